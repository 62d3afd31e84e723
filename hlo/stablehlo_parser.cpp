// StableHLO and MHLO text into an hlo::Module (hlo/stablehlo_parser.h): read (hlo/stablehlo_read.cpp), then lowered
// (hlo/stablehlo_lower.cpp).
#include "hlo/stablehlo_parser.h"

#include "hlo/parser.h"
#include "hlo/stablehlo_lower.h"

namespace podsim::hlo {

bool is_stablehlo(std::string_view text, const std::string& path) {
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".mlir") == 0) return true;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      ++i;
    } else if ((c == '/' && i + 1 < text.size() && text[i + 1] == '/') || c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else {
      break;
    }
  }
  auto word = [&](std::string_view w) {
    return text.compare(i, w.size(), w) == 0 && i + w.size() < text.size() &&
           (text[i + w.size()] == ' ' || text[i + w.size()] == '\n' || text[i + w.size()] == '\t');
  };
  if (word("func.func")) return true;
  if (!word("module")) return false;
  size_t k = i + 6;
  while (k < text.size() && (text[k] == ' ' || text[k] == '\t' || text[k] == '\n')) ++k;
  return k < text.size() && (text[k] == '@' || text[k] == '{' || text.compare(k, 10, "attributes") == 0);
}

Module parse_stablehlo(std::string_view text, const std::string& file) {
  const mlir::Lines lines(text, file);
  const mlir::MlirModule m = mlir::read(lines);
  return mlir::Lowerer(lines, m).run();
}

Module parse_any(std::string_view text, const std::string& file) {
  return is_stablehlo(text, file) ? parse_stablehlo(text, file) : parse_module(text, file);
}

}  // namespace podsim::hlo

#include "sim/sweep/export.h"

#include <cstdlib>
#include <filesystem>

#include "base/text.h"

namespace podsim {
namespace fs = std::filesystem;

std::string results_db_path(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) ? (fs::path(path) / "results.db").string() : path;
}

std::string cell_text(const ColumnValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) {
    std::string t;
    for (int digits = 15; digits <= 17; ++digits) {
      t = strprintf("%.*g", digits, *d);
      if (std::strtod(t.c_str(), nullptr) == *d) break;
    }
    return t;
  }
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  return "";
}

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

void write_csv(const ResultsTable& table, std::ostream& out) {
  for (size_t i = 0; i < table.columns.size(); ++i) out << (i ? "," : "") << csv_field(table.columns[i]);
  out << "\r\n";
  for (const auto& row : table.rows) {
    for (size_t i = 0; i < row.size(); ++i) out << (i ? "," : "") << csv_field(cell_text(row[i]));
    out << "\r\n";
  }
}

}  // namespace podsim

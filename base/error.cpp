#include "base/error.h"

namespace podsim {

const std::vector<ErrorInfo>& error_catalogue() {
  static const std::vector<ErrorInfo> table = {
#define PODSIM_ERROR(name, id, code, title, help) {Err::name, id, code, title, help},
#include "base/error_ids.def"
#undef PODSIM_ERROR
  };
  return table;
}

const ErrorInfo& error_info(Err e) { return error_catalogue().at(static_cast<size_t>(e)); }

std::string SourceLocation::str() const {
  if (file.empty()) return origin;
  std::string s = file;
  if (line > 0) {
    s.append(":").append(std::to_string(line));
    if (column > 0) s.append(":").append(std::to_string(column));
  }
  return s;
}

static std::string render(Err err, const SourceLocation& where, const std::string& message) {
  std::string s;
  std::string loc = where.str();
  if (!loc.empty()) s += loc + ": ";
  s += "error ";
  s += error_info(err).id;
  s += ": " + message;
  return s;
}

Error::Error(Err err, SourceLocation where, std::string message, std::string key_path)
    : std::runtime_error(render(err, where, message)),
      m_err(err),
      m_where(std::move(where)),
      m_message(std::move(message)),
      m_key_path(std::move(key_path)) {}

std::vector<const Error*> Error::all() const {
  std::vector<const Error*> out{this};
  for (const Error& e : m_also) out.push_back(&e);
  return out;
}

}  // namespace podsim

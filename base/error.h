// Errors with stable ids (base/error_ids.def) and a source location.
//
//   throw Error(Err::UnknownKey, loc, "unknown key 'hardware.chip.mxu.rowz' (did you mean 'rows'?)");
//
// what() renders "exp.yaml:12:5: error PODSIM-CFG-002: unknown key ..."; the CLI prints it (and the further errors
// of the same pass, also()) and exits with the first one's exit code. Models and planners throw the same type, with an empty location when none applies.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace podsim {

enum class Err {
#define PODSIM_ERROR(name, id, code, title, help) name,
#include "base/error_ids.def"
#undef PODSIM_ERROR
};

struct ErrorInfo {
  Err err;
  std::string_view id;
  int exit_code;
  std::string_view title;
  std::string_view help;
};

// Every catalogue entry, in declaration order.
const std::vector<ErrorInfo>& error_catalogue();
const ErrorInfo& error_info(Err e);

// Where a value came from: file:line:column of a YAML node (1-based), or an origin such as "--set" or "default".
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
  std::string origin;  // used when there is no file position

  bool empty() const { return file.empty() && origin.empty(); }
  std::string str() const;  // "file:line:col", "file", "origin" or ""
};

class Error : public std::runtime_error {
 public:
  Error(Err err, SourceLocation where, std::string message, std::string key_path = {});
  Error(Err err, std::string message) : Error(err, {}, std::move(message)) {}

  Err err() const { return m_err; }
  std::string_view id() const { return error_info(m_err).id; }
  int exit_code() const { return error_info(m_err).exit_code; }
  const SourceLocation& where() const { return m_where; }
  const std::string& message() const { return m_message; }
  const std::string& key_path() const { return m_key_path; }

  // Further errors found in the same pass (a configuration file reports all of its errors at once, most specific
  // first); what() renders only this one, the CLI prints all.
  const std::vector<Error>& also() const { return m_also; }
  void add_also(Error e) { m_also.push_back(std::move(e)); }
  // Every error: this one, then also().
  std::vector<const Error*> all() const;

 private:
  Err m_err;
  SourceLocation m_where;
  std::string m_message;
  std::string m_key_path;
  std::vector<Error> m_also;
};

}  // namespace podsim

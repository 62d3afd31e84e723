// Runs tools/perfetto_check/check (Perfetto's own trace processor) on a trace and parses what it prints: the
// summary line, import problems ("STAT ...") and the rows of extra SQL queries ("ROW {...}"). Shared by the trace
// writer's unit tests and the end-to-end trace tests. A missing checker fails those tests: tools/bootstrap test
// installs it before it runs them.
#pragma once

#include <sys/wait.h>
#include "tests/test_paths.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace podsim::test {

struct PerfettoCheck {
  int rc = -1;
  bool no_engine = false;              // the trace processor is not installed and could not be fetched
  nlohmann::json summary;              // {"slices", "counter_values", "flows", "tracks", "processes", ...}
  std::vector<std::string> stats;      // import problems
  std::vector<nlohmann::json> rows;    // rows of every query, in order
  std::string output;                  // stdout then stderr, for failure messages
};

// Why a trace test fails when the checker has no engine: a trace that was not checked is not a pass.
inline const char* kNoTraceChecker =
    "Perfetto's trace processor is not installed and could not be fetched, so the trace was NOT checked. "
    "tools/bootstrap test installs it (tools/perfetto_check/check --fetch).";

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// `err_file`: a scratch file for the checker's stderr.
inline PerfettoCheck perfetto_check(const std::string& trace, const std::vector<std::string>& sql,
                                    const std::string& err_file) {
  std::string cmd = std::string(PODSIM_SOURCE_DIR) + "/tools/perfetto_check/check " + shell_quote(trace);
  for (const std::string& s : sql) {
    cmd += ' ';  // appended piecewise: `" " + std::string` trips a false -Wrestrict in GCC 12
    cmd += shell_quote(s);
  }
  cmd += " 2>" + shell_quote(err_file);
  PerfettoCheck c;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return c;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) c.output.append(buf, n);
  int st = pclose(f);
  c.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::stringstream err;
  err << std::ifstream(err_file).rdbuf();
  c.no_engine = c.rc == 2 && (err.str().find("npm pack failed") != std::string::npos ||
                               err.str().find("node is not installed") != std::string::npos);
  std::istringstream lines(c.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("{", 0) == 0) c.summary = nlohmann::json::parse(line)["summary"];
    if (line.rfind("STAT ", 0) == 0) c.stats.push_back(line.substr(5));
    if (line.rfind("ROW ", 0) == 0) c.rows.push_back(nlohmann::json::parse(line.substr(4)));
  }
  c.output += err.str();
  return c;
}

}  // namespace podsim::test

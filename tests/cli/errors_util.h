// Helpers shared by the error-catalogue tests (errors_test.cpp, errors_sweep_serving_test.cpp): provoke an error
// through the command line as a user would and check its id, exit code and location.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "tests/cli/cli_util.h"

namespace podsim::test {

inline const std::string kHw = "hardware:\n  preset: tpu-v3\n";
inline const std::string kMm = "workload:\n  model: matmul\n  m: 64\n  k: 64\n  n: 64\n";

// Runs `validate` (or `run` when `run`) on `text`; expects failure with `id` at "FILE:line:col" (col 0: any).
inline CliResult expect_error(const std::string& text, const std::string& id, int line, int col,
                              std::vector<std::string> extra = {}, bool run = false) {
  std::string file = write_file("exp.yaml", text);
  std::vector<std::string> args = {run ? "run" : "validate", file};
  for (auto& a : extra) args.push_back(a);
  if (run) args.insert(args.end(), {"--out", test_dir() + "/out"});
  CliResult r = run_podsim(args);
  EXPECT_NE(r.code, 0) << r.out;
  std::string where = file + ":" + std::to_string(line) + ":" + (col ? std::to_string(col) : "");
  EXPECT_NE(r.err.find(where), std::string::npos) << "expected location " << where << " in: " << r.err;
  EXPECT_NE(r.err.find("error " + id + ":"), std::string::npos) << r.err;
  return r;
}

// The exit code the catalogue gives `id` (-1: not in it).
inline int exit_of(const std::string& id) {
  for (const auto& e : error_catalogue())
    if (e.id == id) return e.exit_code;
  return -1;
}

}  // namespace podsim::test

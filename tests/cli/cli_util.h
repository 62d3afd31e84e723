// Runs the podsim executable as a user would and captures its exit code, stdout and stderr.
#pragma once

#include <string>
#include <vector>

namespace podsim::test {

struct CliResult {
  int code = -1;
  std::string out, err;
};

// Runs `podsim ARGS...` in `cwd` (default: a fresh per-test folder).
CliResult run_podsim(const std::vector<std::string>& args, const std::string& cwd = "");

// A folder of this test's own, created empty on first use in each test.
std::string test_dir();
// Writes `text` to test_dir()/name and returns the path.
std::string write_file(const std::string& name, const std::string& text);
std::string read_file(const std::string& path);
bool exists(const std::string& path);

// The source tree (configs/, tools/).
std::string source_dir();

}  // namespace podsim::test

// Runs the podsim executable as a user would and captures its exit code, stdout and stderr.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace podsim::test {

struct CliResult {
  int code = -1;
  std::string out, err;
};

// Runs `podsim ARGS...` in `cwd` (default: a fresh per-test folder).
CliResult run_podsim(const std::vector<std::string>& args, const std::string& cwd = "");

// Runs `podsim ARGS...` in the per-test folder with stderr on a pseudo-terminal (what a person at a terminal
// sees: `err` is everything written there, carriage returns included) and stdout to a file, with `env`
// ("NAME=value") added to the environment.
CliResult run_podsim_on_terminal(const std::vector<std::string>& args, const std::vector<std::string>& env = {});

// A folder of this test's own, created empty on first use in each test, and removed when the test passes.
std::string test_dir();
// Writes `text` to test_dir()/name and returns the path.
std::string write_file(const std::string& name, const std::string& text);
std::string read_file(const std::string& path);
bool exists(const std::string& path);

// The source tree (configs/, tools/).
std::string source_dir();

// `s` as one single-quoted shell word.
std::string quote(const std::string& s);

// The length of the union of [start, end) intervals (the spans of a run's ops).
double union_s(std::vector<std::pair<double, double>> spans);

// A run that waits for the test: a FIFO that the test plugin's `test_hold` workload (tests/plugins/hold_workload.cpp,
// loaded with --plugin PODSIM_TEST_PLUGIN) opens while it builds its step and reads until the test releases it. The
// test knows a run is in progress because it holds it, not because of a guess about how long a run takes.
//
//   Hold hold("h");                                  // test_dir()/h, a FIFO
//   ... start a run with workload: {model: test_hold, hold: hold.path()} ...
//   ASSERT_TRUE(hold.wait_held(pid));                // the run is inside build(), and stays there
//   kill(pid, SIGTERM);  or  hold.release();
class Hold {
 public:
  explicit Hold(const std::string& name);
  ~Hold();  // releases, and removes the FIFO
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;
  const std::string& path() const { return m_path; }
  // Waits until a run has opened the FIFO; false if `watched` (the run, or the process that starts it) exited
  // first. No deadline: a run that never arrives is the ctest timeout's to report.
  bool wait_held(pid_t watched);
  // Waits until the run holding the FIFO has exited (its end of the FIFO closed).
  void wait_gone();
  // Lets the run go on, and removes the FIFO so that no later run holds on it.
  void release();

 private:
  std::string m_path;
  int m_fd = -1;
};

}  // namespace podsim::test

// A run that is interrupted never leaves a folder that looks complete: SIGINT/SIGTERM remove the partial folder;
// after SIGKILL only a hidden ".<name>.partial-<pid>" remains, which the next run of that name removes. The run being
// interrupted is held by the test (a FIFO it waits on, tests/cli/cli_util.h: Hold), so it is in progress whatever
// the machine's speed.
#include <gtest/gtest.h>
#include "tests/test_paths.h"
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "tests/cli/cli_util.h"

using namespace podsim::test;
namespace fs = std::filesystem;

namespace {

// A run that waits for the test inside its build (tests/plugins/hold_workload.cpp), after its partial folder exists.
std::string held_experiment(const Hold& hold) {
  return write_file("held.yaml", "hardware: {preset: tpu-v3}\nworkload: {model: test_hold, hold: '" + hold.path() +
                                     "'}\nrun: {trace: {format: \"off\"}}\n");
}

pid_t start_run(const std::string& exp, const std::string& out) {
  const std::string dir = test_dir();  // in the parent: the child's pid would name another folder
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(99);
    execl(PODSIM_BINARY, "podsim", "run", exp.c_str(), "--out", out.c_str(), "-q", "--plugin", PODSIM_TEST_PLUGIN,
          static_cast<char*>(nullptr));
    _exit(98);
  }
  return pid;
}

// The partial folder of `name` (the run has created it before it builds the step), or "".
std::string partial_of(const std::string& name) {
  for (const auto& e : fs::directory_iterator(test_dir()))
    if (e.path().filename().string().rfind("." + name + ".partial-", 0) == 0) return e.path().string();
  return "";
}

int count_entries_named(const std::string& part) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(test_dir())) n += e.path().filename().string().find(part) != std::string::npos;
  return n;
}

}  // namespace

TEST(InterruptTest, TerminatedRunLeavesNothing) {
  for (int sig : {SIGTERM, SIGINT}) {
    Hold hold("hold");
    pid_t pid = start_run(held_experiment(hold), "out");
    ASSERT_TRUE(hold.wait_held(pid)) << "the run ended before it reached the hold";
    ASSERT_FALSE(partial_of("out").empty()) << "the run has not started writing";
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << "signal " << sig;
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig);
    EXPECT_FALSE(exists(test_dir() + "/out"));
    EXPECT_EQ(count_entries_named("partial"), 0) << "signal " << sig;
  }
}

TEST(InterruptTest, KilledRunLeavesOnlyAHiddenPartialFolderThatTheNextRunRemoves) {
  Hold hold("hold");
  pid_t pid = start_run(held_experiment(hold), "out");
  ASSERT_TRUE(hold.wait_held(pid)) << "the run ended before it reached the hold";
  std::string partial = partial_of("out");
  ASSERT_FALSE(partial.empty());
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  EXPECT_FALSE(exists(test_dir() + "/out"));
  EXPECT_TRUE(exists(partial));
  EXPECT_EQ(fs::path(partial).filename().string()[0], '.');  // hidden
  EXPECT_FALSE(exists(partial + "/summary.json"));
  // The next run of that name clears the leftover and completes.
  std::string quick = write_file("quick.yaml", "hardware: {preset: tpu-v3}\nworkload: {model: matmul, m: 8, k: 8, n: 8}\n");
  auto r = run_podsim({"run", quick, "--out", "out"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(exists(partial));
  EXPECT_TRUE(exists(test_dir() + "/out/summary.json"));
}

// A run that is interrupted never leaves a folder that looks complete: SIGINT/SIGTERM remove the partial folder;
// after SIGKILL only a hidden ".<name>.partial-<pid>" remains, which the next run of that name removes.
#include <gtest/gtest.h>
#include "tests/test_paths.h"
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "tests/cli/cli_util.h"

using namespace podsim::test;
namespace fs = std::filesystem;

namespace {

// A run long enough to be interrupted: a 16 x 16 pod of synthetic traffic for a simulated 20 ms.
const char* kLong = "hardware:\n  preset: tpu-v3\n  pod: {dims: [16, 16]}\nworkload:\n  model: traffic\n"
                    "  pattern: uniform\n  rate: 0.5\n  message: 1KiB\n  duration: 5ms\nrun: {trace: {format: \"off\"}}\n";

pid_t start_run(const std::string& exp, const std::string& out) {
  const std::string dir = test_dir();  // in the parent: the child's pid would name another folder
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(99);
    execl(PODSIM_BINARY, "podsim", "run", exp.c_str(), "--out", out.c_str(), "-q", static_cast<char*>(nullptr));
    _exit(98);
  }
  return pid;
}

// Waits until the partial folder of `name` exists (the run has started writing), up to 10 s.
std::string wait_for_partial(const std::string& name) {
  for (int i = 0; i < 1000; ++i) {
    for (const auto& e : fs::directory_iterator(test_dir()))
      if (e.path().filename().string().rfind("." + name + ".partial-", 0) == 0) return e.path().string();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
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
    std::string exp = write_file("long.yaml", kLong);
    pid_t pid = start_run(exp, "out");
    ASSERT_FALSE(wait_for_partial("out").empty()) << "the run never started writing";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
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
  std::string exp = write_file("long.yaml", kLong);
  pid_t pid = start_run(exp, "out");
  std::string partial = wait_for_partial("out");
  ASSERT_FALSE(partial.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
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

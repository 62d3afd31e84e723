#include "tests/cli/cli_util.h"
#include "tests/test_paths.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <pty.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace podsim::test {
namespace fs = std::filesystem;

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string source_dir() { return PODSIM_SOURCE_DIR; }

namespace {

std::string& made_dir() {
  static std::string made;
  return made;
}

// A test that passed (or was skipped) leaves nothing behind: its folder is removed when it ends. A failed test's
// folder stays for the developer to read (its path is in the failure's messages). Every test runs in its own process,
// so without this each run of the suite would leave hundreds of folders in the temporary directory.
class RemovePassedTestDirs : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo& info) override {
    std::string& made = made_dir();
    if (made.empty() || info.result()->Failed()) return;
    std::error_code ec;
    fs::remove_all(made, ec);
    made.clear();
  }
};

const bool kCleanerInstalled = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new RemovePassedTestDirs);
  return true;
}();

}  // namespace

std::string test_dir() {
  (void)kCleanerInstalled;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "cli";
  std::replace(name.begin(), name.end(), '/', '_');  // parameterized tests: one folder, not a nest of them
  std::string& made = made_dir();
  std::string dir = fs::temp_directory_path().string() + "/podsim-cli-" + std::to_string(getpid()) + "-" + name;
  if (made != dir) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    made = dir;
  }
  return dir;
}

std::string write_file(const std::string& name, const std::string& text) {
  std::string path = test_dir() + "/" + name;
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool exists(const std::string& path) { return fs::exists(path); }

CliResult run_podsim_on_terminal(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  CliResult r;
  int master = -1, slave = -1;
  if (openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) {
    ADD_FAILURE() << "openpty: " << std::strerror(errno);
    return r;
  }
  const std::string dir = test_dir(), out = dir + "/.stdout";
  std::vector<std::string> argv_s = {PODSIM_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s = env;
  const pid_t pid = fork();
  if (pid == 0) {
    close(master);
    int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (chdir(dir.c_str()) != 0 || o < 0 || dup2(o, 1) < 0 || dup2(slave, 2) < 0) _exit(127);
    close(o);
    close(slave);
    for (auto& e : env_s) putenv(e.data());
    execv(PODSIM_BINARY, argv.data());
    _exit(127);
  }
  close(slave);
  char buf[4096];
  for (;;) {  // until every writer of the terminal is gone (EIO)
    ssize_t n = read(master, buf, sizeof buf);
    if (n > 0) r.err.append(buf, static_cast<size_t>(n));
    else if (n < 0 && errno == EINTR) continue;
    else break;
  }
  close(master);
  int status = 0;
  waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out);
  fs::remove(out);
  return r;
}

CliResult run_podsim(const std::vector<std::string>& args, const std::string& cwd) {
  std::string dir = cwd.empty() ? test_dir() : cwd;
  std::string out = dir + "/.stdout", err = dir + "/.stderr";
  std::string cmd = "cd " + quote(dir) + " && " + quote(PODSIM_BINARY);
  for (const auto& a : args) {
    cmd += ' ';  // appended piecewise: `" " + std::string` trips a false -Wrestrict in GCC 12
    cmd += quote(a);
  }
  cmd += " > " + quote(out) + " 2> " + quote(err);
  int status = std::system(cmd.c_str());
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out);
  r.err = read_file(err);
  fs::remove(out);
  fs::remove(err);
  return r;
}

Hold::Hold(const std::string& name) : m_path(test_dir() + "/" + name) {
  std::remove(m_path.c_str());
  if (mkfifo(m_path.c_str(), 0600) != 0) ADD_FAILURE() << "cannot make the FIFO " << m_path;
  std::signal(SIGPIPE, SIG_IGN);  // wait_gone() writes to a FIFO whose reader may be gone
}

Hold::~Hold() { release(); }

bool Hold::wait_held(pid_t watched) {
  for (;;) {
    // Opening for writing without blocking succeeds only while a reader has it open.
    m_fd = open(m_path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (m_fd >= 0) return true;
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(watched), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0)
      return false;
    usleep(2000);
  }
}

void Hold::wait_gone() {
  // A write to a FIFO without a reader fails with EPIPE: then the run that held it has exited.
  while (m_fd >= 0) {
    if (write(m_fd, "x", 1) < 0 && errno == EPIPE) return;
    usleep(2000);
  }
}

void Hold::release() {
  if (m_fd >= 0) close(m_fd);
  m_fd = -1;
  std::remove(m_path.c_str());
}

double union_s(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  double total = 0, start = 0, end = -1;
  for (auto [a, b] : v) {
    if (a > end) {
      if (end > start) total += end - start;
      start = a;
      end = b;
    } else {
      end = std::max(end, b);
    }
  }
  if (end > start) total += end - start;
  return total;
}

}  // namespace podsim::test

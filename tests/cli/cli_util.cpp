#include "tests/cli/cli_util.h"
#include "tests/test_paths.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
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

std::string test_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "cli";
  static std::string made;
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

}  // namespace podsim::test

#include "sim/sweep/command.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace podsim {

CommandResult run_command(const std::vector<std::string>& argv) {
  CommandResult r;
  std::vector<std::string> args = argv;
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    r.output = "cannot create a pipe";
    return r;
  }
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t pid = fork();
  if (pid == 0) {
    if (devnull >= 0) dup2(devnull, 0);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    execvp(cargs[0], cargs.data());
    static const char msg[] = "command not found\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    _exit(127);
  }
  close(fds[1]);
  if (devnull >= 0) close(devnull);
  if (pid < 0) {
    close(fds[0]);
    r.output = "cannot start a process";
    return r;
  }
  char buf[4096];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) r.output.append(buf, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::string command_text(const std::vector<std::string>& argv) {
  std::string t;
  for (const auto& a : argv) {
    if (!t.empty()) t += ' ';
    if (a.find_first_of(" '\"\\$") == std::string::npos && !a.empty()) {
      t += a;
      continue;
    }
    t += '\'';
    for (char c : a) t += c == '\'' ? std::string("'\\''") : std::string(1, c);
    t += '\'';
  }
  return t;
}

}  // namespace podsim

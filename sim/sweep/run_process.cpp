#include "sim/sweep/run_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/text.h"

namespace podsim {
namespace {

constexpr double kGraceSeconds = 5;        // SIGTERM to SIGKILL
constexpr size_t kMaxStderr = 1 << 20;     // bytes of stderr kept

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

RunProcess::RunProcess(const SweepDir& dir, const ManifestEntry& run, double timeout_s)
    : m_dir(dir), m_run(run), m_timeout(timeout_s) {
  clear_stale_stages(dir, run.name);
  m_stage = stage_dir(dir, run.name);
  m_digest = config_digest(read_text_file(run.config));
  m_started_at = utc_timestamp();
  m_start = monotonic_seconds();

  std::string exe = self_executable();
  std::vector<std::string> args = {exe, "run", run.config, "--out", m_stage, "-q"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) throw Error(Err::Internal, "cannot create a pipe for run " + run.name);
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  const pid_t parent = getpid();
  m_pid = fork();
  if (m_pid < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    if (devnull >= 0) close(devnull);
    throw Error(Err::Internal, "cannot start a process for run " + run.name + ": fork failed");
  }
  if (m_pid == 0) {
    // Only async-signal-safe calls until exec: the sweep may have threads.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);  // the sweep died before the line above
    if (devnull >= 0) {
      dup2(devnull, 0);
      dup2(devnull, 1);
    }
    dup2(pipefd[1], 2);
    execv(exe.c_str(), argv.data());
    static const char msg[] = "podsim sweep: cannot execute the podsim binary\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    _exit(127);
  }
  setpgid(m_pid, m_pid);  // also from this side, so that the group exists before any signal to it
  close(pipefd[1]);
  if (devnull >= 0) close(devnull);
  m_fd = pipefd[0];
  fcntl(m_fd, F_SETFL, fcntl(m_fd, F_GETFL) | O_NONBLOCK);
}

RunProcess::~RunProcess() {
  if (m_pid > 0 && !m_exited) {
    kill(m_pid, SIGKILL);
    waitpid(m_pid, &m_wait_status, 0);
  }
  if (m_fd >= 0) close(m_fd);
}

void RunProcess::read_some() {
  if (m_fd < 0) return;
  char buf[8192];
  for (;;) {
    ssize_t n = read(m_fd, buf, sizeof buf);
    if (n > 0) {
      m_stderr.append(buf, static_cast<size_t>(n));
      if (m_stderr.size() > kMaxStderr) {
        size_t drop = m_stderr.size() - kMaxStderr;
        m_stderr.erase(0, drop);
        m_dropped += drop;
      }
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      close(m_fd);
      m_fd = -1;
    }
    return;
  }
}

bool RunProcess::exited() {
  if (m_exited) return true;
  pid_t r = waitpid(m_pid, &m_wait_status, WNOHANG);
  if (r == m_pid) {
    m_exited = true;
    // Whatever the child wrote before it ended is still in the pipe.
    if (m_fd >= 0) {
      fcntl(m_fd, F_SETFL, fcntl(m_fd, F_GETFL) & ~O_NONBLOCK);
      char buf[8192];
      ssize_t n;
      while ((n = read(m_fd, buf, sizeof buf)) > 0) m_stderr.append(buf, static_cast<size_t>(n));
      close(m_fd);
      m_fd = -1;
    }
  }
  return m_exited;
}

void RunProcess::enforce_timeout(double now) {
  if (m_exited || m_timeout <= 0) return;
  if (m_term_at < 0 && now - m_start > m_timeout) {
    m_timed_out = true;
    m_term_at = now;
    kill(m_pid, SIGTERM);
  } else if (m_term_at >= 0 && now - m_term_at > kGraceSeconds) {
    kill(m_pid, SIGKILL);
  }
}

void RunProcess::terminate() {
  if (!m_exited) kill(m_pid, SIGTERM);
}

RunStatus RunProcess::publish() {
  RunStatus s;
  s.name = m_run.name;
  s.index = m_run.index;
  if (WIFEXITED(m_wait_status)) s.exit_code = WEXITSTATUS(m_wait_status);
  if (WIFSIGNALED(m_wait_status)) s.signal = WTERMSIG(m_wait_status);
  s.timed_out = m_timed_out;
  s.state = !m_timed_out && s.exit_code && *s.exit_code == 0 ? "done" : "failed";
  s.wall_s = monotonic_seconds() - m_start;
  s.started = m_started_at;
  s.finished = utc_timestamp();
  s.host = host_name();
  s.config_digest = m_digest;
  s.slurm_job = env("SLURM_ARRAY_JOB_ID").empty() ? env("SLURM_JOB_ID") : env("SLURM_ARRAY_JOB_ID");
  s.slurm_task = env("SLURM_ARRAY_TASK_ID");
  std::string err = m_stderr;
  if (m_dropped) err = strprintf("[first %zu bytes of stderr dropped]\n", m_dropped) + err;
  if (m_timed_out) err += strprintf("podsim sweep: stopped after the --timeout of %g s\n", m_timeout);
  if (s.signal) err += strprintf("podsim sweep: the run was ended by signal %d (%s)\n", *s.signal, strsignal(*s.signal));
  s.stderr_tail = tail_of(err);
  publish_run(m_dir, m_stage, s, err);
  return s;
}

}  // namespace podsim

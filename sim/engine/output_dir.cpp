#include "sim/engine/output_dir.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "base/error.h"

namespace podsim {
namespace fs = std::filesystem;

namespace {

// The partial folder of the run in progress, for the watchdog and the interrupt thread.
std::mutex g_mutex;
std::string g_partial;

void remove_partial_locked() {
  if (g_partial.empty()) return;
  std::error_code ec;
  fs::remove_all(g_partial, ec);
  g_partial.clear();
}

SourceLocation at(const std::string& path) {
  SourceLocation w;
  w.file = path;
  return w;
}

}  // namespace

void abandon_partial_output() {
  std::lock_guard<std::mutex> lock(g_mutex);
  remove_partial_locked();
}

namespace {

int g_signal_pipe[2] = {-1, -1};

// The only thing a handler may safely do here: hand the signal number to the cleanup thread.
void forward_signal(int sig) {
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t ignored = write(g_signal_pipe[1], &b, 1);
  (void)ignored;
}

}  // namespace

void install_interrupt_cleanup() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (pipe(g_signal_pipe) != 0) return;
    std::thread([] {
      unsigned char sig = 0;
      while (read(g_signal_pipe[0], &sig, 1) != 1) {
      }
      {
        std::lock_guard<std::mutex> lock(g_mutex);
        if (!g_partial.empty()) {
          remove_partial_locked();
          std::fprintf(stderr, "podsim: interrupted; removed the partial output folder\n");
        }
      }
      std::fflush(stderr);
      _exit(128 + sig);
    }).detach();
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  });
}

OutputDir::OutputDir(const std::string& final_path, bool force) : m_final(final_path), m_force(force) {
  fs::path final_p = fs::path(final_path).lexically_normal();
  if (final_p.filename().empty()) final_p = final_p.parent_path();
  m_final = final_p.string();
  std::error_code ec;
  if (fs::exists(final_p, ec) && !force)
    throw Error(Err::OutputExists, at(m_final),
                "output folder '" + m_final + "' exists; pass --force to replace it, or choose another --out");
  if (fs::exists(final_p, ec) && !fs::is_directory(final_p, ec))
    throw Error(Err::OutputUnwritable, at(m_final), "'" + m_final + "' exists and is not a folder");
  fs::path parent = final_p.has_parent_path() ? final_p.parent_path() : fs::path(".");
  fs::create_directories(parent, ec);
  if (ec || !fs::is_directory(parent))
    throw Error(Err::OutputUnwritable, at(m_final),
                "cannot create the folder '" + parent.string() + "': " + (ec ? ec.message() : "not a folder"));
  // Clear partial folders of earlier runs of this name whose process is gone (e.g. killed with SIGKILL).
  const std::string base = final_p.filename().string();
  const std::string prefix = "." + base + ".partial-";
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    long pid = std::atol(name.c_str() + prefix.size());
    if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0) fs::remove_all(entry.path(), ec);
  }
  m_partial = (parent / (prefix + std::to_string(getpid()))).string();
  fs::remove_all(m_partial, ec);
  if (!fs::create_directory(m_partial, ec) || ec)
    throw Error(Err::OutputUnwritable, at(m_final),
                "cannot write into '" + parent.string() + "': " + (ec ? ec.message() : "permission denied"));
  if (access(m_partial.c_str(), W_OK) != 0) {
    fs::remove_all(m_partial, ec);
    throw Error(Err::OutputUnwritable, at(m_final), "cannot write into '" + parent.string() + "': permission denied");
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_partial = m_partial;
}

OutputDir::~OutputDir() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!m_committed) {
    std::error_code ec;
    fs::remove_all(m_partial, ec);
  }
  g_partial.clear();
}

void OutputDir::commit() {
  std::error_code ec;
  std::string trash;
  if (fs::exists(m_final, ec)) {
    if (!m_force) throw Error(Err::OutputExists, at(m_final), "output folder '" + m_final + "' appeared during the run");
    trash = m_partial + ".old";
    fs::rename(m_final, trash, ec);
    if (ec) throw Error(Err::OutputUnwritable, at(m_final), "cannot replace '" + m_final + "': " + ec.message());
  }
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    fs::rename(m_partial, m_final, ec);
    if (ec) throw Error(Err::OutputUnwritable, at(m_final), "cannot create '" + m_final + "': " + ec.message());
    m_committed = true;
    g_partial.clear();
  }
  if (!trash.empty()) fs::remove_all(trash, ec);
}

}  // namespace podsim

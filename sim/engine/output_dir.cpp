#include "sim/engine/output_dir.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "sim/common/error.h"

namespace podsim {
namespace fs = std::filesystem;

namespace {

char g_partial[4096];  // the partial folder a signal must remove

// Recursive delete with plain system calls only, for the signal handler.
void remove_tree(const char* path) {
  DIR* d = opendir(path);
  if (d) {
    while (struct dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      char child[4096];
      size_t n = std::strlen(path);
      if (n + 1 + std::strlen(e->d_name) + 1 > sizeof child) continue;
      std::memcpy(child, path, n);
      child[n] = '/';
      std::strcpy(child + n + 1, e->d_name);
      struct stat st;
      if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode)) remove_tree(child);
      else unlink(child);
    }
    closedir(d);
  }
  rmdir(path);
}

void on_signal(int sig) {
  if (g_partial[0]) remove_tree(g_partial);
  const char msg[] = "podsim: interrupted; removed the partial output folder\n";
  ssize_t ignored = write(2, msg, sizeof msg - 1);
  (void)ignored;
  _exit(128 + sig);
}

SourceLocation at(const std::string& path) {
  SourceLocation w;
  w.file = path;
  return w;
}

}  // namespace

void abandon_partial_output() {
  if (g_partial[0]) remove_tree(g_partial);
  g_partial[0] = 0;
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
  std::string prefix = "." + final_p.filename().string() + ".partial-";
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
  std::strncpy(g_partial, m_partial.c_str(), sizeof g_partial - 1);
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

OutputDir::~OutputDir() {
  if (!m_committed) {
    std::error_code ec;
    fs::remove_all(m_partial, ec);
  }
  g_partial[0] = 0;
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
  fs::rename(m_partial, m_final, ec);
  if (ec) throw Error(Err::OutputUnwritable, at(m_final), "cannot create '" + m_final + "': " + ec.message());
  m_committed = true;
  g_partial[0] = 0;
  if (!trash.empty()) fs::remove_all(trash, ec);
}

}  // namespace podsim

#include "sim/sweep/folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/text.h"

namespace podsim {
namespace fs = std::filesystem;

namespace {

SourceLocation at(const std::string& path) {
  SourceLocation w;
  w.file = path;
  return w;
}

void make_dirs(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec || !fs::is_directory(path))
    throw Error(Err::OutputUnwritable, at(path), "cannot create the folder '" + path + "': " +
                                                     (ec ? ec.message() : "a file is in the way"));
}

}  // namespace

void make_sweep_root(const SweepDir& dir) { make_dirs(dir.root); }

void write_file_atomic(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp-" + host_name() + "-" + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    f.flush();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error(Err::OutputUnwritable, at(path), "cannot write '" + path + "'");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(Err::OutputUnwritable, at(path), "cannot write '" + path + "': " + ec.message());
  }
}

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void check_sweep_folder(const SweepDir& dir) {
  std::error_code ec;
  if (!fs::exists(dir.root, ec)) return;
  if (!fs::is_directory(dir.root, ec))
    throw Error(Err::OutputUnwritable, at(dir.root), "'" + dir.root + "' exists and is not a folder");
  if (!fs::exists(dir.path("sweep.json"), ec) && !fs::is_empty(dir.root, ec))
    throw Error(Err::NotASweepDir, at(dir.root),
                "'" + dir.root + "' exists and holds something other than a sweep (no sweep.json); choose another --out");
}

std::vector<ManifestEntry> write_sweep_folder(const SweepDir& dir, const SweepPlan& plan, const std::string& sweep_text) {
  for (const char* sub : {"", "/configs", "/runs", "/tmp"}) make_dirs(dir.root + sub);
  nlohmann::ordered_json meta = {{"name", plan.name},
                                 {"sweep_file", fs::absolute(plan.file).lexically_normal().string()},
                                 {"runs", plan.runs.size()},
                                 {"param_columns", plan.param_columns}};
  write_file_atomic(dir.path("sweep.json"), meta.dump(2) + "\n");
  write_file_atomic(dir.path("sweep.yaml"), sweep_text);
  std::vector<ManifestEntry> entries;
  std::string manifest = "# podsim sweep '" + plan.name + "': one run per line: index, name, configuration\n";
  for (const auto& r : plan.runs) {
    std::string cfg = dir.config(r.name);
    // Unchanged configurations keep their files (and dates); a changed one is replaced whole.
    if (read_text_file(cfg) != r.config) write_file_atomic(cfg, r.config);
    manifest += std::to_string(r.index) + "\t" + r.name + "\tconfigs/" + r.name + ".yaml\n";
    entries.push_back({r.index, r.name, cfg});
  }
  write_file_atomic(dir.manifest(), manifest);
  return entries;
}

std::vector<ManifestEntry> read_manifest(const std::string& manifest_path) {
  std::ifstream f(manifest_path);
  if (!f) throw Error(Err::NotASweepDir, at(manifest_path), "cannot read the sweep manifest '" + manifest_path + "'");
  fs::path root = fs::absolute(manifest_path).parent_path();
  std::vector<ManifestEntry> out;
  int line_no = 0;
  for (std::string line; std::getline(f, line);) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields;
    std::stringstream ss(line);
    for (std::string field; std::getline(ss, field, '\t');) fields.push_back(field);
    char* end = nullptr;
    unsigned long long idx = fields.empty() ? 0 : std::strtoull(fields[0].c_str(), &end, 10);
    if (fields.size() != 3 || !end || *end || idx != out.size()) {
      SourceLocation w = at(manifest_path);
      w.line = line_no;
      throw Error(Err::NotASweepDir, w, "malformed manifest line (expected index, name and configuration, tab-separated)");
    }
    out.push_back({static_cast<size_t>(idx), fields[1], (root / fields[2]).string()});
  }
  return out;
}

SweepLock::SweepLock(const SweepDir& dir) {
  std::string path = dir.path(".lock");
  m_fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (m_fd < 0) throw Error(Err::OutputUnwritable, at(path), "cannot create the lock file '" + path + "'");
  if (flock(m_fd, LOCK_EX | LOCK_NB) != 0) {
    std::string holder = read_text_file(path);
    close(m_fd);
    m_fd = -1;
    throw Error(Err::SweepBusy, at(dir.root),
                "another podsim sweep drives '" + dir.root + "' now" +
                    (holder.empty() ? std::string() : " (" + holder.substr(0, holder.find('\n')) + ")"));
  }
  std::string me = "pid " + std::to_string(getpid()) + " on " + host_name() + "\n";
  if (ftruncate(m_fd, 0) == 0 && write(m_fd, me.data(), me.size()) < 0) {
    // the holder's identity is a courtesy for the error message; the lock itself is what counts
  }
}

SweepLock::~SweepLock() {
  if (m_fd >= 0) close(m_fd);
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

std::string self_executable() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("podsim") : p.string();
}

double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string utc_timestamp() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  long ms = static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return strprintf("%s.%03ldZ", buf, ms);
}

}  // namespace podsim

#include "sim/sweep/status.h"

#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

namespace podsim {
namespace fs = std::filesystem;

std::string status_json(const RunStatus& s) {
  nlohmann::ordered_json j;
  j["name"] = s.name;
  j["index"] = s.index;
  j["state"] = s.state;
  j["exit_code"] = s.exit_code ? nlohmann::ordered_json(*s.exit_code) : nlohmann::ordered_json();
  j["signal"] = s.signal ? nlohmann::ordered_json(*s.signal) : nlohmann::ordered_json();
  j["timed_out"] = s.timed_out;
  j["wall_s"] = s.wall_s;
  j["started"] = s.started;
  j["finished"] = s.finished;
  j["host"] = s.host;
  j["config_digest"] = s.config_digest;
  j["slurm_job"] = s.slurm_job;
  j["slurm_task"] = s.slurm_task;
  j["stderr_tail"] = s.stderr_tail;
  return j.dump(2) + "\n";
}

std::optional<RunStatus> read_status(const std::string& run_dir) {
  std::string text = read_text_file(run_dir + "/status.json");
  if (text.empty()) return std::nullopt;
  try {
    auto j = nlohmann::json::parse(text);
    RunStatus s;
    s.name = j.at("name").get<std::string>();
    s.index = j.at("index").get<size_t>();
    s.state = j.at("state").get<std::string>();
    if (!j.at("exit_code").is_null()) s.exit_code = j["exit_code"].get<int>();
    if (!j.at("signal").is_null()) s.signal = j["signal"].get<int>();
    s.timed_out = j.at("timed_out").get<bool>();
    s.wall_s = j.at("wall_s").get<double>();
    s.started = j.at("started").get<std::string>();
    s.finished = j.at("finished").get<std::string>();
    s.host = j.at("host").get<std::string>();
    s.config_digest = j.at("config_digest").get<std::string>();
    s.slurm_job = j.value("slurm_job", "");
    s.slurm_task = j.value("slurm_task", "");
    s.stderr_tail = j.value("stderr_tail", "");
    if (s.state != "done" && s.state != "failed") return std::nullopt;
    return s;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string stage_dir(const SweepDir& dir, const std::string& name) {
  return dir.path("tmp/" + name + "@" + host_name() + "@" + std::to_string(getpid()));
}

void clear_stale_stages(const SweepDir& dir, const std::string& name) {
  std::error_code ec;
  const std::string a = name + "@", b = "." + name + "@";
  for (const auto& e : fs::directory_iterator(dir.path("tmp"), ec)) {
    std::string f = e.path().filename().string();
    if (f.rfind(a, 0) == 0 || f.rfind(b, 0) == 0) fs::remove_all(e.path(), ec);
  }
}

void publish_run(const SweepDir& dir, const std::string& stage, const RunStatus& status, const std::string& stderr_text) {
  std::error_code ec;
  fs::create_directories(stage, ec);
  if (!stderr_text.empty()) write_file_atomic(stage + "/stderr.txt", stderr_text);
  write_file_atomic(stage + "/status.json", status_json(status));
  const std::string final_dir = dir.run(status.name);
  if (fs::exists(final_dir, ec)) {
    // An older attempt (failed, or of another version of the sweep) makes way; between the two renames the run
    // is simply missing, which a later sweep re-runs.
    std::string old = stage + "@old";
    fs::rename(final_dir, old, ec);
    if (ec) throw Error(Err::OutputUnwritable, "cannot replace '" + final_dir + "': " + ec.message());
    fs::rename(stage, final_dir, ec);
    if (ec) throw Error(Err::OutputUnwritable, "cannot create '" + final_dir + "': " + ec.message());
    fs::remove_all(old, ec);
    return;
  }
  fs::rename(stage, final_dir, ec);
  if (ec) throw Error(Err::OutputUnwritable, "cannot create '" + final_dir + "': " + ec.message());
}

std::string tail_of(const std::string& text, size_t lines, size_t max_chars) {
  size_t end = text.size();
  while (end > 0 && text[end - 1] == '\n') --end;
  size_t pos = end, n = 0;
  while (pos > 0 && n < lines) {
    size_t nl = text.rfind('\n', pos - 1);
    pos = nl == std::string::npos ? 0 : nl;
    ++n;
    if (nl == std::string::npos) break;
  }
  if (pos < end && text[pos] == '\n') ++pos;
  std::string t = text.substr(pos, end - pos);
  if (t.size() > max_chars) t = "..." + t.substr(t.size() - max_chars);
  return t;
}

}  // namespace podsim

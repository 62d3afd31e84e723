// Presets: where they are looked up and which exist. Hardware presets (PODSIM_PRESET_DIR, configs/hardware/ beside
// the executable's tree, then the source tree's) and model presets (PODSIM_MODEL_PRESET_DIR, configs/workloads/ in
// the same places).
#include <unistd.h>

#include <filesystem>
#include <map>
#include <yaml-cpp/yaml.h>

#include "sim/config/loader.h"

#ifndef PODSIM_SOURCE_DIR
#define PODSIM_SOURCE_DIR "."
#endif

namespace podsim {
namespace fs = std::filesystem;
namespace {

std::string exe_dir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  return fs::path(buf).parent_path().string();
}

std::vector<std::string> dirs_of(const char* env_var, const char* folder) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv(env_var)) dirs.push_back(env);
  dirs.push_back((fs::path(exe_dir()) / ".." / "configs" / folder).lexically_normal().string());
  dirs.push_back((fs::path(PODSIM_SOURCE_DIR) / "configs" / folder).string());
  return dirs;
}

std::vector<PresetInfo> list_in(const std::vector<std::string>& dirs) {
  std::map<std::string, PresetInfo> found;
  for (const auto& d : dirs) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) continue;
    for (const auto& entry : fs::directory_iterator(d, ec)) {
      if (entry.path().extension() != ".yaml") continue;
      std::string name = entry.path().stem().string();
      if (found.count(name)) continue;  // earlier folders win
      PresetInfo info{name, entry.path().string(), "", "", 0, 0};
      try {
        YAML::Node n = YAML::LoadFile(info.file);
        if (n["description"]) info.description = n["description"].as<std::string>();
        if (n["source"]) info.source = n["source"].as<std::string>();
        if (n["parameters"]) info.parameters = n["parameters"].as<double>();
        if (n["parameters_tolerance"]) info.parameters_tolerance = n["parameters_tolerance"].as<double>();
      } catch (const std::exception&) {
        info.description = "(unreadable preset file)";
      }
      found[name] = info;
    }
  }
  std::vector<PresetInfo> out;
  for (auto& [k, v] : found) out.push_back(v);
  return out;
}

std::string find_in(const std::vector<std::string>& dirs, const std::string& name) {
  // The error_code overloads: a name the OS rejects (e.g. longer than NAME_MAX, found by tools/fuzz) is simply not
  // found, instead of an uncaught std::filesystem::filesystem_error.
  std::error_code ec;
  if (name.find('/') != std::string::npos || (name.size() > 5 && name.substr(name.size() - 5) == ".yaml"))
    return fs::is_regular_file(name, ec) ? name : "";  // not a device or a folder
  for (const auto& d : dirs) {
    fs::path p = fs::path(d) / (name + ".yaml");
    if (fs::exists(p, ec)) return p.string();
  }
  return "";
}

}  // namespace

std::vector<std::string> preset_dirs() { return dirs_of("PODSIM_PRESET_DIR", "hardware"); }
std::vector<PresetInfo> list_presets() { return list_in(preset_dirs()); }
std::string find_preset(const std::string& name) { return find_in(preset_dirs(), name); }

std::vector<std::string> model_preset_dirs() { return dirs_of("PODSIM_MODEL_PRESET_DIR", "workloads"); }
std::vector<PresetInfo> list_model_presets() { return list_in(model_preset_dirs()); }
std::string find_model_preset(const std::string& name) { return find_in(model_preset_dirs(), name); }

}  // namespace podsim

// Hardware presets: where they are looked up (PODSIM_PRESET_DIR, configs/hardware/ beside the executable's tree,
// then the source tree's) and which exist.
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

}  // namespace

std::vector<std::string> preset_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("PODSIM_PRESET_DIR")) dirs.push_back(env);
  dirs.push_back((fs::path(exe_dir()) / ".." / "configs" / "hardware").lexically_normal().string());
  dirs.push_back((fs::path(PODSIM_SOURCE_DIR) / "configs" / "hardware").string());
  return dirs;
}

std::vector<PresetInfo> list_presets() {
  std::map<std::string, PresetInfo> found;
  for (const auto& d : preset_dirs()) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) continue;
    for (const auto& entry : fs::directory_iterator(d, ec)) {
      if (entry.path().extension() != ".yaml") continue;
      std::string name = entry.path().stem().string();
      if (found.count(name)) continue;  // earlier folders win
      PresetInfo info{name, entry.path().string(), ""};
      try {
        YAML::Node n = YAML::LoadFile(info.file);
        if (n["description"]) info.description = n["description"].as<std::string>();
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

std::string find_preset(const std::string& name) {
  // The error_code overloads: a name the OS rejects (e.g. longer than NAME_MAX, found by tools/fuzz) is simply not
  // found, instead of an uncaught std::filesystem::filesystem_error.
  std::error_code ec;
  if (name.find('/') != std::string::npos || (name.size() > 5 && name.substr(name.size() - 5) == ".yaml"))
    return fs::is_regular_file(name, ec) ? name : "";  // not a device or a folder
  for (const auto& d : preset_dirs()) {
    fs::path p = fs::path(d) / (name + ".yaml");
    if (fs::exists(p, ec)) return p.string();
  }
  return "";
}

}  // namespace podsim

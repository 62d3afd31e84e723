#include "base/plugins.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

#include "base/error.h"

namespace podsim {

void load_plugin(const std::string& path) {
  // A bare file name would make dlopen search the system paths; plugins are always files the user names.
  std::string p = path.find('/') == std::string::npos ? "./" + path : path;
  if (!dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    SourceLocation w;
    w.file = path;
    const char* why = dlerror();
    throw Error(Err::FileUnreadable, w, "cannot load plugin '" + path + "': " + (why ? why : "unknown reason"));
  }
}

void load_plugins_from_environment() {
  const char* env = std::getenv("PODSIM_PLUGINS");
  if (!env) return;
  std::string list = env;
  for (size_t start = 0; start <= list.size();) {
    size_t end = list.find(':', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) load_plugin(list.substr(start, end - start));
    start = end + 1;
  }
}

void load_plugins_for_children(const std::vector<std::string>& paths) {
  if (paths.empty()) return;
  const char* env = std::getenv("PODSIM_PLUGINS");
  std::string list = env ? env : "";
  for (const std::string& path : paths) {
    load_plugin(path);
    std::string abs = std::filesystem::absolute(path).lexically_normal().string();
    list += (list.empty() ? "" : ":") + abs;
  }
  setenv("PODSIM_PLUGINS", list.c_str(), 1);
}

}  // namespace podsim

#include "sim/common/plugins.h"

#include <dlfcn.h>

#include "sim/common/error.h"

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

}  // namespace podsim

// Out-of-tree plugins: a shared library that registers workloads, strategies or collective algorithms from its
// static initialisers (PODSIM_REGISTER_*), loaded with `podsim run --plugin path/to/libmine.so exp.yaml`.
#pragma once

#include <string>

namespace podsim {

// dlopen()s the library; throws Error(FileUnreadable) naming the path and dlerror() when it cannot be loaded.
void load_plugin(const std::string& path);

}  // namespace podsim

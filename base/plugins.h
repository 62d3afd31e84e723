// Out-of-tree plugins: a shared library that registers workloads, strategies or collective algorithms from its
// static initialisers (PODSIM_REGISTER_*), loaded with `podsim run --plugin path/to/libmine.so exp.yaml`.
//
// PODSIM_PLUGINS (paths separated by ':') names plugins every podsim command loads; `podsim sweep --plugin` sets it
// for its runs, so that each run, locally or as a Slurm task, loads what the sweep was given.
#pragma once

#include <string>
#include <vector>

namespace podsim {

// dlopen()s the library; throws Error(FileUnreadable) naming the path and dlerror() when it cannot be loaded.
void load_plugin(const std::string& path);

// Loads every plugin PODSIM_PLUGINS names (none when it is unset or empty).
void load_plugins_from_environment();

// Loads `paths` and adds them, made absolute, to PODSIM_PLUGINS for the processes this one starts.
void load_plugins_for_children(const std::vector<std::string>& paths);

}  // namespace podsim

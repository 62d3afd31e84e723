#include <algorithm>
#include <iostream>
#include <set>

#include "collectives/i_algorithm.h"
#include "sim/cli/commands.h"
#include "base/text.h"
#include "sim/config/loader.h"
#include "strategies/i_strategy.h"
#include "workloads/i_workload.h"

namespace podsim::cli {
namespace {

void row(const std::string& name, const std::string& desc, size_t width) {
  std::cout << "  " << name << std::string(name.size() < width ? width - name.size() : 0, ' ') << "  " << desc << "\n";
}

// A parameter count as papers write it: 540.36B, 6.74B, 125.4M, 106816.
std::string parameter_text(double n) {
  if (n >= 1e9) return strprintf("%.2fB", n / 1e9);
  if (n >= 1e6) return strprintf("%.1fM", n / 1e6);
  return strprintf("%.0f", n);
}

size_t widest(const std::vector<std::string>& names) {
  size_t w = 0;
  for (const auto& n : names) w = std::max(w, n.size());
  return w;
}

void list_params(const std::string& only) {
  std::vector<std::string> models = only.empty() ? WorkloadRegistry::instance().names() : std::vector<std::string>{only};
  if (!only.empty() && !WorkloadRegistry::instance().find(only))
    throw Error(Err::UnknownWorkload, "unknown workload model '" + only + "' (" +
                                          suggestion(only, WorkloadRegistry::instance().names()) + ")");
  std::set<std::string> shown;
  for (const auto& m : models) {
    const Schema schema = experiment_schema(m, {"auto"});
    for (const auto& s : schema.specs()) {
      if (shown.count(s.path)) continue;
      shown.insert(s.path);
      std::string def = s.required() ? "required" : s.default_text->empty() ? "optional" : "default " + *s.default_text;
      std::cout << s.path << "  (" << s.type_text() << (s.range_text().empty() ? "" : ", " + s.range_text()) << "; "
                << def << ")\n    " << s.description << "\n";
    }
  }
}

}  // namespace

int cmd_list(const ListArgs& a) {
  if (a.what.empty()) {
    static const std::vector<std::pair<std::string, std::string>> kinds = {
        {"hardware", "hardware presets (hardware.preset)"},
        {"workloads", "workload models (workload.model)"},
        {"strategies", "parallelism strategies (strategy.name)"},
        {"collectives", "collective algorithms, and the default for each collective"},
        {"params", "every parameter with its type, range and default (--workload NAME: one workload's)"},
        {"errors", "error ids and exit codes"},
    };
    std::vector<std::string> names;
    for (const auto& k : kinds) names.push_back(k.first);
    std::cout << "podsim list WHAT, where WHAT is one of:\n";
    for (const auto& [name, desc] : kinds) row(name, desc, widest(names));
  } else if (a.what == "hardware") {
    auto presets = list_presets();
    std::vector<std::string> names;
    for (const auto& p : presets) names.push_back(p.name);
    std::cout << "Hardware presets (hardware.preset):\n";
    for (const auto& p : presets) row(p.name, p.description, widest(names));
  } else if (a.what == "workloads") {
    std::cout << "Workloads (workload.model):\n";
    auto& reg = WorkloadRegistry::instance();
    for (const auto* e : reg.entries()) row(e->name, e->description, widest(reg.names()));
    std::cout << "\nModel presets (workload.preset; each sets workload.model and the model's shape, keys beside it "
                 "override):\n";
    const std::vector<PresetInfo> presets = list_model_presets();
    std::vector<std::string> names;
    for (const auto& p : presets) names.push_back(p.name);
    for (const auto& p : presets) {
      std::string count;
      try {
        count = parameter_text(model_preset_parameter_count(p.name)) + " parameters";
      } catch (const Error& e) {
        count = "does not load: " + e.message();
      }
      row(p.name, p.description, widest(names));
      row("", count + "; source: " + p.source, widest(names));
    }
  } else if (a.what == "strategies") {
    std::cout << "Strategies (strategy.name; auto picks the workload's default):\n";
    auto& reg = StrategyRegistry::instance();
    for (const auto* e : reg.entries()) row(e->name, e->description, widest(reg.names()));
  } else if (a.what == "collectives") {
    std::cout << "Collective algorithms (workload.algorithm / an op's algorithm):\n";
    auto& reg = CollectiveRegistry::instance();
    for (const auto* e : reg.entries()) {
      std::vector<std::string> kinds;
      for (auto k : e->make()->supports()) {
        std::string n = collective_name(k);
        if (default_algorithm(k) == e->name) n += " (default)";
        kinds.push_back(n);
      }
      row(e->name, e->description + " [" + join(kinds, ", ") + "]", widest(reg.names()));
    }
  } else if (a.what == "params") {
    list_params(a.workload);
  } else if (a.what == "errors") {
    for (const auto& e : error_catalogue())
      std::cout << "  " << e.id << "  " << e.title << " (exit " << e.exit_code << ")\n";
  }
  return 0;
}

int cmd_docs(const std::string& what) {
  if (what == "errors") {
    std::cout << "# Error catalogue\n\n"
                 "Generated by `podsim docs errors` from base/error_ids.def; do not edit by hand.\n\n"
                 "Every error podsim reports carries one of these ids. Errors in experiment files name\n"
                 "`file:line:column` and the key path; all the errors of a file are reported at once, one per line,\n"
                 "most specific first (unknown keys and bad values in file order, then missing keys). Exit code 2\n"
                 "means bad input, 1 a failure of the simulator.\n"
                 "Each id has a test asserting it (tests/cli/errors_test.cpp; sweeps, inference and serving in "
                 "errors_sweep_serving_test.cpp).\n\n"
                 "| id | exit | title | what it means, what to do |\n|---|---|---|---|\n";
    for (const auto& e : error_catalogue())
      std::cout << "| `" << e.id << "` | " << e.exit_code << " | " << e.title << " | " << e.help << " |\n";
    return 0;
  }
  // config
  std::cout << "# Experiment parameters\n\n"
               "Generated by `podsim docs config` from the parameter declarations; do not edit by hand.\n\n"
               "An experiment file has four sections: `hardware`, `workload`, `strategy` and `run`. Quantities carry\n"
               "units (`\"940MHz\"`, `\"900GB/s\"`, `\"32GiB\"`, `\"1us\"`). Values come, lowest precedence first, from\n"
               "the defaults below, the hardware preset, the model preset (`workload.preset`), the experiment file and\n"
               "`--set path=value`.\n";
  auto section = [](const std::string& title, const std::vector<ParamSpec>& specs) {
    std::cout << "\n## " << title << "\n\n| key | type | default | range | description |\n|---|---|---|---|---|\n";
    for (const auto& s : specs) {
      std::string def = s.required() ? "required" : s.default_text->empty() ? "unset" : "`" + *s.default_text + "`";
      std::cout << "| `" << s.path << "` | " << s.type_text() << " | " << def << " | " << s.range_text() << " | "
                << s.description << " |\n";
    }
  };
  section("hardware", hardware_param_specs());
  std::cout << "\nPresets (`podsim list hardware`):\n\n";
  for (const auto& p : list_presets()) std::cout << "- `" << p.name << "`: " << p.description << "\n";
  section("workload.preset", {*experiment_schema("", {"auto"}).find("workload.preset")});
  std::cout << "\nA model preset sets `workload.model` and the model's shape (configs/workloads/NAME.yaml); `batch` "
               "and any\nother key beside it override, e.g. `workload: {preset: llama2-7b, batch: 512, seq_len: "
               "2048}`. Presets\n(`podsim list workloads`), with the parameter count podsim builds and the source:\n\n";
  for (const auto& p : list_model_presets())
    std::cout << "- `" << p.name << "`: " << p.description << "; " << parameter_text(model_preset_parameter_count(p.name))
              << " parameters (" << p.source << ")\n";
  for (const auto* e : WorkloadRegistry::instance().entries()) {
    std::vector<ParamSpec> specs = {ParamSpec::choice("workload.model", {e->name}, e->description)};
    for (auto& s : e->make()->params()) specs.push_back(s);
    section("workload.model: " + e->name, specs);
  }
  for (const auto* e : StrategyRegistry::instance().entries()) {
    std::vector<ParamSpec> specs = {ParamSpec::choice("strategy.name", {e->name}, e->description)};
    for (auto& s : e->make()->params()) specs.push_back(s);
    section("strategy.name: " + e->name, specs);
  }
  section("mesh", mesh_param_specs());
  section("run", run_param_specs());
  std::cout << "\nThe `search` section bounds the space `podsim search` explores (docs/search.md); `podsim run` "
               "ignores it\nand a resolved experiment leaves it out.\n";
  section("search", search_param_specs());
  std::cout << "\nThe `serving` section makes `podsim run` a serving run: a request stream through an engine "
               "policy\n(docs/serving.md, \"The serving engine\").\n";
  section("serving", serving_param_specs());
  std::cout << "\n`serving.prefill` gives a serving run's prefill iterations a layout of their own on the same slice: "
               "a `strategy`\nmapping (required) and a `mesh` mapping, with the keys of the experiment's own "
               "`strategy` and `mesh` sections\nabove (unset there: the strategy's default mesh). Decode keeps the "
               "experiment's layout; every prefill's KV\ncache is re-laid out into it (docs/serving.md, \"Per-phase "
               "layouts\"). `--set serving.prefill.strategy.KEY=...`\nand `serving.prefill.mesh.KEY` override its "
               "keys.\n";
  return 0;
}

}  // namespace podsim::cli

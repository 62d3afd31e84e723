// The layers of docs/architecture.md, checked on every source file: which folders a folder may include, and where
// SystemC may appear. A new include that crosses a layer fails here with the file and line.
#include <gtest/gtest.h>
#include "tests/test_paths.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

namespace fs = std::filesystem;

namespace {

// Folders, longest first so that "sim/engine" wins over "sim" and "base/params" over "base".
const std::vector<std::string> kFolders = {
    "sim/cli",     "sim/report",  "sim/sweep",   "sim/search",  "sim/engine", "sim/trace",  "sim/config",
    "base/params", "base",        "hw/chip",     "hw/ici",      "hw/pod",     "hw/dcn",     "hw/compiler", "hw/timing",
    "strategies",  "partition",   "hlo",         "plan",        "workloads",   "collectives", "topology"};

std::string folder_of(const std::string& path) {
  for (const auto& f : kFolders)
    if (path.rfind(f + "/", 0) == 0) return f;
  return "";
}

// What each folder may include besides itself (docs/architecture.md, "The layers"). The top floors (sim/engine,
// sim/search, sim/cli) may include anything below them and are not listed.
const std::map<std::string, std::set<std::string>>& allowed() {
  static const std::set<std::string> ground = {"base", "base/params", "topology"};
  static const std::set<std::string> ir = [] {
    std::set<std::string> s = ground;
    s.insert({"plan", "workloads", "collectives"});
    return s;
  }();
  static const std::set<std::string> planning = [] {
    std::set<std::string> s = ir;
    s.insert({"strategies", "partition"});
    return s;
  }();
  static const std::set<std::string> hw = [] {
    std::set<std::string> s = ir;
    s.insert({"hw/compiler", "hw/timing"});
    return s;
  }();
  static const std::set<std::string> models = [] {
    std::set<std::string> s = hw;
    s.insert({"hw/chip", "hw/ici", "hw/pod", "hw/dcn"});
    return s;
  }();
  static const std::map<std::string, std::set<std::string>> m = {
      {"base", {}},
      {"base/params", {"base"}},
      {"topology", {"base"}},
      {"collectives", {"base", "base/params", "topology"}},
      {"plan", ir},
      {"workloads", ir},
      {"partition", ir},
      {"strategies", planning},
      {"hlo", planning},  // the HLO importer: a workload and a strategy of its own, beside strategies/
      {"hw/timing", hw},
      {"hw/compiler", hw},
      {"hw/chip", models},
      {"hw/ici", models},
      {"hw/pod", models},
      {"hw/dcn", models},
      {"sim/config", planning},  // the experiment loader checks names against the workload and strategy registries
      {"sim/trace", {"base"}},
      {"sim/report", {"base"}},
      {"sim/sweep", {"base", "base/params", "sim/config"}},
  };
  return m;
}

const std::set<std::string> kSystemC = {"hw/chip", "hw/ici", "hw/pod", "hw/dcn", "sim/engine", "sim/cli"};

}  // namespace

TEST(LayersTest, EveryIncludeStaysWithinItsLayer) {
  const fs::path root = PODSIM_SOURCE_DIR;
  const std::regex include_re("^\\s*#\\s*include\\s*[\"<]([^\">]+)[\">]");
  size_t files = 0;
  for (const auto& f : kFolders) {
    for (const auto& e : fs::recursive_directory_iterator(root / f)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".cpp" && ext != ".h") continue;
      const std::string rel = fs::relative(e.path(), root).string();
      const std::string from = folder_of(rel);
      if (from != f) continue;  // a subfolder listed on its own (base/params under base) is walked as itself
      ++files;
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        std::smatch m;
        if (!std::regex_search(line, m, include_re)) continue;
        const std::string target = m[1];
        if (target == "systemc" || target == "systemc.h") {
          EXPECT_TRUE(kSystemC.count(from)) << rel << ":" << n << " includes SystemC outside hw/chip, hw/ici, hw/pod, hw/dcn, "
                                            << "sim/engine and sim/cli";
        }
        const std::string to = folder_of(target);
        if (to.empty() || to == from) continue;
        auto it = allowed().find(from);
        if (it == allowed().end()) continue;  // the top layers (sim/engine, sim/cli) may include anything below
        EXPECT_TRUE(it->second.count(to)) << rel << ":" << n << " (" << from << ") includes " << target
                                          << ", which is in " << to << ": docs/architecture.md, \"The layers\"";
      }
    }
  }
  EXPECT_GT(files, 100u);  // the walk found the tree
}

// The rule the split of topology/ out of hw/ was made for, by name.
TEST(LayersTest, PlanAndHardwareMeetOnlyInTopology) {
  for (const char* from : {"plan", "workloads", "partition", "strategies", "hlo", "collectives"}) {
    for (const auto& to : allowed().at(from)) EXPECT_NE(to.rfind("hw/", 0), 0u) << from << " may include " << to;
  }
  for (const char* from : {"hw/chip", "hw/ici", "hw/pod", "hw/dcn", "hw/compiler", "hw/timing"}) {
    EXPECT_FALSE(allowed().at(from).count("strategies")) << from;
    EXPECT_FALSE(allowed().at(from).count("partition")) << from;
    EXPECT_FALSE(allowed().at(from).count("hlo")) << from;
  }
}

// sim/ is the top of the house: no folder below it includes any of it, and the ground includes nothing above it.
TEST(LayersTest, NoLowerLayerIncludesSim) {
  for (const auto& [from, to] : allowed()) {
    if (from.rfind("sim/", 0) == 0) continue;
    for (const auto& t : to) EXPECT_NE(t.rfind("sim/", 0), 0u) << from << " may include " << t;
  }
  EXPECT_TRUE(allowed().at("base").empty());
  EXPECT_EQ(allowed().at("base/params"), std::set<std::string>{"base"});
}

// The HLO text parser and its attribute readers are the ground's too: they include nothing of the project but base/
// (the importer beside them, hlo/import.cpp and hlo/workload.cpp, is what reaches up to workloads/ and plan/).
TEST(LayersTest, TheHloParserStandsOnTheGroundAlone) {
  const fs::path root = PODSIM_SOURCE_DIR;
  const std::regex include_re("^\\s*#\\s*include\\s*\"([^\"]+)\"");
  for (const char* f : {"hlo/module.h", "hlo/module.cpp", "hlo/parser.h", "hlo/parser.cpp", "hlo/attributes.h",
                        "hlo/attributes.cpp", "hlo/devices.h", "hlo/devices.cpp"}) {
    std::ifstream in(root / f);
    ASSERT_TRUE(in) << f;
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      std::smatch m;
      if (!std::regex_search(line, m, include_re)) continue;
      const std::string target = m[1];
      EXPECT_TRUE(target.rfind("base/", 0) == 0 || target.rfind("hlo/", 0) == 0) << f << ":" << n << " includes " << target;
    }
  }
}

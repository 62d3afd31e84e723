// configs/examples/lars.yaml through `podsim run`: LARS with weight-update sharding over 4 chips. The summary shows
// the norms' all-reduces as the plan makes them (one combined all-reduce of the 4 weights' partial squared norms, 8
// bytes each; with run.combine_threshold: 0, one per weight), the optimizer state a quarter of one fp32 momentum per
// parameter, and `podsim compare` finds the step equal to its single-device run.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

nlohmann::json run(const std::string& name, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"run", source_dir() + "/configs/examples/lars.yaml", "--out",
                                   test_dir() + "/" + name, "-q"};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult r = run_podsim(args);
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(read_file(test_dir() + "/" + name + "/summary.json"));
}

// The MLP of the example: input 256, hidden 512, 3 hidden layers, 16 classes.
constexpr double kParams = 256.0 * 512 + 512 + 2 * (512.0 * 512 + 512) + 512.0 * 16 + 16;
const std::set<std::string> kNorms = {"fc0.w.norms", "fc1.w.norms", "fc2.w.norms", "out.w.norms"};

TEST(OptimizerCliTest, LarsExampleAllReducesTheNormsOnceAndReproducesTheStep) {
  const nlohmann::json s = run("lars", {});
  std::set<std::string> norms;
  int with_norms = 0;
  for (const auto& c : s["collectives"]) {
    if (!c.contains("tensors")) continue;
    bool any = false;
    for (const auto& t : c["tensors"])
      if (kNorms.count(t.get<std::string>())) any = true, norms.insert(t.get<std::string>());
    if (!any) continue;
    ++with_norms;
    EXPECT_EQ(c["kind"], "all_reduce");
    EXPECT_EQ(c["axes"], nlohmann::json::parse("[\"data\"]"));
    EXPECT_DOUBLE_EQ(c["bytes_per_chip"].get<double>(), 4 * 8.0);
  }
  EXPECT_EQ(with_norms, 1);
  EXPECT_EQ(norms, kNorms);
  EXPECT_DOUBLE_EQ(s["roles"][0]["memory_at_peak"]["optimizer_state"].get<double>(), 4 * kParams / 4);

  const nlohmann::json u = run("uncombined", {"--set", "run.combine_threshold=0"});
  std::set<std::string> alone;
  for (const auto& c : u["collectives"])
    if (kNorms.count(c["tensor"].get<std::string>())) {
      alone.insert(c["tensor"].get<std::string>());
      EXPECT_EQ(c["kind"], "all_reduce");
      EXPECT_DOUBLE_EQ(c["bytes_per_chip"].get<double>(), 8.0);
    }
  EXPECT_EQ(alone, kNorms);
  // Four latency-bound all-reduces one after another cost more than one.
  EXPECT_GT(u["step_time_s"].get<double>(), s["step_time_s"].get<double>());

  CliResult r = run_podsim({"run", source_dir() + "/configs/examples/lars.yaml", "--single-device", "--out",
                            test_dir() + "/one", "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_podsim({"compare", test_dir() + "/one", test_dir() + "/lars"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("equal:"), std::string::npos) << r.out;
}

}  // namespace

// Gradient bucketing (run.combine_threshold, partition/combine.h) as a user runs it: the collectives summary.json
// and the report list, the step time it changes, and the values it does not change, moved by the simulated DMA
// engines over the simulated links.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

using namespace podsim::test;
using json = nlohmann::json;

namespace {

// fp32 MLP 24 -> 40 -> 40 -> 40 -> 10: 8 parameter gradients of 3840, 160, 6400, 160, 6400, 160, 1600 and 40
// bytes (18760 in all).
std::string experiment(const std::string& dims) {
  return "hardware: {preset: tpu-v3, pod: {dims: " + dims + "}}\n"
         "workload: {model: mlp, batch: 16, input: 24, hidden: 40, layers: 3, classes: 10, dtype: fp32, "
         "optimizer: adam}\n"
         "strategy: {name: data_parallel}\nrun: {trace: {format: off}}\n";
}

json run(const std::string& name, const std::string& yaml, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"run", write_file(name + ".yaml", yaml), "--out", name, "-q"};
  args.insert(args.end(), extra.begin(), extra.end());
  CliResult r = run_podsim(args);
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(read_file(test_dir() + "/" + name + "/summary.json"));
}

}  // namespace

// Data parallel on 2 x 2 chips: one all-reduce per gradient (and the loss's) without combining; with the default
// threshold the 8 gradients travel in one all-reduce of 18760 bytes, issued when the first layer's gradient (the
// last one) is ready. The small all-reduces no longer queue behind each other on the same links: the step is
// shorter (90.4 us against 42.6 us when this was written; the test asserts only the order).
TEST(CombineTest, OneCombinedAllReduceAndAShorterStep) {
  const json off = run("off", experiment("[2, 2]"), {"--set", "run.combine_threshold=0"});
  const json on = run("on", experiment("[2, 2]"));
  ASSERT_EQ(off["collectives"].size(), 9u);
  for (const json& c : off["collectives"]) EXPECT_FALSE(c.contains("tensors")) << c;
  EXPECT_EQ(off["combined_collectives"]["collectives"], 0);
  EXPECT_EQ(off["combined_collectives"]["threshold_bytes"], 0.0);

  EXPECT_EQ(on["combined_collectives"]["threshold_bytes"], 30.0 * 1024 * 1024);  // the default
  EXPECT_EQ(on["combined_collectives"]["collectives"], 1);
  EXPECT_EQ(on["combined_collectives"]["tensors"], 8);
  ASSERT_EQ(on["collectives"].size(), 2u);
  const json& c = on["collectives"][0];
  EXPECT_EQ(c["kind"], "all_reduce");
  EXPECT_EQ(c["axes"], json::array({"data"}));
  EXPECT_EQ(c["tensor"], "8 tensors");
  EXPECT_EQ(c["bytes_per_chip"], 18760.0);
  EXPECT_EQ(c["tensors"], json::array({"out.b.grad", "out.w.grad", "fc2.b.grad", "fc2.w.grad", "fc1.b.grad",
                                       "fc1.w.grad", "fc0.b.grad", "fc0.w.grad"}));
  EXPECT_EQ(on["collectives"][1]["tensor"], "loss");
  bool noted = false;
  for (const json& n : on["notes"])
    noted = noted || n.get<std::string>().find("gradient reductions: 8 combined into 1 collectives") == 0;
  EXPECT_TRUE(noted) << on["notes"];

  EXPECT_LT(on["step_time_s"].get<double>(), off["step_time_s"].get<double>());

  CliResult r = run_podsim({"report", test_dir() + "/on"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("8 tensors"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gradient bucketing: 1 collectives carry 8 gradient reductions (run.combine_threshold 30.00 MiB)"),
            std::string::npos)
      << r.out;
}

// The values: each tensor's elements sit in the combined buffer in the block and piece the algorithm would give
// them on their own, so they are added in the same order: the combined step's tensors are bit for bit those of
// the uncombined step, over 2 chips, 4 on two torus axes, 8 on three (v4), with the default algorithm (torus) and
// with strategy.gradient_algorithm: ring (whose all-reduce cuts the buffer by each axis in turn: no longer bit for
// bit, equal at fp32 rounding).
TEST(CombineTest, ValuesDoNotChange) {
  struct Case {
    std::string tag, hardware, algorithm, tolerance;
  };
  const Case cases[] = {
      {"two", "tpu-v3, pod: {dims: [2, 1]}", "", "0"},
      {"four", "tpu-v3, pod: {dims: [2, 2]}", "", "0"},
      {"eight", "tpu-v4, pod: {dims: [2, 2, 2]}", "", "0"},
      {"ring", "tpu-v4, pod: {dims: [2, 2, 2]}", "ring", "1e-6"},
  };
  for (const Case& k : cases) {
    std::string yaml = experiment("[2, 2]");
    yaml.replace(yaml.find("tpu-v3, pod: {dims: [2, 2]}"), 27, k.hardware);
    if (!k.algorithm.empty()) yaml.replace(yaml.find("name: data_parallel"), 19, "name: data_parallel, gradient_algorithm: " + k.algorithm);
    run(k.tag + "_off", yaml, {"--set", "run.combine_threshold=0", "--set", "run.numeric=true"});
    const json on = run(k.tag + "_on", yaml, {"--set", "run.numeric=true"});
    EXPECT_EQ(on["combined_collectives"]["tensors"], 8) << k.tag;
    CliResult c = run_podsim({"compare", test_dir() + "/" + k.tag + "_off", test_dir() + "/" + k.tag + "_on",
                              "--tolerance", k.tolerance});
    EXPECT_EQ(c.code, 0) << k.tag << "\n" << c.out << c.err;
  }
}

TEST(CombineTest, NegativeThresholdIsRefused) {
  CliResult r = run_podsim({"run", write_file("bad.yaml", experiment("[2, 1]")), "--set",
                            "run.combine_threshold=-1MiB", "--out", "bad", "-q"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("run.combine_threshold"), std::string::npos) << r.err;
}

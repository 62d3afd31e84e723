// workload.model: hlo on XLA's GPU modules that take minutes to simulate: MaxText's Llama 3 8B training step with
// Transformer Engine attention and activation offloading (tests/data/hlo/modules), simulated whole on 8 TPU v5p
// chips (the quick tier plans its memory: hlo_test.cpp).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

using namespace podsim;
using namespace podsim::test;
using json = nlohmann::json;

TEST(HloSlowTest, TheLlama3StepWithOffloadRuns) {
  const std::string exp = write_file("llama3.yaml", "hardware:\n  preset: tpu-v5p\n  pod: {dims: [2, 2, 2]}\n"
                                                    "workload:\n  model: hlo\n  module: " + source_dir() +
                                                        "/tests/data/hlo/modules/"
                                                        "llama3_8b_train_step_te_attn_offload_8gpu.hlo.gz\n"
                                                        "run: {trace: {format: \"off\"}}\n");
  const std::string out = test_dir() + "/llama3";
  CliResult r = run_podsim({"run", exp, "--out", out, "--force"});
  ASSERT_EQ(r.code, 0) << r.err;
  json s = json::parse(read_file(out + "/summary.json"));
  EXPECT_GT(s["step_time_s"].get<double>(), 0);
  EXPECT_TRUE(s["memory"]["fits"].get<bool>());
}

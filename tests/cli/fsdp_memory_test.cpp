// Per-role memory by category as summary.json reports it for fully sharded data parallelism (`podsim run
// --memory-only`), against hand counts from the MLP's dimensions. tests/unit/fsdp_test.cpp derives the collectives
// and the gathered-weight bounds from the plans; this checks what reaches the summary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

using namespace podsim::test;
using nlohmann::json;

namespace {

// The MLP: batch B, input I, hidden H, classes C, fp32, every tensor in HBM (run.fusion: none).
constexpr double B = 16, I = 8, H = 32, C = 4, F32 = 4;

json memory_only(const std::string& name, const std::string& yaml) {
  const std::string exp = write_file(name + ".yaml", yaml);
  auto r = run_podsim({"run", exp, "--out", name, "--memory-only", "-q"});
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(read_file(test_dir() + "/" + name + "/summary.json"));
}

}  // namespace

// One reduce-scatter per gradient (run.combine_threshold: 0; a bucket holds its gradients whole until its last
// member is ready). Two hidden layers on fsdp 4 with Adam (b = B / 4 rows per chip): a quarter of the weights and twice that of Adam's
// m and v. The peak is at the output layer's input gradient (out.dA), the first backward op that reads a gathered
// weight: live then are the gathered copies of out.w (H x C) and, prefetched one layer ahead, of fc1.w (H x H),
// whole, as temporaries; the logits' gradient (b x C), out.dA's output (b x H) and the quarter of out.b's gradient
// already reduce-scattered (C / 4); and what the rest of the backward pass reads: the batch shard (b x I, b labels),
// the loss, and each hidden layer's biased pre-activation and ReLU output (b x H each).
TEST(FsdpMemoryTest, ShardsAndTwoGatheredLayersByCategory) {
  const json s = memory_only("fsdp", "hardware: {preset: tpu-v3, pod: {dims: [4, 1]}}\n"
                                     "workload: {model: mlp, batch: 16, input: 8, hidden: 32, layers: 2, classes: 4, "
                                     "dtype: fp32, optimizer: adam}\nrun: {fusion: none, combine_threshold: 0}\n"
                                     "strategy: {name: fsdp}\n");
  const double b = B / 4, params = I * H + H + H * H + H + H * C + C;
  ASSERT_EQ(s["roles"].size(), 1u);
  const json& m = s["roles"][0]["memory_at_peak"];
  EXPECT_EQ(m["weights"].get<double>(), params * F32 / 4);
  EXPECT_EQ(m["optimizer_state"].get<double>(), 2 * params * F32 / 4);
  EXPECT_EQ(m["temporaries"].get<double>(), (H * C + H * H) * F32);
  EXPECT_EQ(m["gradients"].get<double>(), (b * C + b * H + C / 4) * F32);
  EXPECT_EQ(m["activations"].get<double>(), (b * I + b + 1 + 4 * b * H) * F32);
  EXPECT_EQ(s["peak_memory_bytes"].get<double>(),
            (3 * params / 4 + H * C + H * H + b * C + b * H + C / 4 + b * I + b + 1 + 4 * b * H) * F32);
}

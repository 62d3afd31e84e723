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
// m and v. The peak is at the reduce-scatter of fc1's weight gradient as it starts, when no gathered weight is left
// (fc1.w's copy died with fc1's input gradient): live then are fc1's whole weight gradient (H x H) and the quarter it
// writes, the quarters already reduce-scattered (out.w's H x C, out.b's C and fc1.b's H, over 4), fc1's input
// gradient (b x H, what fc0's ReLU gradient reads next); and what the rest of the backward pass reads: the batch
// shard (b x I, b labels), the loss and fc0's ReLU output (b x H: the ReLU gradient's mask). At the output layer's
// input gradient (out.dA), the first backward op that reads a gathered weight, the gathered out.w and, prefetched,
// fc1.w are live, but of the activations only the two ReLU outputs (the biased values die as their ReLUs read
// them): 96 B less.
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
  const double gradients = H * H + H * H / 4 + (H * C + C + H) / 4 + b * H;
  EXPECT_EQ(m["temporaries"].get<double>(), 0);
  EXPECT_EQ(m["gradients"].get<double>(), gradients * F32);
  EXPECT_EQ(m["activations"].get<double>(), (b * I + b + 1 + b * H) * F32);
  EXPECT_EQ(s["peak_memory_bytes"].get<double>(), (3 * params / 4 + gradients + b * I + b + 1 + b * H) * F32);
}

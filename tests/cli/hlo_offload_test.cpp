// Host offloading in imported modules (docs/hlo.md): MoveToHost and MoveToDevice (and annotate_device_placement
// with a memory kind) as to_host and from_host transfers over the chip's host link, the value held in host memory
// meanwhile, not HBM. Checked by hand: the host link's bytes and time and the peak HBM of a value offloaded across
// a dot, a stack of offloaded values (XLA's layer scan: dynamic updates of a buffer on the host, a slice brought
// back) in timing and numeric mode, and MaxText's Llama 3 8B training step with activation offloading.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "base/npy.h"
#include "hlo/import.h"
#include "hlo/parser.h"
#include "hlo/stablehlo_parser.h"
#include "tests/cli/cli_util.h"
#include "workloads/op_def.h"

using namespace podsim;
using namespace podsim::test;
using json = nlohmann::json;

namespace {

json run_module(const std::string& name, const std::string& text, const std::string& extra = "") {
  write_file(name + ".hlo", text);
  const std::string exp = write_file(name + ".yaml", "hardware:\n  preset: tpu-v4\n  pod: {dims: [1, 1, 1]}\n"
                                                     "workload:\n  model: hlo\n  module: " + name + ".hlo\n" + extra);
  const std::string out = test_dir() + "/" + name;
  CliResult r = run_podsim({"run", exp, "--out", out, "--force"});
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(read_file(out + "/summary.json"));
}

constexpr double kMiB = 1 << 20;

// y = x w, offloaded while z = x x runs, brought back and added to z. `a` and `b` stand for the two calls.
std::string across_a_dot(const std::string& a, const std::string& b) {
  return "HloModule offload\nENTRY %e (x: f32[1024,1024], w: f32[1024,1024]) -> f32[1024,1024] {\n"
         "  %x = f32[1024,1024] parameter(0)\n  %w = f32[1024,1024] parameter(1)\n"
         "  %y = f32[1024,1024] dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
         "  %h = f32[1024,1024] " + a + "\n"
         "  %z = f32[1024,1024] dot(%x, %x), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
         "  %d = f32[1024,1024] " + b + "\n"
         "  ROOT %r = f32[1024,1024] add(%d, %z)\n}\n";
}

}  // namespace

TEST(HloOffloadTest, AValueOffloadedAcrossADotCrossesTheHostLinkTwiceAndLeavesHbm) {
  const json off = run_module("off", across_a_dot("custom-call(%y), custom_call_target=\"MoveToHost\"",
                                                  "custom-call(%h), custom_call_target=\"MoveToDevice\""));
  const json stay = run_module("stay", across_a_dot("copy(%y)", "copy(%h)"));  // no offload: no host link
  // y's 4 MiB to the host and back.
  ASSERT_TRUE(off.contains("host_link"));
  EXPECT_DOUBLE_EQ(off["host_link"]["bytes_to_host"].get<double>(), 4 * kMiB);
  EXPECT_DOUBLE_EQ(off["host_link"]["bytes_from_host"].get<double>(), 4 * kMiB);
  EXPECT_FALSE(stay.contains("host_link"));
  // Each way 4 MiB at the v4 host link's 16 GB/s (262.144 us), one after the other (d needs h): the step takes both.
  double busy_h = 0, busy_d = 0;
  for (const json& op : off["ops"]) {
    if (op["name"] == "h") busy_h = op["busy_s"].get<double>();
    if (op["name"] == "d") busy_d = op["busy_s"].get<double>();
  }
  EXPECT_NEAR(busy_h, 4 * kMiB / 16e9, 1e-12);
  // Back: the link's time and the writes into HBM that trail it (less than twice 4 MiB at HBM's 1.2 TB/s).
  EXPECT_GE(busy_d, 4 * kMiB / 16e9);
  EXPECT_LT(busy_d, 4 * kMiB / 16e9 + 2 * 4 * kMiB / 1.2e12);
  EXPECT_GE(off["step_time_s"].get<double>(), 2 * 4 * kMiB / 16e9);
  // The peak, at r: x, w, z, d and r (5 x 4 MiB) in HBM; y's buffer is not among them (it is on the host).
  EXPECT_DOUBLE_EQ(off["peak_memory_bytes"].get<double>(), 20 * kMiB);
  for (const json& t : off["memory"]["largest_at_peak"]) EXPECT_NE(t["name"], "y");
  // annotate_device_placement with JAX's memory kinds does the same.
  const json ann = run_module(
      "ann", across_a_dot("custom-call(%y), custom_call_target=\"annotate_device_placement\", "
                          "frontend_attributes={_xla_buffer_placement=\"pinned_host\"}",
                          "custom-call(%h), custom_call_target=\"annotate_device_placement\", "
                          "frontend_attributes={_xla_buffer_placement=\"device\"}"));
  EXPECT_DOUBLE_EQ(ann["host_link"]["bytes_to_host"].get<double>(), 4 * kMiB);
  EXPECT_DOUBLE_EQ(ann["host_link"]["bytes_from_host"].get<double>(), 4 * kMiB);
  EXPECT_DOUBLE_EQ(ann["peak_memory_bytes"].get<double>(), off["peak_memory_bytes"].get<double>());
}

TEST(HloOffloadTest, JaxsMemoryKindsInStableHloAreTheSameTransfers) {
  // jax.device_put(x, pinned_host) and back, as JAX lowers it: 4 MiB each way.
  const std::string mlir =
      "module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
      "  func.func public @main(%arg0: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {\n"
      "    %0 = stablehlo.custom_call @annotate_device_placement(%arg0) {has_side_effect = true, "
      "mhlo.frontend_attributes = {_xla_buffer_placement = \"pinned_host\"}} : (tensor<1024x1024xf32>) -> "
      "tensor<1024x1024xf32>\n"
      "    %1 = stablehlo.custom_call @annotate_device_placement(%0) {has_side_effect = true, "
      "mhlo.frontend_attributes = {_xla_buffer_placement = \"device\"}} : (tensor<1024x1024xf32>) -> "
      "tensor<1024x1024xf32>\n"
      "    %2 = stablehlo.add %1, %arg0 : tensor<1024x1024xf32>\n"
      "    return %2 : tensor<1024x1024xf32>\n  }\n}\n";
  const hlo::Imported im = hlo::import_module(hlo::parse_stablehlo(mlir, "t.mlir"), {});
  std::map<OpKind, double> bytes;
  for (const Op& op : im.graph.ops())
    if (op.kind == OpKind::ToHost || op.kind == OpKind::FromHost) bytes[op.kind] += im.graph.tensor(op.inputs[0]).bytes();
  EXPECT_DOUBLE_EQ(bytes[OpKind::ToHost], 4 * kMiB);
  EXPECT_DOUBLE_EQ(bytes[OpKind::FromHost], 4 * kMiB);
}

namespace {

// Two values offloaded into slots 0 and 1 of a stack of 4 (f32[4, 256, 1024], 4 MiB) on the host, slot 1 brought
// back and added to p0: r = p1 + p0.
const char* kStack = R"(HloModule stack
ENTRY %e (p0: f32[256,1024], p1: f32[256,1024]) -> f32[256,1024] {
  %p0 = f32[256,1024] parameter(0)
  %p1 = f32[256,1024] parameter(1)
  %zero = f32[] constant(0)
  %i0 = s32[] constant(0)
  %i1 = s32[] constant(1)
  %stack = f32[4,256,1024] broadcast(%zero), dimensions={}
  %h0 = f32[256,1024] custom-call(%p0), custom_call_target="MoveToHost"
  %r0 = f32[1,256,1024] reshape(%h0)
  %s1 = f32[4,256,1024] dynamic-update-slice(%stack, %r0, %i0, %i0, %i0)
  %h1 = f32[256,1024] custom-call(%p1), custom_call_target="MoveToHost"
  %r1 = f32[1,256,1024] reshape(%h1)
  %s2 = f32[4,256,1024] dynamic-update-slice(%s1, %r1, %i1, %i0, %i0)
  %g = f32[1,256,1024] dynamic-slice(%s2, %i1, %i0, %i0), dynamic_slice_sizes={1,256,1024}
  %q = f32[256,1024] reshape(%g)
  %d = f32[256,1024] custom-call(%q), custom_call_target="MoveToDevice"
  ROOT %r = f32[256,1024] add(%d, %p0)
}
)";

}  // namespace

TEST(HloOffloadTest, AStackOfOffloadedValuesStaysOnTheHost) {
  const json s = run_module("stack", kStack);
  // Two 1 MiB values to the host, one back.
  EXPECT_DOUBLE_EQ(s["host_link"]["bytes_to_host"].get<double>(), 2 * kMiB);
  EXPECT_DOUBLE_EQ(s["host_link"]["bytes_from_host"].get<double>(), kMiB);
  // HBM holds p0, p1, the value brought back and the sum at most: the 4 MiB stack is on the host.
  EXPECT_LE(s["peak_memory_bytes"].get<double>(), 4 * kMiB);
  // In numeric mode the slot brought back is p1's value.
  run_module("stack_n", kStack, "run: {numeric: true, seed: 5}\n");
  std::vector<int64_t> shape;
  std::vector<float> p0, p1, r;
  read_npy(test_dir() + "/stack_n/tensors/p0.npy", shape, p0);
  read_npy(test_dir() + "/stack_n/tensors/p1.npy", shape, p1);
  read_npy(test_dir() + "/stack_n/tensors/r.npy", shape, r);
  ASSERT_EQ(r.size(), p0.size());
  for (size_t i = 0; i < r.size(); i += 997) EXPECT_FLOAT_EQ(r[i], p0[i] + p1[i]) << i;
}

TEST(HloOffloadTest, LlamaThreeEightBsActivationOffloadingMovesTwoMlpActivationsPerLayer) {
  // MaxText's Llama 3 8B step (tests/data/hlo/modules, openxla/xla's benchmark corpus): the layer scan offloads
  // the two MLP input projections of each of the 32 layers (bf16[1, 8192, 14336], 224 MiB each) into stacks on
  // the host, and the backward scan brings each back; its other 39 MoveToDevice calls place values already in
  // HBM (the optimizer's results) and move nothing.
  const std::string path = source_dir() + "/tests/data/hlo/modules/llama3_8b_train_step_te_attn_offload_8gpu.hlo.gz";
  const hlo::Imported im = hlo::import_module(hlo::parse_module(hlo::read_module_text(path), path), {});
  std::map<OpKind, double> bytes;
  std::map<OpKind, int> count;
  for (const Op& op : im.graph.ops())
    if (op.kind == OpKind::ToHost || op.kind == OpKind::FromHost) {
      bytes[op.kind] += im.graph.tensor(op.inputs[0]).bytes();
      ++count[op.kind];
    }
  const double act = 8192.0 * 14336 * 2;
  EXPECT_EQ(count[OpKind::ToHost], 64);
  EXPECT_EQ(count[OpKind::FromHost], 64);
  EXPECT_DOUBLE_EQ(bytes[OpKind::ToHost], 64 * act);
  EXPECT_DOUBLE_EQ(bytes[OpKind::FromHost], 64 * act);
}

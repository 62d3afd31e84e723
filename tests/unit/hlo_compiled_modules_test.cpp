// Modules compiled for a backend and the reference modules (hlo/import.h, docs/hlo.md): a TPU module's infeed,
// outfeed, X64 custom calls and tiled layouts, GPU library calls as the dots and convolutions they stand for, a
// collective-permute run backwards, every module under shared/reference/modules importing and lowering, and the
// custom calls docs/hlo.md lists.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#include "hlo/attributes.h"
#include "hlo/devices.h"
#include "tests/unit/hlo_test_util.h"

using namespace podsim;
using namespace podsim::hlo;
using namespace podsim::hlo_test;

TEST(HloImportTest, ATpuModulesInfeedOutfeedX64CallsAndTiledLayouts) {
  // What a module TensorFlow compiled for a TPU holds: the input pipeline's infeed and outfeed, the 64-bit integer
  // emulation's custom calls, a gather hint, and tiled layouts.
  const std::string text = R"(HloModule tpu_step
ENTRY %main (w: f32[128,256], p: f32[3,200], q: bf16[3,200]) -> s64[1024] {
  %w = f32[128,256]{1,0:T(8,128)} parameter(0)
  %p = f32[3,200]{1,0:T(8,128)} parameter(1)
  %q = bf16[3,200]{0,1:T(8,128)(2,1)} parameter(2)
  %tok = token[] after-all()
  %in = ((f32[8,128]{1,0:T(8,128)}, s64[1024]{0}), token[]) infeed(%tok)
  %data = (f32[8,128]{1,0:T(8,128)}, s64[1024]{0}) get-tuple-element(%in), index=0
  %x = f32[8,128]{1,0:T(8,128)} get-tuple-element(%data), index=0
  %ids = s64[1024]{0} get-tuple-element(%data), index=1
  %y = f32[8,256]{1,0:T(8,128)} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %lo = u32[1024]{0} custom-call(%ids), custom_call_target="X64SplitLow"
  %hi = u32[1024]{0} custom-call(%ids), custom_call_target="X64SplitHigh"
  %hi2 = u32[1024]{0} add(%hi, %hi)
  %joined = s64[1024]{0} custom-call(%lo, %hi2), custom_call_target="X64Combine"
  %safe = s64[1024]{0} custom-call(%joined), custom_call_target="AssumeGatherIndicesInBound"
  %done = token[] outfeed(%y, %tok), outfeed_shape=f32[8,256]{1,0}
  ROOT %r = s64[1024]{0} copy(%safe)
}
)";
  Imported im = import_text(text);
  // The infeed's two arrays arrive over the host link: 8 x 128 x 4 and 1024 x 8 bytes written to HBM.
  const Op& x = op_named(im, "in.0");
  EXPECT_EQ(x.kind, OpKind::FromHost);
  EXPECT_DOUBLE_EQ(op_cost(im.graph, x).bytes_written, 4096.0);
  EXPECT_EQ(op_cost(im.graph, x).unit, Unit::Host);
  EXPECT_EQ(op_named(im, "in.1").kind, OpKind::FromHost);
  EXPECT_DOUBLE_EQ(op_cost(im.graph, op_named(im, "in.1")).bytes_written, 8192.0);
  // The outfeed sends y (8 x 256 x 4 bytes) to the host.
  const Op& out = op_named(im, "done");
  EXPECT_EQ(out.kind, OpKind::ToHost);
  EXPECT_DOUBLE_EQ(op_cost(im.graph, out).bytes_read, 8192.0);
  // A split reads the 8-byte value and writes a 4-byte word, one vector op per element; a combine reads two words
  // and writes 8 bytes, two ops per element (shift, or).
  for (const char* n : {"lo", "hi"}) {
    const OpCost c = op_cost(im.graph, op_named(im, n));
    EXPECT_DOUBLE_EQ(c.flops, 1024.0) << n;
    EXPECT_DOUBLE_EQ(c.bytes_read + c.bytes_written, 1024.0 * (8 + 4)) << n;
    EXPECT_EQ(c.unit, Unit::Vpu) << n;
  }
  const OpCost j = op_cost(im.graph, op_named(im, "joined"));
  EXPECT_DOUBLE_EQ(j.flops, 2048.0);
  EXPECT_DOUBLE_EQ(j.bytes_read + j.bytes_written, 1024.0 * (4 + 4 + 8));
  // A marker without a result (Shardy's sharding group) is nothing.
  std::string grouped = text;
  grouped.replace(grouped.find("  %done ="), 0, "  %g = () custom-call(%safe), custom_call_target=\"xla.sdy.ShardingGroup\"\n");
  EXPECT_EQ(error_of([&] { import_text(grouped); }), "no error");
  // The gather hint is its operand: r copies the combine's result.
  EXPECT_EQ(im.graph.tensor(op_named(im, "r").inputs[0]).name, "joined");
  // Tiles pad the dimensions they cover: [3, 200] in (8, 128) tiles takes 8 x 256 elements; bf16 [3, 200] stored
  // column-major (200 rows of 3) takes 200 x 128, the (2, 1) tile inside the first padding nothing more.
  auto stored = [&](const std::string& name) {
    for (size_t t = 0; t < im.graph.num_tensors(); ++t)
      if (im.graph.tensor(static_cast<TensorId>(t)).name == name) return im.graph.tensor(static_cast<TensorId>(t)).stored_bytes();
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(stored("w"), 128.0 * 256 * 4);
  EXPECT_DOUBLE_EQ(stored("p"), 8.0 * 256 * 4);
  EXPECT_DOUBLE_EQ(stored("q"), 200.0 * 128 * 2);
  EXPECT_DOUBLE_EQ(stored("in.1"), 1024.0 * 8);  // no tiles: the logical bytes
}

TEST(HloImportTest, AnInfeedsHostSideTakesNoHbm) {
  // x arrives from the host (1 MiB); y = exp(x). HBM holds x and y, not the host's copy.
  const std::string text = R"(HloModule feed
ENTRY %e () -> f32[512,512] {
  %tok = token[] after-all()
  %in = (f32[512,512], token[]) infeed(%tok)
  %x = f32[512,512] get-tuple-element(%in), index=0
  ROOT %y = f32[512,512] exponential(%x)
}
)";
  Imported im = import_text(text);
  ExecProgram ep = lower(im.graph, im.order, v4(), LowerOptions{});
  EXPECT_DOUBLE_EQ(ep.memory.peak_bytes, 2.0 * (1 << 20));
}

TEST(HloImportTest, GpuLibraryCallsAreTheDotsAndConvolutionsTheyStandFor) {
  const std::string text = R"(HloModule gpu
ENTRY %e (a: f32[4,32,64], b: f32[4,64,16], x: f32[1,32,32,8], k: f32[8,3,3,8], k0: u32[1024], c0: u32[1024]) -> f32[4,32,16] {
  %a = f32[4,32,64]{2,1,0} parameter(0)
  %b = f32[4,64,16]{2,1,0} parameter(1)
  %x = f32[1,32,32,8]{3,2,1,0} parameter(2)
  %k = f32[8,3,3,8]{3,2,1,0} parameter(3)
  %k0 = u32[1024]{0} parameter(4)
  %c0 = u32[1024]{0} parameter(5)
  %g = (f32[4,32,16]{2,1,0}, s8[4194304]{0}) custom-call(%a, %b), custom_call_target="__cublas$lt$matmul", backend_config={"gemm_backend_config":{"alpha_real":1,"beta":0,"dot_dimension_numbers":{"lhs_contracting_dimensions":["2"],"rhs_contracting_dimensions":["1"],"lhs_batch_dimensions":["0"],"rhs_batch_dimensions":["0"]},"epilogue":"DEFAULT"}}
  %gy = f32[4,32,16]{2,1,0} get-tuple-element(%g), index=0
  %conv = (f32[1,32,32,8]{3,2,1,0}, u8[0]{0}) custom-call(%x, %k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_o01i->b01f, custom_call_target="__cudnn$convForward"
  %cy = f32[1,32,32,8]{3,2,1,0} get-tuple-element(%conv), index=0
  %rng = (u32[1024]{0}, u32[1024]{0}) custom-call(%k0, %k0, %c0, %c0), custom_call_target="cu_threefry2x32"
  %bits = u32[1024]{0} get-tuple-element(%rng), index=0
  ROOT %r = f32[4,32,16]{2,1,0} negate(%gy)
}
)";
  Imported im = import_text(text);
  // The batched GEMM: batch 4 of [32, 64] x [64, 16], 2 x 4 x 32 x 64 x 16 FLOPs on the matrix unit; the
  // workspace is written by nothing.
  const Op& g = op_named(im, "g");
  EXPECT_EQ(g.kind, OpKind::MatMul);
  EXPECT_EQ(g.attrs.equation, "acb,abd->acd");
  EXPECT_DOUBLE_EQ(op_cost(im.graph, g).flops, 2.0 * 4 * 32 * 64 * 16);
  ASSERT_EQ(g.outputs.size(), 1u);
  // The 3 x 3 convolution of 8 features into 8 over 32 x 32 positions: 2 x 1024 x (8 x 9) x 8 FLOPs.
  const Op& c = op_named(im, "conv");
  EXPECT_EQ(c.kind, OpKind::Convolution);
  EXPECT_DOUBLE_EQ(op_cost(im.graph, c).flops, 2.0 * 1024 * 72 * 8);
  // Threefry-2x32: 119 vector ops per pair of outputs, 1024 pairs; it reads four and writes two 4 KiB arrays.
  const OpCost r = op_cost(im.graph, op_named(im, "rng"));
  EXPECT_DOUBLE_EQ(r.flops, 119.0 * 1024);
  EXPECT_DOUBLE_EQ(r.bytes_read + r.bytes_written, 6.0 * 4096);
}

TEST(HloImportTest, ACollectivePermuteRunBackwardsIsAShiftOfMinusOne) {
  const std::string ring = R"(HloModule m, num_partitions=4
ENTRY %e (x: f32[256]) -> f32[256] {
  %x = f32[256] parameter(0)
  ROOT %y = f32[256] collective-permute(%x), channel_id=1, source_target_pairs={{1,0},{2,1},{3,2},{0,3}}
}
)";
  Imported im = import_text(ring);
  const Op& y = op_named(im, "y");
  EXPECT_EQ(y.kind, OpKind::CollectivePermute);
  EXPECT_EQ(y.attrs.shift, -1);
  EXPECT_EQ(y.attrs.axes, std::vector<std::string>({"d0"}));
  EXPECT_EQ(im.mesh_sizes, std::vector<int64_t>({4}));
  // Two steps round a ring of 4 devices: rings of 2 (0 and 2, 1 and 3), each device sending one step round its own.
  std::string two = ring;
  two.replace(two.find("{{1,0},{2,1},{3,2},{0,3}}"), 25, "{{0,2},{2,0},{1,3},{3,1}}");
  const Op& z = op_named(import_text(two), "y");
  EXPECT_EQ(z.attrs.shift, 1);
  // Pairs that move devices by different steps are no shift: transfers between any devices, over every mesh axis,
  // each device to its target (tests/cli/hlo_permute_test.cpp runs them).
  std::string mixed = ring;
  mixed.replace(mixed.find("{{1,0},{2,1},{3,2},{0,3}}"), 25, "{{0,1},{1,2},{2,0},{3,5},{5,4},{4,3}}");
  mixed.replace(mixed.find("num_partitions=4"), 16, "num_partitions=6");
  const Imported mi = import_text(mixed);
  const Op& m = op_named(mi, "y");
  EXPECT_EQ(m.attrs.targets, std::vector<int64_t>({1, 2, 0, 5, 3, 4}));
  EXPECT_EQ(m.attrs.axes, std::vector<std::string>({"d0"}));
}

namespace {

// The modules of a file, split at its `// -----` lines (lit tests hold several).
std::vector<std::string> modules_of(const std::string& path) {
  const std::string text = read_module_text(path);
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t next = text.find("// -----", at);
    std::string piece = text.substr(at, next == std::string::npos ? std::string::npos : next - at);
    if (piece.find('{') != std::string::npos) out.push_back(piece);
    if (next == std::string::npos) break;
    at = next + 8;
  }
  return out;
}

// FLOPs of an imported program's matrix-unit work (dots, convolutions, fused attention).
double mxu_flops(const Imported& im) {
  double f = 0;
  for (const Op& op : im.graph.ops())
    if (op.kind == OpKind::MatMul || op.kind == OpKind::Convolution || op.kind == OpKind::FusedAttention ||
        op.kind == OpKind::FusedAttentionGrad)
      f += op_cost(im.graph, op).flops;
  return f;
}

}  // namespace

TEST(HloImportTest, EveryReferenceModuleImportsAndLowers) {
  // XLA's small test modules and the GPU dumps (tests/data/hlo/small, tests/data/hlo/modules; provenance in their
  // LICENSE-NOTICE.md): every module of every file imports and lowers for a TPU v4 chip, but one of
  // import_async.hlo's, a recv between devices that names no source.
  std::map<std::string, std::vector<double>> flops;
  int refused = 0;
  for (const char* f : {"small/gpu_hlo_collective_cse.hlo", "small/import.hlo", "small/import_async.hlo",
                        "small/multiple_gemm_fusions.hlo", "small/sharded_computation.hlo", "small/spmd.hlo",
                        "small/while_with_known_trip_count.hlo", "modules/gpu_optimized_cudnn_conv_triton_gemm.hlo",
                        "modules/gpu_scheduled_cublas_gemm_kernel_reuse.hlo",
                        "modules/llama3_8b_train_step_te_attn_offload_8gpu.hlo.gz"}) {
    const std::vector<std::string> ms = modules_of(data(f));
    ASSERT_FALSE(ms.empty()) << f;
    for (size_t k = 0; k < ms.size(); ++k) {
      SCOPED_TRACE(std::string(f) + " module " + std::to_string(k));
      Imported im;
      const std::string err = error_of([&] {
        im = import_module(parse_module(ms[k], f), ImportOptions{});
        lower(im.graph, im.order, v4(), LowerOptions{});
      });
      // One lit module receives between devices with no sender or pairs named: refused, saying so.
      if (std::string(f) == "small/import_async.hlo" && err.find("a recv between devices") != std::string::npos) {
        ++refused;
        continue;
      }
      EXPECT_EQ(err, "no error");
      flops[f].push_back(mxu_flops(im));
    }
  }
  EXPECT_EQ(refused, 1);
  // Counted by hand. Three batched GEMMs of 64 [64, 64] x [64, 64] products: 3 x 2 x 64^4.
  EXPECT_DOUBLE_EQ(flops["small/multiple_gemm_fusions.hlo"].at(0), 3 * 2 * std::pow(64.0, 4));
  // kernel_reuse's first module: four cuBLAS GEMMs of 5 x 5 matrices, 2 x 5^3 each.
  EXPECT_DOUBLE_EQ(flops["modules/gpu_scheduled_cublas_gemm_kernel_reuse.hlo"].at(0), 4 * 2 * 125.0);
  EXPECT_EQ(flops["modules/gpu_scheduled_cublas_gemm_kernel_reuse.hlo"].size(), 5u);
}

TEST(HloImportTest, DocsListEveryCustomCallPodsimKnows) {
  std::ifstream f(std::string(PODSIM_SOURCE_DIR) + "/docs/hlo.md");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  for (const KnownCustomCall& k : known_custom_calls()) {
    EXPECT_NE(doc.find("`" + k.target + "`"), std::string::npos) << k.target << " is not in docs/hlo.md";
    EXPECT_FALSE(k.becomes.empty() || k.source.empty()) << k.target;
  }
}

// The HLO importer (hlo/import.h, hlo/devices.h): the device mesh behind a module's groups, what each instruction
// becomes, trip counts, custom calls, and whole steps counted by hand (FLOPs, HBM bytes, groups, peak memory) on
// small hand-written modules; XLA's benchmark modules' collectives after unrolling against a text scan's counts.
// Modules compiled for TPUs and GPUs and the reference modules: hlo_compiled_modules_test.cpp.
#include <gtest/gtest.h>
#include "tests/test_paths.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>
#include <map>
#include <string>

#include "base/error.h"
#include "hlo/attributes.h"
#include "hlo/devices.h"
#include "hlo/import.h"
#include "hlo/parser.h"
#include "hw/compiler/lower.h"
#include "tests/unit/hlo_test_util.h"

using namespace podsim;
using namespace podsim::hlo;
using namespace podsim::hlo_test;

namespace {

Groups iota(std::vector<int64_t> tile, std::vector<int64_t> reshape, std::vector<int64_t> perm = {}) {
  if (perm.empty())
    for (size_t i = 0; i < reshape.size(); ++i) perm.push_back(static_cast<int64_t>(i));
  std::vector<int64_t> ids = iota_devices(reshape, perm);
  Groups g;
  for (int64_t i = 0; i < tile[0]; ++i) g.emplace_back(ids.begin() + i * tile[1], ids.begin() + (i + 1) * tile[1]);
  return g;
}

// Data parallel over 4 devices: a layer's forward, its weight gradient all-reduced, the SGD update.
// Read from tests/data/hlo/dp_step.hlo (the CLI test runs the same module end to end).
std::string data_parallel_module() {
  std::ifstream f(std::string(PODSIM_SOURCE_DIR) + "/tests/data/hlo/dp_step.hlo");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST(HloDeviceMeshTest, AxesFromTheGroupsOfTheLlama70bModule) {
  // 256 devices as a 2 x 128 mesh: [2,128]<=[256] spans the inner axis, [128,2]<=[2,128]T(1,0) the outer one.
  DeviceMesh dm(256);
  const Groups inner = iota({2, 128}, {256}), outer = iota({128, 2}, {2, 128}, {1, 0}), all = iota({1, 256}, {256});
  ASSERT_EQ(outer[0], (std::vector<int64_t>{0, 128}));
  EXPECT_EQ(dm.add(inner), "");
  EXPECT_EQ(dm.add(outer), "");
  EXPECT_EQ(dm.add(all), "");
  EXPECT_EQ(dm.build(), "");
  EXPECT_EQ(dm.sizes(), (std::vector<int64_t>{2, 128}));
  EXPECT_EQ(dm.axes_of(inner), (std::vector<int>{1}));
  EXPECT_EQ(dm.axes_of(outer), (std::vector<int>{0}));
  EXPECT_EQ(dm.axes_of(all), (std::vector<int>{0, 1}));
  EXPECT_EQ(dm.axes_of({}), (std::vector<int>{0, 1}));
}

TEST(HloDeviceMeshTest, ATransposedGroupOrderIsTheAxesInAnotherOrder) {
  // [1,8]<=[2,4]T(1,0): one group 0,4,1,5,2,6,3,7; its fastest digit is the axis of stride 4.
  DeviceMesh dm(8);
  const Groups g = iota({1, 8}, {2, 4}, {1, 0});
  ASSERT_EQ(g[0], (std::vector<int64_t>{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_EQ(dm.add(g), "");
  EXPECT_EQ(dm.build(), "");
  EXPECT_EQ(dm.sizes(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(dm.axes_of(g), (std::vector<int>{1, 0}));  // axis 0 (stride 4) varies fastest
}

TEST(HloDeviceMeshTest, GroupsThatAreNoMeshAxesAreRefusedWithTheReason) {
  DeviceMesh dm(4);
  EXPECT_EQ(dm.add({{0}, {1, 2}, {3}}), "its groups have different sizes (1 and 2)");
  EXPECT_EQ(dm.add({{0, 1}}), "its groups hold 2 of the module's 4 devices");
  EXPECT_EQ(dm.add({{0, 1}, {3, 2}}), "group {3,2} is not group {0,1} moved to another place");
  EXPECT_EQ(dm.add({{0, 1}, {1, 2}}), "device 1 is in two of its groups, or twice in one");
  DeviceMesh six(6);  // thirds and halves of six devices do not nest
  EXPECT_EQ(six.add({{0, 1, 2}, {3, 4, 5}}), "");
  EXPECT_EQ(six.add({{0, 1}, {2, 3}, {4, 5}}), "");
  EXPECT_EQ(six.build(), "the groups of two collectives cut the device ids at strides 2 and 3, which do not nest (no "
                         "mesh has both as axes)");
}

TEST(HloImportTest, ADataParallelStepOpByOp) {
  Imported im = import_text(data_parallel_module());
  EXPECT_EQ(im.devices, 4);
  EXPECT_EQ(im.mesh_sizes, (std::vector<int64_t>{4}));
  const Op& h = op_named(im, "h");
  EXPECT_EQ(h.kind, OpKind::MatMul);
  EXPECT_EQ(h.attrs.equation, "ba,ac->bc");
  EXPECT_EQ(op_named(im, "g").attrs.equation, "ab,ac->bc");
  const Op& gs = op_named(im, "gs");
  EXPECT_EQ(gs.kind, OpKind::AllReduce);
  EXPECT_EQ(gs.attrs.axes, (std::vector<std::string>{"d0"}));
  // The broadcast scalars are read as scalars: no broadcast op at all.
  EXPECT_EQ(kinds(im)["broadcast_in_dim"], 0);
  EXPECT_EQ(im.graph.tensor(op_named(im, "r").inputs[1]).elements(), 1);
  // x is a tile of a [1024, 1024] array split over the mesh's axis; w the same everywhere.
  ASSERT_EQ(im.inputs.size(), 2u);
  EXPECT_EQ(im.inputs[0].global_shape, (std::vector<int64_t>{1024, 1024}));
  EXPECT_EQ(im.inputs[0].axes, (std::vector<std::vector<int>>{{0}, {}}));
  EXPECT_TRUE(im.inputs[1].replicated);
  // The matmul fuses its ReLU epilogue (the constant joins it); the update is one loop fusion.
  LowerOptions lo;
  lo.kernels = &im.fusions;
  ExecProgram ep = lower(im.graph, im.order, v4(), lo);
  ASSERT_EQ(ep.ops.size(), 4u);
  EXPECT_EQ(ep.ops[0].fusion, FusionKind::Output);
  EXPECT_EQ(ep.ops[3].fusion, FusionKind::Loop);
  // Hand counts: each dot 2 * 256 * 1024 * 1024 FLOPs; the ReLU one operation per element of h, the update two per
  // element of w, the two constants one each.
  double mxu = 0, all = 0;
  for (const ExecOp& e : ep.ops) {
    mxu += e.mxu_flops;
    all += e.flops;
  }
  EXPECT_DOUBLE_EQ(mxu, 2 * 2.0 * 256 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(all, mxu + 256 * 1024 + 2.0 * 1024 * 1024 + 2);
  // The update reads the reduced gradient and w (4 MiB each; the learning rate is a constant of its own kernel)
  // and writes w2 (4 MiB), through both cores.
  EXPECT_DOUBLE_EQ(ep.ops[3].core_hbm_read * ep.ops[3].cores, 8.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(ep.ops[3].core_hbm_write * ep.ops[3].cores, 4.0 * (1 << 20));
  // Peak memory: x (1 MiB) and w (4 MiB) throughout; r (1 MiB) dies with g (4 MiB); the all-reduce reduces in place;
  // w2 (4 MiB, a step result) is written while the reduced gradient is still read: 5 + 4 + 4 MiB.
  EXPECT_DOUBLE_EQ(ep.memory.peak_bytes, 13.0 * (1 << 20));
  EXPECT_EQ(ep.memory.peak_op, 3);
}

TEST(HloImportTest, WhileLoopsRunTheirTripCount) {
  // known_trip_count in the backend config.
  Imported k = import_module(read_module(data("small/while_with_known_trip_count.hlo")), {});
  int adds = 0;
  for (const Op& op : k.graph.ops()) adds += op.kind == OpKind::Elementwise && op.attrs.fn == ArrayFn::Add;
  EXPECT_EQ(adds, 7);
  // The condition's constant, from the counter's start (a constant 2) by the body's step (3): 2, 5, 8 < 10.
  const std::string loop = R"(HloModule m
%cond (p: (s32[], f32[8])) -> pred[] {
  %p = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(10)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}
%body (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %p = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[8] get-tuple-element(%p), index=1
  %three = s32[] constant(3)
  %j = s32[] add(%i, %three)
  %y = f32[8] exponential(%x)
  ROOT %t = (s32[], f32[8]) tuple(%j, %y)
}
ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8] parameter(0)
  %two = s32[] constant(2)
  %t = (s32[], f32[8]) tuple(%two, %x)
  %w = (s32[], f32[8]) while(%t), condition=%cond, body=%body
  ROOT %r = f32[8] get-tuple-element(%w), index=1
}
)";
  auto exps = [](const Imported& im) {
    int n = 0;
    for (const Op& op : im.graph.ops()) n += op.kind == OpKind::Elementwise && op.attrs.fn == ArrayFn::Exp;
    return n;
  };
  EXPECT_EQ(exps(import_text(loop)), 3);
  EXPECT_EQ(op_named(import_text(loop), "w[2]/y").kind, OpKind::Elementwise);
  ImportOptions o;
  o.trip_counts["w"] = 5;
  EXPECT_EQ(exps(import_text(loop, o)), 5);
  // A condition that compares nothing with a constant: the loop says what to do.
  std::string opaque = loop;
  opaque.replace(opaque.find("%n = s32[] constant(10)"), 23, "%n = s32[] negate(%i)  ");
  EXPECT_EQ(error_of([&] { import_text(opaque); }),
            "t.hlo:21:3 PODSIM-HLO-004 instruction 'w' (while): has no known_trip_count and its condition 'cond' does not "
            "compare a loop counter with a constant; give its count as `workload: {trip_counts: [\"w=1\"]}` with the "
            "real count for 1");
}

TEST(HloImportTest, LayoutsMakeTransposesAndReshapesFree) {
  const std::string text = R"(HloModule m
ENTRY %e (p: f32[32,126,64]) -> (f32[126,32,64], f32[126,32,64], f32[32,8064], f32[32,126,64]) {
  %p = f32[32,126,64]{2,1,0} parameter(0)
  %view = f32[126,32,64]{2,0,1} transpose(%p), dimensions={1,0,2}
  %move = f32[126,32,64]{2,1,0} transpose(%p), dimensions={1,0,2}
  %flat = f32[32,8064]{1,0} reshape(%p)
  %relaid = f32[32,126,64]{1,2,0} copy(%p)
  ROOT %t = (f32[126,32,64], f32[126,32,64], f32[32,8064], f32[32,126,64]) tuple(%view, %move, %flat, %relaid)
}
)";
  Imported im = import_text(text);
  EXPECT_EQ(op_named(im, "view").kind, OpKind::Bitcast);
  EXPECT_EQ(op_named(im, "move").kind, OpKind::Transpose);
  EXPECT_EQ(op_named(im, "flat").kind, OpKind::Bitcast);
  EXPECT_EQ(op_named(im, "relaid").kind, OpKind::Transpose);
  // A view costs nothing alone, and its buffer is its input's.
  LowerOptions alone;
  alone.fusion.enabled = false;
  ExecProgram ep = lower(im.graph, im.order, v4(), alone);
  for (const ExecOp& e : ep.ops) {
    if (e.kind == OpKind::Bitcast) {
      EXPECT_EQ(e.core_hbm_read + e.core_hbm_write, 0.0) << e.name;
    }
  }
}

TEST(HloImportTest, CustomCallsKnownGivenOrRefused) {
  const std::string text = R"(HloModule m
ENTRY %e (q: bf16[2,1024,8,128], k: bf16[2,1024,2,128], v: bf16[2,1024,2,128]) -> bf16[2,1024,8,128] {
  %q = bf16[2,1024,8,128] parameter(0)
  %k = bf16[2,1024,2,128] parameter(1)
  %v = bf16[2,1024,2,128] parameter(2)
  %o = (bf16[2,1024,8,128], f32[2,8,1024,1], u8[48]) custom-call(%q, %k, %v), custom_call_target="te_fused_attn_forward_ffi", backend_config={attn_heads = 8 : i64, mask_type = 3 : i64}
  %x = bf16[2,1024,8,128] get-tuple-element(%o), index=0
  ROOT %y = bf16[2,1024,8,128] custom-call(%x), custom_call_target="my_kernel"
}
)";
  EXPECT_EQ(error_of([&] { import_text(text); }),
            "t.hlo:8:8 PODSIM-HLO-005 instruction 'y' (custom-call): custom call 'my_kernel' is no kernel podsim "
            "knows (the nearest it knows is 'Sharding'; docs/hlo.md lists them all); give "
            "its cost as `workload: {custom_calls: [\"my_kernel=flops:0,bytes:8388608\"]}` (bytes: its operands and "
            "results; put in the FLOPs it does)");
  ImportOptions o;
  o.custom_calls["my_kernel"] = {1e9, 4e6, false};
  Imported im = import_text(text, o);
  const Op& y = op_named(im, "y");
  EXPECT_EQ(y.kind, OpKind::CustomCost);
  EXPECT_DOUBLE_EQ(op_cost(im.graph, y).flops, 1e9);
  // Causal flash attention (Transformer Engine's mask_type 3): QK^T and PV over the lower triangle, 4 B H S T D
  // (T + 1) / (2 T) FLOPs; its results the output and the statistics (the u8 scratch is no traffic).
  const Op& attn = op_named(im, "o");
  EXPECT_EQ(attn.kind, OpKind::FusedAttention);
  EXPECT_TRUE(attn.attrs.causal);
  const OpCost c = op_cost(im.graph, attn);
  EXPECT_DOUBLE_EQ(c.flops, 4.0 * 2 * 8 * 1024 * 1024 * 128 * (1025.0 / 2048));
  EXPECT_DOUBLE_EQ(c.bytes_written, 2.0 * 1024 * 8 * 128 * 2 + 2.0 * 8 * 1024 * 4);
  EXPECT_EQ(c.unit, Unit::Mxu);
}

TEST(HloImportTest, ConditionalsTakeBranchZeroOrTheNamedOne) {
  const std::string text = R"(HloModule m
%a (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %y = f32[4] exponential(%x)
}
%b (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %y = f32[4] log(%x)
}
ENTRY %e (i: s32[], x: f32[4]) -> f32[4] {
  %i = s32[] parameter(0)
  %x = f32[4] parameter(1)
  ROOT %c = f32[4] conditional(%i, %x, %x), branch_computations={%a, %b}
}
)";
  Imported zero = import_text(text);
  EXPECT_EQ(op_named(zero, "c/y").attrs.fn, ArrayFn::Exp);
  ASSERT_EQ(zero.notes.size(), 1u);
  EXPECT_EQ(zero.notes[0], "conditional 'c' runs branch 0 (a) of 2; workload.branches picks another");
  ImportOptions o;
  o.branches["c"] = 1;
  EXPECT_EQ(op_named(import_text(text, o), "c/y").attrs.fn, ArrayFn::Log);
}

TEST(HloImportTest, XlasBenchmarkModulesCollectivesAfterUnrolling) {
  // facts.py: the 405B module has 7 all-gathers in its first while body, 7 all-gathers and 9 all-reduces in its
  // second, 2 all-gathers and 41 all-reduces in the entry, all over one group of the 512 devices. Two iterations
  // of each loop here (the shipped experiments run 126). 7 of the body's all-reduces and 2 of the entry's all-reduce a
  // weight's whole gradient and keep each device's rows: XLA's reduce-scatter creator (hlo/reduce_scatter.h) makes
  // them reduce-scatters.
  ImportOptions o;
  o.trip_counts = {{"while", 2}, {"while.1", 2}};
  Imported b405 = import_module(read_module(data("hlo_llama31_405b_bf16_64x8.hlo.gz")), o);
  EXPECT_EQ(b405.devices, 512);
  EXPECT_EQ(b405.mesh_sizes, (std::vector<int64_t>{512}));
  auto n = kinds(b405);
  EXPECT_EQ(n["all_gather"], 7 * 2 + 7 * 2 + 2);
  EXPECT_EQ(n["all_reduce"], 2 * 2 + 39);
  EXPECT_EQ(n["reduce_scatter"], 7 * 2 + 2);
  EXPECT_EQ(n["fused_attention"], 2 * 2);  // one forward per iteration of each loop (the second recomputes it)
  EXPECT_EQ(n["fused_attention_grad"], 2);
  // The 70B module: 256 devices as 2 x 128; its loops run 80 times as their conditions say. Of its backward body's 16
  // all-reduces 7 (over the 128, a weight gradient then its rows) are reduce-scatters, as 2 of the entry's 43.
  Imported b70 = import_module(read_module(data("hlo_llama31_70b_bf16_32x8.hlo.gz")), {});
  EXPECT_EQ(b70.devices, 256);
  EXPECT_EQ(b70.mesh_sizes, (std::vector<int64_t>{2, 128}));
  n = kinds(b70);
  EXPECT_EQ(n["all_gather"], 7 * 80 + 7 * 80 + 2);
  EXPECT_EQ(n["all_reduce"], 9 * 80 + 41);
  EXPECT_EQ(n["reduce_scatter"], 7 * 80 + 2);
  std::map<std::vector<std::string>, int> groups;
  for (const Op& op : b70.graph.ops())
    if (op.kind == OpKind::AllReduce && op.name.find('/') == std::string::npos) ++groups[op.attrs.axes];
  // In the entry (a text scan): [2,128]<=[256] (the inner axis) 38 times, 2 of them reduce-scatters now,
  // [128,2]<=[2,128]T(1,0) (the outer) 2, [1,256]<=[256] (both) 3.
  EXPECT_EQ(groups[std::vector<std::string>{"d1"}], 36);
  EXPECT_EQ(groups[std::vector<std::string>{"d0"}], 2);
  EXPECT_EQ(groups[(std::vector<std::string>{"d0", "d1"})], 3);
  // Mixtral's experts exchange tokens: 192 all-to-alls over the 8 devices.
  Imported mix = import_module(read_module(data("hlo_mixtral_8x7b_bf16_1x8.hlo.gz")), {});
  EXPECT_EQ(mix.devices, 8);
  n = kinds(mix);
  EXPECT_EQ(n["all_to_all"], 192);
  EXPECT_EQ(n["all_gather"], 450);
  EXPECT_EQ(n["all_reduce"], 1261 - 162);  // 162 gradients' all-reduces sliced by rank: reduce-scatters
  EXPECT_EQ(n["reduce_scatter"], 162);
  EXPECT_EQ(n["fused_attention"], 64);
}

TEST(HloImportTest, ModulesBeforePartitioningRunAsOneDevice) {
  Imported im = import_module(read_module(data("nv_maxtext_1n1g_jit_train_step_before_optimization.hlo.gz")), {});
  EXPECT_EQ(im.devices, 1);
  ASSERT_FALSE(im.notes.empty());
  EXPECT_NE(im.notes[0].find("not SPMD-partitioned"), std::string::npos);
}

namespace {

// The exec op a graph op runs in (not as a recomputation).
int exec_of(const ExecProgram& ep, const Imported& im, const std::string& name) {
  const OpId id = [&] {
    for (size_t i = 0; i < im.graph.num_ops(); ++i)
      if (im.graph.op(static_cast<OpId>(i)).name == name) return static_cast<OpId>(i);
    throw std::runtime_error("no op " + name);
  }();
  for (size_t i = 0; i < ep.ops.size(); ++i)
    for (size_t k = 0; k < ep.ops[i].members.size(); ++k)
      if (ep.ops[i].members[k] == id && !ep.ops[i].recomputed[k]) return static_cast<int>(i);
  return -1;
}

size_t position(const Imported& im, const std::string& name) {
  for (size_t i = 0; i < im.order.size(); ++i)
    if (im.graph.op(im.order[i]).name == name) return i;
  throw std::runtime_error("no op " + name);
}

}  // namespace

TEST(HloImportTest, ASoftmaxAndItsLateLossMetricAreOneKernel) {
  // A cross-entropy step as JAX writes it before optimizations: the softmax's maximum and sum of exponentials, the
  // log-probabilities, the gradient, the two dots of the backward pass, and at the end the loss metric read from the
  // log-probabilities at the labels. f32 throughout: logits, log-probabilities and their gradient 1 MiB each.
  const std::string text = R"(HloModule ce
%max (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %r = f32[] maximum(%a, %b)
}
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %r = f32[] add(%a, %b)
}
ENTRY %e (h: f32[256,512], w: f32[512,1024], labels: s32[256]) -> (f32[512,1024], f32[256,512], f32[]) {
  %h = f32[256,512] parameter(0)
  %w = f32[512,1024] parameter(1)
  %labels = s32[256] parameter(2)
  %logits = f32[256,1024] dot(%h, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %ninf = f32[] constant(-inf)
  %m = f32[256] reduce(%logits, %ninf), dimensions={1}, to_apply=%max
  %mb = f32[256,1024] broadcast(%m), dimensions={0}
  %z = f32[256,1024] subtract(%logits, %mb)
  %ez = f32[256,1024] exponential(%z)
  %zero = f32[] constant(0)
  %s = f32[256] reduce(%ez, %zero), dimensions={1}, to_apply=%sum
  %logs = f32[256] log(%s)
  %lsb = f32[256,1024] broadcast(%logs), dimensions={0}
  %lp = f32[256,1024] subtract(%z, %lsb)
  %p = f32[256,1024] exponential(%lp)
  %lb = s32[256,1024] broadcast(%labels), dimensions={0}
  %iota = s32[256,1024] iota(), iota_dimension=1
  %hot = pred[256,1024] compare(%lb, %iota), direction=EQ
  %onehot = f32[256,1024] convert(%hot)
  %dlogits = f32[256,1024] subtract(%p, %onehot)
  %dh = f32[256,512] dot(%dlogits, %w), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  %dh2 = f32[256,512] multiply(%dh, %dh)
  %dw = f32[512,1024] dot(%h, %dlogits), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  %zb = f32[256,1024] broadcast(%zero), dimensions={}
  %sel = f32[256,1024] select(%hot, %lp, %zb)
  %nll = f32[256] reduce(%sel, %zero), dimensions={1}, to_apply=%sum
  %loss = f32[] reduce(%nll, %zero), dimensions={0}, to_apply=%sum
  ROOT %t = (f32[512,1024], f32[256,512], f32[]) tuple(%dw, %dh2, %loss)
}
)";
  Imported im = import_text(text);
  // The metric is issued once the log-probabilities' other reader is done (it frees them), not where the text puts
  // it, after the dots.
  EXPECT_LT(position(im, "nll"), position(im, "dh"));
  LowerOptions lo;
  lo.kernels = &im.fusions;
  lo.fusion.duplicate = false;  // as podsim runs an imported module
  ExecProgram ep = lower(im.graph, im.order, v4(), lo);
  // Five kernels: the logits' dot; the softmax with its three row reductions (maximum, sum of exponentials, the
  // metric's sum), the gradient and the metric's select; the loss's sum over rows; the input gradient's dot with its
  // square; the weight gradient's dot.
  ASSERT_EQ(ep.ops.size(), 5u);
  const int softmax = exec_of(ep, im, "m");
  for (const char* op : {"z", "ez", "s", "logs", "lp", "p", "dlogits", "sel", "nll"})
    EXPECT_EQ(exec_of(ep, im, op), softmax) << op;
  EXPECT_EQ(ep.ops[softmax].fusion, FusionKind::Reduction);
  EXPECT_EQ(exec_of(ep, im, "dh2"), exec_of(ep, im, "dh"));
  // It reads the logits and writes only the gradient and the per-row losses: no exponentials, no log-probabilities.
  // (A scalar constant it holds, the loss's initial value, comes out beside them.)
  std::vector<std::string> written;
  for (TensorId t : ep.ops[softmax].hbm_writes)
    if (im.graph.tensor(t).elements() > 1) written.push_back(im.graph.tensor(t).name);
  std::sort(written.begin(), written.end());
  EXPECT_EQ(written, (std::vector<std::string>{"dlogits", "nll"}));
  // Peak memory at the weight gradient: h (512 KiB), w (2 MiB) and the labels (1 KiB) throughout; the gradient of
  // the logits (1 MiB) it reads last; dh2 (512 KiB) and the loss (4 B), step results; dw (2 MiB). (Were the
  // log-probabilities kept for the metric after the dots, they would add 1 MiB here.)
  EXPECT_DOUBLE_EQ(ep.memory.peak_bytes, 6.0 * (1 << 20) + 1024 + 4);
  EXPECT_EQ(ep.memory.peak_op, exec_of(ep, im, "dw"));
}

TEST(HloImportTest, AnOptimizationBarrierHoldsItsReadersUntilAllItsOperandsAreDone) {
  // JAX's re-materialization: the forward's tanh of h is recomputed in the backward pass from the barrier's copy of
  // h, which the barrier releases only with the cotangent gy.
  const std::string text = R"(HloModule remat
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %r = f32[] add(%a, %b)
}
ENTRY %e (x: f32[512,512], w: f32[512,512]) -> (f32[512,512], f32[512,512]) {
  %x = f32[512,512] parameter(0)
  %w = f32[512,512] parameter(1)
  %h = f32[512,512] dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %y = f32[512,512] dot(%h, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %zero = f32[] constant(0)
  %l = f32[512] reduce(%y, %zero), dimensions={1}, to_apply=%sum
  %g = f32[512,512] broadcast(%l), dimensions={0}
  %gy = f32[512,512] multiply(%g, %y)
  %t = (f32[512,512], f32[512,512]) tuple(%h, %gy)
  %b = (f32[512,512], f32[512,512]) opt-barrier(%t)
  %hh = f32[512,512] get-tuple-element(%b), index=0
  %gg = f32[512,512] get-tuple-element(%b), index=1
  %r = f32[512,512] tanh(%hh)
  %dr = f32[512,512] multiply(%r, %gg)
  %dw = f32[512,512] dot(%x, %dr), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT %out = (f32[512,512], f32[512,512]) tuple(%dw, %y)
}
)";
  Imported im = import_text(text);
  // The barrier's results are views of its operands, each ordered after the producers of both.
  const Op& v0 = op_named(im, "b.0");
  EXPECT_EQ(v0.kind, OpKind::Bitcast);
  EXPECT_EQ(im.graph.predecessors(im.graph.producer(v0.outputs[0])),
            (std::vector<OpId>{im.graph.producer(op_named(im, "h").outputs[0]),
                               im.graph.producer(op_named(im, "gy").outputs[0])}));
  // The recomputation runs after the cotangent, not right after h (its input's producer), where it would be ready
  // without the barrier.
  EXPECT_GT(position(im, "r"), position(im, "gy"));
  LowerOptions lo;
  lo.kernels = &im.fusions;
  lo.fusion.duplicate = false;  // as podsim runs an imported module
  ExecProgram ep = lower(im.graph, im.order, v4(), lo);
  // Kernels: h; y; the sum, the broadcast and gy; the recomputation with its product (the views join it); dw.
  ASSERT_EQ(ep.ops.size(), 5u);
  EXPECT_EQ(exec_of(ep, im, "dr"), exec_of(ep, im, "r"));
  // x and w (1 MiB each) throughout; h (1 MiB) until the recomputation reads it through the view; y (1 MiB, a step
  // result) until gy reads it; gy (1 MiB) until dr; the sum's initial value (4 B) until the sum. The peak is gy's
  // kernel: x, w, h, y, gy and the constant (dr's kernel holds x, w, h, gy and dr: 5 MiB). Recomputed right after
  // h, r (1 MiB) would be live from there to dr: 6 MiB and more.
  EXPECT_DOUBLE_EQ(ep.memory.peak_bytes, 5.0 * (1 << 20) + 4);
  EXPECT_EQ(ep.memory.peak_op, exec_of(ep, im, "gy"));
  EXPECT_DOUBLE_EQ(ep.memory.live_after_op[exec_of(ep, im, "dr")], 3.0 * (1 << 20));  // x, w and dr after it
}

TEST(HloImportTest, AViewAtAKernelsEdgeIsTheBufferItWrites) {
  // exp(x) and its copy (the same layout: a view) are one loop fusion; the dot reads the view, so the fusion writes
  // it, and its source never leaves the chip: the view is the buffer.
  const std::string text = R"(HloModule v
ENTRY %e (x: f32[512,512], w: f32[512,512]) -> f32[512,512] {
  %x = f32[512,512] parameter(0)
  %w = f32[512,512] parameter(1)
  %ex = f32[512,512] exponential(%x)
  %v = f32[512,512] copy(%ex)
  ROOT %y = f32[512,512] dot(%v, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
)";
  Imported im = import_text(text);
  EXPECT_EQ(op_named(im, "v").kind, OpKind::Bitcast);
  LowerOptions lo;
  lo.fusion.duplicate = false;
  ExecProgram ep = lower(im.graph, im.order, v4(), lo);
  ASSERT_EQ(ep.ops.size(), 2u);
  EXPECT_EQ(exec_of(ep, im, "v"), exec_of(ep, im, "ex"));
  // x and w (1 MiB each), v (1 MiB) until the dot, y (1 MiB).
  EXPECT_DOUBLE_EQ(ep.memory.peak_bytes, 4.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(ep.memory.live_after_op[0], 3.0 * (1 << 20));
}

// The StableHLO reader (hlo/stablehlo_parser.h): small modules in both printed forms against the same program in HLO
// text (the same graph, op by op, and the same costs), a numeric run against a hand computation, the partitioning
// of a sharded global program, the reference modules of tests/data/hlo/stablehlo (their dot and convolution FLOPs
// by hand, the sharded MLP's collectives as the modules name them), and errors at the operation's line and column.
#include <gtest/gtest.h>
#include "tests/test_paths.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "base/error.h"
#include "hlo/import.h"
#include "hlo/parser.h"
#include "hlo/stablehlo_parser.h"
#include "hw/compiler/lower.h"
#include "workloads/op_def.h"
#include "workloads/reference.h"

using namespace podsim;
using namespace podsim::hlo;

namespace {

std::string data(const std::string& f) { return std::string(PODSIM_SOURCE_DIR) + "/tests/data/hlo/stablehlo/" + f; }

Imported from_mlir(const std::string& text, ImportOptions o = {}) { return import_module(parse_stablehlo(text, "t.mlir"), o); }
Imported from_hlo(const std::string& text, ImportOptions o = {}) { return import_module(parse_module(text, "t.hlo"), o); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.where().str() + " " + std::string(e.id()) + " " + e.message();
  }
  return "no error";
}

std::map<std::string, int> kinds(const Imported& im) {
  std::map<std::string, int> n;
  for (const Op& op : im.graph.ops()) ++n[op_kind_name(op.kind)];
  return n;
}

double mxu_flops(const Imported& im) {
  double f = 0;
  for (const Op& op : im.graph.ops())
    if (op.kind == OpKind::MatMul || op.kind == OpKind::Convolution) f += op_cost(im.graph, op).flops;
  return f;
}

// Two imports are the same program: the same ops in the same order, each of the same kind, shapes and cost.
void expect_same_program(const Imported& a, const Imported& b) {
  ASSERT_EQ(a.graph.num_ops(), b.graph.num_ops());
  ASSERT_EQ(a.order, b.order);
  for (size_t i = 0; i < a.graph.num_ops(); ++i) {
    const Op &x = a.graph.ops()[i], &y = b.graph.ops()[i];
    SCOPED_TRACE(x.name + " vs " + y.name);
    EXPECT_EQ(x.kind, y.kind);
    ASSERT_EQ(x.inputs.size(), y.inputs.size());
    for (size_t k = 0; k < x.inputs.size(); ++k)
      EXPECT_EQ(a.graph.tensor(x.inputs[k]).shape, b.graph.tensor(y.inputs[k]).shape);
    ASSERT_EQ(x.outputs.size(), y.outputs.size());
    for (size_t k = 0; k < x.outputs.size(); ++k)
      EXPECT_EQ(a.graph.tensor(x.outputs[k]).shape, b.graph.tensor(y.outputs[k]).shape);
    EXPECT_EQ(x.attrs.equation, y.attrs.equation);
    EXPECT_EQ(x.attrs.dims, y.attrs.dims);
    EXPECT_EQ(x.attrs.fn, y.attrs.fn);
    const OpCost cx = op_cost(a.graph, x), cy = op_cost(b.graph, y);
    EXPECT_DOUBLE_EQ(cx.flops, cy.flops);
    EXPECT_DOUBLE_EQ(cx.bytes_read, cy.bytes_read);
    EXPECT_DOUBLE_EQ(cx.bytes_written, cy.bytes_written);
  }
  EXPECT_EQ(a.mesh_sizes, b.mesh_sizes);
  EXPECT_EQ(a.devices, b.devices);
}

// A dense layer, ReLU and a row sum: y = sum_j max(x w + b, 0).
const char* kPretty = R"(// RUN: a lit line, a comment
module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8x32xf32>, %arg1: tensor<32x16xf32>, %arg2: tensor<16xf32>) -> (tensor<8xf32> {jax.result_info = ""}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32> loc(#loc3)
    %1 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<16xf32>) -> tensor<8x16xf32>
    %2 = stablehlo.add %0, %1 : tensor<8x16xf32>
    %3 = call @relu(%2) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %4 = stablehlo.reduce(%3 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
    return %4 : tensor<8xf32>
  }
  func.func private @relu(%arg0: tensor<8x16xf32>) -> tensor<8x16xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8x16xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<8x16xf32>
    return %1 : tensor<8x16xf32>
  }
}
#loc3 = loc("x.py":1:1)
)";

// The same in the generic form.
const char* kGeneric = R"(module {
  func.func @main(%arg0: tensor<8x32xf32>, %arg1: tensor<32x16xf32>, %arg2: tensor<16xf32>) -> tensor<8xf32> {
    %0 = "stablehlo.dot_general"(%arg0, %arg1) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>}> : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
    %1 = "stablehlo.broadcast_in_dim"(%arg2) <{broadcast_dimensions = array<i64: 1>}> : (tensor<16xf32>) -> tensor<8x16xf32>
    %2 = "stablehlo.add"(%0, %1) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    %3 = "func.call"(%2) <{callee = @relu}> : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %4 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %5 = "stablehlo.reduce"(%3, %4) <{dimensions = array<i64: 1>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %6 = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%6) : (tensor<f32>) -> ()
    }) : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
    "func.return"(%5) : (tensor<8xf32>) -> ()
  }
  func.func private @relu(%arg0: tensor<8x16xf32>) -> tensor<8x16xf32> {
    %0 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %1 = "stablehlo.broadcast_in_dim"(%0) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<8x16xf32>
    %2 = "stablehlo.maximum"(%arg0, %1) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    "func.return"(%2) : (tensor<8x16xf32>) -> ()
  }
}
)";

// The same in HLO text.
const char* kHlo = R"(HloModule jit_f, num_partitions=1, replica_count=1
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
relu {
  a = f32[8,16] parameter(0)
  zero = f32[] constant(0)
  z = f32[8,16] broadcast(zero), dimensions={}
  ROOT m = f32[8,16] maximum(a, z)
}
ENTRY main {
  arg0 = f32[8,32] parameter(0)
  arg1 = f32[32,16] parameter(1)
  arg2 = f32[16] parameter(2)
  d = f32[8,16] dot(arg0, arg1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[8,16] broadcast(arg2), dimensions={1}
  s = f32[8,16] add(d, bb)
  r = f32[8,16] call(s), to_apply=relu
  c = f32[] constant(0)
  ROOT y = f32[8] reduce(r, c), dimensions={1}, to_apply=add
}
)";

}  // namespace

TEST(StableHloImportTest, TheFormatIsToldFromTheText) {
  EXPECT_TRUE(is_stablehlo(kPretty, "x.txt"));
  EXPECT_TRUE(is_stablehlo(kGeneric, "x.txt"));
  EXPECT_TRUE(is_stablehlo("func.func @main() {\n}\n", "x"));
  EXPECT_TRUE(is_stablehlo("HloModule m\n", "step.mlir"));  // the extension says so
  EXPECT_FALSE(is_stablehlo(kHlo, "x.txt"));
  EXPECT_FALSE(is_stablehlo("module_0 (p: f32[]) -> f32[] {\n", "x.hlo"));  // an HLO computation named module_0
}

TEST(StableHloImportTest, PrettyGenericAndHloTextAreTheSameProgram) {
  const Imported hlo = from_hlo(kHlo), pretty = from_mlir(kPretty), generic = from_mlir(kGeneric);
  expect_same_program(pretty, hlo);
  expect_same_program(generic, hlo);
  // The dot by hand: 2 x 8 x 32 x 16 FLOPs.
  EXPECT_DOUBLE_EQ(mxu_flops(pretty), 2.0 * 8 * 32 * 16);
  // Instruction names keep the SSA value's name, errors and the profile name the line of the MLIR text.
  const Module m = parse_stablehlo(kPretty, "t.mlir");
  const Computation& e = m.entry_computation();
  ASSERT_GE(e.find("dot.0"), 0);
  EXPECT_EQ(e.instructions[e.find("dot.0")].pos.line, 4);
  EXPECT_EQ(e.instructions[e.find("dot.0")].pos.column, 10);
}

TEST(StableHloImportTest, NumericRunEqualsTheHandComputationAndTheHloText) {
  ImportOptions o;
  o.numeric = true;
  const Imported a = from_mlir(kPretty, o), h = from_hlo(kHlo, o);
  TensorStore sa, sh;
  init_step_inputs(a.graph, sa, 11);
  init_step_inputs(h.graph, sh, 11);
  run_reference(a.graph, sa);
  run_reference(h.graph, sh);
  ASSERT_EQ(a.results.size(), 1u);
  const std::vector<float>& y = sa.get(a.results[0]).data;
  EXPECT_EQ(y, sh.get(h.results[0]).data);  // the same inputs (drawn by name from the seed), the same kernels
  // By hand, in double: y_i = sum_j max(sum_k x_ik w_kj + b_j, 0).
  const std::vector<float>& x = sa.get(0).data;  // parameters in order: x, w, b
  const std::vector<float>& w = sa.get(1).data;
  const std::vector<float>& b = sa.get(2).data;
  ASSERT_EQ(y.size(), 8u);
  double norm = 0;
  for (int i = 0; i < 8; ++i) {
    double want = 0;
    for (int j = 0; j < 16; ++j) {
      double v = b[j];
      for (int k = 0; k < 32; ++k) v += static_cast<double>(x[i * 32 + k]) * w[k * 16 + j];
      want += std::max(v, 0.0);
    }
    EXPECT_NEAR(y[i], want, 1e-4 * (1 + std::abs(want))) << i;
    norm += std::abs(want);
  }
  EXPECT_GT(norm, 0.0);  // not a vacuous zero
}

TEST(StableHloImportTest, AShardedGlobalProgramRunsPerDevice) {
  // Batch split over 4 devices (GSPMD's strings and Shardy's), the weight replicated: each device's dot is its
  // quarter of the rows; the sum over the batch is a local sum and an all-reduce over the 4 devices.
  const std::string gspmd = R"(module @m attributes {mhlo.num_partitions = 4 : i32} {
  func.func public @main(%x: tensor<16x32xf32> {mhlo.sharding = "{devices=[4,1]<=[4]}"}, %w: tensor<32x8xf32> {mhlo.sharding = "{replicated}"}) -> tensor<8xf32> {
    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x8xf32>) -> tensor<16x8xf32>
    %cst = stablehlo.constant dense<1.0> : tensor<16x8xf32>
    %1 = stablehlo.add %0, %cst : tensor<16x8xf32>
    %c = stablehlo.constant dense<0.0> : tensor<f32>
    %2 = stablehlo.reduce(%1 init: %c) applies stablehlo.add across dimensions = [0] : (tensor<16x8xf32>, tensor<f32>) -> tensor<8xf32>
    return %2 : tensor<8xf32>
  }
})";
  const std::string shardy = R"(module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["data"=4]>
  func.func public @main(%x: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}, %w: tensor<32x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) -> tensor<8xf32> {
    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x8xf32>) -> tensor<16x8xf32>
    %cst = stablehlo.constant dense<1.0> : tensor<16x8xf32>
    %1 = stablehlo.add %0, %cst : tensor<16x8xf32>
    %c = stablehlo.constant dense<0.0> : tensor<f32>
    %2 = stablehlo.reduce(%1 init: %c) applies stablehlo.add across dimensions = [0] : (tensor<16x8xf32>, tensor<f32>) -> tensor<8xf32>
    return %2 : tensor<8xf32>
  }
})";
  for (const std::string& text : {gspmd, shardy}) {
    const Imported im = from_mlir(text);
    EXPECT_EQ(im.devices, 4);
    EXPECT_EQ(im.mesh_sizes, (std::vector<int64_t>{4}));
    EXPECT_DOUBLE_EQ(mxu_flops(im), 2.0 * 4 * 32 * 8);  // a quarter of the rows
    std::map<std::string, int> k = kinds(im);
    EXPECT_EQ(k["all_reduce"], 1);
    for (const Op& op : im.graph.ops()) {
      if (op.kind == OpKind::AllReduce) {
        EXPECT_EQ(im.graph.tensor(op.outputs[0]).shape, (std::vector<int64_t>{8}));
      }
    }
    ASSERT_EQ(im.inputs.size(), 2u);
    EXPECT_EQ(im.inputs[0].global_shape, (std::vector<int64_t>{16, 32}));
    EXPECT_EQ(im.graph.tensor(im.inputs[0].local).shape, (std::vector<int64_t>{4, 32}));
    EXPECT_TRUE(im.inputs[1].replicated);
  }
}

TEST(StableHloImportTest, TheShardedMlpsRunTheCollectivesTheirModulesName) {
  auto read = [](const std::string& f) {
    std::ifstream in(data(f));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  {  // GSPMD, tensor parallel: 6 reduce_scatters over the 8 devices (scatter dimension 1), and the loss's sum over
     // the split dimension, which the partitioner makes an all-reduce of f32[32].
    const Imported im = from_mlir(read("mlp_loss_tp_gspmd_8dev.mlir"));
    EXPECT_EQ(im.devices, 8);
    std::map<std::string, int> k = kinds(im);
    EXPECT_EQ(k["reduce_scatter"], 6);
    EXPECT_EQ(k["all_reduce"], 1);
    EXPECT_EQ(k["all_gather"], 0);
    // Each device's dots: 32 x 98 x 128 (the first layer's rows), then 32 x 16 x 128 four times and 32 x 16 x 8.
    EXPECT_DOUBLE_EQ(mxu_flops(im), 2.0 * (32 * 98 * 128 + 4 * 32 * 16 * 128 + 32 * 16 * 8));
    for (const Op& op : im.graph.ops()) {
      if (op.kind == OpKind::ReduceScatter) {
        EXPECT_EQ(op.attrs.dim, 1);
      }
    }
  }
  {  // Shardy, FSDP: 12 all_gathers of the weights and biases, one all_reduce of the loss.
    const Imported im = from_mlir(read("mlp_loss_fsdp_shardy_8dev.mlir"));
    EXPECT_EQ(im.devices, 8);
    std::map<std::string, int> k = kinds(im);
    EXPECT_EQ(k["all_gather"], 12);
    EXPECT_EQ(k["all_reduce"], 1);
    // Each device's 4 rows through the whole MLP: 784 x 128, four 128 x 128 and 128 x 8.
    EXPECT_DOUBLE_EQ(mxu_flops(im), 2.0 * 4 * (784 * 128 + 4 * 128 * 128 + 128 * 8));
  }
}

TEST(StableHloImportTest, EveryReferenceModuleImportsAndLowers) {
  const std::map<std::string, int64_t> devices = {{"mlp_loss_tp_gspmd_8dev.mlir", 8}, {"mlp_loss_fsdp_shardy_8dev.mlir", 8}};
  for (const char* f : {"flax_resnet50_fwd.mlir", "searchless_chess_9m_transformer_fwd.mlir", "mlp_loss_tp_gspmd_8dev.mlir",
                        "mlp_loss_fsdp_shardy_8dev.mlir", "conv_7x7_s2_p3_nchw.mlir", "gather_4d.mlir", "scatter_add.mlir",
                        "select_and_scatter_add_maxpool_grad.mlir", "random_categorical_threefry_while.mlir",
                        "cu_threefry2x32_jax_export.mlir"}) {
    SCOPED_TRACE(f);
    Imported im;
    const std::string err = error_of([&] {
      im = import_module(read_module(data(f)), ImportOptions{});
      ChipConfig c;
      c.clock = 1.05e9;
      c.tensorcores = 2;
      c.mxu.count = 4;
      c.vmem = 16 << 20;
      c.cmem = 128 << 20;
      c.hbm.capacity = 32.0 * (1 << 30);
      c.hbm.bandwidth = 1.2e12;
      lower(im.graph, im.order, c, LowerOptions{});
    });
    EXPECT_EQ(err, "no error");
    EXPECT_EQ(im.devices, devices.count(f) ? devices.at(f) : 1);
    EXPECT_GT(im.graph.num_ops(), 0u);
  }
}

TEST(StableHloImportTest, TheModelsFlopsAreTheHandCounts) {
  {  // The chess Transformer: 8 layers of d = 256 (8 heads of 32) on 33 x 79 tokens, a gated FFN of 1024, a
     // 128-way output head. Per layer: q, k, v and the output projection, the scores and their values, three FFN
     // matrices.
    const Imported im = import_module(read_module(data("searchless_chess_9m_transformer_fwd.mlir")), ImportOptions{});
    const double T = 33 * 79, d = 256, f = 1024, S = 79;
    const double layer = 4 * 2 * T * d * d + 2 * (2 * 33 * 8 * S * S * 32) + 3 * 2 * T * d * f;
    EXPECT_DOUBLE_EQ(mxu_flops(im), 8 * layer + 2 * T * d * 128);
    EXPECT_EQ(kinds(im)["matmul"], 73);
  }
  {  // ResNet-50's stem: a 7 x 7 x 3 -> 64 convolution, stride 2, onto 112 x 112.
    const Imported im = import_module(read_module(data("flax_resnet50_fwd.mlir")), ImportOptions{});
    const Op* stem = nullptr;
    for (const Op& op : im.graph.ops())
      if (op.kind == OpKind::Convolution && !stem) stem = &op;
    ASSERT_NE(stem, nullptr);
    EXPECT_DOUBLE_EQ(op_cost(im.graph, *stem).flops, 2.0 * 112 * 112 * 64 * 7 * 7 * 3);
    EXPECT_EQ(kinds(im)["convolution"], 53);
    // Its weights are elided in the text (dense_resource<__elided__>): each a parameter of the step, beside the image.
    std::ifstream in(data("flax_resnet50_fwd.mlir"));
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    size_t elided = 0;
    for (size_t at = text.find("dense_resource<__elided__>"); at != std::string::npos; at = text.find("dense_resource<__elided__>", at + 1)) ++elided;
    EXPECT_EQ(elided, 265u);
    size_t params = 0;
    for (size_t t = 0; t < im.graph.num_tensors(); ++t)
      if (im.graph.tensor(static_cast<TensorId>(t)).role == TensorRole::Parameter) ++params;
    EXPECT_EQ(params, elided + 1);
  }
  {  // The NCHW stem test: 1 x 3 x 2 x 2 through 64 x 3 x 7 x 7, stride 2, padding 3: one output position.
    const Imported im = import_module(read_module(data("conv_7x7_s2_p3_nchw.mlir")), ImportOptions{});
    EXPECT_DOUBLE_EQ(mxu_flops(im), 2.0 * 64 * 3 * 7 * 7);
  }
  {  // jax.random.uniform of a 2 x 4 sample as JAX exports it for GPUs: one call of cu_threefry2x32_ffi on two key
     // words and two counters of 4 words each (the iota's halves), inside the inlined @_uniform. Threefry-2x32 is
     // 119 vector ops per pair of outputs (docs/hlo.md); it reads four u32[4] and writes two.
    const Imported im = import_module(read_module(data("cu_threefry2x32_jax_export.mlir")), ImportOptions{});
    std::vector<const Op*> calls;
    for (const Op& op : im.graph.ops())
      if (op.kind == OpKind::CustomCost) calls.push_back(&op);
    ASSERT_EQ(calls.size(), 1u);
    const OpCost c = op_cost(im.graph, *calls[0]);
    EXPECT_DOUBLE_EQ(c.flops, 119.0 * 4);
    EXPECT_DOUBLE_EQ(c.bytes_read, 4 * 4 * 4.0);
    EXPECT_DOUBLE_EQ(c.bytes_written, 2 * 4 * 4.0);
    EXPECT_EQ(c.unit, Unit::Vpu);
    EXPECT_DOUBLE_EQ(mxu_flops(im), 0.0);
    // The call has no numeric kernel: a numeric run is refused at it, naming the target.
    ImportOptions o;
    o.numeric = true;
    const std::string err = error_of([&] { import_module(read_module(data("cu_threefry2x32_jax_export.mlir")), o); });
    EXPECT_NE(err.find("no numeric kernel for custom call 'cu_threefry2x32_ffi'"), std::string::npos) << err;
  }
  {  // The threefry loop runs its body 5 times (its condition: counter < 5 from 0).
    const Imported im = import_module(read_module(data("random_categorical_threefry_while.mlir")), ImportOptions{});
    std::set<std::string> iterations;
    for (const Op& op : im.graph.ops())
      if (op.name.rfind("while.16[", 0) == 0) iterations.insert(op.name.substr(0, op.name.find(']') + 1));
    EXPECT_EQ(iterations, (std::set<std::string>{"while.16[0]", "while.16[1]", "while.16[2]", "while.16[3]", "while.16[4]"}));
  }
}

TEST(StableHloImportTest, BadInputIsAnErrorAtItsLineAndColumn) {
  const std::string unknown = "module {\n  func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                              "    %0 = stablehlo.cosh %a : tensor<4xf32>\n    return %0 : tensor<4xf32>\n  }\n}\n";
  const std::string e1 = error_of([&] { parse_stablehlo(unknown, "bad.mlir"); });
  EXPECT_NE(e1.find("bad.mlir:3:10 PODSIM-HLO-003"), std::string::npos) << e1;
  EXPECT_NE(e1.find("'stablehlo.cosh'"), std::string::npos) << e1;
  EXPECT_NE(e1.find("docs/hlo.md"), std::string::npos) << e1;
  const std::string type = "func.func @main(%a: tensor<4xq32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}\n";
  const std::string e2 = error_of([&] { parse_stablehlo(type, "bad.mlir"); });
  EXPECT_NE(e2.find("bad.mlir:1:30 PODSIM-HLO-001"), std::string::npos) << e2;
  EXPECT_NE(e2.find("unknown element type 'q32'"), std::string::npos) << e2;
  const std::string unclosed = "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.add %a, %a : tensor<4xf32>\n";
  const std::string e3 = error_of([&] { parse_stablehlo(unclosed, "bad.mlir"); });
  EXPECT_NE(e3.find("PODSIM-HLO-001"), std::string::npos) << e3;
  const std::string undefined = "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.add %a, %b : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n";
  const std::string e4 = error_of([&] { parse_stablehlo(undefined, "bad.mlir"); });
  EXPECT_NE(e4.find("bad.mlir:2:26 PODSIM-HLO-002"), std::string::npos) << e4;
  EXPECT_NE(e4.find("%b"), std::string::npos) << e4;
  // A split value where podsim does not partition: a sort of a sharded array.
  const std::string sharded = "module attributes {mhlo.num_partitions = 2 : i32} {\n  func.func @main(%a: tensor<4xf32> {mhlo.sharding = \"{devices=[2]<=[2]}\"}) -> tensor<4xf32> {\n"
                              "    %0 = stablehlo.slice %a [0:4] : (tensor<4xf32>) -> tensor<4xf32>\n    return %0 : tensor<4xf32>\n  }\n}\n";
  const std::string e5 = error_of([&] { parse_stablehlo(sharded, "bad.mlir"); });
  EXPECT_NE(e5.find("bad.mlir:3:10 PODSIM-HLO-003"), std::string::npos) << e5;
  EXPECT_NE(e5.find("split by {devices=[2]0,1}"), std::string::npos) << e5;
}

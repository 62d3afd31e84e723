// StableHLO's control flow and the values regions capture (hlo/stablehlo_control.cpp), and the CHLO operations
// (hlo/stablehlo_chlo.cpp): small modules of tests/data/hlo/stablehlo/control_*.mlir and inline text, their
// lowering (the HLO conditional, the while's carried captures), the branch the importer runs, numeric results by
// hand, and errors at the operation's line and column.
#include <gtest/gtest.h>
#include "tests/test_paths.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#include "base/error.h"
#include "hlo/import.h"
#include "hlo/stablehlo_parser.h"
#include "workloads/op_def.h"
#include "workloads/reference.h"

using namespace podsim;
using namespace podsim::hlo;

namespace {

std::string read_data(const std::string& f) {
  std::ifstream in(std::string(PODSIM_SOURCE_DIR) + "/tests/data/hlo/stablehlo/" + f);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Imported from_mlir(const std::string& text, ImportOptions o = {}) { return import_module(parse_stablehlo(text, "t.mlir"), o); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.where().str() + " " + std::string(e.id()) + " " + e.message();
  }
  return "no error";
}

// Elementwise ops by function.
std::map<ArrayFn, int> fns(const Imported& im) {
  std::map<ArrayFn, int> n;
  for (const Op& op : im.graph.ops())
    if (op.kind == OpKind::Elementwise) ++n[op.attrs.fn];
  return n;
}

int count(const Imported& im, OpKind k) {
  int n = 0;
  for (const Op& op : im.graph.ops()) n += op.kind == k;
  return n;
}

// Runs the graph on inputs drawn from the seed, the entry parameters then set by `set` (parameter index, values).
std::vector<float> run(const Imported& im, const std::map<int, std::vector<float>>& set, TensorStore& s) {
  init_step_inputs(im.graph, s, 5);
  for (const auto& [k, v] : set) s.get_mut(k).data = v;
  run_reference(im.graph, s);
  return s.get(im.results.at(0)).data;
}

}  // namespace

// ---- case and if ----

TEST(StableHloControlTest, CaseIsAConditionalWhoseBranchesTakeWhatTheyCapture) {
  const Module m = parse_stablehlo(read_data("control_case.mlir"), "control_case.mlir");
  const Computation& e = m.entry_computation();
  const int32_t c = e.find("conditional.0");
  ASSERT_GE(c, 0);
  const Instruction& in = e.instructions[c];
  EXPECT_EQ(in.opcode, "conditional");
  ASSERT_NE(in.attr("branch_computations"), nullptr);
  // Three branches; each one's operand is the tuple of the values it reads from @main: (x, y), (x, y), (x).
  ASSERT_EQ(in.operands.size(), 4u);
  EXPECT_EQ(e.instructions[in.operands[1]].shape.text(), "(f32[8], f32[8])");
  EXPECT_EQ(e.instructions[in.operands[3]].shape.text(), "(f32[8])");
  for (const char* b : {"conditional.0.branch0", "conditional.0.branch1", "conditional.0.branch2"}) {
    const int32_t k = m.find(b);
    ASSERT_GE(k, 0) << b;
    ASSERT_EQ(m.computations[k].parameters.size(), 1u);
  }
  // The index is the constant 1: branch 1 runs, exp(x * y); no add of branch 0.
  const Imported im = import_module(m, {});
  std::map<ArrayFn, int> f = fns(im);
  EXPECT_EQ(f[ArrayFn::Multiply], 1);
  EXPECT_EQ(f[ArrayFn::Exp], 1);
  EXPECT_EQ(f[ArrayFn::Add], 0);
  for (const std::string& n : im.notes) EXPECT_EQ(n.find("conditional"), std::string::npos) << n;
  ImportOptions o;
  o.numeric = true;
  const Imported num = import_module(m, o);
  TensorStore s;
  const std::vector<float> y = run(num, {}, s);
  const std::vector<float>& a = s.get(0).data;  // the parameters, in order
  const std::vector<float>& b = s.get(1).data;
  ASSERT_EQ(y.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(y[i], std::exp(static_cast<double>(a[i]) * b[i]), 1e-5 * (1 + y[i])) << i;
}

TEST(StableHloControlTest, AnIndexOutOfRangeTakesTheLastBranchAndWorkloadBranchesPicksAnother) {
  std::string t = read_data("control_case.mlir");
  const size_t at = t.find("dense<1> : tensor<i32>");
  ASSERT_NE(at, std::string::npos);
  t.replace(at, 8, "dense<7>");
  const Imported last = from_mlir(t);  // branch 2 returns x: no arithmetic at all
  EXPECT_EQ(count(last, OpKind::Elementwise), 0);
  ImportOptions o;
  o.branches["conditional.0"] = 0;  // branch 0: x + y
  const Imported first = from_mlir(t, o);
  EXPECT_EQ(fns(first)[ArrayFn::Add], 1);
  EXPECT_EQ(count(first, OpKind::Elementwise), 1);
}

// `stablehlo.if` on a predicate known only at run time: timed as branch 0 (the true branch, with a note); in
// numeric mode both branches run and the predicate's value selects the result.
TEST(StableHloControlTest, IfOnARuntimePredicateRunsTheBranchItsValuePicksInNumericMode) {
  const std::string t = read_data("control_if.mlir");
  const Imported timed = from_mlir(t);
  std::map<ArrayFn, int> f = fns(timed);
  EXPECT_EQ(f[ArrayFn::Negate], 1);
  EXPECT_EQ(f[ArrayFn::Abs], 0);
  bool noted = false;
  for (const std::string& n : timed.notes) noted = noted || n.find("conditional 'conditional.0' runs branch 0") != std::string::npos;
  EXPECT_TRUE(noted);
  ImportOptions o;
  o.numeric = true;
  const Imported num = from_mlir(t, o);
  f = fns(num);
  EXPECT_EQ(f[ArrayFn::Negate], 1);
  EXPECT_EQ(f[ArrayFn::Abs], 1);
  EXPECT_EQ(f[ArrayFn::Select], 1);
  const std::vector<float> x = {-1.5f, 2.0f, -0.25f, 3.0f};
  for (float p : {0.0f, 1.0f}) {
    TensorStore s;
    const std::vector<float> y = run(num, {{0, {p}}, {1, x}}, s);
    for (size_t i = 0; i < 4; ++i) {
      // true: -x * 2 (the captured constant 2 copied into the branch); false: |x| + w (w captured, passed in).
      const double want = p != 0 ? -x[i] * 2.0 : std::fabs(x[i]) + s.get(2).data[i];
      EXPECT_NEAR(y[i], want, 1e-6) << "p=" << p << " i=" << i;
    }
  }
}

TEST(StableHloControlTest, CaseOnARuntimeIndexSelectsAmongAllBranchesInNumericMode) {
  std::string t = read_data("control_case.mlir");
  // The index as a parameter instead of the constant.
  const size_t c = t.find("    %c = stablehlo.constant dense<1> : tensor<i32>\n");
  ASSERT_NE(c, std::string::npos);
  t.erase(c, std::string("    %c = stablehlo.constant dense<1> : tensor<i32>\n").size());
  const size_t a = t.find("%y: tensor<8xf32>");
  t.insert(a + std::string("%y: tensor<8xf32>").size(), ", %c: tensor<i32>");
  ImportOptions o;
  o.numeric = true;
  const Imported num = from_mlir(t, o);
  for (int idx : {0, 1, 2, -3, 9}) {
    TensorStore s;
    const std::vector<float> y = run(num, {{2, {static_cast<float>(idx)}}}, s);
    const std::vector<float>& x = s.get(0).data;
    const std::vector<float>& w = s.get(1).data;
    const int br = idx < 0 || idx > 2 ? 2 : idx;  // out of range: the last branch
    for (size_t i = 0; i < 8; ++i) {
      const double want = br == 0 ? x[i] + static_cast<double>(w[i]) : br == 1 ? std::exp(static_cast<double>(x[i]) * w[i]) : x[i];
      EXPECT_NEAR(y[i], want, 1e-5 * (1 + std::fabs(want))) << "index " << idx << " i=" << i;
    }
  }
}

// ---- captures ----

// A while whose body multiplies by a value of @main and whose condition compares with a constant of @main: the
// constant is copied into the condition (so the trip count is read: 3), the value carried as a third element.
TEST(StableHloControlTest, AWhileCarriesItsCapturesAndCopiesConstantsIn) {
  const std::string t = read_data("control_while_capture.mlir");
  const Module m = parse_stablehlo(t, "control_while_capture.mlir");
  const Computation& e = m.entry_computation();
  const int32_t w = e.find("while.0");
  ASSERT_GE(w, 0);
  EXPECT_EQ(e.instructions[w].shape.text(), "(s32[], f32[4], f32[4])");
  const Imported im = import_module(m, {});
  EXPECT_EQ(fns(im)[ArrayFn::Multiply], 3);
  ImportOptions o;
  o.numeric = true;
  const Imported num = import_module(m, o);
  TensorStore s;
  const std::vector<float> y = run(num, {}, s);
  const std::vector<float>& x = s.get(0).data;
  const std::vector<float>& k = s.get(1).data;
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(y[i], x[i] * std::pow(static_cast<double>(k[i]), 3), 1e-5) << i;
}

TEST(StableHloControlTest, AReductionThatReadsAnOuterValueIsAnErrorAtTheUse) {
  const std::string t = R"(func.func @main(%x: tensor<4xf32>, %w: tensor<f32>) -> tensor<f32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = "stablehlo.reduce"(%x, %z) <{dimensions = array<i64: 0>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.multiply %a, %w : tensor<f32>
    %2 = stablehlo.add %1, %b : tensor<f32>
    stablehlo.return %2 : tensor<f32>
  }) : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
})";
  const std::string err = error_of([&] { from_mlir(t); });
  EXPECT_NE(err.find("t.mlir:5:33 PODSIM-HLO-003"), std::string::npos) << err;
  EXPECT_NE(err.find("%w"), std::string::npos) << err;
  // A constant read from outside is copied in, as XLA sinks constants: the same reduction runs.
  std::string ok = t;
  ok.replace(ok.find("%w: tensor<f32>"), 15, "%v: tensor<f32>");
  ok.insert(ok.find("  %z ="), "  %w = stablehlo.constant dense<2.0> : tensor<f32>\n");
  EXPECT_EQ(count(from_mlir(ok), OpKind::Reduce), 1);
}

TEST(StableHloControlTest, ABadSelectorIsAnErrorAtItsOperand) {
  const std::string t = R"(func.func @main(%i: tensor<2xi32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.case"(%i) ({
    stablehlo.return %x : tensor<4xf32>
  }) : (tensor<2xi32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
})";
  const std::string err = error_of([&] { from_mlir(t); });
  EXPECT_NE(err.find("t.mlir:2:25 PODSIM-HLO-002"), std::string::npos) << err;
  EXPECT_NE(err.find("scalar i32"), std::string::npos) << err;
}

// ---- CHLO ----

// chlo.erf as XLA's high-level legalization makes it, one HLO erf: one elementwise op (fused as one), its work that
// of XLA's expansion by hand: 2 clamps, x^2, 6 + 4 Horner steps of a multiply and an add, x * P: 24 simple ops and
// P / Q, a division, per element. Numeric mode computes erf.
TEST(StableHloControlTest, ChloErfIsOneErfOfXlasExpansionsWork) {
  const std::string t = read_data("chlo_ops.mlir");
  ImportOptions o;
  o.numeric = true;
  const Imported im = from_mlir(t, o);
  std::map<ArrayFn, int> f = fns(im);
  EXPECT_EQ(f[ArrayFn::Erf], 1);
  EXPECT_EQ(f[ArrayFn::Add], 1);  // broadcast_add's
  for (const Op& op : im.graph.ops()) {
    if (op.kind == OpKind::Elementwise && op.attrs.fn == ArrayFn::Erf) {
      const OpCost c = op_cost(im.graph, op);
      EXPECT_DOUBLE_EQ(c.vector.simple, 2 + 1 + 2 * 6 + 2 * 4 + 1);
      EXPECT_DOUBLE_EQ(c.vector.divide, 1);
      EXPECT_DOUBLE_EQ(c.vector.transcendental, 0);
      EXPECT_DOUBLE_EQ(c.flops, 25.0 * 64);
    }
  }
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -5.0f + 10.0f * static_cast<float>(i) / 63.0f;
  TensorStore s;
  const std::vector<float> y = run(im, {{0, x}}, s);
  ASSERT_EQ(y.size(), 64u);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], std::erf(static_cast<double>(x[i])), 1e-6) << x[i];
  // The second result: a 4x8 matrix plus a row vector broadcast along dimension 1.
  const std::vector<float>& r = s.get(im.results.at(1)).data;
  const std::vector<float>& a = s.get(1).data;
  const std::vector<float>& b = s.get(2).data;
  ASSERT_EQ(r.size(), 32u);
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = 0; j < 8; ++j) EXPECT_FLOAT_EQ(r[i * 8 + j], a[i * 8 + j] + b[j]);
}

TEST(StableHloControlTest, ChloTopKIsXlasTopKAndBroadcastsAlignTrailingDimensions) {
  const std::string t = R"(func.func @main(%x: tensor<4x16xf32>, %c: tensor<4x1xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>, tensor<4x16xi1>) {
  %0:2 = chlo.top_k(%x, k = 2) : tensor<4x16xf32> -> (tensor<4x2xf32>, tensor<4x2xi32>)
  %1 = chlo.broadcast_compare %x, %c {comparison_direction = #chlo<comparison_direction GT>} : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xi1>
  return %0#0, %0#1, %1 : tensor<4x2xf32>, tensor<4x2xi32>, tensor<4x16xi1>
})";
  const Module m = parse_stablehlo(t, "t.mlir");
  const Computation& e = m.entry_computation();
  const int32_t k = e.find("top_k.0");
  ASSERT_GE(k, 0);
  EXPECT_EQ(e.instructions[k].opcode, "custom-call");
  EXPECT_EQ(e.instructions[k].shape.text(), "(f32[4,2], s32[4,2])");
  const Imported im = import_module(m, {});
  EXPECT_EQ(count(im, OpKind::Sort), 1);
  EXPECT_EQ(fns(im)[ArrayFn::CompareGt], 1);
  // %c's size-1 dimension broadcast along the 16: the comparison reads x and the broadcast at x's shape.
  for (const Op& op : im.graph.ops()) {
    if (op.kind == OpKind::Elementwise && op.attrs.fn == ArrayFn::CompareGt) {
      EXPECT_EQ(im.graph.tensor(op.outputs[0]).shape, (std::vector<int64_t>{4, 16}));
    }
  }
}

TEST(StableHloControlTest, AChloOpPodsimDoesNotReadIsAnErrorNamingThoseItReads) {
  const std::string t = R"(func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = chlo.bessel_i1e %x : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
})";
  const std::string err = error_of([&] { from_mlir(t); });
  EXPECT_NE(err.find("t.mlir:2:8 PODSIM-HLO-003"), std::string::npos) << err;
  EXPECT_NE(err.find("chlo.bessel_i1e"), std::string::npos) << err;
  EXPECT_NE(err.find("erf"), std::string::npos) << err;
  EXPECT_NE(err.find("lgamma"), std::string::npos) << err;
}

// chlo.lgamma, chlo.digamma and chlo.erf_inv: one elementwise op each (one kernel, as XLA's decomposition fuses),
// its vector work that of the decomposition by hand (special_math.h's counts: lgamma 43 simple ops, 4
// transcendentals, 10 divisions per element; digamma 53, 3, 20; erf_inv 37, 2, 0), and numeric mode the functions:
// lgamma against std::lgamma, digamma against published values (psi(1) = -gamma, psi(1/2) = -gamma - 2 ln 2,
// psi(-1/2) = psi(1/2) + 2, the recurrence psi(x + 1) = psi(x) + 1/x), erf_inv as erf's inverse.
TEST(StableHloControlTest, ChloSpecialFunctionsAreOneOpOfTheirDecompositionsWork) {
  const std::string t = R"(func.func @main(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %0 = chlo.lgamma %x : tensor<8xf32> -> tensor<8xf32>
  %1 = chlo.digamma %x : tensor<8xf32> -> tensor<8xf32>
  %2 = chlo.erf_inv %y : tensor<8xf32> -> tensor<8xf32>
  return %0, %1, %2 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
})";
  ImportOptions o;
  o.numeric = true;
  const Imported im = from_mlir(t, o);
  std::map<ArrayFn, int> f = fns(im);
  EXPECT_EQ(f[ArrayFn::Lgamma], 1);
  EXPECT_EQ(f[ArrayFn::Digamma], 1);
  EXPECT_EQ(f[ArrayFn::ErfInv], 1);
  int seen = 0;
  for (const Op& op : im.graph.ops()) {
    if (op.kind != OpKind::Elementwise) continue;
    const OpCost c = op_cost(im.graph, op);
    double simple = -1, trans = -1, div = -1;
    if (op.attrs.fn == ArrayFn::Lgamma) simple = 4 + 2 * 8 + 2 + 5 + 12 + 1 + 3, trans = 4, div = 8 + 2;
    if (op.attrs.fn == ArrayFn::Digamma) simple = 4 + 4 * 8 + 2 + 2 + 4 + 3 + 1 + 5, trans = 3, div = 2 * 8 + 4;
    if (op.attrs.fn == ArrayFn::ErfInv) simple = 3 + 4 + 1 + 3 * 8 + 1 + 4, trans = 2, div = 0;
    if (simple < 0) continue;
    ++seen;
    EXPECT_DOUBLE_EQ(c.vector.simple, simple) << array_fn_name(op.attrs.fn);
    EXPECT_DOUBLE_EQ(c.vector.transcendental, trans) << array_fn_name(op.attrs.fn);
    EXPECT_DOUBLE_EQ(c.vector.divide, div) << array_fn_name(op.attrs.fn);
    EXPECT_DOUBLE_EQ(c.flops, (simple + trans + div) * 8) << array_fn_name(op.attrs.fn);
  }
  EXPECT_EQ(seen, 3);
  const std::vector<float> x = {1.0f, 0.5f, -0.5f, 2.5f, 3.5f, 7.25f, -2.0f, 0.1f};
  const std::vector<float> y = {0.0f, 0.5f, -0.5f, 0.9f, -0.999f, 0.25f, 1.0f, 0.1f};
  TensorStore s;
  run(im, {{0, x}, {1, y}}, s);
  const std::vector<float>& lg = s.get(im.results.at(0)).data;
  const std::vector<float>& dg = s.get(im.results.at(1)).data;
  const std::vector<float>& ei = s.get(im.results.at(2)).data;
  ASSERT_EQ(lg.size(), 8u);
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(lg[i], std::lgamma(static_cast<double>(x[i])), 1e-6) << x[i];
  EXPECT_TRUE(std::isinf(lg[6]) && lg[6] > 0);  // a pole: log |Gamma| = inf
  const double euler = 0.57721566490153286;
  EXPECT_NEAR(dg[0], -euler, 1e-6);
  EXPECT_NEAR(dg[1], -euler - 2 * std::log(2.0), 1e-6);
  EXPECT_NEAR(dg[2], -euler - 2 * std::log(2.0) + 2, 1e-6);
  EXPECT_NEAR(dg[4], dg[3] + 1 / 2.5, 1e-5);  // psi(3.5) = psi(2.5) + 1 / 2.5
  EXPECT_TRUE(std::isnan(dg[6]));             // a pole of digamma
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(std::erf(static_cast<double>(ei[i])), y[i], 2e-6) << y[i];
  EXPECT_NEAR(ei[3], 1.1630871536766743, 1e-5);  // erf^-1(0.9)
  EXPECT_TRUE(std::isinf(ei[6]) && ei[6] > 0);
}

TEST(StableHloControlTest, ChloCoshSinhAndIsInfAreTheirValues) {
  const std::string t = R"(func.func @main(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xi1>, tensor<8xi1>) {
  %0 = chlo.cosh %x : tensor<8xf32> -> tensor<8xf32>
  %1 = chlo.sinh %x : tensor<8xf32> -> tensor<8xf32>
  %2 = chlo.is_inf %x : tensor<8xf32> -> tensor<8xi1>
  %3 = chlo.is_neg_inf %x : tensor<8xf32> -> tensor<8xi1>
  return %0, %1, %2, %3 : tensor<8xf32>, tensor<8xf32>, tensor<8xi1>, tensor<8xi1>
})";
  ImportOptions o;
  o.numeric = true;
  const Imported im = from_mlir(t, o);
  const std::vector<float> x = {-3.0f, -0.5f, -1e-3f, 0.0f, 0.75f, 2.5f, INFINITY, -INFINITY};
  TensorStore s;
  run(im, {{0, x}}, s);
  ASSERT_EQ(im.results.size(), 4u);
  const std::vector<float>&c = s.get(im.results[0]).data, &sh = s.get(im.results[1]).data;
  const std::vector<float>&inf = s.get(im.results[2]).data, &neg = s.get(im.results[3]).data;
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(c[i], std::cosh(static_cast<double>(x[i])), 1e-6 * std::cosh(static_cast<double>(x[i]))) << x[i];
    EXPECT_NEAR(sh[i], std::sinh(static_cast<double>(x[i])), 1e-6 * (1e-3 + std::fabs(std::sinh(static_cast<double>(x[i]))))) << x[i];
  }
  EXPECT_EQ(inf, (std::vector<float>{0, 0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(neg, (std::vector<float>{0, 0, 0, 0, 0, 0, 0, 1}));
}

// ---- Shardy's round-trip form ----

// The batch-split dot of stablehlo_import_test's AShardedGlobalProgramRunsPerDevice in the round-trip form: the
// same per-device program (a quarter of the rows on each of 4 devices, one all-reduce of f32[8]), the manual body's
// multiply on the 4x8 tile, the named computation's add inlined.
TEST(StableHloControlTest, ShardysRoundTripFormReadsLikeItsDirectForm) {
  const Imported im = from_mlir(read_data("shardy_round_trip.mlir"));
  EXPECT_EQ(im.devices, 4);
  EXPECT_EQ(im.mesh_sizes, (std::vector<int64_t>{4}));
  double dot = 0;
  int all_reduce = 0;
  for (const Op& op : im.graph.ops()) {
    if (op.kind == OpKind::MatMul) dot += op_cost(im.graph, op).flops;
    if (op.kind == OpKind::AllReduce) {
      ++all_reduce;
      EXPECT_EQ(im.graph.tensor(op.outputs[0]).shape, (std::vector<int64_t>{8}));
    }
    if (op.kind == OpKind::Elementwise && (op.attrs.fn == ArrayFn::Multiply || op.attrs.fn == ArrayFn::Add)) {
      EXPECT_EQ(im.graph.tensor(op.outputs[0]).shape, (std::vector<int64_t>{4, 8})) << op.name;
    }
  }
  EXPECT_DOUBLE_EQ(dot, 2.0 * 4 * 32 * 8);
  EXPECT_EQ(all_reduce, 1);
  EXPECT_EQ(fns(im)[ArrayFn::Multiply], 1);
  EXPECT_EQ(fns(im)[ArrayFn::Add], 1);
  ASSERT_EQ(im.inputs.size(), 2u);
  EXPECT_EQ(im.inputs[0].global_shape, (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(im.graph.tensor(im.inputs[0].local).shape, (std::vector<int64_t>{4, 32}));
  EXPECT_TRUE(im.inputs[1].replicated);
  // A manual computation over some of the mesh's axes is refused at the call, naming the axis.
  std::string t = read_data("shardy_round_trip.mlir");
  t.replace(t.find("\\\"data\\\"=4"), 10, "\\\"data\\\"=4, \\\"m\\\"=1, \\\"k\\\"=2");
  const std::string err = error_of([&] { from_mlir(t); });
  EXPECT_NE(err.find("axis \"k\" is not manual"), std::string::npos) << err;
}

// XLA's lit test of Shardy's round-trip import (tests/data/hlo/stablehlo, provenance in LICENSE-NOTICE.md), split
// at its `// -----` lines. Module 0's entry, @func_results_with_sharding, takes three i32[32] split over one axis of
// 8 of the 8x8x8 mesh its frontend attributes declare: tiles of 32 / 8 = 4 over 512 devices; modules 3-5 (ShardingGroup,
// PropagationBarrier), 9-11 (calls, the tuple-shardings module) import. Module 0's shard_map over "a" alone
// (@manual_computation_nested_tuples) is refused naming the axis left automatic; module 8's send is not read.
TEST(StableHloControlTest, XlasShardyRoundTripLitTestReads) {
  const std::string all = read_data("x64_split_combine_sdy_round_trip.mlir");
  std::vector<std::string> mods;
  size_t b = 0;
  for (size_t e = all.find("\n// -----"); ; e = all.find("\n// -----", b)) {
    mods.push_back(all.substr(b, e == std::string::npos ? std::string::npos : e - b + 1));
    if (e == std::string::npos) break;
    b = e + 9;
  }
  ASSERT_EQ(mods.size(), 12u);
  const Module m0 = parse_stablehlo(mods[0], "t.mlir");
  const Computation& e = m0.entry_computation();
  EXPECT_EQ(e.name, "func_results_with_sharding");
  ASSERT_EQ(e.parameters.size(), 3u);
  for (int32_t p : e.parameters) {
    const Instruction& in = e.instructions[p];
    EXPECT_EQ(in.shape.text(), "s32[4]");
    ASSERT_NE(in.attr("sharding"), nullptr);
    const std::string& s = in.attr("sharding")->value;
    EXPECT_EQ(s.rfind("{devices=[8,64]", 0), 0u) << s;  // 8 tiles, each on the 64 devices of the other two axes
    EXPECT_EQ(std::count(s.begin(), s.end(), ','), 1 + 511) << s;
  }
  for (int k : {3, 4, 5, 9, 10, 11}) EXPECT_EQ(error_of([&] { from_mlir(mods[k]); }), "no error") << "module " << k;
  std::string manual = mods[0];
  const size_t f = manual.find("func.func @manual_computation_nested_tuples");
  ASSERT_NE(f, std::string::npos);
  manual.replace(f, std::string("func.func @manual_computation_nested_tuples").size(), "func.func @main");
  std::string err = error_of([&] { parse_stablehlo(manual, "t.mlir"); });
  EXPECT_NE(err.find("PODSIM-HLO-003"), std::string::npos) << err;
  EXPECT_NE(err.find("axis \"b\" is not manual"), std::string::npos) << err;
  err = error_of([&] { parse_stablehlo(mods[8], "t.mlir"); });
  EXPECT_NE(err.find("'stablehlo.send' is not one podsim reads"), std::string::npos) << err;
}

// ---- quantized types ----

// x quantized to i8 at scale 0.1, zero point -3 (the storage range i8<-127:127>), back to f32, and per axis (two
// scales along dimension 1): by hand, q = clamp(round_even(x / s + z), -127, 127), x' = (q - z) s.
TEST(StableHloControlTest, QuantizedTypesAreTheirStorageAndQuantizeIsElementwise) {
  const std::string t = R"(func.func @main(%x: tensor<2x2xf32>) -> (tensor<2x2x!quant.uniform<i8<-127:127>:f32, 1.000000e-01:-3>>, tensor<2x2xf32>, tensor<2x2xf32>) {
  %0 = stablehlo.uniform_quantize %x : (tensor<2x2xf32>) -> tensor<2x2x!quant.uniform<i8<-127:127>:f32, 1.000000e-01:-3>>
  %1 = stablehlo.uniform_dequantize %0 : (tensor<2x2x!quant.uniform<i8<-127:127>:f32, 1.000000e-01:-3>>) -> tensor<2x2xf32>
  %2 = stablehlo.uniform_quantize %x : (tensor<2x2xf32>) -> tensor<2x2x!quant.uniform<ui8:f32:1, {5.000000e-01:10, 2.000000e-01:0}>>
  %3 = stablehlo.uniform_dequantize %2 : (tensor<2x2x!quant.uniform<ui8:f32:1, {5.000000e-01:10, 2.000000e-01:0}>>) -> tensor<2x2xf32>
  return %0, %1, %3 : tensor<2x2x!quant.uniform<i8<-127:127>:f32, 1.000000e-01:-3>>, tensor<2x2xf32>, tensor<2x2xf32>
})";
  const Module m = parse_stablehlo(t, "t.mlir");
  const Computation& e = m.entry_computation();
  EXPECT_EQ(e.instructions[e.find("quant.0")].shape.text(), "s8[2,2]");
  EXPECT_EQ(e.instructions[e.find("quant.2")].shape.text(), "u8[2,2]");
  ImportOptions o;
  o.numeric = true;
  const Imported im = import_module(m, o);
  const std::vector<float> x = {0.26f, -20.0f, 1.04f, 0.35f};
  TensorStore s;
  run(im, {{0, x}}, s);
  ASSERT_EQ(im.results.size(), 3u);
  // Per tensor: x / 0.1 - 3 = -0.4, -203, 7.4, 0.5 -> 0 (even), -127 (clamped), 7, 0 (even).
  EXPECT_EQ(s.get(im.results[0]).data, (std::vector<float>{0, -127, 7, 0}));
  const std::vector<float>& back = s.get(im.results[1]).data;
  const std::vector<float> want = {0.3f, -12.4f, 1.0f, 0.3f};  // (q + 3) * 0.1
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(back[i], want[i], 1e-6) << i;
  // Per axis: column 0 at 0.5 + 10, column 1 at 0.2 + 0: q = 10.52 -> 11, -100 -> 0 (ui8), 12.08 -> 12, 1.75 -> 2.
  const std::vector<float>& axis = s.get(im.results[2]).data;
  const std::vector<float> want_axis = {0.5f, 0.0f, 1.0f, 0.4f};  // (11 - 10) 0.5, 0 * 0.2, (12 - 10) 0.5, 2 * 0.2
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(axis[i], want_axis[i], 1e-6) << i;
  // A per-axis type without its axis is an error at the type.
  const std::string bad = R"(func.func @main(%x: tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32, {0.1:1, 0.2:2}>> {
  %0 = stablehlo.uniform_quantize %x : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32, {0.1:1, 0.2:2}>>
  return %0 : tensor<2x!quant.uniform<i8:f32, {0.1:1, 0.2:2}>>
})";
  const std::string err = error_of([&] { parse_stablehlo(bad, "t.mlir"); });
  EXPECT_NE(err.find("t.mlir:1:48 PODSIM-HLO-001"), std::string::npos) << err;
}

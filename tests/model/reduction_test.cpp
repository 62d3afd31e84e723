// The adds of reduce-scatter and all-reduce run on the chip's vector units (docs/model.md, "Collectives"): they
// cost VPU cycles, and they wait in the VPU's queue behind the vector ops already there.
#include <gtest/gtest.h>

#include "hw/pod/pod.h"
#include "strategies/i_strategy.h"
#include "tests/model/sim_util.h"

using namespace podsim;
using podsim::test::in_child;

namespace {

constexpr double kClock = 940e6;  // TPU v3

std::string collective(const std::string& op, const std::string& bytes) {
  return "hardware:\n  preset: tpu-v3\n  pod: {dims: [2, 1]}\n" + std::string(podsim::test::kIdealHbmYaml) + "workload:\n  model: collective\n  op: " + op +
         "\n  bytes: " + bytes + "\nrun: {trace: {format: \"off\"}}\n";
}

// Simulates and returns, per chip, the VPU busy seconds and the communication op's start and end.
nlohmann::json run(const std::string& yaml, const std::vector<std::string>& sets) {
  return in_child([&] {
    Experiment e = load_experiment_text(yaml, "t.yaml", {sets});
    std::unique_ptr<Prepared> p = prepare(e);
    Simulation s = simulate(*p);
    nlohmann::json out = nlohmann::json::array();
    for (auto& chip : s.pod->chips()) {
      nlohmann::json ops = nlohmann::json::object();
      const ExecProgram& prog = p->ctx->programs[chip->role()];
      for (size_t i = 0; i < prog.ops.size(); ++i)
        ops[prog.ops[i].name] = {chip->log().ops[i].start, chip->log().ops[i].end};
      out.push_back({{"vpu_busy", chip->log().vpu_busy}, {"ops", ops}});
    }
    return nlohmann::json({{"chips", out}, {"step_time_s", s.step_time}});
  });
}

}  // namespace

// SystemC time has picosecond resolution and every compute interval rounds: busy time is exact to well under one
// clock period (1.06 ns).
constexpr double kBusyTolerance = 1e-10;

// A VPU of one element per cycle (1 lane x 1 sublane): reduce-scatter of N = 2^20 fp32 elements over 2 chips.
// Each chip adds the peer's half into its own: N/2 adds, shared by its 2 TensorCores, so the VPUs are busy
// N/2 / 940 MHz in all (summed over cores) and the adds take N/4 cycles. Hand count of the time:
//   the first 1 MiB chunk read from HBM (c / 900 GB/s + 500 ns), sent (c / 100 GB/s) and one hop (1 us): 13.2 us
//   + the adds, which the links (one chunk per 10.5 us) keep fed: N/4 cycles = 278.9 us
//   + the algorithm's final copy of the N/2-element result (read and write, 4 MiB / 900 GB/s + 500 ns): 5.2 us
// = 297.2 us; the VPU's streaming of each chunk in groups adds about 1 us per chunk (within 2 %).
TEST(ReductionTest, ReduceScatterAddsCostVpuCycles) {
  const double N = 1 << 20, c = 1 << 20;
  auto r = run(collective("reduce_scatter", "4MiB"), {"hardware.chip.vpu.lanes=1", "hardware.chip.vpu.sublanes=1"});
  ASSERT_FALSE(r.contains("error")) << r.dump();
  for (const auto& chip : r["chips"]) EXPECT_NEAR(chip["vpu_busy"].get<double>(), N / 2 / kClock, kBusyTolerance);
  const double lead_in = c / 900e9 + 500e-9 + c / 100e9 + 1e-6;
  const double adds = N / 4 / kClock;
  const double copy = N / 2 * 4 * 2 / 900e9 + 500e-9;
  const double expected = lead_in + adds + copy;
  EXPECT_NEAR(r["step_time_s"].get<double>(), expected, 0.02 * expected);
}

TEST(ReductionTest, AllReduceAddsCostVpuCyclesOnTheDefaultVpu) {
  // 1024 elements per cycle per core: the same N/2 adds of the reduce-scatter phase (the all-gather adds nothing)
  // take ceil(share / 1024) cycles per core and chunk; with 2 TensorCores and N/2 divisible by 2048, N/2 / 1024
  // cycles in all.
  const double N = 1 << 20;
  auto r = run(collective("all_reduce", "4MiB"), {});
  ASSERT_FALSE(r.contains("error")) << r.dump();
  for (const auto& chip : r["chips"]) EXPECT_NEAR(chip["vpu_busy"].get<double>(), N / 2 / 1024 / kClock, kBusyTolerance);
}

namespace {

// One chip program with two independent ops issued together: a vector add over two 64 MiB fp32 tensors and a
// 4 MiB all-reduce over the whole pod.
class AddBesideAllReduce : public IStrategy {
 public:
  std::optional<Plan> place(const ModelGraph&, const Experiment& exp) const override {
    Plan p;
    p.strategy = "test_add_beside_all_reduce";
    p.mesh = Mesh::torus_axes(Torus(exp.hardware.pod.dims, exp.hardware.pod.wrap, exp.hardware.pod.slices));
    Program prog;
    prog.role = "device";
    ModelGraph& g = prog.graph;
    TensorId a = g.add_tensor({"a", {16 << 20}, DType::F32, TensorRole::Input});
    TensorId b = g.add_tensor({"b", {16 << 20}, DType::F32, TensorRole::Input});
    TensorId c = g.add_tensor({"c", {16 << 20}, DType::F32, TensorRole::Activation});
    TensorId x = g.add_tensor({"x", {1 << 20}, DType::F32, TensorRole::Input});
    TensorId y = g.add_tensor({"y", {1 << 20}, DType::F32, TensorRole::Activation});
    Op add;
    add.name = "add";
    add.kind = OpKind::Add;
    add.inputs = {a, b};
    add.outputs = {c};
    g.add_op(add);
    Op ar;
    ar.name = "all_reduce";
    ar.kind = OpKind::AllReduce;
    ar.phase = Phase::Communication;
    ar.inputs = {x};
    ar.outputs = {y};
    g.add_op(ar);
    prog.order = {0, 1};
    p.programs = {prog};
    p.role_of_chip.assign(static_cast<size_t>(exp.hardware.pod.chips()), 0);
    return p;
  }
};
PODSIM_REGISTER_STRATEGY(AddBesideAllReduce, "test_add_beside_all_reduce",
                         "Test: a vector add and an all-reduce issued together");

}  // namespace

// The all-reduce's adds wait in the VPU queue behind the vector add (HBM-bound: 192 MiB at 900 GB/s, about
// 224 us), so the all-reduce, about 50 us alone, cannot end before the add, and ends within its own time after it.
TEST(ReductionTest, ReductionsQueueBehindVectorOps) {
  auto alone = run(collective("all_reduce", "4MiB"), {});
  auto both = run(collective("all_reduce", "4MiB") + "strategy: {name: test_add_beside_all_reduce}\n", {});
  ASSERT_FALSE(alone.contains("error") || both.contains("error")) << alone.dump() << both.dump();
  const double ar_alone = alone["chips"][0]["ops"]["all_reduce"][1].get<double>();
  const auto& ops = both["chips"][0]["ops"];
  const double add_end = ops["add"][1].get<double>(), ar_end = ops["all_reduce"][1].get<double>();
  const double add_expected = 3.0 * (64 << 20) / 900e9;
  EXPECT_NEAR(add_end, add_expected, 0.02 * add_expected);
  EXPECT_LT(ar_alone, 0.3 * add_end);
  EXPECT_GT(ar_end, add_end);
  EXPECT_LT(ar_end, add_end + ar_alone);
}

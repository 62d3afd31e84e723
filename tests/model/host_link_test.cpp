// The chip's host link (hw/chip/host_link.h) against hand counts: a to_host op takes B / bandwidth + latency when
// HBM outpaces the link, a from_host op the same plus the last chunk's HBM write; transfers on one way share it chunk
// by chunk, the two ways do not slow each other; the values come back bit for bit, and what is in host memory takes
// no HBM. The plans come from strategies registered in this file, on one TPU v3 chip (host link 16 GB/s per way,
// 1 us, chunks of 16 MiB; ideal HBM at 900 GB/s with 500 ns latency).
#include <gtest/gtest.h>

#include <cstring>

#include "hw/pod/pod.h"
#include "strategies/i_strategy.h"
#include "tests/model/sim_util.h"

using namespace podsim;
using podsim::test::in_child;
using podsim::test::op_time;
using podsim::test::simulate_in_child;

namespace {

Op host_op(const std::string& name, OpKind kind, TensorId in, TensorId out) {
  Op op;
  op.name = name;
  op.kind = kind;
  op.phase = Phase::Forward;
  op.inputs = {in};
  op.outputs = {out};
  return op;
}

// What each test plan does on its one chip (the workload's input tensor x, B bytes):
//  - round trip: h = to_host(x), y = from_host(h);
//  - two out: to_host of two inputs at once;
//  - both ways: to_host(x) and from_host(x2) at once.
enum class Shape { RoundTrip, TwoOut, BothWays };

Plan host_plan(const ModelGraph& g, const Experiment& exp, Shape shape) {
  Plan p;
  p.strategy = "test_host";
  p.mesh = Mesh::torus_axes(Torus(exp.hardware.pod.dims, exp.hardware.pod.wrap, exp.hardware.pod.slices));
  const TensorInfo& x = g.tensor(0);
  Program prog;
  prog.role = "chip";
  ModelGraph& pg = prog.graph;
  TensorId a = pg.add_tensor({"x", x.shape, x.dtype, TensorRole::Input});
  if (shape == Shape::RoundTrip) {
    TensorId h = pg.add_tensor({"x.host", x.shape, x.dtype, TensorRole::Activation});
    TensorId y = pg.add_tensor({"y", x.shape, x.dtype, TensorRole::Activation});
    pg.add_op(host_op("offload", OpKind::ToHost, a, h));
    pg.add_op(host_op("reload", OpKind::FromHost, h, y));
  } else {
    TensorId b = pg.add_tensor({"x2", x.shape, x.dtype, TensorRole::Input});
    TensorId h1 = pg.add_tensor({"x.host", x.shape, x.dtype, TensorRole::Activation});
    TensorId h2 = pg.add_tensor({"x2.out", x.shape, x.dtype, TensorRole::Activation});
    pg.add_op(host_op("first", OpKind::ToHost, a, h1));
    pg.add_op(host_op("second", shape == Shape::TwoOut ? OpKind::ToHost : OpKind::FromHost, b, h2));
  }
  prog.order = {0, 1};
  p.programs = {prog};
  p.role_of_chip.assign(static_cast<size_t>(exp.hardware.pod.chips()), 0);
  return p;
}

class RoundTrip : public IStrategy {
 public:
  std::optional<Plan> place(const ModelGraph& g, const Experiment& e) const override {
    return host_plan(g, e, Shape::RoundTrip);
  }
};
class TwoOut : public IStrategy {
 public:
  std::optional<Plan> place(const ModelGraph& g, const Experiment& e) const override {
    return host_plan(g, e, Shape::TwoOut);
  }
};
class BothWays : public IStrategy {
 public:
  std::optional<Plan> place(const ModelGraph& g, const Experiment& e) const override {
    return host_plan(g, e, Shape::BothWays);
  }
};
PODSIM_REGISTER_STRATEGY(RoundTrip, "test_host_round_trip", "Test: a tensor to the host and back");
PODSIM_REGISTER_STRATEGY(TwoOut, "test_host_two_out", "Test: two tensors to the host at once");
PODSIM_REGISTER_STRATEGY(BothWays, "test_host_both_ways", "Test: one tensor to the host, one from it, at once");

std::string host_yaml(const std::string& bytes, const std::string& strategy, bool numeric = false) {
  return "hardware:\n  preset: tpu-v3\n  pod: {dims: [1, 1]}\n" + std::string(podsim::test::kIdealHbmYaml) +
         "workload:\n  model: collective\n  op: all_gather\n  bytes: " + bytes + "\nstrategy: {name: " + strategy +
         "}\nrun: {trace: {format: \"off\"}, numeric: " + (numeric ? "true" : "false") + "}\n";
}

const nlohmann::json* op_named(const nlohmann::json& s, const std::string& name) {
  for (const auto& o : s["ops"])
    if (o["name"] == name) return &o;
  return nullptr;
}

// TPU v3 (configs/hardware/tpu-v3.yaml): host link 16 GB/s per way, 1 us; HBM 900 GB/s, 500 ns.
constexpr double kHost = 16e9, kHostLatency = 1e-6, kHbm = 900e9, kHbmLatency = 500e-9, kChunk = 16 << 20;
constexpr double kClock = 1 / 940e6;  // HBM completions round up to the clock

}  // namespace

// 40 MiB in chunks of 16, 16 and 8 MiB. To the host: each chunk's HBM read (18.6 us) hides under its 1.05 ms on the
// link, so B / bandwidth + latency. Back: the same, then the last 8 MiB chunk is written to HBM.
TEST(HostLinkTest, ARoundTripTakesTheBytesOverTheBandwidthEachWay) {
  const double B = 40 << 20;
  auto s = simulate_in_child(host_yaml("40MiB", "test_host_round_trip"));
  ASSERT_FALSE(s.contains("error")) << s.dump();
  const auto* out = op_named(s, "offload");
  const auto* back = op_named(s, "reload");
  ASSERT_TRUE(out && back) << s.dump();
  EXPECT_EQ((*out)["unit"], "host");
  EXPECT_NEAR(op_time(*out), B / kHost + kHostLatency, 1e-9);
  const double last_chunk = B - 2 * kChunk;
  EXPECT_NEAR(op_time(*back), B / kHost + kHostLatency + last_chunk / kHbm + kHbmLatency, 3 * kClock);
  EXPECT_NEAR(s["step_time_s"].get<double>(), op_time(*out) + op_time(*back), 3 * kClock);
  // Statistics: the bytes each way, the HBM traffic of each op, the link busy for both transfers.
  EXPECT_EQ(s["host_link"]["bytes_to_host"].get<double>(), B);
  EXPECT_EQ(s["host_link"]["bytes_from_host"].get<double>(), B);
  EXPECT_EQ((*out)["hbm_read"].get<double>(), B);
  EXPECT_EQ((*back)["hbm_write"].get<double>(), B);
  // The link's busy time is the op's, but for the latency (and the HBM write after the last chunk).
  EXPECT_NEAR((*out)["busy_s"].get<double>(), B / kHost, 1e-9);
  // Communication, not compute.
  EXPECT_NEAR(s["time_breakdown"]["compute_s"].get<double>(), 0, 1e-12);
}

// Two 32 MiB transfers to the host at once take turns chunk by chunk (A1 B1 A2 B2): the first ends after three
// chunks' link time, the second after four.
TEST(HostLinkTest, TransfersOnOneWayTakeTurnsChunkByChunk) {
  auto s = simulate_in_child(host_yaml("32MiB", "test_host_two_out"));
  ASSERT_FALSE(s.contains("error")) << s.dump();
  const auto* a = op_named(s, "first");
  const auto* b = op_named(s, "second");
  ASSERT_TRUE(a && b) << s.dump();
  EXPECT_NEAR(op_time(*a), 3 * kChunk / kHost + kHostLatency, 1e-9);
  EXPECT_NEAR(op_time(*b), 4 * kChunk / kHost + kHostLatency, 1e-9);
}

// One transfer each way at once: the link is full duplex, neither waits for the other.
TEST(HostLinkTest, TheTwoWaysDoNotSlowEachOther) {
  const double B = 32 << 20;
  auto s = simulate_in_child(host_yaml("32MiB", "test_host_both_ways"));
  ASSERT_FALSE(s.contains("error")) << s.dump();
  const auto* a = op_named(s, "first");
  const auto* b = op_named(s, "second");
  ASSERT_TRUE(a && b) << s.dump();
  EXPECT_NEAR(op_time(*a), B / kHost + kHostLatency, 1e-9);
  EXPECT_NEAR(op_time(*b), B / kHost + kHostLatency + kChunk / kHbm + kHbmLatency, 3 * kClock);
}

// Numeric mode: the tensor comes back bit for bit. The memory plan holds x and y in HBM, not the copy in host
// memory: a peak of 2 B, where an HBM copy would make it 3 B.
TEST(HostLinkTest, ValuesComeBackBitForBitAndTheHostCopyTakesNoHbm) {
  auto r = in_child([] {
    Experiment e = load_experiment_text(host_yaml("1MiB", "test_host_round_trip", true), "t.yaml", LoadOptions{});
    std::unique_ptr<Prepared> p = prepare(e);
    Simulation s = simulate(*p);
    const ModelGraph& g = p->plan.programs[0].graph;
    const auto& x = s.pod->chips()[0]->store().get(g.op(0).inputs[0]).data;
    const auto& y = s.pod->chips()[0]->store().get(g.op(1).outputs[0]).data;
    int64_t wrong = x.size() == y.size() ? 0 : -1;
    for (size_t k = 0; wrong >= 0 && k < x.size(); ++k) wrong += std::memcmp(&x[k], &y[k], sizeof(float)) != 0;
    bool varied = false;
    for (size_t k = 1; k < x.size(); ++k) varied = varied || x[k] != x[0];
    return nlohmann::json({{"wrong", wrong}, {"varied", varied}, {"peak", p->ctx->programs[0].memory.peak_bytes}});
  });
  ASSERT_FALSE(r.contains("error")) << r.dump();
  EXPECT_EQ(r["wrong"].get<int64_t>(), 0);
  EXPECT_TRUE(r["varied"].get<bool>());
  EXPECT_EQ(r["peak"].get<double>(), 2.0 * (1 << 20));
}

// The data-center network between slices (hw/dcn/dcn.h) against hand counts: a transfer to another slice crosses the
// sender's host link, its host's NICs, the network, the peer host's NICs and the peer's host link, store-and-forward
// at each host's memory and cut-through on the wire; the chips of a host share its NICs; an all-reduce across slices
// takes what the NICs' bandwidth bounds it to. TPU v5e (host link 15 GB/s and 1 us per way, NICs 25 GB/s per host,
// DCN latency 10 us; ideal HBM at 819 GB/s with 500 ns latency).
#include <gtest/gtest.h>

#include "hw/pod/pod.h"
#include "strategies/i_strategy.h"
#include "tests/model/sim_util.h"

using namespace podsim;
using podsim::test::in_child;
using podsim::test::point_to_point_op;
using podsim::test::simulate_in_child;

namespace {

// Every chip of slice 0 sends the workload's input to the chip at its place in slice 1.
Plan across_plan(const ModelGraph& g, const Experiment& exp) {
  Plan p;
  p.strategy = "test_dcn_send";
  const Torus torus(exp.hardware.pod.dims, exp.hardware.pod.wrap, exp.hardware.pod.slices);
  p.mesh = Mesh::torus_axes(torus);
  const TensorInfo& x = g.tensor(0);
  const int64_t per = torus.slice_chips();
  p.role_of_chip.assign(static_cast<size_t>(torus.chips()), -1);
  for (int64_t c = 0; c < per; ++c) {
    Program send, recv;
    send.role = "sender " + std::to_string(c);
    recv.role = "receiver " + std::to_string(c);
    TensorId sx = send.graph.add_tensor({"x", x.shape, x.dtype, TensorRole::Input});
    TensorId done = send.graph.add_tensor({"sent", {1}, x.dtype, TensorRole::Activation});
    send.graph.add_op(point_to_point_op("send", OpKind::Send, sx, done, c + per, 1));
    TensorId token = recv.graph.add_tensor({"token", {1}, x.dtype, TensorRole::Input});
    TensorId y = recv.graph.add_tensor({"y", x.shape, x.dtype, TensorRole::Activation});
    recv.graph.add_op(point_to_point_op("recv", OpKind::Recv, token, y, c, 1));
    send.order = recv.order = {0};
    p.role_of_chip[c] = static_cast<int32_t>(p.programs.size());
    p.programs.push_back(send);
    p.role_of_chip[c + per] = static_cast<int32_t>(p.programs.size());
    p.programs.push_back(recv);
  }
  p.result_chip = static_cast<int32_t>(2 * per - 1);  // the last receiver
  return p;
}

class AcrossSlices : public IStrategy {
 public:
  std::optional<Plan> place(const ModelGraph& g, const Experiment& exp) const override { return across_plan(g, exp); }
};
PODSIM_REGISTER_STRATEGY(AcrossSlices, "test_dcn_send", "Test: slice 0's chips send their input to slice 1's");

std::string send_yaml(const std::string& dims, const std::string& bytes) {
  return "hardware:\n  preset: tpu-v5e\n  pod: {dims: " + dims + "}\n  slices: 2\n  dcn: {chunk: 4MiB}\n" +
         std::string(podsim::test::kIdealHbmYaml) + "workload:\n  model: collective\n  op: all_gather\n  bytes: " +
         bytes + "\nstrategy: {name: test_dcn_send}\nrun: {trace: {format: \"off\"}}\n";
}

const nlohmann::json* comm(const nlohmann::json& s, const std::string& name) {
  for (const auto& c : s["collectives"])
    if (c["name"] == name) return &c;
  return nullptr;
}

// TPU v5e (configs/hardware/tpu-v5e.yaml).
constexpr double kHost = 15e9, kHostLatency = 1e-6, kNic = 25e9, kDcnLatency = 10e-6;
constexpr double kHbm = 819e9, kHbmLatency = 500e-9, kClock = 1 / 1.5e9;

}  // namespace

// One chip per host. 16 MiB in chunks of c = 4 MiB: the host link (15 GB/s) is the slowest stage, so the chunks
// follow each other into host memory at c / host apart; each then takes c / nic through the NICs and the network's
// latency, enters the peer's host memory whole, and crosses its host link (c / host and its latency) to be written
// to HBM. The last chunk lands at
//   B / host + latency_host + c / nic + latency_dcn + c / host + latency_host + c / HBM + latency_HBM,
// and the Send completes when the Recv's acknowledgement (no data) has come back the same way.
TEST(DcnTest, ATransferBetweenSlicesCrossesHostLinksNicsAndTheNetwork) {
  const double B = 16 << 20, c = 4 << 20;
  auto s = simulate_in_child(send_yaml("[1, 1]", "16MiB"));
  ASSERT_FALSE(s.contains("error")) << s.dump();
  const auto* recv = comm(s, "recv");
  ASSERT_TRUE(recv) << s.dump();
  const double landed = B / kHost + kHostLatency + c / kNic + kDcnLatency + c / kHost + kHostLatency + c / kHbm +
                        kHbmLatency;
  EXPECT_NEAR((*recv)["time_s"].get<double>(), landed, 3 * kClock);
  EXPECT_NEAR(s["step_time_s"].get<double>(), landed + 2 * kHostLatency + kDcnLatency, 3 * kClock);
  EXPECT_EQ((*recv)["dcn"], true);
  // What crossed: the bytes over the sender's host link and NICs, and the receiver's.
  EXPECT_EQ(s["dcn"]["bytes"].get<double>(), B);
  EXPECT_EQ(s["dcn"]["per_host"]["bytes_out"][0].get<double>(), B);
  EXPECT_EQ(s["dcn"]["per_host"]["bytes_in"][1].get<double>(), B);
  EXPECT_EQ(s["host_link"]["bytes_to_host"].get<double>(), B);
  EXPECT_EQ(s["host_link"]["bytes_from_host"].get<double>(), B);
  EXPECT_EQ(s["ici"]["bytes"].get<double>(), 0);  // nothing on the ICI
}

// Two chips on one host send at once: their chunks share the host's NICs, which are now the slowest stage (two
// chunks arrive every c / host, and the NICs need 2c / nic for them). The NICs run without a gap from the first
// chunk's arrival to the last chunk's departure, 2B / nic later, and the peer host's NICs pass the same stream.
TEST(DcnTest, TheChipsOfAHostShareItsNics) {
  const double B = 16 << 20, c = 4 << 20;
  auto s = simulate_in_child(send_yaml("[2, 1]", "16MiB"));
  ASSERT_FALSE(s.contains("error")) << s.dump();
  EXPECT_EQ(s["dcn"]["chips_per_host"], 2);
  const auto* recv = comm(s, "recv");  // chip 3's, the second in the NICs' order
  ASSERT_TRUE(recv) << s.dump();
  const double landed = c / kHost + kHostLatency + 2 * B / kNic + kDcnLatency + c / kHost + kHostLatency +
                        c / kHbm + kHbmLatency;
  EXPECT_NEAR((*recv)["time_s"].get<double>(), landed, 3 * kClock);
  EXPECT_EQ(s["dcn"]["per_host"]["bytes_out"][0].get<double>(), 2 * B);
  EXPECT_EQ(s["dcn"]["per_host"]["bytes_in"][1].get<double>(), 2 * B);
}

// An all-reduce of V bytes per chip across S = 4 slices of 2 x 2 chips (one host each): the ring sends
// 2 (S - 1) / S x V per chip over the DCN, and a host's NICs carry its four chips' share, so the all-reduce takes at
// least 4 x 2 (S - 1) / S x V / nic (16.1 ms; the host links' bound is 6.7 ms). The ring's steps wait for each other
// across the network, so a few per cent more.
TEST(DcnTest, AnAllReduceAcrossSlicesRunsAtTheNicsBandwidth) {
  const double V = 64 << 20, S = 4;
  auto s = simulate_in_child(
      "hardware: {preset: tpu-v5e, pod: {dims: [2, 2]}, slices: 4}\n"
      "workload: {model: collective, op: all_reduce, bytes: 64MiB, axes: [slice]}\nrun: {trace: {format: \"off\"}}\n");
  ASSERT_FALSE(s.contains("error")) << s.dump();
  const double per_chip = 2 * (S - 1) / S * V;
  EXPECT_EQ(s["dcn"]["max_bytes_per_chip"].get<double>(), per_chip);
  EXPECT_EQ(s["dcn"]["max_bytes_per_host"].get<double>(), 4 * per_chip);
  const double bound = 4 * per_chip / kNic;
  const double t = s["step_time_s"].get<double>();  // the last chip's (a host's chips take the NICs in turn)
  EXPECT_GE(t, bound);
  EXPECT_LE(t, 1.10 * bound);
  EXPECT_EQ(s["collectives"][0]["group"], "ring of 4 on slices");
}

// With the network oversubscribed 4:1, a slice's way out carries its NICs' total / 4: the same all-reduce is four
// times as slow, bound by the slice's way out (one host per slice: nic / 4).
TEST(DcnTest, AnOversubscribedNetworkBoundsWhatASliceSends) {
  const double V = 16 << 20, S = 4;
  auto s = simulate_in_child(
      "hardware: {preset: tpu-v5e, pod: {dims: [2, 2]}, slices: 4, dcn: {oversubscription: 4}}\n"
      "workload: {model: collective, op: all_reduce, bytes: 16MiB, axes: [slice]}\nrun: {trace: {format: \"off\"}}\n");
  ASSERT_FALSE(s.contains("error")) << s.dump();
  const double bound = 4 * 2 * (S - 1) / S * V / (kNic / 4);
  const double t = s["step_time_s"].get<double>();
  EXPECT_GE(t, bound);
  EXPECT_LE(t, 1.10 * bound);
}

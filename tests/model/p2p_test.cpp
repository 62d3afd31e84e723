// Point-to-point Send/Recv over the simulated torus: a Send completes when its data has arrived (the receiver's
// acknowledgement came back), transfers are chunked (hardware.ici.chunk) and pipeline over the links, and the
// data arrives intact even when two transfers with the same tag interleave on a link.
// The plans come from strategies registered in this file: chip 0 sends the workload's input tensor to the chip
// half-way round the x ring.
#include <gtest/gtest.h>

#include <cstring>

#include "hw/pod/pod.h"
#include "strategies/i_strategy.h"
#include "tests/model/sim_util.h"

using namespace podsim;
using podsim::test::in_child;
using podsim::test::op_time;
using podsim::test::point_to_point_op;
using podsim::test::simulate_in_child;

namespace {

// `transfers` sends of the workload's input from chip 0 to chip dims[0] / 2, all with tag 3 and independent of
// each other (so their chunks share the first link).
Plan p2p_plan(const ModelGraph& g, const Experiment& exp, int transfers) {
  Plan p;
  p.strategy = "test_p2p";
  p.mesh = Mesh::torus_axes(Torus(exp.hardware.pod.dims, exp.hardware.pod.wrap, exp.hardware.pod.slices));
  const int64_t receiver = exp.hardware.pod.dims[0] / 2;
  const TensorInfo& x = g.tensor(0);
  Program send, recv;
  send.role = "sender";
  recv.role = "receiver";
  for (int i = 0; i < transfers; ++i) {
    std::string k = std::to_string(i);
    TensorId sx = send.graph.add_tensor({"x" + k, x.shape, x.dtype, TensorRole::Input});
    TensorId done = send.graph.add_tensor({"sent" + k, {1}, x.dtype, TensorRole::Activation});
    send.graph.add_op(point_to_point_op("send" + k, OpKind::Send, sx, done, receiver, 3));
    TensorId token = recv.graph.add_tensor({"token" + k, {1}, x.dtype, TensorRole::Input});
    TensorId y = recv.graph.add_tensor({"y" + k, x.shape, x.dtype, TensorRole::Activation});
    recv.graph.add_op(point_to_point_op("recv" + k, OpKind::Recv, token, y, 0, 3));
    send.order.push_back(i);
    recv.order.push_back(i);
  }
  p.programs = {send, recv};
  p.role_of_chip.assign(static_cast<size_t>(exp.hardware.pod.chips()), -1);
  p.role_of_chip[0] = 0;
  p.role_of_chip[receiver] = 1;
  p.result_chip = static_cast<int32_t>(receiver);
  return p;
}

class OneTransfer : public IStrategy {
 public:
  std::optional<Plan> place(const ModelGraph& g, const Experiment& exp) const override { return p2p_plan(g, exp, 1); }
};
class TwoTransfers : public IStrategy {
 public:
  std::optional<Plan> place(const ModelGraph& g, const Experiment& exp) const override { return p2p_plan(g, exp, 2); }
};
PODSIM_REGISTER_STRATEGY(OneTransfer, "test_p2p", "Test: chip 0 sends its input half-way round the x ring");
PODSIM_REGISTER_STRATEGY(TwoTransfers, "test_p2p_twice", "Test: two such sends with the same tag at once");

std::string p2p_yaml(const std::string& bytes, const std::string& strategy = "test_p2p", bool numeric = false) {
  return "hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 1]}\n" + std::string(podsim::test::kIdealHbmYaml) + "workload:\n  model: collective\n  op: all_gather\n"
         "  bytes: " + bytes + "\nstrategy: {name: " + strategy + "}\nrun: {trace: {format: \"off\"}, numeric: " +
         (numeric ? "true" : "false") + "}\n";
}

const nlohmann::json* comm(const nlohmann::json& s, const std::string& name) {
  for (const auto& c : s["collectives"])
    if (c["name"] == name) return &c;
  return nullptr;
}

// TPU v3: 100 GB/s per link and direction, 1 us per hop, HBM 900 GB/s with 500 ns latency (docs/hardware.md).
constexpr double kLink = 100e9, kHop = 1e-6, kHbm = 900e9, kHbmLatency = 500e-9;

}  // namespace

// Hand count for B bytes in chunks of c over h hops: the first chunk is read from HBM (c / HBM + latency), then the
// chunks follow each other on the links (B / link), the last one's tail arrives h hop latencies later and is
// written to HBM (c / HBM + latency); the Recv ends there. The acknowledgement then takes h hop latencies back.
TEST(PointToPointTest, SendCompletesWhenItsDataHasArrivedAndTheAcknowledgementIsBack) {
  for (const char* chunk : {"1MiB", "256KiB"}) {
    const double B = 4 << 20, c = std::string(chunk) == "1MiB" ? 1 << 20 : 256 << 10, h = 2;
    auto s = simulate_in_child(p2p_yaml("4MiB"), {std::string("hardware.ici.chunk=") + chunk});
    ASSERT_FALSE(s.contains("error")) << s.dump();
    // The summary lists the receiver's ops (the result chip); the step ends with the sender's Send.
    const auto* recv = comm(s, "recv0");
    ASSERT_TRUE(recv) << s.dump();
    const double hbm = c / kHbm + kHbmLatency;
    const double recv_time = hbm + B / kLink + h * kHop + hbm;
    // Within a few clock periods (HBM completions round up to the 940 MHz clock).
    EXPECT_NEAR((*recv)["time_s"].get<double>(), recv_time, 5e-9) << chunk;
    EXPECT_NEAR(s["step_time_s"].get<double>(), recv_time + h * kHop, 5e-9) << chunk;
    EXPECT_EQ((*recv)["algorithm"], "point_to_point");
  }
}

// Two 1 MiB transfers with the same tag, issued together: their chunks share chip 0's link in turn, and each lands
// in the Recv it pairs with (the k-th Send to a peer with a tag pairs with the peer's k-th Recv with that tag).
TEST(PointToPointTest, InterleavedTransfersWithTheSameTagArriveIntact) {
  auto r = in_child([] {
    Experiment e = load_experiment_text(p2p_yaml("1MiB", "test_p2p_twice", true), "t.yaml",
                                        {{"hardware.ici.chunk=64KiB"}});
    std::unique_ptr<Prepared> p = prepare(e);
    Simulation s = simulate(*p);
    auto& chips = s.pod->chips();
    const int64_t receiver = 2;
    int64_t wrong = 0, elements = 0;
    for (int i = 0; i < 2; ++i) {
      const auto& sent = chips[0]->store().get(p->plan.programs[0].graph.op(i).inputs[0]).data;
      const auto& got = chips[receiver]->store().get(p->plan.programs[1].graph.op(i).outputs[0]).data;
      if (sent.size() != got.size()) return nlohmann::json({{"error", "size"}});
      for (size_t k = 0; k < sent.size(); ++k) wrong += std::memcmp(&sent[k], &got[k], sizeof(float)) != 0;
      elements += static_cast<int64_t>(got.size());
    }
    // Distinct inputs, so a swap of the two transfers would show.
    bool distinct = chips[0]->store().get(0).data != chips[0]->store().get(2).data;
    return nlohmann::json({{"wrong", wrong}, {"elements", elements}, {"distinct", distinct},
                           {"step_time_s", s.step_time}});
  });
  ASSERT_FALSE(r.contains("error")) << r.dump();
  EXPECT_TRUE(r["distinct"].get<bool>());
  EXPECT_EQ(r["elements"].get<int64_t>(), 2 * (1 << 18));
  EXPECT_EQ(r["wrong"].get<int64_t>(), 0);
  // Both transfers share the links back to back: as one 2 MiB transfer in 64 KiB chunks, there and back.
  const double hbm = 65536 / kHbm + kHbmLatency;
  EXPECT_NEAR(r["step_time_s"].get<double>(), hbm + 2.0 * (1 << 20) / kLink + 2 * kHop + hbm + 2 * kHop, 5e-9);
}

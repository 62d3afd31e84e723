// Two transfers of unequal messages sharing a link get equal bytes of it (hw/chip/link_turns.h): chip 0 sends a
// 64 MiB and an 8 MiB tensor to the chip two hops along the x ring at once. With hardware.ici.max_chunks = 8 and
// chunks of 1 MiB the large one moves in 8 messages of 8 MiB and the small one in 8 of 1 MiB; the small one's
// messages take the link while the large one collects its turns, so it lands after 8 MiB of the other's, not 64.
#include <gtest/gtest.h>

#include "strategies/i_strategy.h"
#include "tests/model/sim_util.h"

using namespace podsim;
using podsim::test::point_to_point_op;
using podsim::test::simulate_in_child;

namespace {

// Chip 0 sends the workload's input (64 MiB of f32: 2^24 elements) and an eighth of it, independently, to chip 2.
class UnequalTransfers : public IStrategy {
 public:
  std::optional<Plan> place(const ModelGraph& g, const Experiment& exp) const override {
    Plan p;
    p.strategy = "test_unequal_transfers";
    p.mesh = Mesh::torus_axes(Torus(exp.hardware.pod.dims, exp.hardware.pod.wrap, exp.hardware.pod.slices));
    const TensorInfo& x = g.tensor(0);
    const int64_t n = x.elements();
    Program send, recv;
    send.role = "sender";
    recv.role = "receiver";
    int i = 0;
    for (int64_t elements : {n, n / 8}) {
      const std::string k = std::to_string(i);
      TensorId sx = send.graph.add_tensor({"x" + k, {elements}, x.dtype, TensorRole::Input});
      TensorId done = send.graph.add_tensor({"sent" + k, {1}, x.dtype, TensorRole::Activation});
      send.graph.add_op(point_to_point_op("send" + k, OpKind::Send, sx, done, 2, 5));
      TensorId token = recv.graph.add_tensor({"token" + k, {1}, x.dtype, TensorRole::Input});
      TensorId y = recv.graph.add_tensor({"y" + k, {elements}, x.dtype, TensorRole::Activation});
      recv.graph.add_op(point_to_point_op("recv" + k, OpKind::Recv, token, y, 0, 5));
      send.order.push_back(i);
      recv.order.push_back(i);
      ++i;
    }
    p.programs = {send, recv};
    p.role_of_chip.assign(static_cast<size_t>(exp.hardware.pod.chips()), -1);
    p.role_of_chip[0] = 0;
    p.role_of_chip[2] = 1;
    p.result_chip = 2;
    return p;
  }
};
PODSIM_REGISTER_STRATEGY(UnequalTransfers, "test_unequal_transfers",
                         "Test: chip 0 sends its input and an eighth of it to chip 2 at once");

nlohmann::json run(const std::string& max_chunks) {
  const std::string yaml = "hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 1]}\n  ici: {chunk: 1MiB}\n" +
                           std::string(podsim::test::kIdealHbmYaml) +
                           "workload:\n  model: collective\n  op: all_gather\n  bytes: 64MiB\n"
                           "strategy: {name: test_unequal_transfers}\nrun: {trace: {format: \"off\"}}\n";
  return simulate_in_child(yaml, {"hardware.ici.max_chunks=" + max_chunks});
}

double recv_time(const nlohmann::json& s, const std::string& name) {
  for (const auto& c : s["collectives"])
    if (c["name"] == name) return c["time_s"].get<double>();
  ADD_FAILURE() << "no " << name << " in " << s.dump();
  return 0;
}

// TPU v3: 100 GB/s per link and direction, 1 us per hop, HBM 900 GB/s with 500 ns latency (docs/hardware.md).
constexpr double kLink = 100e9, kHop = 1e-6, kHbm = 900e9, kHbmLatency = 500e-9, kMiB = 1 << 20;

}  // namespace

// Hand count. Without the cap both transfers move in 1 MiB messages, one per turn: the 8 MiB transfer's last
// leaves after 16 MiB (its first read from HBM, 1 MiB, before), pays 2 hop latencies and is written to HBM.
// With N = 8 the large transfer's first message (8 MiB) is read first and takes the link for 8 MiB; then the
// small transfer's eight 1 MiB messages go, one per turn, while the large one collects the eight turns its next
// message needs: the small transfer's last leaves after 16 MiB again, only the first read is longer. A message per
// turn would have sent all eight large messages by then (64 + 8 MiB). Every read but the first is hidden under
// the link (a read of 8 MiB, 9.8 us, within the 10.5 us horizon of one chunk); the large transfer ends after
// 72 MiB either way.
TEST(LinkShareTest, UnequalMessagesGetEqualBytesOfASharedLink) {
  const nlohmann::json exact = run("0"), capped = run("8");
  ASSERT_FALSE(exact.contains("error") || capped.contains("error")) << exact.dump() << capped.dump();
  const double read1 = kMiB / kHbm + kHbmLatency, read8 = 8 * kMiB / kHbm + kHbmLatency, write1 = read1;
  const double write8 = read8;
  EXPECT_NEAR(recv_time(exact, "recv1"), read1 + 16 * kMiB / kLink + 2 * kHop + write1, 5e-9);
  EXPECT_NEAR(recv_time(capped, "recv1"), read8 + 16 * kMiB / kLink + 2 * kHop + write1, 5e-9);
  EXPECT_NEAR(recv_time(exact, "recv0"), read1 + 72 * kMiB / kLink + 2 * kHop + write1, 5e-9);
  EXPECT_NEAR(recv_time(capped, "recv0"), read8 + 72 * kMiB / kLink + 2 * kHop + write8, 5e-9);
}

// Units contend for HBM: an HBM-bound vector op slows down when an MXU op streams its operands at the same time,
// and it lands on the memory side of the roofline; the HBM's write drain alone moves it by its turnarounds. The
// workload is registered by this test binary only.
#include <gtest/gtest.h>

#include "tests/model/sim_util.h"
#include "workloads/builder.h"
#include "workloads/i_workload.h"

using namespace podsim;
using podsim::test::op_time;
using podsim::test::simulate_in_child;

namespace {

// A big elementwise add (HBM-bound) and, when workload.with_matmul, an independent GEMV-like matmul whose weights
// stream from HBM at the same time (the sequencer overlaps them: different units, no dependency).
class ContentionWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    return {ParamSpec::boolean("workload.with_matmul", "Also run an independent matmul.").def("false")};
  }
  ModelGraph build(const ParamSet& p) const override {
    ModelGraph g("contention");
    GraphBuilder b(g, DType::BF16);
    TensorId x = b.input("x", {64 << 20}, DType::BF16);
    TensorId y = b.input("y", {64 << 20}, DType::BF16);
    if (p.b("workload.with_matmul")) b.matmul(b.input("a", {64, 8192}, DType::BF16), b.param("w", {8192, 8192}), "mm");
    b.add(x, y, "add");
    return g;
  }
};

PODSIM_REGISTER_WORKLOAD(ContentionWorkload, "test_contention", "Test: an HBM-bound add, optionally with a matmul");

const char* kYaml = "hardware: {preset: tpu-v3}\nworkload: {model: test_contention}\nrun: {trace: {format: \"off\"}}\n";

const nlohmann::json& op_named(const nlohmann::json& s, const std::string& name) {
  for (const auto& o : s["ops"])
    if (o["name"] == name) return o;
  static nlohmann::json none;
  return none;
}

}  // namespace

TEST(ContentionTest, MemoryBoundOpRunsAtHbmSpeed) {
  auto s = simulate_in_child(kYaml);
  ASSERT_FALSE(s.contains("error")) << s.dump();
  const auto& add = op_named(s, "add");
  double bytes = add["bytes"].get<double>();
  EXPECT_DOUBLE_EQ(bytes, 3.0 * 2 * (64 << 20));  // read x and y, write the sum, bf16
  // By hand: 32 channels of 28.125 GB/s, 2.2756 ns per 64 B burst. Each channel reads 8 MiB (131072 bursts) and
  // writes 4 MiB (65536 bursts), the writes turning the bus around (13 + 13 ns) every 16 bursts (the preset's
  // write batch); refresh takes 350 ns of every 3.9 us. (At the peak alone the op would take 447 us.)
  double burst = 64 / 28.125e9;
  double hbm_time = (131072 * burst + 65536 * (burst + 26e-9 / 16)) * 3900.0 / 3550.0;
  EXPECT_NEAR(op_time(add) / hbm_time, 1.0, 0.05);
  // Its vector work would take a fraction of that: the op sits on the memory side of the roofline.
  double compute = add["cycles"].get<double>() / s["clock_hz"].get<double>();
  EXPECT_LT(compute, 0.3 * op_time(add));
}

TEST(ContentionTest, ConcurrentMatmulSlowsTheMemoryBoundOp) {
  auto alone = simulate_in_child(kYaml);
  auto shared = simulate_in_child(kYaml, {"workload.with_matmul=true"});
  ASSERT_FALSE(alone.contains("error") || shared.contains("error"));
  const auto& a = op_named(alone, "add");
  const auto& b = op_named(shared, "add");
  const auto& mm = op_named(shared, "mm");
  // The two ops overlap in time...
  EXPECT_LT(mm["start_ns"].get<double>(), b["end_ns"].get<double>());
  EXPECT_LT(b["start_ns"].get<double>(), mm["end_ns"].get<double>());
  // ...and share HBM, so the add takes longer than alone, while its own work is unchanged.
  EXPECT_EQ(a["cycles"], b["cycles"]);
  EXPECT_GT(op_time(b), 1.1 * op_time(a));
}

// The HBM's write drain alone (hardware.chip.hbm.write_batch, docs/model.md "HBM"): the add reads two bytes for
// each one it writes, so its writes are the minority direction and each channel turns its bus around (13 + 13 ns)
// once per write_batch of its 65,536 write bursts, stretched by refresh (350 ns of every 3.9 us). Nothing else
// changes with the drain: the op's time moves by exactly those turnarounds, 8 drains (the DRAM simulators' stack)
// twice as many as the TPU v3 preset's 16, none when turnarounds are off.
TEST(ContentionTest, HbmWriteBatchAloneMovesTheMemoryBoundOp) {
  const double stretch = 3900.0 / 3550.0, pair = 26e-9, write_bursts = 65536;
  const auto add_time = [&](int batch) {
    auto s = simulate_in_child(kYaml, {"hardware.chip.hbm.write_batch=" + std::to_string(batch)});
    EXPECT_FALSE(s.contains("error")) << s.dump();
    return op_time(op_named(s, "add"));
  };
  const double none = add_time(0), eight = add_time(8), sixteen = add_time(16);
  const double turnarounds_8 = write_bursts / 8 * pair * stretch;  // 234 us
  const double edge = 1 / 940e6;  // each run's op ends on a clock edge
  EXPECT_NEAR(eight - none, turnarounds_8, edge);
  EXPECT_NEAR(sixteen - none, turnarounds_8 / 2, edge);
  // The preset's own drain is 16.
  EXPECT_DOUBLE_EQ(op_time(op_named(simulate_in_child(kYaml), "add")), sixteen);
}

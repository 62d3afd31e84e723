// One chip executing real ops, checked on the simulated time: MXU cycles by hand in both modes (accumulator chunks,
// row padding, exposed weight loads, folds shared by MXUs), an epilogue on the VPU, tiling traffic and its VMEM
// limit, a memory-bound GEMM against a hand count of the HBM, memory capacity errors.
#include <gtest/gtest.h>

#include <tuple>

#include "tests/model/sim_util.h"

using namespace podsim;
using podsim::test::op_time;
using podsim::test::simulate_in_child;

namespace {

std::string matmul(int64_t m, int64_t k, int64_t n, const std::string& dtype = "bf16",
                   const std::string& preset = "tpu-v3") {
  return "hardware: {preset: " + preset + "}\nworkload: {model: matmul, m: " + std::to_string(m) +
         ", k: " + std::to_string(k) + ", n: " + std::to_string(n) + ", dtype: " + dtype + "}\n";
}

constexpr double kClock = 940e6;  // tpu-v3

// One core, one MXU, and an HBM so fast that an op's time is its compute alone.
std::vector<std::string> mxu_only(std::vector<std::string> more = {}) {
  std::vector<std::string> s = {"hardware.chip.tensorcores=1",         "hardware.chip.mxu.count=1",
                                "hardware.chip.hbm.bandwidth=1000TB/s", "hardware.chip.hbm.latency=0ns",
                                "hardware.chip.hbm.cas=0ns",            "hardware.chip.hbm.rcd=0ns",
                                "hardware.chip.hbm.refresh_interval=0s", "hardware.chip.hbm.activate_interval=0ns",
                                "hardware.chip.hbm.faw=0ns",            "hardware.chip.hbm.row_cycle=0ns",
                                "hardware.chip.hbm.write_batch=0",      "hardware.chip.vmem.capacity=256MiB",
                                "hardware.chip.mxu.weight_push=0",   // the array alone (WeightPushTakesTheInputPort,
                                "hardware.chip.mxu.result_pop=0"};   // ResultsLeaveThroughTheVectorUnit)
  s.insert(s.end(), more.begin(), more.end());
  return s;
}

const nlohmann::json& op_with_member(const nlohmann::json& s, const std::string& member) {
  for (const auto& o : s["ops"]) {
    if (o["name"] == member) return o;
    if (o.contains("fused"))
      for (const auto& m : o["fused"])
        if (m == member) return o;
  }
  static const nlohmann::json none;
  ADD_FAILURE() << "no op " << member;
  return none;
}

}  // namespace

// The simulated op time in clock cycles: the compute plus the first load and the last write, which with the fast
// HBM take no time but each end on a clock edge (up to 3 cycles in all).
void expect_time_in_cycles(const nlohmann::json& op, int64_t cycles) {
  EXPECT_GE(op_time(op) * kClock, static_cast<double>(cycles) - 1e-3) << op["name"];
  EXPECT_LE(op_time(op) * kClock, static_cast<double>(cycles) + 3.001) << op["name"];
}

TEST(ChipTest, ReferenceModeTakesTheWeightStationaryFormulaForEveryShape) {
  // folds x (2R + C + M - 2), M streaming whole through each fold, counted by hand:
  //   2048 x 1024 x 4096: 8 x 32 folds of 2430 = 622,080     4096 x 128 x 4096: 32 folds of 4478 = 143,296
  //   300 x 129 x 200: 2 x 2 folds of 682 = 2728              1 x 1 x 1: one fold of 383
  for (auto [m, k, n, cycles] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
           {2048, 1024, 4096, 622080}, {4096, 128, 4096, 143296}, {300, 129, 200, 2728}, {1, 1, 1, 383}}) {
    // A 2 MiB VMEM tiles the output for HBM, but the weights still stream all of M in this mode.
    for (const char* vmem : {"256MiB", "2MiB"}) {
      auto s = simulate_in_child(matmul(m, k, n), mxu_only({"hardware.chip.mxu.weight_double_buffer=false",
                                                              std::string("hardware.chip.vmem.capacity=") + vmem}));
      ASSERT_FALSE(s.contains("error")) << s.dump();
      const auto& op = s["ops"][0];
      EXPECT_EQ(op["cycles"].get<int64_t>(), cycles) << m << "x" << k << "x" << n << " vmem " << vmem;
      if (std::string(vmem) == "256MiB") expect_time_in_cycles(op, cycles);
    }
  }
}

TEST(ChipTest, TpuModeStreamsMInAccumulatorChunks) {
  // 4096 x 128 x 4096 with 64-row accumulators: 64 chunks x 32 folds = 2048 folds of max(64, 128) cycles each:
  // 128 + 64 + 2047 x 128 + 254 = 262,462. With the v3 preset's 1024 rows, 4 chunks x 32 folds of 1024 rows:
  // 128 + 1024 + 127 x 1024 + 254 = 131,454 (the same: with the loads hidden a chunk costs only its rows).
  auto small = simulate_in_child(matmul(4096, 128, 4096), mxu_only({"hardware.chip.mxu.accumulator_rows=64"}));
  auto dflt = simulate_in_child(matmul(4096, 128, 4096), mxu_only());
  ASSERT_FALSE(small.contains("error") || dflt.contains("error")) << small.dump() << dflt.dump();
  EXPECT_EQ(small["ops"][0]["mxu"]["m_chunks"].get<int64_t>(), 64);
  EXPECT_EQ(dflt["ops"][0]["mxu"]["m_chunks"].get<int64_t>(), 4);
  expect_time_in_cycles(small["ops"][0], 262462);
  expect_time_in_cycles(dflt["ops"][0], 131454);
}

TEST(ChipTest, TpuModePadsRowsToWholeVectors) {
  // M = 1 streams a whole 8-row vector: one fold of 128 + 8 + 254 = 390 cycles (the reference mode: 383).
  auto s = simulate_in_child(matmul(1, 128, 128), mxu_only());
  ASSERT_FALSE(s.contains("error")) << s.dump();
  expect_time_in_cycles(s["ops"][0], 390);
  EXPECT_EQ(s["ops"][0]["mxu"]["rows_per_fold"].get<int64_t>(), 8);
}

TEST(ChipTest, KernelOverheadHoldsTheUnitBeforeItsFirstLoad) {
  // hardware.chip.kernel_overhead: a kernel's fixed cost, on its unit before its first load. M = 1 on one MXU is
  // 390 cycles (above); with 1000 cycles of overhead, 1390, and the MXU's busy cycles stay the op's 390. On both
  // cores of a v3 chip each core's share pays it at the same time, so the op still takes 1000 cycles more.
  for (const char* cores : {"hardware.chip.tensorcores=1", "hardware.chip.tensorcores=2"}) {
    auto with = simulate_in_child(matmul(1, 128, 128), mxu_only({cores, "hardware.chip.kernel_overhead=1000"}));
    auto without = simulate_in_child(matmul(1, 128, 128), mxu_only({cores}));
    ASSERT_FALSE(with.contains("error") || without.contains("error")) << with.dump() << without.dump();
    EXPECT_EQ(with["ops"][0]["cycles"].get<int64_t>(), without["ops"][0]["cycles"].get<int64_t>()) << cores;
    EXPECT_NEAR((op_time(with["ops"][0]) - op_time(without["ops"][0])) * kClock, 1000.0, 1.001) << cores;
    if (std::string(cores).back() == '1') expect_time_in_cycles(with["ops"][0], 1390);
  }
}

TEST(ChipTest, KernelOverheadIsNotPaidByACollectivesReduction) {
  // An all-reduce's adds run on the vector units inside the collective's kernel: one chunk after another, never
  // issued as kernels of their own, so the overhead leaves the collective's time as it was.
  const std::string ar = "hardware: {preset: tpu-v3, pod: {dims: [2, 2]}}\n"
                         "workload: {model: collective, op: all_reduce, bytes: 4MiB}\n";
  auto with = simulate_in_child(ar, {"hardware.chip.kernel_overhead=1000"});
  auto without = simulate_in_child(ar, {});
  ASSERT_FALSE(with.contains("error") || without.contains("error")) << with.dump() << without.dump();
  EXPECT_EQ(with["step_time_s"].get<double>(), without["step_time_s"].get<double>());
}

TEST(ChipTest, WeightLoadsThatDoubleBufferingCannotHide) {
  // M = 32 < R: every fold after the first waits for its 128-cycle weight load. 32 x 512 x 512 is 16 folds:
  // 128 + 32 + 15 x 128 + 254 = 2334 cycles, where 16 folds of 32 rows would take 894 if loads hid.
  auto s = simulate_in_child(matmul(32, 512, 512), mxu_only());
  ASSERT_FALSE(s.contains("error")) << s.dump();
  expect_time_in_cycles(s["ops"][0], 2334);
}

TEST(ChipTest, WeightPushTakesTheInputPort) {
  // TPU v3 pushes each fold's weights through the port its rows use: 128 cycles per fold (hardware.chip.mxu.
  // weight_push). 2048 x 1024 x 128 on one MXU: 8 folds of 2048 rows, 128 + 2048 + 7 x (2048 + 128) + 254 = 17,662
  // cycles (without the push: 16,766). With M = 32 < R the weight shift decides as before unless the push and the
  // rows take longer: 8 folds of 32 rows, 128 + 32 + 7 x max(32 + 128, 128) + 254 = 1,534 (without: 1,310).
  // (Folds of up to 2048 rows here; the v3 preset streams 1024, below.)
  const std::string rows2048 = "hardware.chip.mxu.accumulator_rows=2048";
  for (auto [m, with, without] : {std::tuple<int64_t, int64_t, int64_t>{2048, 17662, 16766}, {32, 1534, 1310}}) {
    auto push = simulate_in_child(matmul(m, 1024, 128), mxu_only({"hardware.chip.mxu.weight_push=128", rows2048}));
    auto own = simulate_in_child(matmul(m, 1024, 128), mxu_only({rows2048}));
    ASSERT_FALSE(push.contains("error") || own.contains("error")) << push.dump() << own.dump();
    EXPECT_EQ(push["ops"][0]["cycles"].get<int64_t>(), with) << m;
    EXPECT_EQ(own["ops"][0]["cycles"].get<int64_t>(), without) << m;
  }
  // A fold pushes only the weight rows it holds: K = 64 (an attention head) pushes 64 rows. 2048 x 64 x 256 is 2
  // folds of 2048 rows: 128 + 2048 + (2048 + 64) + 254 = 4542 (a whole 128-row push would give 4606).
  auto shallow =
      simulate_in_child(matmul(2048, 64, 256), mxu_only({"hardware.chip.mxu.weight_push=128", rows2048}));
  ASSERT_FALSE(shallow.contains("error")) << shallow.dump();
  EXPECT_EQ(shallow["ops"][0]["cycles"].get<int64_t>(), 4542);
  // The preset carries it: v3 pushes R / 2 = 64 cycles a fold and streams 1024-row chunks, so 2 chunks x 8 folds
  // of 1024 rows: 128 + 1024 + 15 x (1024 + 64) + 254 = 17,726.
  auto v3 = simulate_in_child(matmul(2048, 1024, 128), {"hardware.chip.tensorcores=1", "hardware.chip.mxu.count=1"});
  EXPECT_EQ(v3["ops"][0]["cycles"].get<int64_t>(), 17726);
}

TEST(ChipTest, ResultsLeaveThroughTheVectorUnit) {
  // TPU v3 pops each 8 x 128 vector of results through the vector unit (hardware.chip.mxu.result_pop = 2 cycles),
  // between the MXU's streams. 2048 x 1024 x 128 on one MXU (no weight push): 16,766 MXU cycles, then 2048 / 8 x
  // 128 / 128 = 256 result vectors: 16,766 + 2 x 256 = 17,278. Batched, with N = 64 padded to the 128 lanes:
  // 4 x 512 x 64 x 64 is 4 folds of 512 rows, 128 + 512 + 3 x 512 + 254 = 2430 cycles, and 4 x 512 / 8 = 256
  // vectors: 2430 + 512 = 2942.
  auto pop = mxu_only({"hardware.chip.mxu.result_pop=2"});
  auto s = simulate_in_child(matmul(2048, 1024, 128), pop);
  auto batched = simulate_in_child(
      "hardware: {preset: tpu-v3}\nworkload: {model: matmul, batch: 4, m: 512, k: 64, n: 64}\n", pop);
  ASSERT_FALSE(s.contains("error") || batched.contains("error")) << s.dump() << batched.dump();
  EXPECT_EQ(s["ops"][0]["cycles"].get<int64_t>(), 16766);  // the MXU's own
  EXPECT_EQ(s["ops"][0]["mxu"]["result_vectors"].get<int64_t>(), 256);
  expect_time_in_cycles(s["ops"][0], 17278);
  EXPECT_EQ(batched["ops"][0]["mxu"]["result_vectors"].get<int64_t>(), 256);
  expect_time_in_cycles(batched["ops"][0], 2942);
  // The epilogue follows the pops instead of overlapping the MXU: the MLP layer of EpilogueRunsOnTheVpuAlongside-
  // TheMxu (33,150 MXU cycles, 49,152 of epilogue) pops 1024 / 8 x 4096 / 128 = 4096 vectors:
  // 33,150 + 2 x 4096 + 49,152 = 90,494 cycles, where the overlapped epilogue took 51,223.
  auto mlp = simulate_in_child(
      "hardware: {preset: tpu-v3}\nworkload: {model: mlp, batch: 1024, input: 8, hidden: 4096, layers: 1, classes: "
      "16, activation: gelu}\n",
      pop);
  ASSERT_FALSE(mlp.contains("error")) << mlp.dump();
  const auto& fused = op_with_member(mlp, "fc0.gelu");
  EXPECT_EQ(fused["mxu"]["epilogue_vpu_cycles"].get<int64_t>(), 49152);
  expect_time_in_cycles(fused, 90494);
  // The preset carries it.
  auto v3 = simulate_in_child(matmul(2048, 1024, 128), {"hardware.chip.tensorcores=1", "hardware.chip.mxu.count=1"});
  EXPECT_EQ(v3["ops"][0]["mxu"]["result_pop_cycles"].get<int64_t>(), 512);
}

TEST(ChipTest, EveryTpuPresetFeedsItsMxusThroughTheVectorRegisters) {
  // Every TPU since v2 pushes an MXU's weights through the port its rows use (two bf16 weight rows per cycle:
  // P = R / 2), streams at most 1024 rows per fold and pops its results through the vector unit (2 cycles per
  // 8 x 128 vector), the values fitted on v3 (above). On one MXU with an HBM that takes no time, by hand:
  //   128 x 128 arrays, 2048 x 1024 x 128: 2 chunks x 8 folds of 1024 rows, 128 + 1024 + 15 x (1024 + 64) + 254 =
  //     17,726 MXU cycles, then 2 x 1024 / 8 x 128 / 128 = 256 result vectors: 512 pop cycles, 18,238 in all;
  //   v6e's 256 x 256 arrays, 2048 x 1024 x 256: 2 chunks x 4 folds, 256 + 1024 + 7 x (1024 + 128) + 510 = 9,854
  //     MXU cycles, 2048 / 8 x 256 / 128 = 512 vectors: 1,024 pop cycles, 10,878 in all.
  // (Without the data path these would be 16,766 and 8,958: the array alone.) The op's time is that within a few
  // cycles: each tile group's load and write end on a clock edge.
  for (auto [preset, n, mxu, pops] : std::vector<std::tuple<std::string, int64_t, int64_t, int64_t>>{
           {"tpu-v2", 128, 17726, 512}, {"tpu-v3", 128, 17726, 512}, {"tpu-v4", 128, 17726, 512},
           {"tpu-v5e", 128, 17726, 512}, {"tpu-v5p", 128, 17726, 512}, {"tpu-v6e", 256, 9854, 1024}}) {
    std::vector<std::string> sets = mxu_only();
    sets.resize(sets.size() - 2);  // keep the preset's weight_push and result_pop
    auto s = simulate_in_child(matmul(2048, 1024, n, "bf16", preset), sets);
    ASSERT_FALSE(s.contains("error")) << preset << s.dump();
    const auto& op = s["ops"][0];
    EXPECT_EQ(op["cycles"].get<int64_t>(), mxu) << preset;
    EXPECT_EQ(op["mxu"]["result_pop_cycles"].get<int64_t>(), pops) << preset;
    const double cycles = op_time(op) * s["clock_hz"].get<double>();
    EXPECT_GE(cycles, static_cast<double>(mxu + pops) - 1e-3) << preset;
    EXPECT_LE(cycles, static_cast<double>(mxu + pops) + 6.001) << preset;
  }
}

TEST(ChipTest, FoldsShareTheChipsMxus) {
  // tpu-v3: 2 cores x 2 MXUs; 1024^3 splits N over the cores, 32 folds per core, 16 per MXU, each 2R + C + M - 2.
  auto s = simulate_in_child(matmul(1024, 1024, 1024),
                             {"hardware.chip.mxu.weight_double_buffer=false", "hardware.chip.hbm.bandwidth=1000TB/s",
                              "hardware.chip.hbm.latency=0ns", "hardware.chip.hbm.cas=0ns",
                              "hardware.chip.hbm.refresh_interval=0s", "hardware.chip.hbm.activate_interval=0ns",
                              "hardware.chip.hbm.faw=0ns", "hardware.chip.hbm.row_cycle=0ns",
                              "hardware.chip.hbm.write_batch=0", "hardware.chip.mxu.result_pop=0"});
  ASSERT_FALSE(s.contains("error")) << s.dump();
  const auto& op = s["ops"][0];
  EXPECT_EQ(op["mxu"]["folds_per_mxu"].get<int64_t>(), 16);
  expect_time_in_cycles(op, 16 * (2 * 128 + 128 + 1024 - 2));
}

TEST(ChipTest, EpilogueRunsOnTheVpuAlongsideTheMxu) {
  // One MLP layer, 1024 x 8 @ 8 x 4096, fused with its bias add and GELU (output fusion). MXU: 32 folds of 1024
  // rows: 128 + 1024 + 31 x 1024 + 254 = 33,150 cycles. VPU: 4 Mi elements = 4096 vectors of 1024, each 1 (bias)
  // + 7 (GELU) simple operations and one tanh (4 cycles): 49,152 cycles. In 16 tile groups the VPU finishes group
  // g - 1 while the MXU computes g: 2071 (MXU, group 0) + 15 x 3072 (VPU) + 3072 (the last epilogue) = 51,223.
  std::string mlp =
      "hardware: {preset: tpu-v3}\nworkload: {model: mlp, batch: 1024, input: 8, hidden: 4096, layers: 1, classes: "
      "16, activation: gelu}\n";
  auto s = simulate_in_child(mlp, mxu_only());
  auto none = simulate_in_child(mlp, mxu_only({"run.fusion=none"}));
  ASSERT_FALSE(s.contains("error") || none.contains("error")) << s.dump() << none.dump();
  const auto& op = op_with_member(s, "fc0.gelu");
  EXPECT_EQ(op["unit"], "MXU");
  EXPECT_EQ(op["fusion"], "output");
  EXPECT_EQ(op["cycles"].get<int64_t>(), 33150);
  EXPECT_EQ(op["mxu"]["epilogue_vpu_cycles"].get<int64_t>(), 49152);
  expect_time_in_cycles(op, 51223);
  // Unfused, the matmul alone takes its MXU time.
  expect_time_in_cycles(op_with_member(none, "fc0"), 33150);
}

TEST(ChipTest, GemmTooLargeForVmemReReadsOperandsPerTile) {
  // 2048^3 bf16 on one core in 2 MiB of VMEM: the best tile is 512 x 256 (or 256 x 512), 2048 (512 + 256) + 4 x
  // 512 x 256 = 2 MiB. A (8 MiB) is read once per column of tiles (8) and B (8 MiB) once per row (4): 96 MiB.
  auto fits = simulate_in_child(matmul(2048, 2048, 2048),
                                {"hardware.chip.tensorcores=1", "hardware.chip.vmem.capacity=64MiB"});
  auto spills = simulate_in_child(matmul(2048, 2048, 2048),
                                  {"hardware.chip.tensorcores=1", "hardware.chip.vmem.capacity=2MiB"});
  ASSERT_FALSE(fits.contains("error") || spills.contains("error"));
  EXPECT_DOUBLE_EQ(spills["ops"][0]["hbm_read"].get<double>(), 96.0 * (1 << 20));
  EXPECT_EQ(spills["ops"][0]["mxu"]["m_tile"].get<int64_t>() * spills["ops"][0]["mxu"]["n_tile"].get<int64_t>(),
            512 * 256);
  EXPECT_DOUBLE_EQ(fits["ops"][0]["hbm_read"].get<double>(), 16.0 * (1 << 20));
  EXPECT_EQ(spills["ops"][0]["hbm_pattern"], "strided");  // B's tiles are runs of 256 columns
  EXPECT_EQ(fits["ops"][0]["hbm_pattern"], "stream");
}

TEST(ChipTest, VmemTooSmallForAnyTileIsAnError) {
  auto s = simulate_in_child(matmul(1024, 1024, 1024), {"hardware.chip.vmem.capacity=4KiB"});
  ASSERT_TRUE(s.contains("error")) << s.dump();
  EXPECT_EQ(s["error"], "PODSIM-CFG-006");
  std::string msg = s["message"];
  EXPECT_NE(msg.find("hardware.chip.vmem.capacity"), std::string::npos) << msg;
  EXPECT_NE(msg.find("8.25 KiB"), std::string::npos) << msg;  // 8 x 128 outputs, 8-deep K slices: 8448 bytes
}

TEST(ChipTest, SlowHbmMakesAGemmMemoryBound) {
  // 8 x 2048 x 2048 on one core fits VMEM: it reads A (32 KiB) and B (8 MiB) once and writes C (32 KiB), in 16
  // tile groups. At 20 GB/s over 32 channels a 64 B burst takes 102.4 ns: each group loads 16.06 rows of 16 bursts
  // per channel (26.3 us, x 3.9 / 3.55 for refresh = 28.9 us) and waits 514 ns of latency before the next group's
  // load is issued: 16 x 29.4 us = 470.6 us. Each group also writes 2 KiB on two channels (16 bursts + two 26 ns
  // turnarounds, 1.86 us) that the next loads queue behind on those channels: at most 16 x 1.86 us more.
  auto fast = simulate_in_child(matmul(8, 2048, 2048), {"hardware.chip.tensorcores=1"});
  auto slow =
      simulate_in_child(matmul(8, 2048, 2048), {"hardware.chip.tensorcores=1", "hardware.chip.hbm.bandwidth=20GB/s"});
  ASSERT_FALSE(fast.contains("error") || slow.contains("error"));
  const auto& f = fast["ops"][0];
  const auto& s = slow["ops"][0];
  EXPECT_EQ(f["cycles"], s["cycles"]);  // same MXU work
  const double stretch = 3900.0 / 3550.0;
  double load = 514.0 / 32 * 16 * 102.4e-9 * stretch + 514e-9;
  double write = (16 * 102.4e-9 + 2 * 26e-9) * stretch;
  EXPECT_GE(op_time(s), 16 * load);
  EXPECT_LE(op_time(s), 16 * (load + write));
  EXPECT_GT(op_time(s), 20 * op_time(f));
  EXPECT_GT(slow["busy_fraction"]["hbm"].get<double>(), 0.9);
}

TEST(ChipTest, StepThatDoesNotFitInHbmIsAnErrorNamingWhatAndHowMuch) {
  auto s = simulate_in_child(matmul(65536, 65536, 65536, "fp32"));
  ASSERT_TRUE(s.contains("error")) << s.dump();
  EXPECT_EQ(s["error"], "PODSIM-MEM-001");
  std::string msg = s["message"];
  EXPECT_NE(msg.find("does not fit in HBM"), std::string::npos) << msg;
  EXPECT_NE(msg.find("48.00 GiB"), std::string::npos) << msg;        // the peak
  EXPECT_NE(msg.find("16.00 GiB more than the 32.00 GiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'a' 16.00 GiB (input)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("run.allow_oom"), std::string::npos) << msg;
}

TEST(ChipTest, AllowOomReportsAndContinues) {
  auto s = simulate_in_child(matmul(65536, 65536, 65536, "fp32"), {"run.allow_oom=true"});
  ASSERT_FALSE(s.contains("error")) << s.dump();
  EXPECT_FALSE(s["memory"]["fits"].get<bool>());
  EXPECT_DOUBLE_EQ(s["peak_memory_bytes"].get<double>(), 3.0 * 65536.0 * 65536 * 4);
}

// One chip executing real ops: MXU cycles through the whole stack, the roofline, tiling traffic, memory limits.
#include <gtest/gtest.h>

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

int64_t classic(int64_t m, int64_t k, int64_t n, int64_t R = 128, int64_t C = 128) {
  return ((k + R - 1) / R) * ((n + C - 1) / C) * (2 * R + C + m - 2);
}

}  // namespace

TEST(ChipTest, MatmulCyclesEqualClassicFormulaWithoutDoubleBuffering) {
  for (auto [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{256, 384, 640}, {1, 1, 1}, {300, 129, 200}}) {
    auto s = simulate_in_child(matmul(m, k, n), {"hardware.chip.mxu.weight_double_buffer=false",
                                                 "hardware.chip.tensorcores=1", "hardware.chip.mxu.count=1"});
    ASSERT_FALSE(s.contains("error")) << s.dump();
    EXPECT_EQ(s["ops"][0]["cycles"].get<int64_t>(), classic(m, k, n)) << m << "x" << k << "x" << n;
  }
}

TEST(ChipTest, MatmulFoldsShareTheChipsMxus) {
  // tpu-v3: 2 cores x 2 MXUs. 1024 x 1024 x 1024: 64 folds, 16 per MXU.
  auto s = simulate_in_child(matmul(1024, 1024, 1024), {"hardware.chip.mxu.weight_double_buffer=false"});
  ASSERT_FALSE(s.contains("error")) << s.dump();
  const auto& op = s["ops"][0];
  EXPECT_EQ(op["mxu"]["folds"].get<int64_t>(), 64);
  EXPECT_EQ(op["mxu"]["folds_per_mxu"].get<int64_t>(), 16);
  EXPECT_EQ(op["cycles"].get<int64_t>(), 16 * (2 * 128 + 128 + 1024 - 2));
}

TEST(ChipTest, DoubleBufferingReportsFewerCycles) {
  auto off = simulate_in_child(matmul(512, 2048, 2048), {"hardware.chip.mxu.weight_double_buffer=false"});
  auto on = simulate_in_child(matmul(512, 2048, 2048));
  ASSERT_FALSE(off.contains("error") || on.contains("error"));
  EXPECT_LT(on["ops"][0]["cycles"].get<int64_t>(), off["ops"][0]["cycles"].get<int64_t>());
  EXPECT_LT(on["step_time_s"].get<double>(), off["step_time_s"].get<double>());
}

TEST(ChipTest, ComputeBoundGemmRunsAtMxuSpeed) {
  auto s = simulate_in_child(matmul(4096, 4096, 4096));
  ASSERT_FALSE(s.contains("error")) << s.dump();
  const auto& op = s["ops"][0];
  double compute = op["cycles"].get<double>() / s["clock_hz"].get<double>();
  // Only the first load and the last write are exposed.
  EXPECT_LT(op_time(op) / compute, 1.05);
  EXPECT_GT(s["mfu"].get<double>(), 0.85);
  EXPECT_LT(s["busy_fraction"]["hbm"].get<double>(), 0.8);
}

TEST(ChipTest, GemmTooLargeForVmemMovesMoreHbmBytes) {
  auto fits = simulate_in_child(matmul(2048, 2048, 2048), {"hardware.chip.vmem.capacity=128MiB"});
  auto spills = simulate_in_child(matmul(2048, 2048, 2048), {"hardware.chip.vmem.capacity=2MiB"});
  ASSERT_FALSE(fits.contains("error") || spills.contains("error"));
  EXPECT_GT(spills["ops"][0]["bytes"].get<double>(), 1.5 * fits["ops"][0]["bytes"].get<double>());
  EXPECT_LT(spills["ops"][0]["mxu"]["n_tile"].get<int64_t>() * spills["ops"][0]["mxu"]["m_tile"].get<int64_t>(),
            fits["ops"][0]["mxu"]["n_tile"].get<int64_t>() * fits["ops"][0]["mxu"]["m_tile"].get<int64_t>());
}

TEST(ChipTest, SlowHbmMakesTheSameGemmMemoryBound) {
  auto fast = simulate_in_child(matmul(256, 8192, 8192));
  auto slow = simulate_in_child(matmul(256, 8192, 8192), {"hardware.chip.hbm.bandwidth=20GB/s"});
  ASSERT_FALSE(fast.contains("error") || slow.contains("error"));
  const auto& f = fast["ops"][0];
  const auto& s = slow["ops"][0];
  EXPECT_EQ(f["cycles"], s["cycles"]);  // same MXU work
  // Slow HBM: the op lasts as long as its bytes take, far beyond its compute.
  double bytes_time = s["bytes"].get<double>() / 20e9;
  EXPECT_NEAR(op_time(s) / bytes_time, 1.0, 0.1);
  EXPECT_GT(op_time(s), 3 * op_time(f));
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

// The HBM microbenchmark (workload.model: memory) on one HBM2 stack (configs/validation/hbm2_stack.yaml), against
// the hand count of the model and the two DRAM simulators' measurements (docs/validation.md): within their band
// +-5 points for sequential reads, random reads and 50/50 reads/writes, idle latencies within 20 %.
#include <gtest/gtest.h>
#include "tests/test_paths.h"

#include <fstream>
#include <sstream>

#include "tests/model/sim_util.h"

using podsim::test::simulate_in_child;

namespace {

std::string stack_yaml() {
  std::ifstream f(std::string(PODSIM_SOURCE_DIR) + "/configs/validation/hbm2_stack.yaml");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

nlohmann::json bench(const std::string& pattern) {
  auto s = simulate_in_child(stack_yaml(), {"workload.pattern=" + pattern, "workload.bytes=16MiB"});
  EXPECT_FALSE(s.contains("error")) << s.dump();
  return s.value("memory_benchmark", nlohmann::json::object());
}

constexpr double kStretch = 3900.0 / 3550.0;  // refresh

}  // namespace

TEST(MemoryBenchmarkTest, SequentialReadsRandomReadsAndCopiesLandInTheSimulatorsBand) {
  struct Case {
    const char* pattern;
    double hand, dramsim3, ramulator;
  };
  // By hand (docs/model.md, HBM): a stream is data-bound, 1 / stretch; 64 B random reads wait tFAW / 4 = 7.5 ns per
  // activate for 2 ns of data; a copy's writes add (13 + 13) ns per 8 bursts: 2 KiB per (32 + 32 + 52) ns.
  for (const Case& c : {Case{"read", 1 / kStretch, 0.92, 0.87}, Case{"gather", 2 / 7.5 / kStretch, 0.24, 0.28},
                        Case{"copy", 2048 / 116e-9 / kStretch / 32e9, 0.65, 0.41}}) {
    auto m = bench(c.pattern);
    double eff = m["efficiency"].get<double>();
    EXPECT_NEAR(eff, c.hand, 0.005) << c.pattern;  // the stream op also pays its first latency
    EXPECT_GE(eff, std::min(c.dramsim3, c.ramulator) - 0.05) << c.pattern;
    EXPECT_LE(eff, std::max(c.dramsim3, c.ramulator) + 0.05) << c.pattern;
    EXPECT_DOUBLE_EQ(m["hbm_bytes"].get<double>(), (std::string(c.pattern) == "copy" ? 2 : 1) * 16.0 * (1 << 20));
  }
}

TEST(MemoryBenchmarkTest, IdleLatenciesWithinTwentyPercent) {
  auto m = bench("read");
  // Row hit: 4 ns controller + tCL 14 ns + a 2 ns burst (x refresh stretch); row miss adds tRCD 14 ns. The op's
  // end rounds up to the 940 MHz clock.
  double hit = m["latency_row_hit_s"].get<double>(), miss = m["latency_row_miss_s"].get<double>();
  EXPECT_NEAR(hit, 18e-9 + 2e-9 * kStretch, 1.07e-9);
  EXPECT_NEAR(miss, 32e-9 + 2e-9 * kStretch, 1.07e-9);
  EXPECT_NEAR(hit / 20e-9, 1.0, 0.2);   // DRAM simulators: ~20 ns
  EXPECT_NEAR(miss / 39e-9, 1.0, 0.2);  // ~39 ns
}

TEST(MemoryBenchmarkTest, WritesAloneStreamLikeReads) {
  auto r = bench("read"), w = bench("write");
  EXPECT_NEAR(w["efficiency"].get<double>(), r["efficiency"].get<double>(), 0.005);  // reads expose a latency per group
}

// `podsim sweep plot`'s axis labels: a name a person reads and the unit the values are drawn in, against
// hand-written expectations for the default figures, other figures by their suffix, and swept parameters by the
// unit they are declared with.
#include <gtest/gtest.h>

#include "sim/sweep/plot_axis.h"

using podsim::axis_scale;

namespace {

void expect(const std::string& column, std::vector<double> values, const std::string& label, double factor) {
  const podsim::AxisScale a = axis_scale(column, values);
  EXPECT_EQ(a.label, label) << column;
  EXPECT_DOUBLE_EQ(a.factor, factor) << column;
}

}  // namespace

TEST(SweepPlotAxisTest, DefaultFiguresInUnitsAndPercent) {
  expect("step_time_s", {0.0021, 0.0035}, "step time (ms)", 1e3);
  expect("step_time_s", {2.5, 0.4}, "step time (s)", 1);
  expect("step_time_s", {3e-6}, "step time (us)", 1e6);
  expect("mfu", {0.41}, "MFU (%)", 100);
  expect("hbm_busy", {0.9}, "HBM busy (%)", 100);
  expect("exposed_comm_fraction", {0.2}, "exposed communication (%)", 100);
  expect("bubble_fraction", {0.3}, "pipeline bubble (%)", 100);
  expect("peak_memory_bytes", {3.0 * (1 << 30)}, "peak memory (GiB)", 1.0 / (1 << 30));
  expect("peak_memory_bytes", {300.0 * (1 << 20)}, "peak memory (MiB)", 1.0 / (1 << 20));
  expect("chips", {16, 1024}, "chips", 1);
  expect("wall_s", {12}, "wall time of the run (s)", 1);
  EXPECT_EQ(axis_scale("step_time_s", {0.002}).name, "step time");
}

TEST(SweepPlotAxisTest, OtherFiguresBySuffix) {
  expect("algorithm_bandwidth_Bps", {3.1e10}, "algorithm bandwidth (GB/s)", 1e-9);
  expect("comm_time_s", {4e-5}, "comm time (us)", 1e6);
  expect("weights_bytes", {2048}, "weights (KiB)", 1.0 / 1024);
  expect("stage0_mxu_busy", {0.5}, "stage0 mxu busy (%)", 100);
  expect("tokens", {512}, "tokens", 1);
}

TEST(SweepPlotAxisTest, ParametersByTheirDeclaredUnit) {
  expect("hardware.chip.clock", {9.4e8, 1.05e9}, "hardware.chip.clock (GHz)", 1e-9);
  expect("hardware.chip.clock", {9.4e8}, "hardware.chip.clock (MHz)", 1e-6);
  expect("hardware.ici.link_bandwidth", {4.5e10}, "hardware.ici.link_bandwidth (GB/s)", 1e-9);
  expect("hardware.ici.hop_latency", {1e-6}, "hardware.ici.hop_latency (us)", 1e6);
  expect("workload.bytes", {4.0 * (1 << 20), 64.0 * (1 << 20)}, "workload.bytes (MiB)", 1.0 / (1 << 20));  // a plugin's
  expect("workload.batch", {64, 256}, "workload.batch", 1);
  expect("strategy.micro_batches", {4}, "strategy.micro_batches", 1);
  expect("no.such.parameter", {1}, "no.such.parameter", 1);
}

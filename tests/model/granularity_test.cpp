// hardware.ici.max_chunks (docs/model.md, "Simulation granularity") on the simulated torus: a collective whose
// transfers all fit in max_chunks chunks takes exactly the time it took without the cap; a large one moves in
// fewer, larger chunks and its time stays within the bound docs/model.md states (1.5 %) of the exact mode's.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/model/sim_util.h"

using podsim::test::simulate_in_child;

namespace {

// The 70B module's FSDP group: a pod of 4 x 8 x 4 TPU v5p chips without wrap-around on z.
std::string collective(const std::string& op, const std::string& bytes) {
  return "hardware:\n  preset: tpu-v5p\n  pod: {dims: [4, 8, 4], wrap: [true, true, false]}\n"
         "workload:\n  model: collective\n  op: " + op + "\n  bytes: " + bytes + "\nrun: {trace: {format: \"off\"}}\n";
}

double step(const std::string& op, const std::string& bytes, const std::string& max_chunks) {
  auto s = simulate_in_child(collective(op, bytes), {"hardware.ici.max_chunks=" + max_chunks});
  EXPECT_FALSE(s.contains("error")) << s.dump();
  return s.value("step_time_s", 0.0);
}

}  // namespace

// A 1 MiB all-gather: pieces of 1/6 MiB, at most 32 of them (5.3 MiB) per ring step, under 8 chunks of 1 MiB.
TEST(GranularityTest, SmallCollectiveTimeIsIdenticalWithAndWithoutTheCap) {
  const double exact = step("all_gather", "1MiB", "0");
  EXPECT_GT(exact, 0);
  EXPECT_EQ(step("all_gather", "1MiB", "8"), exact);
}

// A 256 MiB all-reduce: its first phases' steps of 32 pieces of 1/3 MiB (10.7 MiB) move in 8 chunks instead of 32,
// so the next phase starts later by part of a chunk. The largest difference measured over all-gathers,
// reduce-scatters and all-reduces of 1 MiB to 1 GiB on rings and 2-D and 3-D groups (docs/model.md).
TEST(GranularityTest, LargeCollectiveTimeIsWithinTheStatedBound) {
  const double exact = step("all_reduce", "256MiB", "0"), capped = step("all_reduce", "256MiB", "8");
  EXPECT_NE(capped, exact);  // the cap applies
  EXPECT_LT(std::fabs(capped / exact - 1), 0.015) << capped << " vs " << exact;
}

// Shipped experiments run as a user runs them: default settings, trace on; exit 0 and a summary.json.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

void run_as_shipped(const std::string& rel) {
  std::string out = test_dir() + "/" + std::filesystem::path(rel).stem().string();
  auto r = run_podsim({"run", source_dir() + "/" + rel, "--out", out});
  ASSERT_EQ(r.code, 0) << rel << "\n" << r.err;
  ASSERT_TRUE(exists(out + "/summary.json")) << rel;
  auto s = nlohmann::json::parse(read_file(out + "/summary.json"));
  EXPECT_GT(s["step_time_s"].get<double>(), 0) << rel;
  EXPECT_TRUE(exists(out + "/trace.pftrace")) << rel;
}

}  // namespace

// Every collective example with the trace on (the default): flows from sends to receives must be unique.
TEST(ShippedTest, CollectiveExamplesRunWithTheTraceOn) {
  run_as_shipped("configs/examples/allreduce_16x16.yaml");
  run_as_shipped("configs/examples/alltoall_8x8.yaml");
}

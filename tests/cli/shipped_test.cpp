// Quick tier: every shipped experiment runs as a user runs it (default settings, trace on) and succeeds; one too
// large for the quick budget runs with its reduced-size overrides (tests/cli/shipped.h) and fails if it has none.
#include "tests/cli/shipped.h"

using namespace podsim::test;

namespace {

class ShippedTest : public ::testing::TestWithParam<Shipped> {};

}  // namespace

TEST_P(ShippedTest, RunsAsShippedOrReduced) {
  const Shipped& f = GetParam();
  auto it = reduced_sizes().find(f.path);
  std::vector<std::string> sets = it == reduced_sizes().end() ? std::vector<std::string>{} : it->second;
  run_shipped(f.path, sets, test_dir() + "/run", true);
}

INSTANTIATE_TEST_SUITE_P(Configs, ShippedTest, ::testing::ValuesIn(shipped_experiments()),
                         [](const ::testing::TestParamInfo<Shipped>& i) { return i.param.name; });

// Every entry of the reduced-size table names a shipped file (a renamed file would otherwise run at full size).
TEST(ShippedTableTest, ReducedEntriesNameShippedFiles) {
  auto files = shipped_experiments();
  EXPECT_GE(files.size(), 6u);  // quickstart and the five examples at least
  for (const auto& [path, sets] : reduced_sizes()) {
    bool found = std::any_of(files.begin(), files.end(), [&](const Shipped& s) { return s.path == path; });
    EXPECT_TRUE(found) << path << " has a reduced-size entry in tests/cli/shipped.h but is not shipped";
    EXPECT_FALSE(sets.empty()) << path;
  }
}

// The sweep files plan: every run they expand to is a valid experiment (the long tier runs them).
TEST(ShippedSweeps, EverySweepPlans) {
  auto sweeps = shipped_sweeps();
  if (sweeps.empty()) GTEST_SKIP() << "no files under configs/sweeps/";
  for (const Shipped& f : sweeps) {
    auto r = run_podsim({"sweep", "plan", source_dir() + "/" + f.path});
    EXPECT_EQ(r.code, 0) << f.path << "\n" << r.err;
    EXPECT_NE(r.out.find("every one valid"), std::string::npos) << f.path << "\n" << r.out;
  }
}

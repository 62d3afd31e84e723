// Long tier: the shipped experiments that the quick tier runs reduced or only plans (tests/cli/shipped.h) run at full
// size, as shipped (default settings, trace on), and every shipped sweep runs as shipped (`podsim sweep FILE`):
// every run done, each with its summary.json.
#include <filesystem>

#include "tests/cli/shipped.h"

using namespace podsim::test;

namespace {

class ShippedFullSizeTest : public ::testing::TestWithParam<Shipped> {};

std::vector<Shipped> reduced_in_quick_tier() {
  std::vector<Shipped> out;
  for (const Shipped& s : shipped_experiments())
    if (reduced_sizes().count(s.path) || planned_in_quick_tier().count(s.path)) out.push_back(s);
  return out;
}

}  // namespace

TEST_P(ShippedFullSizeTest, RunsAsShipped) { run_shipped(GetParam().path, {}, test_dir() + "/run", false); }

INSTANTIATE_TEST_SUITE_P(Configs, ShippedFullSizeTest, ::testing::ValuesIn(reduced_in_quick_tier()),
                         [](const ::testing::TestParamInfo<Shipped>& i) { return i.param.name; });

namespace {

class ShippedSweepTest : public ::testing::TestWithParam<Shipped> {};

}  // namespace

TEST_P(ShippedSweepTest, RunsAsShipped) {
  const std::string out = test_dir() + "/sweep";
  auto r = run_podsim({"sweep", source_dir() + "/" + GetParam().path, "--out", out, "-j", "2"});
  ASSERT_EQ(r.code, 0) << GetParam().path << "\n" << r.out << r.err;
  EXPECT_NE((r.out + r.err).find(" 0 failed"), std::string::npos) << r.out << r.err;
  EXPECT_TRUE(exists(out + "/results.db"));
  int runs = 0;
  for (const auto& e : std::filesystem::directory_iterator(out + "/runs")) {
    ++runs;
    EXPECT_TRUE(exists(e.path().string() + "/summary.json")) << e.path();
  }
  EXPECT_GT(runs, 0);
}

INSTANTIATE_TEST_SUITE_P(Sweeps, ShippedSweepTest, ::testing::ValuesIn(shipped_sweeps()),
                         [](const ::testing::TestParamInfo<Shipped>& i) { return i.param.name; });

namespace {

class ShippedSearchFullTest : public ::testing::TestWithParam<Shipped> {};

}  // namespace

// Each search as shipped (docs/search.md gives their figures).
TEST_P(ShippedSearchFullTest, SearchesAsShipped) {
  const std::string out = test_dir() + "/search";
  auto r = run_podsim({"search", source_dir() + "/" + GetParam().path, "--out", out, "-j", "2"});
  ASSERT_EQ(r.code, 0) << GetParam().path << "\n" << r.out << r.err;
  EXPECT_TRUE(exists(out + "/best.yaml"));
  EXPECT_TRUE(exists(out + "/ranking.tsv"));
}

INSTANTIATE_TEST_SUITE_P(Searches, ShippedSearchFullTest, ::testing::ValuesIn(shipped_searches()),
                         [](const ::testing::TestParamInfo<Shipped>& i) { return i.param.name; });

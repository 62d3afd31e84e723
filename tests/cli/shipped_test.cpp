// Quick tier: every shipped experiment runs as a user runs it (default settings, trace on) and succeeds; one too
// large for the quick budget runs with its reduced-size overrides (tests/cli/shipped.h) and fails if it has none.
#include "tests/cli/shipped.h"

using namespace podsim::test;

namespace {

class ShippedTest : public ::testing::TestWithParam<Shipped> {};

}  // namespace

TEST_P(ShippedTest, RunsAsShippedOrReduced) {
  const Shipped& f = GetParam();
  if (planned_in_quick_tier().count(f.path)) {  // planned as shipped; the long tier runs it
    const std::string out = test_dir() + "/plan";
    CliResult r = run_podsim({"run", source_dir() + "/" + f.path, "--memory-only", "--out", out});
    ASSERT_EQ(r.code, 0) << f.path << "\n" << r.err;
    auto s = nlohmann::json::parse(read_file(out + "/summary.json"));
    // It fits, unless the file says it ships over capacity (run.allow_oom, with its reason beside it).
    const bool declared = read_file(source_dir() + "/" + f.path).find("allow_oom: true") != std::string::npos;
    EXPECT_TRUE(s["memory"]["fits"].get<bool>() || declared) << f.path;
    EXPECT_GT(s["memory"]["peak_bytes"].get<double>(), 0) << f.path;
    return;
  }
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
    EXPECT_FALSE(planned_in_quick_tier().count(path)) << path << " is both reduced and planned only";
  }
  for (const std::string& path : planned_in_quick_tier()) {
    bool found = std::any_of(files.begin(), files.end(), [&](const Shipped& s) { return s.path == path; });
    EXPECT_TRUE(found) << path << " is planned only in tests/cli/shipped.h but is not shipped";
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

namespace {

class ShippedSearchTest : public ::testing::TestWithParam<Shipped> {};

}  // namespace

// Each search runs reduced (search_reduced_sizes()), and the best candidate it writes runs as an experiment.
TEST_P(ShippedSearchTest, SearchesReducedAndBestRuns) {
  const Shipped& f = GetParam();
  auto it = search_reduced_sizes().find(f.path);
  ASSERT_NE(it, search_reduced_sizes().end()) << f.path << " needs an entry in search_reduced_sizes() (tests/cli/shipped.h)";
  std::vector<std::string> args = {"search", source_dir() + "/" + f.path, "--out", test_dir() + "/s", "-j", "2",
                                   "--no-plot"};
  for (const std::string& s : it->second) args.insert(args.end(), {"--set", s});
  auto r = run_podsim(args);
  ASSERT_EQ(r.code, 0) << f.path << "\n" << r.out << r.err;
  EXPECT_TRUE(exists(test_dir() + "/s/ranking.tsv"));
  ASSERT_TRUE(exists(test_dir() + "/s/best.yaml"));
  // best.yaml is the shipped model (the reduction is --set, not part of the file): run it reduced the same way.
  std::vector<std::string> run = {"run", test_dir() + "/s/best.yaml", "--out", test_dir() + "/best", "-q",
                                  "--trace-format", "off"};
  for (const std::string& s : it->second)
    if (s.rfind("search.", 0) != 0) run.insert(run.end(), {"--set", s});
  auto b = run_podsim(run);
  EXPECT_EQ(b.code, 0) << b.err;
}

INSTANTIATE_TEST_SUITE_P(Searches, ShippedSearchTest, ::testing::ValuesIn(shipped_searches()),
                         [](const ::testing::TestParamInfo<Shipped>& i) { return i.param.name; });

// The generated reference pages stay in sync with the declarations they come from: docs/config.md with the
// parameter declarations, docs/errors.md with the error catalogue, docs/validation.md with what tools/validate
// measures. Regenerate with tools/validate and
//   build/bin/podsim docs config > docs/config.md && build/bin/podsim docs errors > docs/errors.md
#include <gtest/gtest.h>
#include "tests/test_paths.h"

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

TEST(DocsTest, ConfigReferenceIsCurrent) {
  auto r = run_podsim({"docs", "config"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, read_file(source_dir() + "/docs/config.md"))
      << "docs/config.md is stale: regenerate it with `podsim docs config > docs/config.md`";
  for (const char* key : {"hardware.chip.mxu.weight_double_buffer", "hardware.pod.dims", "workload.m", "run.allow_oom",
                          "run.trace.detail", "workload.algorithm"})
    EXPECT_NE(r.out.find(std::string("`") + key + "`"), std::string::npos) << key;
}

TEST(DocsTest, ErrorCatalogueIsCurrent) {
  auto r = run_podsim({"docs", "errors"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, read_file(source_dir() + "/docs/errors.md"))
      << "docs/errors.md is stale: regenerate it with `podsim docs errors > docs/errors.md`";
  EXPECT_NE(r.out.find("`PODSIM-SIM-001`"), std::string::npos);
}

// docs/trace.md's sample figures are the quickstart's as this build writes it (the trace is deterministic), so the
// page cannot go stale: the test prints the sentence the page must have.
TEST(DocsTest, TraceSampleIsCurrent) {
  auto r = run_podsim({"run", source_dir() + "/configs/quickstart.yaml", "--out", "qs", "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string host = read_file(test_dir() + "/qs/host.json");
  auto count = [&](const std::string& key) {
    std::smatch m;
    std::regex re("\"" + key + "\": ([0-9]+)");
    return std::regex_search(host, m, re) ? std::stoll(m[1]) : -1LL;
  };
  auto grouped = [](long long v) {
    std::string s = std::to_string(v);
    for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
    return s;
  };
  const std::string want = "writes " + std::to_string((count("bytes") + 512) / 1024) + " KiB: " +
                           grouped(count("slices")) + " slices, " + grouped(count("counter_values")) +
                           " counter values, " + grouped(count("tracks")) + " tracks";
  std::string page = read_file(source_dir() + "/docs/trace.md");
  for (char& c : page)
    if (c == '\n') c = ' ';
  EXPECT_NE(page.find(want), std::string::npos) << "docs/trace.md should say the quickstart " << want;
}

// docs/report.md's sample (its first code block, lines elided with "...") is what `podsim report` prints for the
// quickstart as this build runs it: every line of the sample, in order, is a line of the report.
TEST(DocsTest, ReportSampleIsCurrent) {
  ASSERT_EQ(run_podsim({"run", source_dir() + "/configs/quickstart.yaml", "--out", "qs", "-q"}).code, 0);
  auto r = run_podsim({"report", "qs", "--no-plots"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream page(read_file(source_dir() + "/docs/report.md"));
  std::vector<std::string> sample;
  bool in_block = false;
  for (std::string line; std::getline(page, line);) {
    if (line.rfind("```", 0) == 0) {
      if (in_block) break;
      in_block = true;
      continue;
    }
    if (in_block && line.find("...") == std::string::npos) sample.push_back(line);
  }
  ASSERT_GT(sample.size(), 10u) << "docs/report.md has no sample block";
  std::istringstream out(r.out);
  size_t next = 0;
  for (std::string line; next < sample.size() && std::getline(out, line);)
    if (line == sample[next]) ++next;
  EXPECT_EQ(next, sample.size()) << "docs/report.md's sample differs from `podsim report` of the quickstart at: "
                                 << (next < sample.size() ? sample[next] : "") << "\nthe report:\n" << r.out;
}

// The documentation cites what it relies on within the repository or by a full reference: a relative path (a
// Markdown link or a "../" path outside code blocks) must name a file inside the checkout.
TEST(DocsTest, DocsPointAtNothingOutsideTheRepository) {
  namespace fs = std::filesystem;
  const fs::path root = fs::weakly_canonical(source_dir());
  std::vector<fs::path> files = {root / "README.md"};
  for (const auto& dir : {root / "docs", root / "configs" / "hardware"})
    for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  std::regex link(R"(\]\(([^)#\s]+)[^)]*\)|((?:\.\./)+[\w./-]+))");
  for (const fs::path& f : files) {
    // Code blocks hold example files, whose paths are relative to where such a file would live: not checked.
    std::string text = std::regex_replace(read_file(f.string()), std::regex("```[^`]*```"), "");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), link); it != std::sregex_iterator(); ++it) {
      std::string target = (*it)[1].matched ? (*it)[1].str() : (*it)[2].str();
      if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0) continue;
      fs::path resolved = fs::weakly_canonical(f.parent_path() / target);
      std::string rel = fs::relative(resolved, root).generic_string();
      EXPECT_TRUE(rel.rfind("..", 0) != 0 && fs::exists(resolved))
          << f.lexically_relative(root).generic_string() << " points at '" << target << "', outside the repository "
          << "or missing";
    }
  }
}

// docs/hardware.md cites its sources as [Name]; every name used is defined in its Sources section.
TEST(DocsTest, HardwareSourcesAreAllListed) {
  std::string text = read_file(source_dir() + "/docs/hardware.md");
  auto sources = text.find("## Sources");
  ASSERT_NE(sources, std::string::npos);
  std::set<std::string> defined;
  std::regex def(R"(\n- (\[[^\]]+\]) )");
  for (auto it = std::sregex_iterator(text.begin() + sources, text.end(), def); it != std::sregex_iterator(); ++it)
    defined.insert((*it)[1].str());
  EXPECT_GE(defined.size(), 8u);
  std::regex use(R"(\[(Cloud [^\]]+|CACM'20|IEEE Micro'21|ISCA'23|Scaling book|Wikipedia)\])");
  size_t uses = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), use); it != std::sregex_iterator(); ++it, ++uses)
    EXPECT_TRUE(defined.count((*it)[0].str())) << (*it)[0].str() << " is cited but not listed under Sources";
  EXPECT_GT(uses, 20u);
}

// docs/validation.md is what tools/validate measures now (it runs this build's podsim).
TEST(DocsTest, ValidationPageIsCurrent) {
  std::string cmd = std::string("PODSIM='") + PODSIM_BINARY + "' '" + source_dir() + "/tools/validate' --check";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "docs/validation.md is stale: regenerate it with tools/validate";
}

// Replays the fuzzer's seed corpus (tests/fuzz/corpus/) and every saved crash reproducer (tests/fuzz/crashes/)
// through the very check the fuzzer runs (tests/fuzz/fuzz_check.h): each input must load or be rejected with a
// podsim::Error, never anything else, and a loaded experiment's resolved YAML must load back to itself.
// docs/fuzzing.md explains how a crash found by tools/fuzz becomes a file here.
#include <gtest/gtest.h>
#include "tests/test_paths.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_hlo_check.h"

namespace fs = std::filesystem;

namespace {

const fs::path kFuzzDir = fs::path(PODSIM_SOURCE_DIR) / "tests" / "fuzz";

// Every regular file of `dir` except README*, sorted; none when the folder does not exist.
std::vector<fs::path> inputs(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    if (entry.path().filename().string().rfind("README", 0) == 0) continue;
    out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Tally {
  size_t files = 0, loaded = 0, rejected = 0;
};

// Runs the fuzzer's check on each file; any failure names the file.
Tally replay(const std::vector<fs::path>& files) {
  Tally t;
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    ++t.files;
    podsim::fuzz::CheckResult r;
    try {
      r = podsim::fuzz::check_experiment(read_bytes(f));
    } catch (const std::exception& e) {
      ADD_FAILURE() << f << ": exception other than podsim::Error: " << e.what();
      continue;
    } catch (...) {
      ADD_FAILURE() << f << ": non-standard exception";
      continue;
    }
    EXPECT_TRUE(r.problem.empty()) << f << ": " << r.problem;
    if (r.loaded) ++t.loaded;
    else ++t.rejected;
  }
  return t;
}

TEST(FuzzRegression, SeedCorpusLoadsOrIsRejectedCleanly) {
  Tally t = replay(inputs(kFuzzDir / "corpus"));
  // Guards against a test that checks nothing: a moved corpus, a broken PODSIM_SOURCE_DIR, or a check that no
  // longer loads anything. The corpus holds the repo's 8 example configs (all valid) and the hand-written seeds.
  EXPECT_GE(t.files, 60u) << "the seed corpus tests/fuzz/corpus/ looks missing or truncated";
  EXPECT_GE(t.loaded, 8u) << "too few corpus inputs load, so the round trip is hardly exercised";
  EXPECT_GE(t.rejected, 20u) << "too few corpus inputs are rejected, so error paths are hardly exercised";
}

TEST(FuzzRegression, CrashReproducersStayFixed) {
  std::vector<fs::path> files = inputs(kFuzzDir / "crashes");
  Tally t = replay(files);
  EXPECT_EQ(t.files, files.size());
  // The folder keeps its README even when it holds no reproducer.
  EXPECT_TRUE(fs::exists(kFuzzDir / "crashes" / "README.md"));
}

// The repo's own experiment files must load (not merely be rejected cleanly) and survive the round trip.
TEST(FuzzRegression, RepoConfigsLoadAndRoundTrip) {
  std::vector<fs::path> files;
  for (const char* sub : {"", "examples", "bench"})
    for (const auto& f : inputs(fs::path(PODSIM_SOURCE_DIR) / "configs" / sub))
      if (f.extension() == ".yaml") files.push_back(f);
  ASSERT_GE(files.size(), 8u);
  for (const auto& f : files) {
    podsim::fuzz::CheckResult r = podsim::fuzz::check_experiment(read_bytes(f));
    EXPECT_TRUE(r.loaded) << f << " was rejected: " << r.error_id;
    EXPECT_TRUE(r.problem.empty()) << f << ": " << r.problem;
  }
}

// The HLO fuzzer's seeds and reproducers: each module is imported or rejected with a podsim::Error, nothing else.
TEST(FuzzRegression, HloSeedsAndReproducersImportOrAreRejectedCleanly) {
  size_t files = 0, imported = 0;
  for (const char* dir : {"corpus-hlo", "crashes-hlo"})
    for (const auto& f : inputs(kFuzzDir / dir)) {
      SCOPED_TRACE(f.string());
      ++files;
      try {
        imported += podsim::fuzz::check_hlo(read_bytes(f)).imported;
      } catch (const std::exception& e) {
        ADD_FAILURE() << f << ": exception other than podsim::Error: " << e.what();
      }
    }
  EXPECT_GE(files, 8u) << "the HLO seed corpus tests/fuzz/corpus-hlo/ looks missing";
  EXPECT_GE(imported, 5u);
  EXPECT_TRUE(fs::exists(kFuzzDir / "crashes-hlo" / "README.md"));
  EXPECT_FALSE(podsim::fuzz::check_hlo("ENTRY e {\n  a = f32[2 parameter(0)\n}\n").imported);
}

// The check itself: bad input is reported as a rejection with the error's id, not as a problem.
TEST(FuzzRegression, CheckReportsRejectionsWithTheirId) {
  podsim::fuzz::CheckResult r = podsim::fuzz::check_experiment("hardware: {preset: tpu-v3\n");
  EXPECT_FALSE(r.loaded);
  EXPECT_EQ(r.error_id, podsim::error_info(podsim::Err::YamlSyntax).id);
  EXPECT_TRUE(r.problem.empty());
  r = podsim::fuzz::check_experiment("");
  EXPECT_FALSE(r.loaded);
  EXPECT_FALSE(r.error_id.empty());
}

}  // namespace

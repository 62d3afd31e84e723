// Determinism: the same experiment and seed give byte-identical summary.json and tensors/, for a multi-chip
// numeric collective and a numeric single-chip training step. Stall injection (run.stall.*) never changes the
// numbers and never shortens the step.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

using namespace podsim::test;
namespace fs = std::filesystem;

namespace {

const char* kCollective = "hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 2]}\nworkload:\n  model: collective\n"
                          "  op: all_reduce\n  bytes: 256KiB\nrun:\n  numeric: true\n  dump_shards: true\n  seed: 7\n";
const char* kTraining = "hardware: {preset: tpu-v5e}\nworkload: {model: transformer, layers: 2, d_model: 64, d_ff: 128, "
                        "heads: 4, vocab: 50, seq_len: 8, batch: 2}\nrun: {numeric: true, seed: 11}\n";

// Every file under dir/tensors (relative path -> bytes).
std::map<std::string, std::string> tensors(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir + "/tensors"))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = read_file(e.path().string());
  return out;
}

void run_twice_and_compare(const std::string& yaml) {
  std::string exp = write_file("exp.yaml", yaml);
  ASSERT_EQ(run_podsim({"run", exp, "--out", "a", "-q"}).code, 0);
  ASSERT_EQ(run_podsim({"run", exp, "--out", "b", "-q"}).code, 0);
  std::string d = test_dir();
  EXPECT_EQ(read_file(d + "/a/summary.json"), read_file(d + "/b/summary.json"));
  auto ta = tensors(d + "/a"), tb = tensors(d + "/b");
  EXPECT_GT(ta.size(), 3u);
  EXPECT_EQ(ta, tb);
  EXPECT_EQ(read_file(d + "/a/trace.pftrace"), read_file(d + "/b/trace.pftrace"));
}

}  // namespace

TEST(DeterminismTest, MultiChipNumericCollectiveIsByteIdentical) { run_twice_and_compare(kCollective); }

TEST(DeterminismTest, NumericTrainingStepIsByteIdentical) { run_twice_and_compare(kTraining); }

TEST(DeterminismTest, AnotherSeedGivesOtherNumbers) {
  std::string exp = write_file("exp.yaml", kTraining);
  ASSERT_EQ(run_podsim({"run", exp, "--out", "a", "-q"}).code, 0);
  ASSERT_EQ(run_podsim({"run", exp, "--out", "b", "-q", "--set", "run.seed=12"}).code, 0);
  EXPECT_NE(read_file(test_dir() + "/a/tensors/loss.npy"), read_file(test_dir() + "/b/tensors/loss.npy"));
}

TEST(StallTest, StallsNeverChangeNumbersNorShortenTheStep) {
  for (const char* yaml : {kCollective, kTraining}) {
    std::string exp = write_file("exp.yaml", yaml);
    ASSERT_EQ(run_podsim({"run", exp, "--out", "base", "-q", "--force"}).code, 0);
    for (const char* seed : {"1", "2", "3"}) {
      auto r = run_podsim({"run", exp, "--out", "stalled", "-q", "--force", "--set", "run.stall.probability=0.3",
                           "--set", "run.stall.max=2us", "--set", std::string("run.seed=") + seed});
      ASSERT_EQ(r.code, 0) << r.err;
      // The seed also draws the inputs, so compare with a base run of the same seed.
      ASSERT_EQ(run_podsim({"run", exp, "--out", "base", "-q", "--force", "--set", std::string("run.seed=") + seed}).code, 0);
      EXPECT_EQ(tensors(test_dir() + "/stalled"), tensors(test_dir() + "/base")) << yaml << " seed " << seed;
      auto s = nlohmann::json::parse(read_file(test_dir() + "/stalled/summary.json"));
      auto b = nlohmann::json::parse(read_file(test_dir() + "/base/summary.json"));
      EXPECT_GT(s["stalls"]["injected"].get<int64_t>(), 0);
      EXPECT_GE(s["step_time_s"].get<double>(), b["step_time_s"].get<double>()) << yaml << " seed " << seed;
    }
  }
}

TEST(CliNumericTest, NumericRunWritesNpyTensors) {
  std::string exp = write_file("exp.yaml", kTraining);
  ASSERT_EQ(run_podsim({"run", exp, "--out", "o", "-q"}).code, 0);
  std::string d = test_dir() + "/o/tensors/";
  for (const char* f : {"tokens.npy", "labels.npy", "loss.npy", "embedding.npy", "embedding.grad.npy",
                        "embedding.new.npy", "layer0.ffn.w1.npy", "layer0.ffn.w1.grad.npy", "layer0.ffn.w1.new.npy",
                        "layer0.ffn.w1.m.new.npy"})
    EXPECT_TRUE(exists(d + f)) << f;
  std::string npy = read_file(d + "layer0.ffn.w1.npy");
  ASSERT_GT(npy.size(), 128u);
  EXPECT_EQ(npy.substr(0, 6), "\x93NUMPY");
  EXPECT_NE(npy.find("'descr': '<f4', 'fortran_order': False, 'shape': (64, 128), }"), std::string::npos);
  EXPECT_EQ(npy.size(), 128u + 64 * 128 * 4);  // a 128-byte header, then the data
  std::string ids = read_file(d + "tokens.npy");
  EXPECT_NE(ids.find("'descr': '<i4'"), std::string::npos);
  EXPECT_NE(ids.find("'shape': (2, 8)"), std::string::npos);  // [batch, seq_len]
}

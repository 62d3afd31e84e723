// run.max_tensor_bytes: a numeric run that would write more tensor data than the limit stops before anything is
// written (PODSIM-IO-005, the size in the message), and one within it writes exactly what it announced: the limit
// is compared with the data bytes of the .npy files a run really writes, counted from the files.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "base/text.h"
#include "tests/cli/cli_util.h"

using namespace podsim::test;
namespace fs = std::filesystem;

namespace {

// Four chips of data parallelism on a small MLP, numeric; with run.dump_shards each chip's shards as well.
const std::string kExp =
    "hardware:\n  preset: tpu-v3\n  pod: {dims: [2, 2]}\nworkload:\n  model: mlp\n  batch: 32\n  input: 64\n"
    "  hidden: 128\n  layers: 2\n  classes: 10\n  optimizer: adam\nstrategy:\n  name: data_parallel\n"
    "run:\n  numeric: true\n  trace: {format: \"off\"}\n";

// Bytes of array data in every .npy file under `dir`: the file size less its header (magic, version, header length
// field and header, NumPy format 1.0).
uint64_t npy_data_bytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().extension() != ".npy") continue;
    const std::string head = read_file(e.path().string()).substr(0, 10);
    EXPECT_EQ(head.substr(0, 6), "\x93NUMPY") << e.path();
    const uint64_t header = uint8_t(head[8]) | (uint64_t(uint8_t(head[9])) << 8);
    total += fs::file_size(e.path()) - 10 - header;
  }
  return total;
}

}  // namespace

TEST(TensorLimitTest, RefusedAboveTheLimitWrittenWithinIt) {
  for (const bool shards : {false, true}) {
    SCOPED_TRACE(shards ? "with shards" : "logical tensors");
    const std::string exp = write_file("exp.yaml", kExp + (shards ? "  dump_shards: true\n" : ""));
    const std::string tag = shards ? "s" : "l";
    CliResult big = run_podsim({"run", exp, "--out", "big" + tag, "-q", "--set", "run.max_tensor_bytes=1GiB"});
    ASSERT_EQ(big.code, 0) << big.err;
    const uint64_t bytes = npy_data_bytes(test_dir() + "/big" + tag + "/tensors");
    ASSERT_GT(bytes, 100000u);
    if (shards) {
      EXPECT_TRUE(exists(test_dir() + "/big" + tag + "/tensors/chip3"));
    }
    // Exactly at the limit: written, the same bytes.
    CliResult at = run_podsim({"run", exp, "--out", "at" + tag, "-q", "--set",
                               "run.max_tensor_bytes=" + std::to_string(bytes) + "B"});
    ASSERT_EQ(at.code, 0) << at.err;
    EXPECT_EQ(npy_data_bytes(test_dir() + "/at" + tag + "/tensors"), bytes);
    // One byte less: refused before anything is written, with the size it would have written and the key.
    CliResult over = run_podsim({"run", exp, "--out", "over" + tag, "-q", "--set",
                                 "run.max_tensor_bytes=" + std::to_string(bytes - 1) + "B"});
    EXPECT_EQ(over.code, 2);
    EXPECT_NE(over.err.find("error PODSIM-IO-005: numeric mode would write " + podsim::format_bytes(double(bytes))),
              std::string::npos)
        << over.err;
    EXPECT_NE(over.err.find("--set run.max_tensor_bytes="), std::string::npos) << over.err;
    EXPECT_FALSE(exists(test_dir() + "/over" + tag));
    for (const auto& e : fs::directory_iterator(test_dir()))
      EXPECT_EQ(e.path().filename().string().find(".over"), std::string::npos) << "a partial folder left: " << e.path();
  }
}

// The default (256 MiB) admits every shipped numeric example: the MLP example writes about 120 MiB.
TEST(TensorLimitTest, ShippedMlpFitsTheDefault) {
  CliResult r = run_podsim({"run", source_dir() + "/configs/examples/mlp.yaml", "--out", "mlp", "-q", "--set",
                            "run.trace.format=off"});
  ASSERT_EQ(r.code, 0) << r.err;
  const uint64_t bytes = npy_data_bytes(test_dir() + "/mlp/tensors");
  EXPECT_LE(bytes, 256ull << 20);
  EXPECT_GT(bytes, 64ull << 20);
}

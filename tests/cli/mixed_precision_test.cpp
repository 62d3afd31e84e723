// Mixed precision end to end (workload.weight_dtype; docs/model.md): partitioned steps reproduce the single-device
// step, and the memory figures count the fp32 master weights, the bf16 copies and Adam's fp32 moments by hand.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

std::string hw(const std::string& dims) { return "hardware:\n  preset: tpu-v3\n  pod: {dims: " + dims + "}\n"; }

nlohmann::json summary(const std::string& dir) { return nlohmann::json::parse(read_file(dir + "/summary.json")); }

// llm-tiny (grouped-query attention, SwiGLU, RMSNorm, RoPE) with the given types.
std::string tiny(const std::string& dtype, const std::string& weight_dtype) {
  return "workload:\n  preset: llm-tiny\n  batch: 8\n  dtype: " + dtype + "\n  weight_dtype: " + weight_dtype + "\n";
}

// Runs `rest` on `dims` and the single-device reference in numeric mode and compares every tensor both wrote
// (`tolerance` empty: podsim compare's own bound for each tensor, by the precision it was computed in).
void expect_equivalent(const std::string& workload, const std::string& dims, const std::string& rest,
                       const std::string& tolerance) {
  const std::string ref = write_file("ref.yaml", hw("[1, 1]") + workload + "run: {numeric: true}\n");
  const std::string exp = write_file("exp.yaml", hw(dims) + workload + rest + "run: {numeric: true}\n");
  CliResult r = run_podsim({"run", ref, "--out", test_dir() + "/ref", "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_podsim({"run", exp, "--out", test_dir() + "/exp", "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> args = {"compare", test_dir() + "/ref", test_dir() + "/exp"};
  if (!tolerance.empty()) args.insert(args.end(), {"--tolerance", tolerance});
  CliResult c = run_podsim(args);
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  // "equal: N tensors within their bounds (...)": each tensor within the bound of the precision it was computed in.
  const size_t at = c.out.find("  equal: ");
  ASSERT_NE(at, std::string::npos) << c.out;
  std::printf("%s", c.out.substr(at).c_str());
  // The masters, their gradients, updates and Adam moments (21 parameters) are among the tensors compared.
  EXPECT_GE(std::stoi(c.out.substr(at + 9)), 100) << c.out;
}

struct Case {
  std::string name, dims, rest;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
const Case kCases[] = {
    {"DataParallel2", "[2, 1]", "strategy: {name: data_parallel}\n"},
    {"WeightUpdateSharding2", "[2, 1]", "strategy: {name: data_parallel, weight_update_sharding: true}\n"},
    {"Megatron2", "[2, 1]", "strategy: {name: spmd}\n"},
    {"DataTimesModel4", "[4, 1]", "strategy: {name: [data_parallel, spmd]}\nmesh: {axes: [data, model], shape: [2, 2]}\n"},
    {"Pipeline2", "[2, 1]", "strategy: {name: pipeline, micro_batches: 2}\n"},
};

class MixedPrecisionEquivalenceTest : public ::testing::TestWithParam<Case> {};

// fp32 master weights, bf16 compute: each tensor within podsim compare's bound for its precision (a partitioned
// step rounds its bf16 partial sums at other points than one chip; docs/model.md); the fp32 masters, which no
// strategy changes before the update, exactly.
TEST_P(MixedPrecisionEquivalenceTest, Fp32MastersBf16Compute) {
  expect_equivalent(tiny("bf16", "fp32"), GetParam().dims, GetParam().rest, "");
}

INSTANTIATE_TEST_SUITE_P(Strategies, MixedPrecisionEquivalenceTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name; });

}  // namespace

// The language models of the seed papers end to end, as tests/cli/strategies_test.cpp checks the Transformer: BERT
// with LAMB and global-norm clipping, the encoder-decoder Transformer and GNMT, each run by `podsim run` in numeric
// mode under every strategy that applies (data parallel, weight-update sharding, fsdp, tensor sharding over
// `model`, data x model, a pipeline of 2 stages x data) and `podsim compare`d with its single-device run: every
// tensor within its bound. BERT's key-projection biases are the exception the comparison reports: their gradient is
// zero in exact arithmetic (a shift of all of a query's scores, which the softmax cancels), so it, and Adam's
// moments of it, are rounding noise in both runs; the test requires that they are the only tensors reported.
#include <gtest/gtest.h>

#include <sstream>
#include <tuple>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

const std::string kBert =
    "workload:\n  model: bert\n  layers: 2\n  d_model: 32\n  heads: 4\n  d_ff: 48\n  vocab: 50\n  seq_len: 8\n"
    "  max_predictions: 3\n  batch: 8\n  dtype: fp32\n  weight_decay: 0.01\n  eps: 1e-6\n  clip_norm: 1.0\n";
const std::string kTransformer =
    "workload:\n  model: encoder_decoder\n  encoder_layers: 2\n  decoder_layers: 2\n  d_model: 32\n  heads: 4\n"
    "  d_ff: 48\n  vocab: 50\n  src_len: 8\n  tgt_len: 6\n  batch: 8\n  dtype: fp32\n";
const std::string kGnmt =
    "workload:\n  model: gnmt\n  encoder_layers: 3\n  decoder_layers: 3\n  hidden: 16\n  vocab: 50\n  src_len: 6\n"
    "  tgt_len: 5\n  batch: 8\n  dtype: fp32\n  clip_norm: 5.0\n";

std::string hw(const std::string& dims) { return "hardware:\n  preset: tpu-v3\n  pod: {dims: " + dims + "}\n"; }

struct Case {
  std::string name, dims, rest;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name << " on " << c.dims; }
const Case kCases[] = {
    {"DataParallel2", "[2, 1]", "strategy: {name: data_parallel}\n"},
    {"WeightUpdateSharding4", "[4, 1]", "strategy: {name: data_parallel, weight_update_sharding: true}\n"},
    {"Megatron4", "[4, 1]", "strategy: {name: spmd}\n"},
    {"Fsdp4", "[4, 1]", "strategy: {name: fsdp}\n"},
    {"DataTimesModel4", "[2, 2]", "strategy: {name: [data_parallel, spmd]}\nmesh: {axes: [data, model], shape: [2, 2]}\n"},
    {"PipelineTimesData4", "[2, 2]",
     "strategy: {name: [pipeline, data_parallel], micro_batches: 2}\nmesh: {axes: [pipe, data], shape: [2, 2]}\n"},
};

enum class Model { Bert, Transformer, Gnmt };
class LanguageModelsTest : public ::testing::TestWithParam<std::tuple<Case, Model>> {};

TEST_P(LanguageModelsTest, ReproducesTheSingleDeviceStep) {
  const auto& [c, model] = GetParam();
  const std::string w = model == Model::Bert ? kBert : model == Model::Transformer ? kTransformer : kGnmt;
  const std::string ref = write_file("ref.yaml", hw("[1, 1]") + w + "run: {numeric: true}\n");
  const std::string exp = write_file("exp.yaml", hw(c.dims) + w + c.rest + "run: {numeric: true}\n");
  CliResult r = run_podsim({"run", ref, "--out", test_dir() + "/ref", "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_podsim({"run", exp, "--out", test_dir() + "/exp", "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  CliResult cmp = run_podsim({"compare", test_dir() + "/ref", test_dir() + "/exp", "--brief"});
  int above = 0, compared = 0;
  std::istringstream lines(cmp.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" ABOVE") != std::string::npos) {
      ++above;
      EXPECT_NE(line.find(".attn.k.b."), std::string::npos) << line;
    }
    if (line.find("DIFFERENT: ") != std::string::npos) compared = std::stoi(line.substr(line.find(" of ") + 4));
    if (line.find("  equal: ") != std::string::npos) compared = std::stoi(line.substr(line.find("  equal: ") + 9));
  }
  if (model == Model::Bert) {
    EXPECT_LE(above, 6) << cmp.out;  // the key biases' gradients and moments, 3 per layer
  } else {
    EXPECT_EQ(cmp.code, 0) << cmp.out << cmp.err;
    EXPECT_EQ(above, 0) << cmp.out;
  }
  EXPECT_GE(compared, 100) << cmp.out;
}

INSTANTIATE_TEST_SUITE_P(Strategies, LanguageModelsTest,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Values(Model::Bert, Model::Transformer, Model::Gnmt)),
                         [](const auto& info) {
                           const Model m = std::get<1>(info.param);
                           return std::get<0>(info.param).name +
                                  (m == Model::Bert ? "Bert" : m == Model::Transformer ? "EncoderDecoder" : "Gnmt");
                         });

// A perturbed run (another seed) fails the comparison: the comparison can fail.
TEST(LanguageModelsTest, AnotherSeedFails) {
  int n = 0;
  for (const std::string& w : {kBert, kTransformer, kGnmt}) {
    const std::string a = test_dir() + "/a" + std::to_string(n), b = test_dir() + "/b" + std::to_string(n++);
    const std::string fa = write_file("a.yaml", hw("[1, 1]") + w + "run: {numeric: true}\n");
    const std::string fb =
        write_file("b.yaml", hw("[2, 1]") + w + "strategy: {name: data_parallel}\nrun: {numeric: true, seed: 9}\n");
    ASSERT_EQ(run_podsim({"run", fa, "--out", a, "-q"}).code, 0);
    ASSERT_EQ(run_podsim({"run", fb, "--out", b, "-q"}).code, 0);
    const CliResult c = run_podsim({"compare", a, b, "--brief"});
    EXPECT_EQ(c.code, 1) << c.out;
    EXPECT_GT(static_cast<int>(c.out.find("DIFFERENT")), 0) << c.out;
  }
}

}  // namespace

// The Transformer's variant keys (docs/model.md, "transformer"): the combinations the workload refuses, each with
// its error id and the location of the key at fault, and the combinations it accepts.
#include <gtest/gtest.h>

#include "sim/config/loader.h"
#include "tests/unit/load_errors.h"

using namespace podsim;

namespace {

// A tiny Transformer with `extra` appended to its workload section (one key per line, two-space indented).
std::string transformer(const std::string& extra) {
  return "hardware:\n  preset: tpu-v3\nworkload:\n  model: transformer\n  layers: 1\n  d_model: 8\n  d_ff: 16\n"
         "  heads: 4\n  vocab: 16\n  seq_len: 4\n  batch: 2\n" + extra;
}

}  // namespace

TEST(ConfigTransformerTest, HeadDimLiftsTheDivisibilityOfDModel) {
  // 3 heads do not divide d_model 8: refused at heads, unless head_dim gives their width.
  std::string three = transformer("");
  three.replace(three.find("heads: 4"), 8, "heads: 3");
  expect_at(load_failure(three), Err::NotDivisible, 8, "workload.head_dim");
  EXPECT_NO_THROW(load_experiment_text(three + "  head_dim: 5\n", "exp.yaml", {}));
}

TEST(ConfigTransformerTest, HeadDimMustBePositive) {
  expect_at(load_failure(transformer("  head_dim: 0\n")), Err::OutOfRange, 12, "head_dim");
}

TEST(ConfigTransformerTest, KvHeadsMustDivideHeads) {
  expect_at(load_failure(transformer("  kv_heads: 3\n")), Err::NotDivisible, 12, "workload.kv_heads = 3");
  expect_at(load_failure(transformer("  kv_heads: 0\n")), Err::OutOfRange, 12, "kv_heads");
  for (const char* ok : {"  kv_heads: 1\n", "  kv_heads: 2\n", "  kv_heads: 4\n"})
    EXPECT_NO_THROW(load_experiment_text(transformer(ok), "exp.yaml", {})) << ok;
}

TEST(ConfigTransformerTest, GatedFfnIsForDenseLayersOnly) {
  // Mixture-of-experts layers (every other layer from the second) have GELU experts: another FFN for the dense
  // layers is refused at workload.ffn.
  auto two_layers = [](std::string t) { return t.replace(t.find("layers: 1"), 9, "layers: 2"); };
  expect_at(load_failure(two_layers(transformer("  ffn: swiglu\n  moe: {experts: 2}\n"))), Err::BadChoice, 12,
            "workload.moe.experts");
  expect_at(load_failure(transformer("  ffn: geglu\n")), Err::BadChoice, 12, "did you mean 'gelu'");
  for (const std::string& ok : {transformer("  ffn: swiglu\n"), transformer("  ffn: relu\n"),
                                two_layers(transformer("  ffn: gelu\n  moe: {experts: 2}\n"))})
    EXPECT_NO_THROW(load_experiment_text(ok, "exp.yaml", {})) << ok;
}

TEST(ConfigTransformerTest, NormIsLayerNormOrRmsNorm) {
  expect_at(load_failure(transformer("  norm: rms\n")), Err::BadChoice, 12, "rmsnorm");
  EXPECT_NO_THROW(load_experiment_text(transformer("  norm: rmsnorm\n"), "exp.yaml", {}));
}

TEST(ConfigTransformerTest, RopeNeedsAnEvenHeadWidth) {
  // d_model 8 over 4 heads: width 2, even. head_dim 3 is odd: refused at rope, naming head_dim.
  EXPECT_NO_THROW(load_experiment_text(transformer("  rope: true\n"), "exp.yaml", {}));
  expect_at(load_failure(transformer("  head_dim: 3\n  rope: true\n")), Err::NotDivisible, 13,
            "workload.head_dim) is 3");
  // 8 heads on d_model 8: width d_model / heads = 1.
  std::string eight = transformer("  rope: true\n");
  eight.replace(eight.find("heads: 4"), 8, "heads: 8");
  expect_at(load_failure(eight), Err::NotDivisible, 12, "d_model / heads) is 1");
}

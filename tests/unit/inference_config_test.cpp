// The keys of the inference steps (workloads/inference.h, docs/serving.md): the iterations they pose (layout, padding,
// cache) and the combinations they refuse, each with its error id and the line of the key at fault.
#include <gtest/gtest.h>

#include "tests/unit/load_errors.h"
#include "workloads/inference.h"

using namespace podsim;

namespace {

// llm-tiny (vocab 256) with `extra` workload keys, one a line from line 5.
std::string tiny(const std::string& extra) {
  return "hardware:\n  preset: tpu-v5e\nworkload:\n  preset: llm-tiny\n" + extra;
}

InferenceStep step(const std::string& extra) { return inference_config(load_experiment_text(tiny(extra), "exp.yaml").params); }

}  // namespace

TEST(InferenceConfigTest, IterationsAndTheirLayouts) {
  // Equal prompts: one row each, the fused kernel; ragged: packed along one row, padded as asked.
  InferenceStep s = step("  step: prefill\n  batch: 3\n  seq_len: 8\n");
  EXPECT_FALSE(s.seqs.packed);
  EXPECT_TRUE(s.flash);
  EXPECT_EQ(s.rows, 3);
  EXPECT_EQ(s.row_len, 8);
  EXPECT_EQ(s.capacity, 8);
  s = step("  step: prefill\n  batch: 3\n  prompt_lengths: [3, 6, 2]\n");
  EXPECT_TRUE(s.seqs.packed);
  EXPECT_EQ(s.row_len, 11);
  s = step("  step: prefill\n  batch: 3\n  prompt_lengths: [3, 6, 2]\n  prefill_padding: bucket\n");
  EXPECT_EQ(s.seqs.width, (std::vector<int64_t>{4, 8, 2}));
  EXPECT_EQ(s.row_len, 14);
  EXPECT_EQ(s.new_tokens(), 11);  // padding is computed, not new
  s = step("  step: prefill\n  batch: 3\n  prompt_lengths: [3, 6, 2]\n  prefill_padding: max\n");
  EXPECT_FALSE(s.seqs.packed);
  EXPECT_EQ(s.row_len, 6);
  // A decode: one row a sequence, one new token, the ragged kernel; the cache holds the longest context and one.
  s = step("  step: decode\n  batch: 2\n  context_lengths: [7, 30]\n  kv_sequences: 8\n");
  EXPECT_FALSE(s.flash);
  EXPECT_EQ(s.row_len, 1);
  EXPECT_EQ(s.capacity, 31);
  EXPECT_EQ(s.resident, 8);
  // Chunks: packed unless they are of one length.
  s = step("  step: mixed\n  batch: 3\n  chunks: [\"512+0\", \"1+1000\", \"64+64\"]\n");
  EXPECT_TRUE(s.seqs.packed);
  EXPECT_EQ(s.seqs.cached, (std::vector<int64_t>{0, 1000, 64}));
  EXPECT_EQ(s.capacity, 1001);
}

TEST(InferenceConfigTest, RefusedCombinations) {
  // A list that is not one entry per sequence of the batch.
  expect_at(load_failure(tiny("  step: decode\n  batch: 3\n  context_lengths: [4, 5]\n")), Err::LengthMismatch, 7,
            "gives 2 sequences but workload.batch is 3");
  // A chunk that is not NEW+CACHED.
  expect_at(load_failure(tiny("  step: mixed\n  batch: 1\n  chunks: [\"512-0\"]\n")), Err::WrongType, 7,
            "is not NEW+CACHED");
  // A decode without its contexts; a key of another step.
  expect_at(load_failure(tiny("  step: decode\n  batch: 1\n")), Err::MissingKey, 5, "workload.context");
  expect_at(load_failure(tiny("  step: prefill\n  batch: 1\n  context: 4\n")), Err::BadChoice, 7,
            "workload.context applies to workload.step decode");
  // Sampling: an unknown way, top_k past the vocabulary, top_k without top_k sampling, top_p without its mass.
  expect_at(load_failure(tiny("  step: decode\n  batch: 1\n  context: 4\n  sampling: beam\n")), Err::BadChoice, 8,
            "sampling");
  expect_at(load_failure(tiny("  step: decode\n  batch: 1\n  context: 4\n  sampling: top_k\n  top_k: 300\n")),
            Err::OutOfRange, 9, "keeps more candidates than the vocabulary's 256 tokens");
  expect_at(load_failure(tiny("  step: decode\n  batch: 1\n  context: 4\n  top_k: 5\n")), Err::BadChoice, 8,
            "workload.top_k applies to workload.sampling: top_k");
  expect_at(load_failure(tiny("  step: decode\n  batch: 1\n  context: 4\n  sampling: top_p\n")), Err::MissingKey, 8,
            "workload.top_p");
  // An unknown number format; re-materialization, which an inference step has no backward pass for.
  expect_at(load_failure(tiny("  step: decode\n  batch: 1\n  context: 4\n  kv_dtype: int4\n")), Err::BadChoice, 8,
            "kv_dtype");
  expect_at(load_failure(tiny("  step: decode\n  batch: 1\n  context: 4\n  remat: full\n")), Err::BadChoice, 8,
            "an inference step");
}

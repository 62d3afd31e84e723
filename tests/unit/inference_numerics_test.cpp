// The inference steps' numerics (docs/serving.md, "The inference step"): a greedy decode with the KV cache gives
// the tokens and logits of recomputing the whole sequence without a cache, fp32 within 1e-5. The generate form (a
// prefill and decodes chained in one graph, each decode attending over the cache the steps before it wrote) runs on
// the reference executor; the recomputation is the training step's forward pass over the prompt and the generated
// tokens (the same weights: values depend on the tensor's name), whose logits at every position are the model's
// prediction there. The single steps (a decode of ragged contexts, a mixed iteration of chunks) are checked the same
// way against the forward pass over each sequence's tokens.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/config/loader.h"
#include "workloads/i_workload.h"
#include "workloads/reference.h"

using namespace podsim;

namespace {

// llm-tiny (grouped-query attention, RoPE, SwiGLU, RMSNorm) in fp32, with `extra` keys.
std::string tiny(const std::string& extra) {
  return "hardware:\n  preset: tpu-v5e\nworkload:\n  preset: llm-tiny\n  dtype: fp32\n" + extra;
}

ModelGraph build(const std::string& text, Experiment* out = nullptr) {
  Experiment e = load_experiment_text(text, "exp.yaml", {});
  if (out) *out = e;
  return WorkloadRegistry::instance().make(e.workload)->build(e.params);
}

const Tensor& get(const ModelGraph& g, const TensorStore& st, const std::string& name) {
  const TensorId t = g.find_tensor(name);
  EXPECT_GE(t, 0) << name;
  return st.get(t);
}

// The training step's forward pass over `tokens` [B, S]: its logits [B, S, V].
Tensor recompute(const std::vector<std::vector<float>>& tokens, const std::string& extra) {
  const int64_t B = static_cast<int64_t>(tokens.size()), S = static_cast<int64_t>(tokens[0].size());
  const ModelGraph g = build(tiny("  batch: " + std::to_string(B) + "\n  seq_len: " + std::to_string(S) + "\n" + extra));
  TensorStore st;
  init_step_inputs(g, st, 1);
  Tensor& ids = st.get_mut(g.find_tensor("tokens"));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) ids.data[b * S + s] = tokens[b][s];
  run_reference(g, st);
  return get(g, st, "logits");
}

// Relative norm error of `got` against `want`.
double rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

std::vector<float> row(const Tensor& t, int64_t r) {
  const int64_t v = t.shape.back();
  return {t.data.begin() + r * v, t.data.begin() + (r + 1) * v};
}

}  // namespace

TEST(InferenceNumericsTest, GreedyDecodeWithTheCacheEqualsRecomputation) {
  const int64_t B = 2, P = 5, N = 6;
  const ModelGraph g = build(tiny("  step: generate\n  batch: 2\n  seq_len: 5\n  generate: 6\n  flash: {block_q: 2, "
                                  "block_kv: 2}\n  kv_block: 3\n"));
  TensorStore st;
  init_step_inputs(g, st, 1);
  run_reference(g, st);
  const Tensor& prompt = get(g, st, "tokens");
  const Tensor& generated = get(g, st, "generated");
  ASSERT_EQ(generated.shape, (std::vector<int64_t>{B, N}));
  // The whole sequence: the prompt and every generated token but the last (whose successor nobody asked for).
  std::vector<std::vector<float>> seq(B);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < P; ++s) seq[b].push_back(prompt.data[b * P + s]);
    for (int64_t j = 0; j + 1 < N; ++j) seq[b].push_back(generated.data[b * N + j]);
  }
  const Tensor full = recompute(seq, "");
  const int64_t S = P + N - 1, V = full.shape.back();
  for (int64_t j = 0; j < N; ++j) {
    const Tensor& step = get(g, st, j == 0 ? "logits" : "gen" + std::to_string(j) + ".logits");
    for (int64_t b = 0; b < B; ++b) {
      const std::vector<float> want = row(full, b * S + P - 1 + j), got = row(step, b);
      EXPECT_LT(rel_error(got, want), 1e-5) << "token " << j << " of sequence " << b;
      // The greedy token is the argmax of the recomputed logits.
      int64_t best = 0;
      for (int64_t v = 1; v < V; ++v)
        if (want[v] > want[best]) best = v;
      EXPECT_EQ(generated.data[b * N + j], static_cast<float>(best)) << "token " << j << " of sequence " << b;
    }
  }
}

namespace {

// Runs an inference step whose token ids are `ids` (its "tokens" input, row-major) and whose caches start as
// `caches` holds them (by name; the rest as init_step_inputs draws them). Returns the store and the graph.
struct Ran {
  ModelGraph g{"step"};
  TensorStore st;
};
Ran run_step(const std::string& keys, const std::vector<float>& ids, const Ran* caches) {
  Ran r;
  r.g = build(tiny(keys));
  init_step_inputs(r.g, r.st, 1);
  Tensor& tokens = r.st.get_mut(r.g.find_tensor("tokens"));
  EXPECT_EQ(tokens.data.size(), ids.size()) << keys;
  tokens.data = ids;
  for (size_t t = 0; caches && t < r.g.num_tensors(); ++t) {
    const TensorInfo& info = r.g.tensor(static_cast<TensorId>(t));
    if (info.role != TensorRole::KvCache) continue;
    // The cache the step before left: its last version of this cache.
    const TensorId from = caches->g.find_tensor(info.name + ".new");
    EXPECT_GE(from, 0) << info.name;
    if (from < 0) continue;
    r.st.put(static_cast<TensorId>(t), caches->st.get(from));
  }
  run_reference(r.g, r.st);
  return r;
}

// The logits the training step's forward pass gives the last token of `seq`.
std::vector<float> last_logits(const std::vector<float>& seq) {
  const Tensor full = recompute({seq}, "");
  return row(full, static_cast<int64_t>(seq.size()) - 1);
}

}  // namespace

// A ragged prefill (three prompts packed along one row, as vLLM batches them), then a mixed iteration on its caches:
// one decode, one chunk of four tokens and one of two, packed too. Each sequence's next-token logits equal those of
// the forward pass over its whole sequence, for the prefill and for the mixed step; and a decode of one row per
// sequence on the mixed step's caches the same. The kernel's blocks (3 keys) leave partial blocks everywhere.
TEST(InferenceNumericsTest, RaggedPrefillChunksAndDecodesEqualRecomputation) {
  const std::vector<std::vector<float>> prompt = {{5, 9, 2}, {7, 1, 1, 30, 4, 8}, {11, 200}};
  const std::vector<std::vector<float>> chunk = {{17}, {3, 3, 90, 12}, {6, 41}};
  const std::vector<std::vector<float>> next = {{2}, {88}, {150}};
  const std::string common = "  kv_capacity: 16\n  kv_block: 3\n  batch: 3\n";
  auto flat = [](const std::vector<std::vector<float>>& v) {
    std::vector<float> out;
    for (const auto& x : v) out.insert(out.end(), x.begin(), x.end());
    return out;
  };
  const Ran pre = run_step(common + "  step: prefill\n  prompt_lengths: [3, 6, 2]\n", flat(prompt), nullptr);
  const Ran mix = run_step(common + "  step: mixed\n  chunks: [\"1+3\", \"4+6\", \"2+2\"]\n", flat(chunk), &pre);
  const Ran dec = run_step(common + "  step: decode\n  context_lengths: [4, 10, 4]\n", flat(next), &mix);
  std::vector<float> seq[3];
  for (int i = 0; i < 3; ++i) {
    seq[i] = prompt[i];
    EXPECT_LT(rel_error(row(get(pre.g, pre.st, "logits"), i), last_logits(seq[i])), 1e-5) << "prefill " << i;
    seq[i].insert(seq[i].end(), chunk[i].begin(), chunk[i].end());
    EXPECT_LT(rel_error(row(get(mix.g, mix.st, "logits"), i), last_logits(seq[i])), 1e-5) << "mixed " << i;
    seq[i].insert(seq[i].end(), next[i].begin(), next[i].end());
    EXPECT_LT(rel_error(row(get(dec.g, dec.st, "logits"), i), last_logits(seq[i])), 1e-5) << "decode " << i;
  }
}

// Prompts padded to their buckets (3 -> 4, 6 -> 8, 2 -> 2: packed, the padding computed and never cached) and to
// the longest (one row each, the fused attention kernel over the padded rows): the same first tokens' logits.
TEST(InferenceNumericsTest, PaddedPrefillsEqualRecomputation) {
  const std::vector<std::vector<float>> prompt = {{5, 9, 2}, {7, 1, 1, 30, 4, 8}, {11, 200}};
  for (const char* padding : {"bucket", "max"}) {
    std::vector<float> ids;
    for (const auto& p : prompt) {
      const int64_t width = std::string(padding) == "max" ? 6 : p.size() == 3 ? 4 : p.size() == 6 ? 8 : 2;
      for (int64_t s = 0; s < width; ++s) ids.push_back(s < static_cast<int64_t>(p.size()) ? p[s] : 0);
    }
    const Ran pre = run_step(std::string("  batch: 3\n  step: prefill\n  prompt_lengths: [3, 6, 2]\n  prefill_padding: ") +
                                 padding + "\n",
                             ids, nullptr);
    for (int i = 0; i < 3; ++i)
      EXPECT_LT(rel_error(row(get(pre.g, pre.st, "logits"), i), last_logits(prompt[i])), 1e-5) << padding << " " << i;
  }
}

// Model presets (workload.preset, configs/workloads/): each preset's parameter count as podsim builds it against the
// figure its paper publishes, the values a preset sets, overrides, the error for an unknown preset, and the
// resolved configuration.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "sim/config/loader.h"

using namespace podsim;

namespace {

const PresetInfo* find_info(const std::vector<PresetInfo>& all, const std::string& name) {
  for (const auto& p : all)
    if (p.name == name) return &p;
  return nullptr;
}

Experiment load(const std::string& workload, std::vector<std::string> overrides = {}) {
  return load_experiment_text("hardware:\n  preset: tpu-v4\nworkload:\n" + workload, "exp.yaml",
                              {.overrides = std::move(overrides)});
}

}  // namespace

// The published counts, independent of the preset files (which could drift together with the builder): the paper's
// figure and the rounding it uses. GPT-3's Table 2.1 says 175.0B for shapes that hold 174.6B; the Llama papers name
// size classes (Llama 2 70B holds 69.0B).
TEST(ModelPresetsTest, ParameterCountsMatchThePublishedFigures) {
  const std::map<std::string, std::pair<double, double>> published = {
      {"gpt3-175b", {175.0e9, 0.5e9}},   {"llama2-7b", {6.7e9, 0.05e9}},   {"llama2-70b", {70e9, 1.5e9}},
      {"llama3-8b", {8e9, 0.5e9}},       {"llama3-70b", {70e9, 1e9}},       {"llama3-405b", {405e9, 1e9}},
      {"palm-540b", {540.35e9, 0.01e9}}, {"llm-tiny", {106816, 0}},
      // BERT's "340M" and "110M" round the pre-training graph's 336.2M and 110.1M (ParameterCountsByHand).
      {"bert-large", {340e6, 4e6}},      {"bert-base", {110e6, 0.5e6}},
      // Vaswani et al.'s 213M counts another vocabulary; MLPerf's GNMT logs print the count exactly.
      {"transformer-big", {213e6, 2.5e6}}, {"gnmt", {160671297, 0}},
      // DeiT-S's 22M and ViT Table 1's 86M (which counts the original layout's 86.57M) round the 22.12M and 87.01M
      // of the layout with pre-logits (ParameterCountsByHand).
      {"vit-s16", {22e6, 0.5e6}},        {"vit-b16", {86e6, 1.01e6}},
      // EfficientNet's Table 2 rounds the trainable counts, B2's 9.2M 0.09M above its 9.11M (ParameterCountsOfB0ToB7).
      {"efficientnet-b0", {5.3e6, 0.05e6}}, {"efficientnet-b1", {7.8e6, 0.05e6}}, {"efficientnet-b2", {9.2e6, 0.1e6}},
      {"efficientnet-b3", {12e6, 0.5e6}},   {"efficientnet-b4", {19e6, 0.5e6}},   {"efficientnet-b5", {30e6, 0.5e6}},
      {"efficientnet-b6", {43e6, 0.5e6}},   {"efficientnet-b7", {66e6, 0.5e6}},
      // BoT50's 20.8M rounds 20,852,008; the T-variants' figures (as NZ99 quotes the paper) are 0.16 to 0.40M below
      // the counts with squeeze-and-excitation in every block (botnet_test.cpp, ParameterCounts).
      {"botnet-50", {20.8e6, 0.06e6}},      {"botnet-s1-t3", {33.5e6, 0.5e6}},    {"botnet-s1-t4", {54.7e6, 0.5e6}},
      {"botnet-s1-t5", {75.1e6, 0.5e6}},    {"botnet-s1-t6", {53.9e6, 0.5e6}},    {"botnet-s1-t7", {75.1e6, 0.5e6}},
  };
  const std::vector<PresetInfo> all = list_model_presets();
  for (const auto& [name, fig] : published) {
    const PresetInfo* info = find_info(all, name);
    ASSERT_NE(info, nullptr) << name << " is missing from configs/workloads/";
    EXPECT_FALSE(info->source.empty()) << name;
    EXPECT_EQ(info->parameters, fig.first) << name << ": the preset states another published count";
    EXPECT_EQ(info->parameters_tolerance, fig.second) << name;
    const double n = model_preset_parameter_count(name);
    EXPECT_LE(std::abs(n - fig.first), fig.second) << name << " builds " << n << " parameters";
  }
  // Every shipped preset states its source and matches its own stated figure.
  for (const auto& p : all) {
    EXPECT_FALSE(p.source.empty()) << p.name;
    EXPECT_GT(p.parameters, 0) << p.name;
    EXPECT_LE(std::abs(model_preset_parameter_count(p.name) - p.parameters), p.parameters_tolerance) << p.name;
  }
}

// Hand counts of two presets from their shapes (docs/model.md's parameter list).
TEST(ModelPresetsTest, ParameterCountsByHand) {
  // llm-tiny: per layer q 64*4*16 + k, v 2*64*2*16 + o 4*16*64 + SwiGLU 3*64*128 + two RMSNorms 2*64; two layers,
  // embedding and unembedding 2*256*64, final norm 64.
  EXPECT_EQ(model_preset_parameter_count("llm-tiny"), 2 * (4096 + 4096 + 4096 + 3 * 64 * 128 + 128) + 2 * 256 * 64 + 64);
  // palm-540b: multi-query (one key/value head of 256), parallel block (one layer norm with gamma and beta), tied
  // embeddings.
  const double D = 18432, F = 73728, H = 48, E = 256, V = 256000, L = 118;
  const double layer = D * H * E + 2 * D * E + H * E * D + 3 * D * F + 2 * D;
  EXPECT_EQ(model_preset_parameter_count("palm-540b"), L * layer + V * D + 2 * D);
  // BERT: the word, position (512) and token-type (2) tables with their layer norm; per layer the four projections
  // with biases, the FFN with biases and two layer norms; the pooler, the masked-LM transform, its layer norm and
  // output bias (its decoder tied to the word table) and the next-sentence classifier [2, D] + [2].
  auto bert = [](double L, double D, double F) {
    const double V = 30522;
    const double embeddings = V * D + 512 * D + 2 * D + 2 * D;
    const double layer = 4 * (D * D + D) + 2 * D * F + F + D + 4 * D;
    return embeddings + L * layer + (D * D + D) + (D * D + D) + 2 * D + V + (2 * D + 2);
  };
  EXPECT_EQ(bert(24, 1024, 4096), 336226108);  // seed-models.md's hand count of the full pre-training graph
  EXPECT_EQ(model_preset_parameter_count("bert-large"), bert(24, 1024, 4096));
  EXPECT_EQ(model_preset_parameter_count("bert-base"), bert(12, 768, 3072));
  // transformer-big: the shared embedding; per encoder layer 4 attention matrices (no biases), the FFN with biases and
  // 2 layer norms; per decoder layer 8 attention matrices, the FFN and 3 layer norms; two final layer norms
  // (seed-models.md: 12,592,128 and 16,788,480 per layer, 210,804,736 in all).
  const double d = 1024, f = 4096;
  const double enc = 4 * d * d + 2 * d * f + f + d + 4 * d, dec = 8 * d * d + 2 * d * f + f + d + 6 * d;
  EXPECT_EQ(enc, 12592128);
  EXPECT_EQ(dec, 16788480);
  EXPECT_EQ(model_preset_parameter_count("transformer-big"), 33708 * d + 6 * enc + 6 * dec + 4 * d);
  EXPECT_EQ(model_preset_parameter_count("transformer-big"), 210804736);
  // gnmt (MLPerf's PyTorch layout): an LSTM of input I has Wx [I, 4H], Wh [H, 4H] and two biases [4H]; the encoder
  // 2 x LSTM(1024) + LSTM(2048) + 2 x LSTM(1024), the decoder LSTM(1024) + 3 x LSTM(2048), the attention's Wq, Wk,
  // bias, v and g, the classifier with bias, the shared embedding.
  const double h = 1024, v = 32320;
  auto lstm = [&](double in) { return in * 4 * h + h * 4 * h + 2 * 4 * h; };
  const double encoder = 2 * lstm(h) + lstm(2 * h) + 2 * lstm(h);
  const double decoder = lstm(h) + 3 * lstm(2 * h) + (2 * h * h + 2 * h + 1) + (h * v + v);
  EXPECT_EQ(model_preset_parameter_count("gnmt"), v * h + encoder + decoder);
  // vit-s16, vit-b16 (big_vision's layout: fixed 2-D embedding, pre-logits): the 16 x 16 x 3 patch kernel and its
  // bias; per block 2 layer norms, q, k, v, o with biases and the MLP with biases; the final norm; the pre-logits
  // layer and the 1000-class head (seed-models.md: 22,122,472 and 87,006,184).
  auto vit = [](double D, double F) {
    return 768 * D + D + 12 * (4 * D + 4 * (D * D + D) + 2 * D * F + F + D) + 2 * D + (D * D + D) + (D * 1000 + 1000);
  };
  EXPECT_EQ(model_preset_parameter_count("vit-s16"), vit(384, 1536));
  EXPECT_EQ(model_preset_parameter_count("vit-b16"), vit(768, 3072));
  EXPECT_EQ(vit(384, 1536), 22122472);
  EXPECT_EQ(vit(768, 3072), 87006184);
}

TEST(ModelPresetsTest, PresetSetsTheModelAndItsShape) {
  const Experiment e = load("  preset: palm-540b\n  batch: 8\n");
  EXPECT_EQ(e.workload, "transformer");
  const ParamSet& p = e.params;
  EXPECT_EQ(p.i("workload.layers"), 118);
  EXPECT_EQ(p.i("workload.d_model"), 18432);
  EXPECT_EQ(p.i("workload.heads"), 48);
  EXPECT_EQ(p.i("workload.head_dim"), 256);
  EXPECT_EQ(p.i("workload.kv_heads"), 1);
  EXPECT_EQ(p.i("workload.d_ff"), 73728);
  EXPECT_EQ(p.i("workload.vocab"), 256000);
  EXPECT_EQ(p.i("workload.seq_len"), 2048);
  EXPECT_EQ(p.i("workload.batch"), 8);
  EXPECT_EQ(p.s("workload.ffn"), "swiglu");
  EXPECT_TRUE(p.b("workload.parallel_block"));
  EXPECT_TRUE(p.b("workload.tie_embeddings"));
  EXPECT_TRUE(p.b("workload.rope"));
  // Where each value came from: the preset file.
  EXPECT_NE(p.where("workload.d_model").file.find("configs/workloads/palm-540b.yaml"), std::string::npos);
  EXPECT_EQ(p.where("workload.batch").file, "exp.yaml");
}

TEST(ModelPresetsTest, FileKeysAndOverridesWin) {
  const Experiment e = load("  preset: llama3-8b\n  batch: 2\n  layers: 2\n  seq_len: 128\n", {"workload.vocab=1024"});
  EXPECT_EQ(e.params.i("workload.layers"), 2);
  EXPECT_EQ(e.params.i("workload.seq_len"), 128);
  EXPECT_EQ(e.params.i("workload.vocab"), 1024);
  EXPECT_EQ(e.params.i("workload.kv_heads"), 8);  // still the preset's
  // An override may name the preset too.
  const Experiment o = load("  batch: 2\n", {"workload.preset=llm-tiny"});
  EXPECT_EQ(o.workload, "transformer");
  EXPECT_EQ(o.params.i("workload.d_model"), 64);
}

TEST(ModelPresetsTest, UnknownPresetListsTheValidOnesWithASuggestion) {
  try {
    load("  preset: llama2-7c\n  batch: 2\n");
    FAIL() << "an unknown preset loaded";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_EQ(e.id(), error_info(Err::UnknownWorkload).id) << w;
    EXPECT_EQ(e.where().line, 4) << w;
    EXPECT_EQ(e.where().column, 11) << w;
    EXPECT_NE(w.find("unknown model preset 'llama2-7c'"), std::string::npos) << w;
    EXPECT_NE(w.find("did you mean 'llama2-7b'?"), std::string::npos) << w;
    EXPECT_NE(w.find("valid: bert-base, bert-large, "), std::string::npos) << w;
    EXPECT_NE(w.find(", gpt3-175b, llama2-70b, "), std::string::npos) << w;
    // Only that error: the model it would have set is not also reported missing.
    EXPECT_EQ(e.also().size(), 0u) << w;
  }
}

TEST(ModelPresetsTest, AModelOtherThanThePresetsIsRefused) {
  try {
    load("  preset: llm-tiny\n  model: mlp\n  batch: 2\n");
    FAIL() << "loaded";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_EQ(e.id(), error_info(Err::BadChoice).id) << w;
    EXPECT_EQ(e.where().line, 5) << w;
    EXPECT_NE(w.find("workload.model = mlp, but model preset 'llm-tiny' is a transformer model"), std::string::npos)
        << w;
  }
  // The same model as the preset's is fine.
  EXPECT_EQ(load("  preset: llm-tiny\n  model: transformer\n  batch: 2\n").params.i("workload.d_model"), 64);
}

TEST(ModelPresetsTest, ResolvedConfigShowsThePresetsValuesAndLoadsBack) {
  const Experiment e = load("  preset: llm-tiny\n  batch: 4\n  layers: 3\n");
  const std::string text = resolved_yaml(e);
  EXPECT_NE(text.find("preset: \"llm-tiny\""), std::string::npos) << text;
  EXPECT_NE(text.find("kv_heads: 2"), std::string::npos) << text;
  EXPECT_NE(text.find("configs/workloads/llm-tiny.yaml"), std::string::npos) << text;
  EXPECT_NE(text.find("layers: 3"), std::string::npos) << text;
  const Experiment back = load_experiment_text(text, "resolved.yaml");
  for (const char* k : {"workload.layers", "workload.d_model", "workload.kv_heads", "workload.d_ff", "workload.vocab"})
    EXPECT_EQ(back.params.i(k), e.params.i(k)) << k;
  EXPECT_EQ(back.params.s("workload.ffn"), "swiglu");
}

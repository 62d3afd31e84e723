// strategy.name: spmd — tensor sharding over the mesh axes in strategy.spmd_axes (default [model]), from a
// built-in scheme and per-tensor annotations; the SPMD partitioner derives everything else (GSPMD).
//  - scheme megatron (one axis; Shoeybi et al. 2019): Transformer attention weights split by heads (q, k, v
//    [D, H, E] over H; the output projection [H, E, D] over H) and the FFN over its hidden units (W1, SwiGLU's W3
//    and b1 by columns, W2 by rows), so each layer all-reduces its activations twice forward and twice backward. The MLP
//    alternates column- and row-split layers (pairs), the matmul workload splits B by columns. Grouped-query
//    attention (q [D, KV, G, E], k and v [D, KV, E]) splits the KV key/value heads when the axis divides them, and
//    otherwise replicates them and splits the G query heads of each group. BERT and the encoder-decoder
//    Transformer likewise (every attention block's heads, the FFNs' hidden units; q, k, v biases with their heads).
//  - scheme 2d (two axes s0, s1; GSPMD §4, lingvo's 2-D sharding): activations [B, S, M] as [B over s0, S, M over
//    s1] (the FFN's output among them, so that its pending sum over s1 is reduce-scattered); FFN weights [M, H] as
//    [M over s0, H over s1] and [H, M] as [H over s1, M over s0]; attention weights
//    [M, H, E] as [M over s0, H over s1, -], [H, E, M] as [H over s1, -, M over s0]. The MLP: inputs over s0 and
//    weights alternating [s0, s1] / [s1, s0].
//  - both: the vocabulary split over the model axis (megatron's, 2d's s1; strategy.vocab_parallel, default true):
//    embedding [V over model, D], unembedding [D, V over model], so the logits stay split into a parallel
//    cross-entropy (workloads/ops/cross_entropy.cpp). With vocab_parallel false, 2d splits the table's M over s1.
//  - strategy.sequence_parallel (megatron): the residual stream split along the sequence (sequence_parallel()).
//  - scheme none: only the annotations.
// strategy.spatial (convolutional networks; GSPMD's spatial partitioning): the images and every feature map split
// along their height over the first axis, halos exchanged by collective-permutes (plan/halo.h).
// strategy.shard lists annotations "PATTERN = SPEC": every tensor whose name matches the glob PATTERN gets SPEC
// (plan/sharding.h), replacing the scheme's; e.g. "layer*.ffn.w1 = [-, model]".
#include <fnmatch.h>

#include <algorithm>

#include "plan/halo.h"
#include "base/error.h"
#include "base/text.h"
#include "strategies/planner.h"
#include "strategies/spmd_checks.h"

namespace podsim {
namespace {

struct Rule {
  std::string pattern;
  std::string spec;  // with axis placeholders A and B
};

// Key/value heads of a grouped-query Transformer (its query weights [D, KV, G, E] have rank 4); 0 otherwise.
int64_t grouped_kv_heads(const ModelGraph& g) {
  TensorId q = g.find_tensor("layer0.attn.q.w");
  return q >= 0 && g.tensor(q).shape.size() == 4 ? g.tensor(q).shape[1] : 0;
}

// The vocabulary-parallel embedding and unembedding of a Transformer (Megatron-LM's VocabParallelEmbedding and
// parallel cross-entropy): the table [V, D] and the unembedding [D, V] split V over `axis`, so the lookup gives a
// partial sum over it and the logits [B, S, V] stay split for the cross-entropy (never gathered). A tied
// unembedding is the table itself.
std::vector<Rule> vocab_rules(const std::string& axis) {
  return {{"embedding", "[" + axis + ", -]"}, {"unembed", "[-, " + axis + "]"}};
}

// The scheme's own rules; `axis_a` is the size of the scheme's first axis.
// Whether `g` is an inference step (it holds a KV cache).
bool inference_step(const ModelGraph& g) { return g.find_tensor("layer0.attn.k_cache") >= 0; }

// The heads of a layer's queries [B, S, H, E] (or its group's query heads, [B, S, KV, G, E]) and of multi-head
// attention's keys and values: split over both axes (B, A) when they divide them, else over B alone.
std::string heads_2d(int64_t heads, int64_t axes) { return heads % axes == 0 ? "(B, A)" : "B"; }

// 2-D weight-stationary (Pope et al. 2023, section 3.2.2) for an inference step: the weights as GSPMD's 2-D scheme
// splits them (the FFN's [d_model over A, d_ff over B], [d_ff over B, d_model over A], the attention's heads over B
// and d_model over A), the residual stream's d_model split over both axes (A, B) and the FFN's hidden units over
// (B, A), so that each matmul's input is all-gathered over one axis before it and its partial sums reduce-scattered
// over the other after it; the queries, keys and values split by heads over both axes when they divide them. The
// batch is whole on every chip (decode batches are small; Pope's layouts do not split it).
std::vector<Rule> weight_stationary_2d(const ModelGraph& g, int64_t kv, int64_t axes) {
  std::vector<Rule> r = {{"embed", "[-, -, (A, B)]"},           {"layer*.attn.residual", "[-, -, (A, B)]"},
                         {"layer*.ffn.residual", "[-, -, (A, B)]"}, {"layer*.moe.residual", "[-, -, (A, B)]"},
                         {"layer*.block.residual", "[-, -, (A, B)]"}, {"layer*.ffn.down.bias", "[-, -, (A, B)]"},
                         {"layer*.ffn.gelu", "[-, -, (B, A)]"},     {"layer*.ffn.relu", "[-, -, (B, A)]"},
                         {"layer*.ffn.glu", "[-, -, (B, A)]"},      {"layer*.ffn.gate", "[-, -, (B, A)]"},
                         {"layer*.ffn.up", "[-, -, (B, A)]"},       {"layer*.ffn.silu", "[-, -, (B, A)]"},
                         {"layer*.ffn.up.bias", "[-, -, (B, A)]"},  {"embedding", "[-, B]"},
                         {"layer*.ffn.w[13]", "[A, B]"},          {"layer*.ffn.b1", "[B]"},
                         {"layer*.ffn.w2", "[B, A]"}};
  const TensorId q = g.find_tensor("layer0.attn.q.w");
  if (kv > 0) {  // grouped: the group's query heads split, the key/value heads whole
    const std::string h = heads_2d(g.tensor(q).shape[2], axes);
    r.insert(r.end(), {{"layer*.attn.q.w", "[A, -, B, -]"}, {"layer*.attn.[kv].w", "[A, -, -]"},
                       {"layer*.attn.o.w", "[-, B, -, A]"}, {"layer*.attn.q", "[-, -, -, " + h + ", -]"},
                       {"layer*.attn.q.rope", "[-, -, -, " + h + ", -]"}});
  } else {
    const std::string h = heads_2d(g.tensor(q).shape[1], axes);
    r.insert(r.end(), {{"layer*.attn.[qkv].w", "[A, B, -]"}, {"layer*.attn.o.w", "[B, -, A]"}});
    for (const char* t : {"layer*.attn.[qkv]", "layer*.attn.[qk].rope"}) r.push_back({t, "[-, -, " + h + ", -]"});
  }
  return r;
}

std::vector<Rule> base_rules(const std::string& scheme, const std::string& workload, const ModelGraph& g,
                             int64_t axis_a, int64_t axis_b) {
  const int64_t kv = workload == "transformer" ? grouped_kv_heads(g) : 0;
  if (scheme == "megatron") {
    // Grouped-query attention: the key/value heads split when the axis divides them; otherwise every chip keeps
    // all key/value heads (replicated, as Megatron-LM and GSPMD keep a shared head on the chips that share it) and
    // the query heads of each group split.
    if (kv > 0 && kv % axis_a == 0)
      return {{"layer*.attn.q.w", "[-, A, -, -]"}, {"layer*.attn.[kv].w", "[-, A, -]"},
              {"layer*.attn.o.w", "[A, -, -, -]"}, {"layer*.ffn.w[13]", "[-, A]"},
              {"layer*.ffn.b1", "[A]"},            {"layer*.ffn.w2", "[A, -]"}};
    if (kv > 0)
      return {{"layer*.attn.q.w", "[-, -, A, -]"}, {"layer*.attn.o.w", "[-, A, -, -]"},
              {"layer*.ffn.w[13]", "[-, A]"},         {"layer*.ffn.b1", "[A]"},
              {"layer*.ffn.w2", "[A, -]"}};
    if (workload == "transformer")
      return {{"layer*.attn.[qkv].w", "[-, A, -]"}, {"layer*.attn.o.w", "[A, -, -]"},
              {"layer*.ffn.w[13]", "[-, A]"},         {"layer*.ffn.b1", "[A]"},
              {"layer*.ffn.w2", "[A, -]"}};
    // BERT and the Vision Transformer (their layers named as the Transformer's, with biases on the projections)
    // and the encoder-decoder Transformer (encoder self-attention, decoder self- and cross-attention:
    // enc.layer<l>.attn, dec.layer<l>.self, dec.layer<l>.cross), whose query, key and value biases split with their
    // heads.
    if (workload == "bert" || workload == "vit" || workload == "encoder_decoder")
      return {{"*layer*.*.[qkv].w", "[-, A, -]"}, {"*layer*.*.[qkv].b", "[A, -]"}, {"*layer*.*.o.w", "[A, -, -]"},
              {"*layer*.ffn.w1", "[-, A]"},       {"*layer*.ffn.b1", "[A]"},       {"*layer*.ffn.w2", "[A, -]"}};
    // GNMT: its LSTMs and attention stay whole (each step needs the whole previous state); the classifier splits
    // over the vocabulary, as the embedding (the vocabulary-parallel rules below).
    if (workload == "gnmt") return {{"classifier.w", "[-, A]"}, {"classifier.b", "[A]"}};
    // BoTNet: c5's self-attention split by heads as a Transformer's (q, k, v column-parallel; the relative
    // embeddings, shared by the heads, whole, their gradients all-reduced). It has no output projection to take
    // the row-parallel half (a convolution's partition rule splits no input features), so the heads' outputs are
    // all-gathered into the map for the batch norm and the 1x1 convolution after it; the convolutions stay whole.
    if (workload == "botnet") return {{"layer4.*.mhsa.[qkv].w", "[-, A, -]"}};
    if (workload == "matmul") return {{"b", "[-, A]"}};
    if (workload == "mlp") {
      std::vector<Rule> r;
      int layers = 0;
      while (g.find_tensor("fc" + std::to_string(layers) + ".w") >= 0) ++layers;
      for (int l = 0; l + 1 < layers; l += 2) {
        std::string a = "fc" + std::to_string(l), b = "fc" + std::to_string(l + 1);
        r.push_back({a + ".w", "[-, A]"});
        r.push_back({a + ".b", "[A]"});
        r.push_back({b + ".w", "[A, -]"});
      }
      if (layers % 2 == 1) {
        std::string a = "fc" + std::to_string(layers - 1);
        r.push_back({a + ".w", "[-, A]"});
        r.push_back({a + ".b", "[A]"});
        r.push_back({"out.w", "[A, -]"});
      }
      return r;
    }
  }
  if (scheme == "2d" && inference_step(g)) return weight_stationary_2d(g, kv, axis_b);
  if (scheme == "2d") {
    if (kv > 0)  // grouped-query attention: query groups over s1, key/value heads replicated on s1
      return {{"tokens", "[A, -]"},          {"labels", "[A, -]"},           {"embed", "[A, -, B]"},
              {"layer*.attn.residual", "[A, -, B]"},
              {"layer*.ffn.residual", "[A, -, B]"}, {"layer*.block.residual", "[A, -, B]"}, {"embedding", "[-, B]"},
              {"layer*.attn.q.w", "[A, -, B, -]"}, {"layer*.attn.[kv].w", "[A, -, -]"},
              {"layer*.attn.o.w", "[-, B, -, A]"},
              {"layer*.ffn.w[13]", "[A, B]"},     {"layer*.ffn.b1", "[B]"},       {"layer*.ffn.w2", "[B, A]"},
              {"layer*.ffn.gelu", "[A, -, B]"}, {"layer*.ffn.relu", "[A, -, B]"}, {"layer*.ffn.glu", "[A, -, B]"}};
    if (workload == "transformer")
      return {{"tokens", "[A, -]"},          {"labels", "[A, -]"},           {"embed", "[A, -, B]"},
              {"layer*.attn.residual", "[A, -, B]"},
              {"layer*.ffn.residual", "[A, -, B]"}, {"layer*.block.residual", "[A, -, B]"}, {"embedding", "[-, B]"},
              {"layer*.attn.[qkv].w", "[A, B, -]"}, {"layer*.attn.o.w", "[B, -, A]"},
              {"layer*.ffn.w[13]", "[A, B]"},     {"layer*.ffn.b1", "[B]"},       {"layer*.ffn.w2", "[B, A]"},
              {"layer*.ffn.gelu", "[A, -, B]"}, {"layer*.ffn.relu", "[A, -, B]"}, {"layer*.ffn.glu", "[A, -, B]"},
              {"layer*.ffn.down.bias", "[A, -, B]"}};
    if (workload == "mlp") {
      std::vector<Rule> r = {{"x", "[A, -]"}, {"labels", "[A]"}};
      for (int l = 0; g.find_tensor("fc" + std::to_string(l) + ".w") >= 0; ++l)
        r.push_back({"fc" + std::to_string(l) + ".w", l % 2 == 0 ? "[A, B]" : "[B, A]"});
      return r;
    }
    if (workload == "matmul") return {{"a", "[A, -]"}, {"b", "[-, B]"}};
  }
  return {};
}

// An inference step's KV caches (layer<l>.attn.k_cache, .v_cache [N, C, KV, E], their scales [N, C, KV], and the
// resident caches outside the iteration, kv_cache.resident [L, 2, n, C, KV, E]) split as strategy.kv_sharding says:
// heads over the scheme's head axis where it splits the key/value heads (megatron: A when it divides them; 2d: both
// axes, or B, for multi-head attention, as its keys and values split), else whole (a multi-query or grouped cache whose heads the axis does not divide: every
// device holds it, as Megatron-LM keeps a shared head); batch over the scheme's axes (Pope et al.'s multi-query
// attention sharded over the batch), whatever the heads.
std::vector<Rule> kv_rules(const std::string& scheme, const std::string& kv_sharding, const ModelGraph& g,
                           int64_t axis_a, int64_t axes) {
  const TensorId k = g.find_tensor("layer0.attn.k_cache");
  if (k < 0 || (scheme != "megatron" && scheme != "2d")) return {};
  const int64_t kv = g.tensor(k).shape[2];
  const int64_t grouped = grouped_kv_heads(g);  // 0 for multi-head attention
  if (kv_sharding == "batch") {
    const std::string b = scheme == "megatron" ? "A" : "(A, B)";
    return {{"layer*.attn.[kv]_cache", "[" + b + ", -, -, -]"}, {"layer*.attn.[kv]_cache.scale", "[" + b + ", -, -]"},
            {"kv_cache.resident", "[-, -, " + b + ", -, -, -]"}, {"kv_cache.resident.scale", "[-, -, " + b + ", -, -]"}};
  }
  std::string heads;
  if (scheme == "megatron" && (grouped == 0 || kv % axis_a == 0)) heads = "A";
  if (scheme == "2d" && grouped == 0) heads = heads_2d(kv, axes);
  const std::string batch = "-";
  if (heads.empty() && batch == "-") return {};
  const std::string h = heads.empty() ? "-" : heads;
  return {{"layer*.attn.[kv]_cache", "[" + batch + ", -, " + h + ", -]"},
          {"layer*.attn.[kv]_cache.scale", "[" + batch + ", -, " + h + "]"},
          {"kv_cache.resident", "[-, -, " + batch + ", -, " + h + ", -]"},
          {"kv_cache.resident.scale", "[-, -, " + batch + ", -, " + h + "]"}};
}

// The scheme's rules with, unless strategy.vocab_parallel is false, the vocabulary split over the scheme's model
// axis (megatron: its one axis; 2d: s1, the axis that splits the heads and the FFN's hidden units).
std::vector<Rule> scheme_rules(const std::string& scheme, const std::string& workload, const ModelGraph& g,
                               int64_t axis_a, int64_t axis_b, bool vocab_parallel) {
  std::vector<Rule> r = base_rules(scheme, workload, g, axis_a, axis_b);
  const bool encoder = workload == "bert" || workload == "encoder_decoder" || workload == "gnmt";  // megatron only
  if ((workload != "transformer" && !(encoder && scheme == "megatron")) || !vocab_parallel) return r;
  const std::string axis = scheme == "megatron" ? "A" : scheme == "2d" ? "B" : "";
  if (axis.empty()) return r;
  r.erase(std::remove_if(r.begin(), r.end(), [](const Rule& x) { return x.pattern == "embedding"; }), r.end());
  for (const Rule& v : vocab_rules(axis)) r.push_back(v);
  return r;
}

// Sequence parallelism (Korthikanti et al. 2022) over the megatron scheme's axis: the residual stream [B, S, D]
// (the embedding's output, every residual sum, the FFN's output bias) is split along S, so the layer norms and the
// dropout-free elementwise ops run on S / n rows. The column-parallel matmuls (q, k, v, the FFN's up and gate, the
// unembedding: those that read a norm's output) have their outputs annotated with S whole and split as their
// weight, so the partitioner all-gathers their input along S; the row-parallel ones (attn.o, ffn.down), whose
// pending sums meet the split residual stream, are reduce-scattered into S instead of all-reduced. Backward, the
// gradient of a row-parallel matmul's input is annotated likewise (its output gradient is all-gathered along S),
// and the norms' input gradients are reduce-scattered. `mine` holds the scheme's specs (the weights'); the specs
// of the activations go to `out`, their batch dimension split over `batch` (the axes the other strategies split the
// batch over: a value of a data-parallel step is a replica's rows).
void sequence_parallel(const ModelGraph& g, const std::string& axis, const std::map<TensorId, ShardSpec>& mine,
                       const std::vector<std::string>& batch, std::map<TensorId, ShardSpec>& out) {
  ShardSpec seq = ShardSpec::parse("[-, " + axis + ", -]");
  seq.dims[0] = batch;
  for (size_t t = 0; t < g.num_tensors(); ++t) {
    const TensorInfo& info = g.tensor(static_cast<TensorId>(t));
    if (info.shape.size() != 3) continue;
    for (const char* pattern : {"embed", "layer*.attn.residual", "layer*.ffn.residual", "layer*.moe.residual",
                                "layer*.block.residual", "layer*.ffn.down.bias"})
      if (fnmatch(pattern, info.name.c_str(), 0) == 0) out[static_cast<TensorId>(t)] = seq;
  }
  // The spec of an operand or result with `letters` of an einsum whose weight operand has letters `w` and spec
  // `ws`: the weight's split on the letters they share, nothing else split.
  auto from_weight = [&](const std::string& letters, const std::string& w, const ShardSpec& ws) {
    ShardSpec s = ShardSpec::replicated(letters.size());
    s.dims[0] = batch;
    for (size_t i = 0; i < letters.size(); ++i) {
      const size_t k = w.find(letters[i]);
      if (k != std::string::npos) s.dims[i] = ws.dims[k];
    }
    return s;
  };
  for (OpId id : g.topological_order()) {
    const Op& op = g.op(id);
    if (op.kind != OpKind::MatMul || op.phase != Phase::Forward) continue;
    TensorId w = op.inputs[1];
    // Mixed precision: the matmul reads the weight's compute copy, made by a convert of the parameter.
    if (const OpId c = g.producer(w); g.tensor(w).role == TensorRole::WeightCopy && c >= 0 &&
                                       g.op(c).kind == OpKind::Convert)
      w = g.op(c).inputs[0];
    if (g.tensor(w).role != TensorRole::Parameter) continue;
    const std::string& eq = op.attrs.equation;
    const size_t comma = eq.find(','), arrow = eq.find("->");
    if (comma == std::string::npos || arrow == std::string::npos) continue;
    const std::string lhs = eq.substr(0, comma), rhs = eq.substr(comma + 1, arrow - comma - 1), res = eq.substr(arrow + 2);
    const ShardSpec ws = mine.count(w) ? mine.at(w) : ShardSpec::replicated(g.tensor(w).shape.size());
    if (lhs.rfind("bs", 0) != 0) continue;  // not on the [B, S, ...] stream
    const OpId producer = g.producer(op.inputs[0]);
    const bool column = producer >= 0 && (g.op(producer).kind == OpKind::LayerNorm || g.op(producer).kind == OpKind::RmsNorm);
    if (column) {
      out[op.outputs[0]] = from_weight(res, rhs, ws);
      continue;
    }
    // Row-parallel: the weight split on a contracted letter, the result on the residual stream.
    bool contracted_split = false;
    for (size_t k = 0; k < rhs.size(); ++k)
      contracted_split = contracted_split || (!ws.dims[k].empty() && res.find(rhs[k]) == std::string::npos &&
                                              lhs.find(rhs[k]) != std::string::npos);
    const TensorId dA = g.find_tensor(op.name + ".dA");
    if (contracted_split && res.size() == 3 && dA >= 0) out[dA] = from_weight(lhs, rhs, ws);
  }
}

std::string substitute(std::string spec, const std::vector<std::string>& axes) {
  std::string out;
  for (char c : spec) {
    if (c == 'A') out += axes.at(0);
    else if (c == 'B') out += axes.at(1);
    else out += c;
  }
  return out;
}

// "PATTERN = SPEC"
bool split_rule(const std::string& entry, std::string& pattern, std::string& spec) {
  auto eq = entry.find('=');
  if (eq == std::string::npos) return false;
  auto trim = [](std::string s) {
    size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  pattern = trim(entry.substr(0, eq));
  spec = trim(entry.substr(eq + 1));
  return !pattern.empty() && !spec.empty();
}

class Spmd : public IStrategy {
 public:
  std::vector<ParamSpec> params() const override {
    return {
        ParamSpec::choice("strategy.scheme", {"megatron", "2d", "none"},
                          "spmd: built-in sharding scheme (docs/strategies.md): megatron (1-D over one axis), 2d "
                          "(GSPMD's 2-D Transformer sharding over two axes), none (only strategy.shard).")
            .def("megatron"),
        ParamSpec::text_list("strategy.spmd_axes", "spmd: the mesh axes it owns; megatron uses one, 2d two (s0, s1).")
            .length(1, 2)
            .def("[model]"),
        ParamSpec::boolean("strategy.vocab_parallel",
                           "spmd: split a Transformer's vocabulary over the model axis (megatron: its axis; 2d: s1): "
                           "embedding [V, D] and unembedding [D, V] by V, logits [B, S, V] by V into a parallel "
                           "cross-entropy, never gathered (Megatron-LM's vocab-parallel embedding and "
                           "cross-entropy); false keeps both whole (2d: the table's D over s1).")
            .def("true"),
        ParamSpec::boolean("strategy.sequence_parallel",
                           "spmd (scheme megatron, Transformer): sequence parallelism (Korthikanti et al. 2022): the "
                           "residual stream, layer norms and dropout-free elementwise ops split along the sequence "
                           "over the model axis; each all-reduce of a layer becomes a reduce-scatter and an "
                           "all-gather.")
            .def("false"),
        ParamSpec::boolean("strategy.spatial",
                           "spmd: spatial partitioning of a convolutional network (GSPMD): the images and every "
                           "feature map [B, H, W, C] split along H over spmd's first axis; each convolution and max "
                           "pool exchanges its halo rows with its neighbours (collective-permutes), batch-norm "
                           "statistics are all-reduced over the axis, the global average pool gathers the rows "
                           "(docs/strategies.md).")
            .def("false"),
        ParamSpec::boolean("strategy.spatial_gather",
                           "spmd with strategy.spatial: a convolution or max pool whose map is too small for the "
                           "split (fewer rows than devices, or halos past a neighbour: SSD's last feature maps) has "
                           "its input's rows all-gathered over the axis and runs whole on every device of it, as does "
                           "everything after it; false refuses such a split.")
            .def("false"),
        ParamSpec::choice("strategy.kv_sharding", {"heads", "batch"},
                          "spmd, inference steps: how the KV cache splits over the scheme's axes: heads (as the "
                          "key/value heads split; a multi-query cache whose one head cannot split is held whole on "
                          "every device) or batch (by sequence: Pope et al.'s multi-query attention sharded over the "
                          "batch, the queries and the attention's output moved by an all-to-all per layer, and the "
                          "fresh keys and values too where the projections split their heads).")
            .def("heads"),
        ParamSpec::text_list("strategy.shard",
                             "spmd: per-tensor annotations \"PATTERN = SPEC\": tensors whose name matches the glob "
                             "get SPEC, e.g. \"layer*.ffn.w1 = [-, model]\" (docs/strategies.md).")
            .length(0, 1000)
            .def("[]"),
    };
  }

  void validate(const ParamSet& p) const override {
    const auto& axes = p.strings("strategy.spmd_axes");
    const std::string scheme = p.s("strategy.scheme");
    size_t need = scheme == "megatron" ? 1 : scheme == "2d" ? 2 : axes.size();
    if (axes.size() != need)
      throw Error(Err::LengthMismatch, p.where("strategy.spmd_axes"),
                  "strategy.scheme " + scheme + " shards over " + std::to_string(need) + " mesh axes, but "
                  "strategy.spmd_axes names " + std::to_string(axes.size()),
                  "strategy.spmd_axes");
    if (p.b("strategy.sequence_parallel") && scheme != "megatron")
      throw Error(Err::StrategyMismatch, p.where("strategy.sequence_parallel"),
                  "strategy.sequence_parallel splits the sequence over the megatron scheme's model axis, but "
                  "strategy.scheme is " + scheme + "; use scheme: megatron or leave sequence_parallel false",
                  "strategy.sequence_parallel");
    for (const std::string& entry : p.strings("strategy.shard")) {
      std::string pattern, spec;
      if (!split_rule(entry, pattern, spec))
        throw Error(Err::BadSharding, p.where("strategy.shard"),
                    "cannot read the annotation '" + entry + "'; write \"PATTERN = SPEC\", e.g. "
                    "\"layer*.ffn.w1 = [-, model]\"",
                    "strategy.shard");
      try {
        ShardSpec::parse(spec);
      } catch (const Error& e) {
        throw Error(Err::BadSharding, p.where("strategy.shard"), e.message(), "strategy.shard");
      }
    }
  }

  std::vector<std::string> axes(const ParamSet& p) const override { return p.strings("strategy.spmd_axes"); }

  // The scheme's specs and the strategy.shard annotations.
  std::map<TensorId, ShardSpec> own_specs(const ModelGraph& g, const Experiment& exp, const Mesh& mesh) const {
    const ParamSet& p = exp.params;
    const auto& axes = p.strings("strategy.spmd_axes");
    std::map<TensorId, ShardSpec> mine;
    const int64_t both = axes.size() > 1 ? mesh.axis_size(axes.at(0)) * mesh.axis_size(axes.at(1)) : 1;
    std::vector<Rule> rules = scheme_rules(p.s("strategy.scheme"), exp.workload, g, mesh.axis_size(axes.at(0)), both,
                                           p.b("strategy.vocab_parallel"));
    for (const Rule& r : kv_rules(p.s("strategy.scheme"), p.s("strategy.kv_sharding"), g, mesh.axis_size(axes.at(0)), both))
      rules.push_back(r);
    check_spmd_kv_batch(g, exp, mesh);
    check_spmd_convolutional(!rules.empty(), exp);
    for (const Rule& r : rules)
      for (size_t t = 0; t < g.num_tensors(); ++t)
        if (fnmatch(r.pattern.c_str(), g.tensor(static_cast<TensorId>(t)).name.c_str(), 0) == 0)
          mine[static_cast<TensorId>(t)] = ShardSpec::parse(substitute(r.spec, axes));
    for (const std::string& entry : p.strings("strategy.shard")) {
      std::string pattern, spec;
      split_rule(entry, pattern, spec);
      ShardSpec s = ShardSpec::parse(spec);
      int matched = 0;
      for (size_t t = 0; t < g.num_tensors(); ++t) {
        const TensorInfo& info = g.tensor(static_cast<TensorId>(t));
        if (fnmatch(pattern.c_str(), info.name.c_str(), 0) != 0) continue;
        ++matched;
        if (s.rank() != info.shape.size())
          throw Error(Err::BadSharding, p.where("strategy.shard"),
                      "the annotation '" + entry + "' gives " + std::to_string(s.rank()) + " entries but '" +
                          info.name + "' is " + info.shape_text() + " (one entry per dimension)",
                      "strategy.shard");
        for (const auto& a : s.axes())
          if (std::find(axes.begin(), axes.end(), a) == axes.end())
            throw Error(Err::BadSharding, p.where("strategy.shard"),
                        "the annotation '" + entry + "' splits over mesh axis '" + a +
                            "', which spmd does not own (strategy.spmd_axes: [" + join(axes, ", ") + "])",
                        "strategy.shard");
        mine[static_cast<TensorId>(t)] = s;
      }
      if (matched == 0)
        throw Error(Err::BadSharding, p.where("strategy.shard"),
                    "the annotation '" + entry + "' matches no tensor of the " + exp.workload +
                        " step (names as in tensors/ and the trace, e.g. layer0.ffn.w1)",
                    "strategy.shard");
    }
    return mine;
  }

  void annotate(const ModelGraph& g, const Experiment& exp, const Mesh& mesh, Annotations& specs) const override {
    for (const auto& [t, s] : own_specs(g, exp, mesh)) add_spec(specs, g, t, s);
    if (exp.params.b("strategy.spatial")) (void)spatial(g, exp, mesh, specs);
  }

  // Spatial partitioning: the step's NHWC inputs split along H over the first axis; the partition rules of the
  // convolutions, pools and batch norms carry the split through the network (plan/halo.h). Every windowed op the
  // split reaches is checked here, so that a map too small for it is reported against strategy.spatial.
  // Returns the tensors whose rows strategy.spatial_gather gathers.
  static std::vector<TensorId> spatial(const ModelGraph& g, const Experiment& exp, const Mesh& mesh,
                                       Annotations& specs) {
    const ParamSet& p = exp.params;
    const bool gather = p.b("strategy.spatial_gather");
    std::vector<TensorId> gathered;
    const std::string axis = p.strings("strategy.spmd_axes").at(0);
    const int64_t n = mesh.axis_size(axis);
    std::vector<bool> split(g.num_tensors(), false);
    for (size_t t = 0; t < g.num_tensors(); ++t) {
      const TensorInfo& info = g.tensor(static_cast<TensorId>(t));
      if (g.producer(static_cast<TensorId>(t)) >= 0 || info.role != TensorRole::Input || info.shape.size() != 4) continue;
      add_spec(specs, g, static_cast<TensorId>(t), ShardSpec::parse("[-, " + axis + ", -, -]"));
      split[t] = true;
    }
    if (std::find(split.begin(), split.end(), true) == split.end())
      throw Error(Err::StrategyMismatch, p.where("strategy.spatial"),
                  "strategy.spatial splits images [batch, height, width, channels] along their height; the " +
                      exp.workload + " workload has none (use a convolutional network, or leave it false)",
                  "strategy.spatial");
    if (n < 2) return gathered;
    // A collective-permute steps along one ring: the axis must lie on one torus dimension.
    if (mesh.axis(mesh.axis_index(axis)).factors.size() > 1)
      throw Error(Err::SpatialSplit, p.where("strategy.spatial"),
                  "strategy.spatial exchanges halos between neighbours along axis '" + axis + "', which the mesh (" +
                      mesh.describe() + ") lays over several torus dimensions; place it on one (mesh.placement)",
                  "strategy.spatial");
    for (OpId id : g.topological_order()) {
      const Op& op = g.op(id);
      if (op.phase != Phase::Forward || op.inputs.empty() || !split[op.inputs[0]]) continue;
      if (op.kind == OpKind::Conv2d || op.kind == OpKind::MaxPool) {
        HaloGeometry h;
        const OpAttrs::Window& w = op.attrs.window;
        const int64_t rows = g.tensor(op.inputs[0]).shape[1], out = g.tensor(op.outputs[0]).shape[1];
        const std::string why = halo_geometry(n, rows, out, w.kh, w.sh, w.pt, h);
        if (!why.empty() && gather) {  // its input gathered (refine annotates it): it and what follows run whole
          split[op.inputs[0]] = false;
          gathered.push_back(op.inputs[0]);
          continue;
        }
        if (!why.empty())
          throw Error(Err::SpatialSplit, p.where("strategy.spatial"),
                      "strategy.spatial cannot split layer '" + op.name + "' (height " + std::to_string(rows) +
                          ") over the " + std::to_string(n) + " devices of axis '" + axis + "': " + why +
                          "; use fewer devices on the axis or larger images (or strategy.spatial_gather: true, "
                          "which gathers such maps)",
                      "strategy.spatial");
      }
      // The split goes on through every op but the global pool (which gathers the rows) and reshapes.
      if (op.kind == OpKind::AvgPool || op.kind == OpKind::Reshape) continue;
      for (TensorId o : op.outputs)
        if (g.tensor(o).shape.size() == 4) split[o] = true;
    }
    return gathered;
  }

  // strategy.spatial_gather, once every strategy has annotated the images' batch: each gathered map keeps the
  // images' batch split, its rows whole.
  static void gather_small_maps(const ModelGraph& g, const Experiment& exp, const Mesh& mesh, Annotations& specs) {
    Annotations scratch;
    const std::vector<TensorId> gathered = spatial(g, exp, mesh, scratch);
    std::vector<std::string> batch;
    for (const auto& [t, spec] : specs) {
      const TensorInfo& info = g.tensor(t);
      if (g.producer(t) >= 0 || info.role != TensorRole::Input || info.shape.size() != 4 || spec.rank() != 4) continue;
      batch = spec.dims[0];
      break;
    }
    for (TensorId t : gathered) {
      ShardSpec whole = ShardSpec::replicated(4);
      whole.dims[0] = batch;
      specs[t] = whole;
    }
  }

  // Under a row split a batch norm's sums are all-reduced over the spatial axis (with the group's replicas), so each
  // device's examples must be one group or part of one. Checked once every strategy has annotated the images'
  // batch, against workload.bn_batch (the partition rule says the same without a place in the file).
  static void spatial_batch_norm_groups(const ModelGraph& g, const Experiment& exp, const Mesh& mesh,
                                        const Annotations& specs) {
    const ParamSet& p = exp.params;
    const std::string axis = p.strings("strategy.spmd_axes").at(0);
    if (mesh.axis_size(axis) < 2) return;
    int64_t replicas = 1;  // devices the images' batch is split over
    for (const auto& [t, spec] : specs) {
      const TensorInfo& info = g.tensor(t);
      if (g.producer(t) >= 0 || info.role != TensorRole::Input || info.shape.size() != 4 || spec.rank() != 4) continue;
      replicas = mesh.size(spec.dims[0]);
      break;
    }
    for (OpId id : g.topological_order()) {
      const Op& op = g.op(id);
      if (op.kind != OpKind::BatchNormStats || op.phase != Phase::Forward) continue;
      const int64_t batch = g.tensor(op.inputs[0]).shape[0];
      const int64_t group = op.attrs.count > 0 ? op.attrs.count : batch;
      if (batch % replicas != 0 || batch / replicas <= group) continue;
      const int64_t local = batch / replicas;
      const std::string key = p.has("workload.bn_batch") ? "workload.bn_batch" : "strategy.spatial";
      throw Error(Err::SpatialSplit, p.where(key),
                  "strategy.spatial splits the rows of batch norm '" + op.name + "', whose sums are then all-reduced "
                      "over axis '" + axis + "': each device's " + std::to_string(local) + " examples must be one "
                      "group or part of one, not " + std::to_string(local / group) + " groups of " +
                      std::to_string(group) + "; set workload.bn_batch to at least " + std::to_string(local),
                  key);
    }
  }

  // Sequence parallelism, once every strategy has annotated the step: the activations it splits along S keep the
  // batch split the others gave the step's ids (data_parallel's `data`, ...).
  void refine(const ModelGraph& g, const Experiment& exp, const Mesh& mesh, Annotations& specs) const override {
    const ParamSet& p = exp.params;
    if (p.b("strategy.spatial")) spatial_batch_norm_groups(g, exp, mesh, specs);
    if (p.b("strategy.spatial") && p.b("strategy.spatial_gather")) gather_small_maps(g, exp, mesh, specs);
    if (!p.b("strategy.sequence_parallel")) return;
    const auto& axes = p.strings("strategy.spmd_axes");
    if (exp.workload != "transformer")
      throw Error(Err::StrategyMismatch, p.where("strategy.sequence_parallel"),
                  "strategy.sequence_parallel splits a Transformer's residual stream along the sequence; the " +
                      exp.workload + " workload has none (use workload.model: transformer, or leave it false)",
                  "strategy.sequence_parallel");
    if (mesh.axis_size(axes.at(0)) < 2)
      throw Error(Err::StrategyMismatch, p.where("strategy.sequence_parallel"),
                  "strategy.sequence_parallel splits the sequence over the model axis '" + axes.at(0) +
                      "', which has 1 chip; give it 2 or more (mesh.shape) or leave sequence_parallel false",
                  "strategy.sequence_parallel");
    std::vector<std::string> batch;
    const TensorId ids = g.find_tensor("tokens");
    if (ids >= 0 && specs.count(ids)) batch = specs.at(ids).dims[0];
    std::map<TensorId, ShardSpec> seq;
    sequence_parallel(g, axes.at(0), own_specs(g, exp, mesh), batch, seq);
    for (const auto& [t, s] : seq) add_spec(specs, g, t, s);
  }
};

PODSIM_REGISTER_STRATEGY(Spmd, "spmd",
                         "Tensor sharding (GSPMD): Megatron 1-D or 2-D schemes and per-tensor annotations");

}  // namespace
}  // namespace podsim

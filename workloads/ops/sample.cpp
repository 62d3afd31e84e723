// Sampling the next token on the chip, as the serving engines do after the logits (JetStream's and vLLM TPU's
// samplers; docs/serving.md): logits [N, V] -> ids [N] int32, by attrs.sampling
//   greedy  the argmax (the first of equal maxima)
//   top_k   a draw from the softmax over the attrs.top_k largest logits
//   top_p   a draw from the softmax over the smallest set of largest logits whose probabilities reach attrs.top_p
// A draw takes one uniform number per row from (attrs.seed, the row's index): the same token whatever the layout.
// Candidates are ordered by value, then by vocabulary index, so ties break alike everywhere.
//
// Partitioning: rows split as they come. Greedy and top-k over a vocabulary split across devices run as
// SampleCandidates on each shard (its K best (value, global index) pairs, K = 1 for greedy), an all-gather of the
// pairs over the vocabulary's axes and SampleFinish over the pooled P K pairs: what XLA's SPMD partitioner does
// with an argmax over a split dimension, moving 2 K values per row instead of the logits. Top-p needs every
// probability: its logits are gathered whole.
//
// Cost on the vector unit: greedy one compare and select per logit and a row maximum; top-k and top-p a bitonic
// sorting network over the row (log2 V (log2 V + 1) / 2 stages of a compare and a select per element; top-p adds
// the softmax's exponential per logit).
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

struct Candidate {
  float value;
  float index;
};
bool better(const Candidate& a, const Candidate& b) { return a.value != b.value ? a.value > b.value : a.index < b.index; }

// The uniform number of row `row`, from the op's seed: splitmix64 of (seed, row), so it depends on nothing else.
double uniform(uint64_t seed, int64_t row) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(row + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

// The sample among candidates sorted best first (all of them for top_p).
float choose(const std::vector<Candidate>& c, const OpAttrs& a, int64_t row) {
  if (c.empty()) return 0;
  if (a.sampling == "greedy") return c.front().index;
  size_t n = a.sampling == "top_k" ? std::min(c.size(), static_cast<size_t>(a.top_k)) : c.size();
  std::vector<double> p(n);
  const double mx = c.front().value;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += p[i] = std::exp(static_cast<double>(c[i].value) - mx);
  if (a.sampling == "top_p") {  // the smallest prefix whose probability reaches top_p
    double acc = 0;
    size_t keep = 0;
    while (keep < n && acc < a.top_p * sum) acc += p[keep++];
    n = std::max<size_t>(keep, 1);
    sum = 0;
    for (size_t i = 0; i < n; ++i) sum += p[i];
  }
  double u = uniform(a.seed, row) * sum;
  for (size_t i = 0; i < n; ++i) {
    if (u < p[i]) return c[i].index;
    u -= p[i];
  }
  return c[n - 1].index;
}

// A row's candidates, best first: the `keep` best (all when keep <= 0), global index = offset + column; columns at or
// past `limit` (a shard's padding) are none.
std::vector<Candidate> row_candidates(const float* x, int64_t v, int64_t offset, int64_t limit, int64_t keep) {
  std::vector<Candidate> c;
  for (int64_t j = 0; j < v && offset + j < limit; ++j) c.push_back({x[j], static_cast<float>(offset + j)});
  const size_t k = keep > 0 ? std::min(c.size(), static_cast<size_t>(keep)) : c.size();
  std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(k), c.end(), better);
  c.resize(k);
  return c;
}

int64_t keep_of(const OpAttrs& a) { return a.sampling == "greedy" ? 1 : a.sampling == "top_k" ? a.top_k : 0; }

OpCost sample_cost(const ModelGraph& g, const Op& op) {
  const int64_t v = g.tensor(op.inputs[0]).shape.back();
  const double stages = std::ceil(std::log2(static_cast<double>(std::max<int64_t>(v, 2))));
  if (op.attrs.sampling == "greedy") return ops::reduction(ops::vpu_cost(g, op, 2, 0, 0, 1));
  const double sort = stages * (stages + 1) / 2 * 2;
  return ops::vpu_cost(g, op, sort, op.attrs.sampling == "top_p" ? 1 : 0, 0, 1);
}

// The first row of this device's rows (attrs.axes split them) among all rows.
int64_t first_row(const TensorStore& s, const Op& op, int64_t rows) { return s.device_index(op.attrs.axes) * rows; }

void sample_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  const int64_t n = x.shape[0], v = x.shape[1], row0 = first_row(s, op, n);
  Tensor ids = ops::out_like(g, op);
  for (int64_t r = 0; r < n; ++r)
    ids.data[r] = choose(row_candidates(&x.data[r * v], v, 0, v, keep_of(op.attrs)), op.attrs, row0 + r);
  s.put(op.outputs[0], std::move(ids));
}

// Its shard's best pairs, [1, N, 2 K]: (value, global index), -infinity and -1 where the shard has fewer.
void candidates_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  const int64_t n = x.shape[0], v = x.shape[1], k = keep_of(op.attrs);
  const int64_t offset = s.device_index(op.attrs.axes) * v;  // attrs.axes: the vocabulary's
  Tensor out = ops::out_like(g, op);
  for (int64_t r = 0; r < n; ++r) {
    const std::vector<Candidate> c = row_candidates(&x.data[r * v], v, offset, op.attrs.count, k);
    for (int64_t i = 0; i < k; ++i) {
      const bool has = i < static_cast<int64_t>(c.size());
      out.data[(r * k + i) * 2] = has ? c[static_cast<size_t>(i)].value : -std::numeric_limits<float>::infinity();
      out.data[(r * k + i) * 2 + 1] = has ? c[static_cast<size_t>(i)].index : -1.0f;
    }
  }
  s.put(op.outputs[0], std::move(out));
}

void finish_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  const int64_t shards = x.shape[0], n = x.shape[1], k2 = x.shape[2], row0 = first_row(s, op, n);
  Tensor ids = ops::out_like(g, op);
  for (int64_t r = 0; r < n; ++r) {
    std::vector<Candidate> c;
    for (int64_t p = 0; p < shards; ++p)
      for (int64_t i = 0; i < k2; i += 2) {
        const float* pair = &x.data[(p * n + r) * k2 + i];
        if (pair[1] >= 0) c.push_back({pair[0], pair[1]});
      }
    std::sort(c.begin(), c.end(), better);
    ids.data[r] = choose(c, op.attrs, row0 + r);
  }
  s.put(op.outputs[0], std::move(ids));
}

OpCost candidates_cost(const ModelGraph& g, const Op& op) { return sample_cost(g, op); }
OpCost finish_cost(const ModelGraph& g, const Op& op) { return ops::vpu_cost(g, op, 2, 1, 0, 1); }

OpSharding sample_rule(const OpShardingQuery& q) {
  const ShardSpec x = sharding::settled(q.in[0]);
  const std::vector<std::string> rows = x.dims[0], vocab = x.dims[1];
  OpSharding r;
  r.attrs = q.op.attrs;
  r.attrs.axes = rows;
  ShardSpec ids = ShardSpec::replicated(1);
  ids.dims[0] = rows;
  r.out = {ids};
  if (vocab.empty() || q.op.attrs.sampling == "top_p") {
    ShardSpec whole = x;
    whole.dims[1].clear();
    r.in = {whole};
    return r;
  }
  r.in = {x};
  const TensorInfo& logits = q.g.tensor(q.op.inputs[0]);
  const int64_t n = local_shape(logits.shape, x, q.mesh)[0], k = keep_of(q.op.attrs);
  int64_t shards = 1;
  for (const std::string& a : vocab) shards *= q.mesh.axis_size(a);
  // Slots: 0 logits, 1 ids, 2 this shard's pairs, 3 every shard's.
  r.scratch = {{q.op.name + ".candidates", {1, n, 2 * k}}, {q.op.name + ".candidates.all", {shards, n, 2 * k}}};
  OpAttrs local = r.attrs;
  local.axes = vocab;
  local.count = logits.shape[1];  // the vocabulary: a padded shard's columns past it are none
  OpAttrs gather;
  gather.axes = vocab;
  gather.dim = 0;
  r.steps = {{"candidates", OpKind::SampleCandidates, {0}, {2}, local},
             {"", OpKind::AllGather, {2}, {3}, gather},
             {"finish", OpKind::SampleFinish, {3}, {1}, r.attrs}};
  return r;
}

const bool registered =
    register_op_kind({OpKind::Sample, "sample", Unit::Vpu, sample_cost, sample_kernel, nullptr, sample_rule}) &&
    register_op_kind({OpKind::SampleCandidates, "sample_candidates", Unit::Vpu, candidates_cost, candidates_kernel,
                      nullptr}) &&
    register_op_kind({OpKind::SampleFinish, "sample_finish", Unit::Vpu, finish_cost, finish_kernel, nullptr});

}  // namespace
}  // namespace podsim

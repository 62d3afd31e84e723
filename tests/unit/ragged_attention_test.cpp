// The ops of the inference steps (docs/serving.md, "The inference step"): the decode attention kernel
// (workloads/ops/ragged_attention.cpp) by hand count of its FLOPs, bytes, MXU feed and vector work, its cost on split
// rows (the slowest device's), its int8 cache against attention over the dequantized values, and its partition rule;
// the cache write (workloads/ops/kv_cache.cpp) and the sampling (workloads/ops/sample.cpp) by hand count.
#include <gtest/gtest.h>

#include <cmath>

#include "plan/mesh.h"
#include "topology/torus.h"
#include "workloads/builder.h"
#include "workloads/ops/op_kind.h"
#include "workloads/quantization.h"
#include "workloads/reference.h"
#include "workloads/tensor_compare.h"

using namespace podsim;

namespace {

// A decode of sequences with `cached` tokens each (one row a sequence, one new token), grouped-query attention of
// KV heads with G query heads each, head width E; `kv` the cache's type (int8 or fp8 adds the scales).
struct Decode {
  ModelGraph g{"decode"};
  Op op;
};
Decode decode(const std::vector<int64_t>& cached, int64_t KV, int64_t G, int64_t E, DType kv, int64_t block,
              int64_t rows = -1) {
  Decode d;
  GraphBuilder b(d.g, DType::BF16);
  const int64_t N = static_cast<int64_t>(cached.size()), R = rows < 0 ? N : rows;
  int64_t C = 0;
  for (int64_t c : cached) C = std::max(C, c + 1);
  Op& op = d.op;
  op.name = "attn";
  op.kind = OpKind::RaggedAttention;
  auto cache = [&](const char* name, std::vector<int64_t> shape, DType t) {
    return d.g.add_tensor({name, std::move(shape), t, TensorRole::KvCache});
  };
  op.inputs = {b.input("q", {R, 1, KV, G, E}, DType::BF16), cache("k", {R, C, KV, E}, kv),
               cache("v", {R, C, KV, E}, kv)};
  if (quantized_type(kv))
    op.inputs.insert(op.inputs.end(), {cache("k.scale", {R, C, KV}, DType::F32), cache("v.scale", {R, C, KV}, DType::F32)});
  op.outputs = {d.g.add_tensor({"o", {R, 1, KV, G, E}, DType::BF16, TensorRole::Activation})};
  op.attrs.alpha = 1.0 / std::sqrt(static_cast<double>(E));
  op.attrs.blocks.q = 128;
  op.attrs.blocks.kv = block;
  op.attrs.ragged.cached = cached;
  op.attrs.ragged.fresh.assign(cached.size(), 1);
  op.attrs.ragged.width.assign(cached.size(), 1);
  return d;
}

}  // namespace

TEST(RaggedAttentionTest, DecodeCostByHandCount) {
  // Three sequences of 1000, 300 and 0 cached tokens, each adding one: 1001, 301 and 1 keys, in blocks of 256:
  // 4 + 2 + 1 = 7 blocks per key/value head, 8 heads: 56 block pairs. Each pair is two products with the block as
  // the array's weights and the group's 8 query heads streamed: the scores (8 x 128 . 128 x 256) and the values
  // (8 x 256 . 256 x 128).
  const Decode d = decode({1000, 300, 0}, 8, 8, 128, DType::BF16, 256);
  const OpCost c = op_cost(d.g, d.op);
  const double pairs = 56, E = 128, bk = 256, rows = 8, H = 64;
  EXPECT_EQ(c.unit, Unit::Mxu);
  const std::vector<GemmPass> passes = kernel_gemms(d.g, d.op);
  ASSERT_EQ(passes.size(), 2u);
  EXPECT_EQ(passes[0].count, 56);
  EXPECT_EQ(passes[0].m, 8);
  EXPECT_EQ(passes[0].k, 128);
  EXPECT_EQ(passes[0].n, 256);
  EXPECT_EQ(passes[1].count, 56);
  EXPECT_EQ(passes[1].m, 8);
  EXPECT_EQ(passes[1].k, 256);
  EXPECT_EQ(passes[1].n, 128);
  EXPECT_DOUBLE_EQ(c.flops, 2 * 2.0 * pairs * bk * E * rows);
  // Model FLOPs: the products over the keys each query sees, 4 E H per (query, key).
  EXPECT_DOUBLE_EQ(c.model_flops, 4 * E * H * (1001 + 301 + 1));
  // The queries once (3 tokens x 64 heads x 128, bf16), a whole key block and value block per pair; o written once.
  const double q = 3 * H * E * 2;
  EXPECT_DOUBLE_EQ(c.bytes_read, q + pairs * 2 * bk * E * 2);
  EXPECT_DOUBLE_EQ(c.bytes_written, q);
  // Per score: scale, max, cast (3), the accumulator's rescale 2 E / bk; one exponential, the row max and sum.
  EXPECT_DOUBLE_EQ(c.vector.elements, pairs * rows * bk);
  EXPECT_DOUBLE_EQ(c.vector.simple, 3 + 2 * E / bk);
  EXPECT_DOUBLE_EQ(c.vector.transcendental, 1);
  EXPECT_DOUBLE_EQ(c.vector.reduce, 2);
  // An int8 cache: half the cache bytes, each block's fp32 scales beside it, and the dequantization's convert and
  // multiply per cache element (2 x 2 E per key, over the 8 rows of scores it feeds: 4 E / rows per score).
  const Decode i8 = decode({1000, 300, 0}, 8, 8, 128, DType::I8, 256);
  const OpCost ci = op_cost(i8.g, i8.op);
  EXPECT_DOUBLE_EQ(ci.bytes_read, q + pairs * (2 * bk * E * 1 + 2 * bk * 4));
  EXPECT_DOUBLE_EQ(ci.vector.simple, 3 + 2 * E / bk + 4 * E / rows);
  EXPECT_DOUBLE_EQ(ci.flops, c.flops);
}

TEST(RaggedAttentionTest, SplitRowsCostTheSlowestDevice) {
  // Four sequences over two devices (two rows each): the first holds 1000 and 10 cached tokens (4 + 1 blocks of
  // 256), the second 10 and 10 (1 + 1). The program is both devices', so it costs the first's 5 blocks a head.
  const Decode d = decode({1000, 10, 10, 10}, 1, 4, 128, DType::BF16, 256, 2);
  EXPECT_EQ(kernel_gemms(d.g, d.op)[0].count, 5);
  const Decode whole = decode({1000, 10, 10, 10}, 1, 4, 128, DType::BF16, 256);
  EXPECT_EQ(kernel_gemms(whole.g, whole.op)[0].count, 7);
}

TEST(RaggedAttentionTest, Int8CacheEqualsAttentionOverItsDequantizedValues) {
  // The same decode twice: over an int8 cache with its scales, and over an fp32 cache holding q * scale. Both in
  // fp32 queries: the dequantization is the only difference, and it is exact algebra.
  auto run = [](DType kv) {
    Decode d = decode({5, 9, 2}, 2, 2, 8, kv, 4);
    for (TensorId t = 0; t < static_cast<TensorId>(d.g.num_tensors()); ++t)
      if (d.g.tensor(t).dtype == DType::BF16) d.g.tensor(t).dtype = DType::F32;
    d.g.add_op(d.op);
    TensorStore st;
    init_step_inputs(d.g, st, 7);
    return std::make_pair(std::move(d), std::move(st));
  };
  auto [qd, qs] = run(DType::I8);
  auto [fd, fs] = run(DType::F32);
  // The fp32 cache: the int8 cache's values times their scales; the queries alike.
  for (const char* name : {"k", "v"}) {
    const Tensor& q8 = qs.get(qd.g.find_tensor(name));
    const Tensor& sc = qs.get(qd.g.find_tensor(std::string(name) + ".scale"));
    Tensor& f = fs.get_mut(fd.g.find_tensor(name));
    for (int64_t i = 0; i < f.elements(); ++i) f.data[i] = q8.data[i] * sc.data[i / 8];
  }
  fs.put(fd.g.find_tensor("q"), qs.get(qd.g.find_tensor("q")));
  for (TensorId t = 0; t < static_cast<TensorId>(qd.g.num_tensors()); ++t) {
    if (qd.g.tensor(t).dtype != DType::I8) continue;  // the int8 values are integers within [-127, 127]
    double largest = 0;
    for (float x : qs.get(t).data) {
      ASSERT_TRUE(x == std::nearbyint(x) && std::fabs(x) <= 127);
      largest = std::max(largest, static_cast<double>(std::fabs(x)));
    }
    EXPECT_EQ(largest, 127);  // each head's absmax maps to 127
  }
  run_reference(qd.g, qs);
  run_reference(fd.g, fs);
  EXPECT_LE(compare_tensors(qs.get(qd.g.find_tensor("o")), fs.get(fd.g.find_tensor("o"))).rel_norm, 1e-6);
}

TEST(RaggedAttentionTest, PartitionRuleKeepsTheCacheLayout) {
  // The queries come split by heads (a megatron projection); a cache split by heads keeps them so, a cache split by
  // sequence (kv_sharding: batch) takes the queries by sequence instead, their heads whole.
  const Decode d = decode({5, 9, 2, 4}, 4, 2, 8, DType::BF16, 4);
  const Mesh mesh = Mesh::layout({"model"}, {4}, Torus({4}, {true}), {});
  auto rule = [&](const char* q, const char* cache) {
    OpShardingQuery sq{d.g, d.op, mesh, {ShardSpec::parse(q), ShardSpec::parse(cache), ShardSpec::parse(cache)}, {}};
    return find_op_kind(OpKind::RaggedAttention)->partition(sq);
  };
  const OpSharding heads = rule("[-, -, model, -, -]", "[-, -, model, -]");
  EXPECT_EQ(heads.in[0], ShardSpec::parse("[-, -, model, -, -]"));
  EXPECT_EQ(heads.in[1], ShardSpec::parse("[-, -, model, -]"));
  EXPECT_TRUE(heads.attrs.axes.empty());
  const OpSharding batch = rule("[-, -, model, -, -]", "[model, -, -, -]");
  EXPECT_EQ(batch.in[0], ShardSpec::parse("[model, -, -, -, -]"));
  EXPECT_EQ(batch.in[1], ShardSpec::parse("[model, -, -, -]"));
  EXPECT_EQ(batch.out[0], ShardSpec::parse("[model, -, -, -, -]"));
  EXPECT_EQ(batch.attrs.axes, std::vector<std::string>{"model"});
  // Multi-query attention's one head cannot split: the cache whole, the group's query heads split.
  const OpSharding mqa = rule("[-, -, -, model, -]", "[-, -, -, -]");
  EXPECT_EQ(mqa.in[0], ShardSpec::parse("[-, -, -, model, -]"));
  EXPECT_EQ(mqa.in[1], ShardSpec::parse("[-, -, -, -]"));
}

TEST(KvCacheWriteTest, CostByHandCount) {
  // Three sequences add 1, 4 and 2 tokens (packed along one row) into caches of 8 key/value heads of 128: each
  // token's 8 x 128 values read (bf16) and written, in runs of one token's heads scattered over the cache.
  for (DType kv : {DType::BF16, DType::I8}) {
    ModelGraph g("write");
    GraphBuilder b(g, DType::BF16);
    Op op;
    op.name = "w";
    op.kind = OpKind::KvCacheWrite;
    op.inputs = {b.input("cache", {3, 16, 8, 128}, kv)};
    if (kv == DType::I8) op.inputs.push_back(b.input("scale", {3, 16, 8}, DType::F32));
    op.inputs.push_back(b.input("new", {1, 7, 8, 128}, DType::BF16));
    op.outputs = {g.add_tensor({"cache.new", {3, 16, 8, 128}, kv, TensorRole::Updated})};
    op.attrs.ragged.fresh = {1, 4, 2};
    op.attrs.ragged.cached = {5, 0, 9};
    op.attrs.ragged.packed = true;
    const OpCost c = op_cost(g, op);
    const double tokens = 7, per = 8 * 128;
    EXPECT_DOUBLE_EQ(c.bytes_read, tokens * per * 2);
    EXPECT_DOUBLE_EQ(c.bytes_written, tokens * (per * dtype_bytes(kv) + (kv == DType::I8 ? 8 * 4 : 0)));
    EXPECT_EQ(c.write_pattern, HbmPattern::Gather);
    EXPECT_DOUBLE_EQ(c.read_run, per * dtype_bytes(kv));
    EXPECT_TRUE(c.in_place);
    EXPECT_DOUBLE_EQ(c.vector.elements, tokens * per);
  }
}

TEST(SampleTest, CostByHandCount) {
  // Greedy over 4 rows of 1000 logits: a compare and a select per logit, one row-maximum step. Top-k and top-p: a
  // bitonic network over the row, ceil(log2 1000) = 10 -> 10 x 11 / 2 = 55 stages of a compare and a select.
  for (const char* how : {"greedy", "top_k", "top_p"}) {
    ModelGraph g("sample");
    GraphBuilder b(g, DType::F32);
    Op op;
    op.name = "s";
    op.kind = OpKind::Sample;
    op.inputs = {b.input("logits", {4, 1000}, DType::F32)};
    op.outputs = {g.add_tensor({"ids", {4}, DType::I32, TensorRole::Activation})};
    op.attrs.sampling = how;
    op.attrs.top_k = 5;
    const OpCost c = op_cost(g, op);
    EXPECT_DOUBLE_EQ(c.vector.elements, 4000) << how;
    EXPECT_DOUBLE_EQ(c.vector.simple, std::string(how) == "greedy" ? 2 : 110) << how;
    EXPECT_DOUBLE_EQ(c.vector.transcendental, std::string(how) == "top_p" ? 1 : 0) << how;
    EXPECT_DOUBLE_EQ(c.bytes_read, 4000 * 4) << how;
  }
}

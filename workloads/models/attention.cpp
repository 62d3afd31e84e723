#include "workloads/models/attention.h"

#include <cmath>

namespace podsim {

TensorId attention(GraphBuilder& b, TensorId xq, TensorId xkv, const AttentionSpec& a, const std::string& name) {
  ModelGraph& g = b.graph();
  const int64_t D = g.tensor(xq).shape.back(), H = a.heads, E = a.head_dim;
  auto proj = [&](TensorId x, const char* what) {
    const std::string n = name + "." + what;
    TensorId y = b.einsum(x, b.param(n + ".w", {D, H, E}), "bsd,dhe->bshe", n);
    return a.bias ? b.bias_add(y, b.param(n + ".b", {H, E}), n + ".bias") : y;
  };
  TensorId q = proj(xq, "q"), k = proj(xkv, "k"), v = proj(xkv, "v");
  if (a.rope) q = b.rope(q, name + ".q.rope"), k = b.rope(k, name + ".k.rope");
  // MaxText's checkpoint names (TensorInfo::checkpoint), which its re-materialization policies keep values by.
  g.tensor(q).checkpoint = "query_proj";
  g.tensor(k).checkpoint = "key_proj";
  g.tensor(v).checkpoint = "value_proj";
  const double scale = 1.0 / std::sqrt(static_cast<double>(E));
  TensorId ctx;
  if (a.flash) {
    ctx = b.flash_attention(q, k, v, scale, a.causal, a.blocks, name + ".context");
    g.tensor(g.op(g.producer(ctx)).outputs[1]).checkpoint = "context";  // the row statistics go with it
  } else {
    // The scores and context matmuls of causal attention are marked so (OpAttrs::causal): conventions of model FLOPs
    // that count the mask's triangle count half of them.
    auto marked = [&](TensorId x, TensorId y, const char* equation, const std::string& n) {
      TensorId t = b.einsum(x, y, equation, n);
      g.op(g.producer(t)).attrs.causal = a.causal;
      return t;
    };
    TensorId scores = marked(q, k, "bshe,bthe->bhst", name + ".scores");
    TensorId probs = b.softmax(scores, scale, a.causal, name + ".softmax");
    ctx = marked(probs, v, "bhst,bthe->bshe", name + ".context");
  }
  g.tensor(ctx).checkpoint = "context";
  TensorId out = b.einsum(ctx, b.param(name + ".o.w", {H, E, D}), "bshe,hed->bsd", name + ".o");
  g.tensor(out).checkpoint = "out_proj";
  return a.bias ? b.bias_add(out, b.param(name + ".o.b", {D}), name + ".o.bias") : out;
}

TensorId dense_ffn(GraphBuilder& b, TensorId x, int64_t F, const std::string& act, bool bias, const std::string& name) {
  ModelGraph& g = b.graph();
  const int64_t D = g.tensor(x).shape.back();
  TensorId up = b.einsum(x, b.param(name + ".w1", {D, F}), "bsd,df->bsf", name + ".up");
  g.tensor(up).checkpoint = "mlpwi";  // the projections' outputs, before their biases
  if (bias) up = b.bias_add(up, b.param(name + ".b1", {F}), name + ".up.bias");
  TensorId h = act == "relu" ? b.relu(up, name + ".relu") : b.gelu(up, name + ".gelu");
  TensorId down = b.einsum(h, b.param(name + ".w2", {F, D}), "bsf,fd->bsd", name + ".down");
  g.tensor(down).checkpoint = "mlpwo";
  return bias ? b.bias_add(down, b.param(name + ".b2", {D}), name + ".down.bias") : down;
}

}  // namespace podsim

// Numeric mode against an independent model: the test computes each step itself, in double precision, from the
// definitions in docs/model.md ("The workloads"), with none of the simulator's kernels: the loss from its own
// forward pass, the gradients by central finite differences of that forward pass, and the optimizer update from
// those gradients. The simulated step (fp32 storage) must agree within fp32 tolerances. A wrong kernel, a missed
// or reordered op, a wrong constant (layer-norm eps, GELU, attention scale, causal mask, Adam bias correction) or a
// wrong gradient rule would each fail it. Stall injection must change timing and never numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "hw/pod/pod.h"
#include "tests/model/sim_util.h"

using namespace podsim;
using podsim::test::in_child;

namespace {

using Params = std::map<std::string, std::vector<double>>;

// ---- the independent models (double precision, plain loops) ---------------------------------------------------

double cross_entropy(const std::vector<double>& z, const std::vector<double>& labels, int64_t classes) {
  const int64_t n = static_cast<int64_t>(labels.size());
  double total = 0;
  for (int64_t r = 0; r < n; ++r) {
    double mx = -1e300, sum = 0;
    for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, z[r * classes + c]);
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(z[r * classes + c] - mx);
    total += std::log(sum) + mx - z[r * classes + static_cast<int64_t>(labels[r])];
  }
  return total / static_cast<double>(n);
}

// y[rows, out] = x[rows, in] W[in, out] (+ b[out])
std::vector<double> dense(const std::vector<double>& x, const std::vector<double>& w, int64_t in, int64_t out,
                          const std::vector<double>* b = nullptr) {
  const int64_t rows = static_cast<int64_t>(x.size()) / in;
  std::vector<double> y(static_cast<size_t>(rows * out), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? (*b)[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w[i * out + o];
      y[r * out + o] = s;
    }
  return y;
}

std::vector<double> layer_norm(const std::vector<double>& x, const std::vector<double>& gamma,
                               const std::vector<double>& beta) {
  const int64_t d = static_cast<int64_t>(gamma.size()), rows = static_cast<int64_t>(x.size()) / d;
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mu += x[r * d + j] / d;
    for (int64_t j = 0; j < d; ++j) var += (x[r * d + j] - mu) * (x[r * d + j] - mu) / d;
    for (int64_t j = 0; j < d; ++j) y[r * d + j] = gamma[j] * (x[r * d + j] - mu) / std::sqrt(var + 1e-5) + beta[j];
  }
  return y;
}

// RMSNorm: x / sqrt(mean(x^2) + eps) * gamma, eps = 1e-5.
std::vector<double> rms_norm(const std::vector<double>& x, const std::vector<double>& gamma) {
  const int64_t d = static_cast<int64_t>(gamma.size()), rows = static_cast<int64_t>(x.size()) / d;
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t j = 0; j < d; ++j) ms += x[r * d + j] * x[r * d + j] / d;
    for (int64_t j = 0; j < d; ++j) y[r * d + j] = gamma[j] * x[r * d + j] / std::sqrt(ms + 1e-5);
  }
  return y;
}

// Rotary position embedding of rows [T = B S, heads x E] in place, half rotation: with h = E / 2, the pair
// (i, i + h) of each head at position p turns by p * 10000^(-2i / E).
void rotate(std::vector<double>& x, int64_t seq, int64_t width, int64_t e) {
  const int64_t rows = static_cast<int64_t>(x.size()) / width, h = e / 2;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t head = 0; head < width / e; ++head)
      for (int64_t i = 0; i < h; ++i) {
        const double theta = static_cast<double>(r % seq) * std::pow(10000.0, -2.0 * i / e);
        double& a = x[r * width + head * e + i];
        double& b = x[r * width + head * e + i + h];
        const double a0 = a, b0 = b;
        a = a0 * std::cos(theta) - b0 * std::sin(theta);
        b = b0 * std::cos(theta) + a0 * std::sin(theta);
      }
}

double gelu(double u) { return 0.5 * u * (1 + std::tanh(std::sqrt(2 / M_PI) * (u + 0.044715 * u * u * u))); }

struct MlpShape {
  int64_t batch = 6, input = 5, hidden = 7, layers = 2, classes = 4;
};

double mlp_loss(const Params& p, const MlpShape& s, bool use_gelu) {
  std::vector<double> h = p.at("x");
  int64_t in = s.input;
  for (int64_t l = 0; l < s.layers; ++l) {
    std::string n = "fc" + std::to_string(l);
    h = dense(h, p.at(n + ".w"), in, s.hidden, &p.at(n + ".b"));
    for (double& v : h) v = use_gelu ? gelu(v) : std::max(0.0, v);
    in = s.hidden;
  }
  return cross_entropy(dense(h, p.at("out.w"), in, s.classes, &p.at("out.b")), p.at("labels"), s.classes);
}

struct TransformerShape {
  int64_t layers = 2, d = 8, ff = 12, heads = 2, vocab = 11, seq = 5, batch = 2;
  int64_t head_dim = 0;  // 0: d / heads (the default)
  int64_t kv_heads = 0;  // 0: heads (the default)
  std::string ffn = "gelu";  // gelu | relu | swiglu
  bool rms_norm = false;
  bool parallel_block = false;
  bool tie_embeddings = false;
  bool rope = false;
  int64_t dh() const { return head_dim ? head_dim : d / heads; }
  int64_t kv() const { return kv_heads ? kv_heads : heads; }
  // The extra workload keys this shape sets.
  std::string keys() const {
    std::string k;
    if (head_dim) k += ", head_dim: " + std::to_string(head_dim);
    if (kv_heads) k += ", kv_heads: " + std::to_string(kv_heads);
    if (ffn != "gelu") k += ", ffn: " + ffn;
    if (rms_norm) k += ", norm: rmsnorm";
    if (parallel_block) k += ", parallel_block: true";
    if (tie_embeddings) k += ", tie_embeddings: true";
    if (rope) k += ", rope: true";
    return k;
  }
  // Parameter elements of the step.
  int64_t param_count() const {
    const int64_t D = d, F = ff, V = vocab, HE = heads * dh(), KE = kv() * dh();
    const int64_t ffn_params = ffn == "swiglu" ? 3 * D * F : D * F + F + F * D + D;
    const int64_t norm_params = rms_norm ? D : 2 * D;  // gamma (and beta)
    const int64_t layer_norms = parallel_block ? 1 : 2;
    return V * D + layers * (2 * D * HE + 2 * D * KE + layer_norms * norm_params + ffn_params) + norm_params +
           (tie_embeddings ? 0 : D * V);
  }
};

// Query head h (of H, width E) reads key/value head h / (H / KV); the projections are [D, H·E] and [D, KV·E] in
// row-major order, the output projection [H·E, D].
double transformer_loss(const Params& p, const TransformerShape& s) {
  const int64_t D = s.d, S = s.seq, B = s.batch, H = s.heads, dh = s.dh(), T = B * S, HE = H * dh;
  const int64_t KV = s.kv(), KE = KV * dh, group = H / KV;
  auto norm = [&](const std::vector<double>& in, const std::string& name) {
    return s.rms_norm ? rms_norm(in, p.at(name + ".gamma")) : layer_norm(in, p.at(name + ".gamma"), p.at(name + ".beta"));
  };
  std::vector<double> x(static_cast<size_t>(T * D));
  const auto& E = p.at("embedding");
  const auto& tokens = p.at("tokens");
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < D; ++j) x[t * D + j] = E[static_cast<int64_t>(tokens[t]) * D + j];
  for (int64_t l = 0; l < s.layers; ++l) {
    std::string n = "layer" + std::to_string(l);
    std::vector<double> a = norm(x, n + ".ln1");
    std::vector<double> q = dense(a, p.at(n + ".attn.q.w"), D, HE), k = dense(a, p.at(n + ".attn.k.w"), D, KE),
                        v = dense(a, p.at(n + ".attn.v.w"), D, KE);
    if (s.rope) {
      rotate(q, S, HE, dh);
      rotate(k, S, KE, dh);
    }
    std::vector<double> o(static_cast<size_t>(T * HE), 0.0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < S; ++i) {
          const int64_t kh = h / group;
          std::vector<double> score(static_cast<size_t>(i + 1));  // causal: keys j <= i
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j <= i; ++j) {
            double dot = 0;
            for (int64_t c = 0; c < dh; ++c) dot += q[(b * S + i) * HE + h * dh + c] * k[(b * S + j) * KE + kh * dh + c];
            score[j] = dot / std::sqrt(static_cast<double>(dh));
            mx = std::max(mx, score[j]);
          }
          for (double& e : score) sum += e = std::exp(e - mx);
          for (int64_t j = 0; j <= i; ++j)
            for (int64_t c = 0; c < dh; ++c)
              o[(b * S + i) * HE + h * dh + c] += score[j] / sum * v[(b * S + j) * KE + kh * dh + c];
        }
    std::vector<double> attn = dense(o, p.at(n + ".attn.o.w"), HE, D);
    // A parallel block: the FFN reads the attention's normalised input, and both join the residual.
    if (!s.parallel_block)
      for (size_t i = 0; i < x.size(); ++i) x[i] += attn[i];
    const std::vector<double> a2 = s.parallel_block ? a : norm(x, n + ".ln2");
    std::vector<double> f;
    if (s.ffn == "swiglu") {  // (silu(a W1) * (a W3)) W2, no biases
      f = dense(a2, p.at(n + ".ffn.w1"), D, s.ff);
      const std::vector<double> up = dense(a2, p.at(n + ".ffn.w3"), D, s.ff);
      for (size_t i = 0; i < f.size(); ++i) f[i] = f[i] / (1 + std::exp(-f[i])) * up[i];
      f = dense(f, p.at(n + ".ffn.w2"), s.ff, D);
    } else {
      f = dense(a2, p.at(n + ".ffn.w1"), D, s.ff, &p.at(n + ".ffn.b1"));
      for (double& u : f) u = s.ffn == "relu" ? std::max(0.0, u) : gelu(u);
      f = dense(f, p.at(n + ".ffn.w2"), s.ff, D, &p.at(n + ".ffn.b2"));
    }
    for (size_t i = 0; i < x.size(); ++i) x[i] += f[i] + (s.parallel_block ? attn[i] : 0.0);
  }
  std::vector<double> unembed(static_cast<size_t>(D * s.vocab));  // tied: the embedding's transpose
  if (s.tie_embeddings) {
    for (int64_t v = 0; v < s.vocab; ++v)
      for (int64_t j = 0; j < D; ++j) unembed[j * s.vocab + v] = E[v * D + j];
  } else {
    unembed = p.at("unembed");
  }
  std::vector<double> z = dense(norm(x, "final_ln"), unembed, D, s.vocab);
  return cross_entropy(z, p.at("labels"), s.vocab);
}

// ---- comparison with the simulated step ------------------------------------------------------------------------

struct Update {
  std::vector<double> w, grad, updated;  // as simulated (w: the initial values)
};

struct SimStep {
  Params initial;                       // every tensor that no op produces, by name
  double loss = 0;
  std::map<std::string, Update> params;  // by parameter name
  std::string optimizer;
};

// Simulates `yaml` on one chip and collects the inputs, the loss, and each parameter's gradient and update.
nlohmann::json simulate_step(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  return in_child([&] {
    Experiment e = load_experiment_text(yaml, "t.yaml", {sets});
    std::unique_ptr<Prepared> p = prepare(e);
    Simulation s = simulate(*p);
    const ModelGraph& g = p->plan.programs[0].graph;
    const TensorStore& st = s.pod->chips()[0]->store();
    nlohmann::json out, initial, params;
    for (size_t i = 0; i < g.num_tensors(); ++i) {
      TensorId id = static_cast<TensorId>(i);
      if (g.producer(id) < 0 && st.has(id) && g.tensor(id).role != TensorRole::OptimizerState)
        initial[g.tensor(id).name] = st.get(id).data;
      if (g.tensor(id).name == "loss") out["loss"] = st.get(id).data.at(0);
    }
    for (size_t i = 0; i < g.num_ops(); ++i) {
      const Op& op = g.op(static_cast<OpId>(i));
      if (op.phase != Phase::Optimizer) continue;
      params[g.tensor(op.inputs[0]).name] = {{"grad", st.get(op.inputs[1]).data}, {"updated", st.get(op.outputs[0]).data}};
    }
    out["initial"] = initial;
    out["params"] = params;
    out["step_time_s"] = s.step_time;
    return out;
  });
}

Params params_of(const nlohmann::json& initial) {
  Params p;
  for (auto it = initial.begin(); it != initial.end(); ++it) p[it.key()] = it.value().get<std::vector<double>>();
  return p;
}

struct Optimizer {
  bool adam = false;
  double lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

// Checks the simulated loss, every gradient against central differences of `loss`, and every update against the
// optimizer applied to those gradients. Returns the number of parameter elements checked.
int64_t check_step(const nlohmann::json& sim, const std::function<double(const Params&)>& loss, const Optimizer& opt) {
  Params p = params_of(sim["initial"]);
  const double l0 = loss(p);
  EXPECT_NEAR(sim["loss"].get<double>(), l0, 2e-6 * std::max(1.0, std::fabs(l0)));
  int64_t checked = 0;
  for (auto it = sim["params"].begin(); it != sim["params"].end(); ++it) {
    const std::string& name = it.key();
    std::vector<double> g_sim = it.value()["grad"].get<std::vector<double>>();
    std::vector<double> w_new = it.value()["updated"].get<std::vector<double>>();
    std::vector<double>& w = p.at(name);
    std::vector<double> g_fd(w.size());
    double scale = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      const double h = 1e-5 * std::max(1.0, std::fabs(w[i])), keep = w[i];
      w[i] = keep + h;
      double up = loss(p);
      w[i] = keep - h;
      double down = loss(p);
      w[i] = keep;
      g_fd[i] = (up - down) / (2 * h);
      scale = std::max(scale, std::fabs(g_fd[i]));
    }
    // fp32 gradients: within 1e-3 of the tensor's largest gradient (a wrong rule is off by far more).
    const double tol = 1e-3 * scale + 1e-7;
    for (size_t i = 0; i < w.size(); ++i) {
      ++checked;
      EXPECT_NEAR(g_sim[i], g_fd[i], tol) << name << "[" << i << "] gradient";
      double expected;
      if (!opt.adam) {
        expected = w[i] - opt.lr * g_fd[i];
        EXPECT_NEAR(w_new[i], expected, opt.lr * tol + 1e-6 * std::fabs(w[i]) + 1e-7) << name << "[" << i << "]";
      } else {
        // Step 1 from m = v = 0: m / (1 - b1) = g and v / (1 - b2) = g^2, so the step is lr * g / (|g| + eps).
        if (std::fabs(g_fd[i]) < 20 * tol) {
          EXPECT_LE(std::fabs(w_new[i] - w[i]), opt.lr * 1.0001 + 1e-6) << name << "[" << i << "]";
          continue;
        }
        expected = w[i] - opt.lr * g_fd[i] / (std::fabs(g_fd[i]) + opt.eps);
        EXPECT_NEAR(w_new[i], expected, 1e-6 * std::max(1.0, std::fabs(w[i])) + opt.lr * 1e-3) << name << "[" << i << "]";
      }
    }
  }
  return checked;
}

std::string mlp_yaml(const MlpShape& s, const std::string& extra) {
  return "hardware: {preset: tpu-v3}\nworkload: {model: mlp, batch: " + std::to_string(s.batch) +
         ", input: " + std::to_string(s.input) + ", hidden: " + std::to_string(s.hidden) + ", layers: " +
         std::to_string(s.layers) + ", classes: " + std::to_string(s.classes) + ", dtype: fp32" + extra +
         "}\nrun: {numeric: true, trace: {format: \"off\"}}\n";
}

std::string transformer_yaml(const TransformerShape& s) {
  return "hardware: {preset: tpu-v4}\nworkload: {model: transformer, layers: " + std::to_string(s.layers) +
         ", d_model: " + std::to_string(s.d) + ", d_ff: " + std::to_string(s.ff) + ", heads: " +
         std::to_string(s.heads) + ", vocab: " + std::to_string(s.vocab) + ", seq_len: " + std::to_string(s.seq) +
         ", batch: " + std::to_string(s.batch) + ", dtype: fp32" + s.keys() + "}\nrun: {numeric: true, trace: {format: \"off\"}}\n";
}

}  // namespace

TEST(NumericTest, MlpWithReluAndSgdMatchesAnIndependentModel) {
  MlpShape s;
  auto sim = simulate_step(mlp_yaml(s, ", optimizer: sgd, learning_rate: 0.1"));
  ASSERT_FALSE(sim.contains("error")) << sim.dump();
  ASSERT_EQ(sim["params"].size(), 6u);  // fc0.w, fc0.b, fc1.w, fc1.b, out.w, out.b
  int64_t n = check_step(sim, [&](const Params& p) { return mlp_loss(p, s, false); }, {false, 0.1});
  EXPECT_EQ(n, 5 * 7 + 7 + 7 * 7 + 7 + 7 * 4 + 4);
}

TEST(NumericTest, MlpWithGeluAndAdamMatchesAnIndependentModel) {
  MlpShape s;
  auto sim = simulate_step(mlp_yaml(s, ", activation: gelu, optimizer: adam, learning_rate: 0.01"));
  ASSERT_FALSE(sim.contains("error")) << sim.dump();
  Optimizer adam;
  adam.adam = true;
  adam.lr = 0.01;
  EXPECT_GT(check_step(sim, [&](const Params& p) { return mlp_loss(p, s, true); }, adam), 100);
}

TEST(NumericTest, TransformerMatchesAnIndependentModel) {
  TransformerShape s;
  auto sim = simulate_step(transformer_yaml(s));
  ASSERT_FALSE(sim.contains("error")) << sim.dump();
  Optimizer adam;  // the transformer's default: Adam, learning rate 0.001
  adam.adam = true;
  adam.lr = 0.001;
  int64_t n = check_step(sim, [&](const Params& p) { return transformer_loss(p, s); }, adam);
  const int64_t D = s.d, F = s.ff, V = s.vocab;
  EXPECT_EQ(n, V * D + s.layers * (4 * D * D + 4 * D + D * F + F + F * D + D) + 2 * D + D * V);
  EXPECT_EQ(n, s.param_count());
}

// Runs the variant's step and checks it against the independent model; returns the parameter elements checked.
static int64_t check_transformer_variant(const TransformerShape& s) {
  auto sim = simulate_step(transformer_yaml(s));
  EXPECT_FALSE(sim.contains("error")) << sim.dump();
  if (sim.contains("error")) return 0;
  Optimizer adam;
  adam.adam = true;
  adam.lr = 0.001;
  return check_step(sim, [&](const Params& p) { return transformer_loss(p, s); }, adam);
}

TEST(NumericTest, TransformerWithHeadDimMatchesAnIndependentModel) {
  // 3 heads of width 5 on d_model 8: heads x head_dim = 15 differs from d_model, which 3 does not divide.
  TransformerShape s;
  s.heads = 3;
  s.head_dim = 5;
  EXPECT_EQ(check_transformer_variant(s), s.param_count());
}

// Stalls move time, never numbers: every tensor of a stalled run equals the unstalled run's, bit for bit.
TEST(NumericTest, StallsChangeTimingNeverNumbers) {
  TransformerShape s;
  auto base = simulate_step(transformer_yaml(s));
  auto stalled = simulate_step(transformer_yaml(s), {"run.stall.probability=0.5", "run.stall.max=3us"});
  ASSERT_FALSE(base.contains("error") || stalled.contains("error"));
  EXPECT_EQ(stalled["params"], base["params"]);
  EXPECT_EQ(stalled["loss"], base["loss"]);
  EXPECT_GT(stalled["step_time_s"].get<double>(), base["step_time_s"].get<double>());
}

TEST(NumericTest, TransformerWithGroupedQueryAttentionMatchesAnIndependentModel) {
  // 4 query heads in 2 groups, each group sharing one key/value head.
  TransformerShape s;
  s.heads = 4;
  s.kv_heads = 2;
  EXPECT_EQ(check_transformer_variant(s), s.param_count());
}

TEST(NumericTest, TransformerWithMultiQueryAttentionMatchesAnIndependentModel) {
  // One key/value head for all 4 query heads, with heads of width 3 (4 x 3 = 12 on d_model 8).
  TransformerShape s;
  s.heads = 4;
  s.kv_heads = 1;
  s.head_dim = 3;
  EXPECT_EQ(check_transformer_variant(s), s.param_count());
}

TEST(NumericTest, TransformerWithSwigluMatchesAnIndependentModel) {
  TransformerShape s;
  s.ffn = "swiglu";
  EXPECT_EQ(check_transformer_variant(s), s.param_count());
}

TEST(NumericTest, TransformerWithReluMatchesAnIndependentModel) {
  TransformerShape s;
  s.ffn = "relu";
  EXPECT_EQ(check_transformer_variant(s), s.param_count());
}

TEST(NumericTest, TransformerWithRmsNormMatchesAnIndependentModel) {
  TransformerShape s;
  s.rms_norm = true;
  EXPECT_EQ(check_transformer_variant(s), s.param_count());
}

TEST(NumericTest, TransformerWithParallelBlocksMatchesAnIndependentModel) {
  TransformerShape s;
  s.parallel_block = true;
  EXPECT_EQ(check_transformer_variant(s), s.param_count());
}

TEST(NumericTest, TransformerWithTiedEmbeddingsMatchesAnIndependentModel) {
  // One parameter for both uses: its gradient (checked by differences of the whole loss) sums the lookup's and the
  // unembedding's.
  TransformerShape s;
  s.tie_embeddings = true;
  EXPECT_EQ(check_transformer_variant(s), s.param_count());
}

TEST(NumericTest, TransformerWithRopeMatchesAnIndependentModel) {
  TransformerShape s;
  s.rope = true;
  EXPECT_EQ(check_transformer_variant(s), s.param_count());
  // With grouped-query attention and heads of width 6: the shared key heads rotate too.
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 6;
  EXPECT_EQ(check_transformer_variant(s), s.param_count());
}

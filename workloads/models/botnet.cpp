// workload.model: botnet — Bottleneck Transformers (BoTNet, Srinivas et al. 2021, arXiv:2101.11605): ResNet v1.5
// (workload.model: resnet's stem, stages and batch norm) whose last stage (c5) replaces the 3x3 convolution of every
// bottleneck block by global multi-head self-attention over the map, with 2-D relative position logits, as the
// authors' reference (their botnet.py gist: relpos_self_attention, relative_logits, rel_to_abs) builds it:
//   images [B, S, S, 3] -> stem (7x7/2 convolution, batch norm, activation, 3x3/2 max pool) -> stages c2..c4 of
//   bottleneck blocks (1x1, 3x3 with the stage's stride, 1x1 to 4 x width; batch norm after each) -> c5 of BoT
//   blocks -> global average pool -> dense to `classes` -> softmax cross-entropy -> backward -> optimizer.
// A BoT block (width 512, 4 heads of 128):
//   h = act(bn(x . W1 [Cin, 512]))                                  1x1 convolution
//   q, k, v = h . Wq, h . Wk, h . Wv  [512, heads, 128], no biases  (the map's H W positions as a sequence)
//   logits = q k^T + rel_to_abs(q rh^T) + rel_to_abs(q rw^T)        rh [2H - 1, 128], rw [2W - 1, 128], per block,
//                                                                   shared by the heads (op rel_pos_logits)
//   h = softmax(logits / sqrt(128)) v                               no output projection; heads side by side
//   h = avgpool 2x2/2 (h)                                           c5's first block when c5 has stride 2
//   h = act(bn(h)); h = bn(h . W3 [512, 2048]) [; squeeze-and-excitation]; x = act(h + shortcut)
// The shortcut is a 1x1 convolution (stride 2 in c5's first block under stride 2) with batch norm where the shape
// changes. The reference scales q by 1/sqrt(128) before both products; the softmax's scale does the same.
// BoTNet-S1 (the T3..T7 presets): c5 with stride 1 (attention at 1/16 of the image), SiLU activations, and
// squeeze-and-excitation (se_ratio 1/16 of the block's 4 x width output features, dense layers with biases, the
// block's activation, a sigmoid gate) on every block's last batch norm, before the residual add.
// Not modelled: the batch norm's zero-initialised scale on each block's last batch norm (an initial value, not a
// cost), label smoothing, and any data augmentation. Each block is a model cell (the stem the first, the head the
// last).
#include <algorithm>
#include <cmath>

#include "base/text.h"
#include "workloads/i_workload.h"
#include "workloads/layout.h"
#include "workloads/training.h"

namespace podsim {
namespace {

constexpr int64_t kC5Width = 512;

OpAttrs::Window window(int64_t k, int64_t stride, int64_t pad) {
  OpAttrs::Window w;
  w.kh = w.kw = k;
  w.sh = w.sw = stride;
  w.pt = w.pb = w.pl = w.pr = pad;
  return w;
}

class BotNetWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    std::vector<ParamSpec> p = {
        ParamSpec::int_list("workload.blocks",
                            "Bottleneck blocks of stages c2, c3, c4 and c5 (BoT50: [3, 4, 6, 3], ResNet-50's; "
                            "BoTNet-S1-59 (T3): [3, 4, 6, 6]); every c5 block is a BoT block.")
            .length(4, 4)
            .range(1, 1000)
            .def("[3, 4, 6, 3]"),
        ParamSpec::integer("workload.c5_stride",
                           "Stride of c5 (2: BoT50, the attention at 1/16 of the image and a 2x2 average pool after "
                           "it in c5's first block; 1: BoTNet-S1, the whole stage at 1/16).")
            .range(1, 2)
            .def("2"),
        ParamSpec::integer("workload.heads", "Attention heads of the BoT blocks; must divide c5's width 512 (4).")
            .range(1, 512)
            .def("4"),
        ParamSpec::choice("workload.activation", {"relu", "silu"},
                          "The blocks' activation (BoT50: relu; BoTNet-S1: silu, swish).")
            .def("relu"),
        ParamSpec::real("workload.se_ratio",
                        "Squeeze-and-excitation on each block's output: a bottleneck of se_ratio x its 4 x width "
                        "features (BoTNet-S1: 0.0625); 0: none.")
            .range(0, 1)
            .def("0"),
        ParamSpec::boolean("workload.se_in_bot_blocks",
                           "With se_ratio > 0, the BoT blocks of c5 have squeeze-and-excitation too (the convention "
                           "whose parameter counts are the paper's); false: the ResNet blocks only.")
            .def("true"),
        ParamSpec::integer("workload.batch", "Images per step (global batch).").range(1, 1LL << 24),
        ParamSpec::integer("workload.image_size",
                           "Height and width of the input images; a multiple of 16 x c5_stride (c5's map, which the "
                           "attention covers whole, is image_size / 16; even under stride 2 for the pool).")
            .range(16, 4096)
            .def("224"),
        ParamSpec::integer("workload.classes", "Output classes.").range(2, 1LL << 24).def("1000"),
        ParamSpec::integer("workload.bn_batch",
                           "Examples per batch-norm group, as workload.model: resnet takes it (0: each data-parallel "
                           "replica's examples).")
            .range(0, 1LL << 24)
            .def("0"),
    };
    for (auto& s : training_param_specs("momentum", "0.1")) p.push_back(s);
    return p;
  }

  void validate(const ParamSet& p) const override {
    validate_training(p);
    auto ll = [](int64_t v) { return static_cast<long long>(v); };
    const int64_t size = p.i("workload.image_size"), stride = p.i("workload.c5_stride");
    if (size % (16 * stride) != 0) {
      const int64_t m = 16 * stride, below = size / m * m;
      throw Error(Err::NotDivisible, p.where("workload.image_size"),
                  strprintf("workload.image_size = %lld is not a multiple of %lld: c5's attention runs over the whole "
                            "image_size / 16 map%s; choose %s%lld",
                            ll(size), ll(m), stride == 2 ? ", which the 2x2 average pool of c5's first block halves" : "",
                            below > 0 ? (std::to_string(below) + " or ").c_str() : "", ll(below + m)),
                  "workload.image_size");
    }
    const int64_t heads = p.i("workload.heads");
    if (kC5Width % heads != 0)
      throw Error(Err::NotDivisible, p.where("workload.heads"),
                  strprintf("workload.heads = %lld does not divide c5's width %lld: each head gets width / heads "
                            "features (BoTNet: 4 heads of 128)",
                            ll(heads), ll(kC5Width)),
                  "workload.heads");
    validate_bn_batch(p);
  }

  ModelGraph build(const ParamSet& p) const override {
    const std::vector<int64_t> blocks = p.ints("workload.blocks");
    const int64_t batch = p.i("workload.batch"), size = p.i("workload.image_size");
    const int64_t group = p.i("workload.bn_batch"), c5_stride = p.i("workload.c5_stride");
    const int64_t heads = p.i("workload.heads"), E = kC5Width / heads;
    const bool silu = p.s("workload.activation") == "silu";
    const double se_ratio = p.f("workload.se_ratio");
    const bool se_bot = p.b("workload.se_in_bot_blocks");
    ModelGraph g("botnet");
    GraphBuilder b(g, training_dtype(p), training_weight_dtype(p));
    int32_t cell = 0;
    b.set_cell(cell);
    auto act = [&](TensorId x, const std::string& n) { return silu ? b.silu(x, n) : b.relu(x, n); };
    auto bn = [&](TensorId h, const std::string& n) {
      const int64_t c = g.tensor(h).shape[3];
      return b.batch_norm(h, b.param(n + ".gamma", {c}), b.param(n + ".beta", {c}), group, n);
    };
    auto conv_bn = [&](TensorId x, int64_t k, int64_t cout, int64_t stride, const std::string& n, bool with_act) {
      const int64_t cin = g.tensor(x).shape[3];
      TensorId w = b.param(n + ".conv.w", {k, k, cin, cout});
      TensorId h = bn(b.conv2d(x, w, window(k, stride, (k - 1) / 2), n + ".conv"), n + ".bn");
      return with_act ? act(h, n + ".act") : h;
    };
    auto dense = [&](TensorId x, int64_t out, const std::string& n) {
      const int64_t in = g.tensor(x).shape[1];
      return b.bias_add(b.matmul(x, b.param(n + ".w", {in, out}), n), b.param(n + ".b", {out}), n + ".bias");
    };
    // The global average pool of [B, H, W, C] as [B, C].
    auto pool = [&](TensorId x, const std::string& n) {
      const auto s = g.tensor(x).shape;
      OpAttrs::Window all;
      all.kh = s[1];
      all.kw = s[2];
      return b.reshape(b.avg_pool(x, all, n), {s[0], s[3]}, n + ".flat");
    };
    auto squeeze_excite = [&](TensorId h, const std::string& n) {
      const int64_t c = g.tensor(h).shape[3];
      const int64_t r = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(c) * se_ratio));
      TensorId s = act(dense(pool(h, n + ".pool"), r, n + ".reduce"), n + ".act");
      s = b.sigmoid(dense(s, c, n + ".expand"), n + ".gate");
      return b.channel_scale(h, s, n + ".scale");
    };
    // Global self-attention over the map of x [B, H, W, 512] with relative position logits: [B, H, W, 512].
    auto mhsa = [&](TensorId x, const std::string& n) {
      const std::vector<int64_t> s = g.tensor(x).shape;
      const int64_t H = s[1], W = s[2], D = s[3];
      TensorId seq = b.reshape(x, {s[0], H * W, D}, n + ".tokens");
      auto proj = [&](const char* what) {
        return b.einsum(seq, b.param(n + "." + what + ".w", {D, heads, E}), "bsd,dhe->bshe", n + "." + what);
      };
      TensorId q = proj("q"), k = proj("k"), v = proj("v");
      TensorId scores = b.einsum(q, k, "bshe,bthe->bhst", n + ".scores");
      TensorId rh = b.einsum(q, b.param(n + ".rel_h", {2 * H - 1, E}), "bshe,me->bhsm", n + ".rel_h.logits");
      TensorId rw = b.einsum(q, b.param(n + ".rel_w", {2 * W - 1, E}), "bshe,me->bhsm", n + ".rel_w.logits");
      TensorId logits = b.add(scores, b.rel_pos_logits(rh, rw, n + ".rel"), n + ".logits");
      TensorId probs = b.softmax(logits, 1.0 / std::sqrt(static_cast<double>(E)), false, n + ".softmax");
      TensorId ctx = b.einsum(probs, v, "bhst,bthe->bshe", n + ".context");
      return b.reshape(ctx, {s[0], H, W, D}, n + ".map");
    };

    TensorId x = b.input("images", {batch, size, size, 3}, training_dtype(p));
    x = act(bn(b.conv2d(x, b.param("stem.conv.w", {7, 7, 3, 64}), window(7, 2, 3), "stem.conv"), "stem.bn"),
            "stem.act");
    x = b.max_pool(x, window(3, 2, 1), "stem.pool");
    TensorId labels = b.label("labels", {batch});
    for (size_t stage = 0; stage < 4; ++stage) {
      const int64_t width = 64 << stage;
      const bool bot = stage == 3;
      for (int64_t blk = 0; blk < blocks[stage]; ++blk) {
        b.set_cell(++cell);
        const std::string n = "layer" + std::to_string(stage + 1) + "." + std::to_string(blk);
        const int64_t stride = blk == 0 && stage > 0 ? (bot ? c5_stride : 2) : 1;
        const int64_t cin = g.tensor(x).shape[3], cout = width * 4;
        TensorId h = conv_bn(x, 1, width, 1, n + ".a", true);
        if (bot) {
          h = mhsa(h, n + ".mhsa");
          if (stride == 2) h = b.avg_pool(h, window(2, 2, 0), n + ".mhsa.pool");
          h = act(bn(h, n + ".b.bn"), n + ".b.act");
        } else {
          h = conv_bn(h, 3, width, stride, n + ".b", true);
        }
        h = conv_bn(h, 1, cout, 1, n + ".c", false);
        if (se_ratio > 0 && (!bot || se_bot)) h = squeeze_excite(h, n + ".se");
        const TensorId shortcut = stride != 1 || cin != cout ? conv_bn(x, 1, cout, stride, n + ".down", false) : x;
        x = act(b.add(h, shortcut, n + ".add"), n + ".out");
      }
    }
    b.set_cell(++cell);
    TensorId logits = dense(pool(x, "head.pool"), p.i("workload.classes"), "fc");
    TensorId loss = b.softmax_cross_entropy(logits, labels, "loss");
    ModelGraph out = finish_training_step(b, loss, p);
    assign_image_layouts(out, image_layouts_from(p.s("run.layout")));
    return out;
  }

  std::string default_strategy() const override { return "single_device"; }
};

PODSIM_REGISTER_WORKLOAD(BotNetWorkload, "botnet",
                         "BoTNet (ResNet-50 with global self-attention and relative position logits in c5; the "
                         "BoTNet-S1 T3..T7 variants), a training step");

}  // namespace
}  // namespace podsim

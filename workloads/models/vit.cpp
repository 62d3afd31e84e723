// workload.model: vit — the Vision Transformer (Dosovitskiy et al. 2021) as "Better plain ViT baselines" (Beyer,
// Zhai, Kolesnikov 2022) and big_vision's models/vit.py build it (docs/model.md has the equations):
//   images [B, S, S, 3] as patches [B, N, P P 3] (N = (S / P)^2, each patch's pixels in (row, column, channel)
//   order) -> x = patches . We [P P 3, D] + be            (the P x P stride-P convolution, as the matmul XLA makes)
//   x += the 2-D sin-cos position embedding of the (S / P) x (S / P) grid (fixed), or a learned table [N, D]
//   per layer (pre-LN):  x = x + attention(LN(x))     (bidirectional; q, k, v, o with biases, heads of D / H)
//                        x = x + gelu(LN(x) . W1 [D, F] + b1) . W2 [F, D] + b2
//   h = LN(x); pooled = mean over the N tokens (global average pooling), or with pool: cls the output of a learned
//   class token put before the patches (the original ViT; the learned position table then has N + 1 rows)
//   pre-logits (big_vision's rep_size): pooled = tanh(pooled . Wp [D, D] + bp);  logits = pooled . Wh [D, C] + bh
//   loss = mean softmax cross-entropy -> backward -> optimizer (AdamW, big_vision's ViT recipe).
// Layer norms use Flax's epsilon 1e-6; GELU is its tanh form (Flax's default). The layer names follow the
// Transformer's and BERT's (layer<l>.attn.q.w, ...), so the strategies' Megatron rules apply. Dropout and stochastic
// depth are not modelled (the recipe has neither).
//
// The patches: big_vision convolves the image on the device; a convolution whose stride is its window is exactly
// this matmul over non-overlapping patches (contraction P P 3 = 768), which is how XLA feeds it to the MXU. The
// rearrangement of the pixels into patches is taken as the input's layout (as resnet's space_to_depth takes its
// 2 x 2 blocks), a copy of 0.3 MB per 224-pixel image that podsim does not time.
#include "base/text.h"
#include "workloads/i_workload.h"
#include "workloads/models/attention.h"
#include "workloads/training.h"

namespace podsim {
namespace {

constexpr double kEps = 1e-6;  // Flax's layer-norm epsilon
constexpr int64_t kChannels = 3;

class VitWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    std::vector<ParamSpec> p = {
        ParamSpec::integer("workload.layers", "Encoder blocks (ViT-S and ViT-B: 12).").range(1, 10000),
        ParamSpec::integer("workload.d_model", "Token width (ViT-S/16: 384, ViT-B/16: 768).").range(1, 1LL << 20),
        ParamSpec::integer("workload.d_ff", "MLP hidden width (4 d_model in ViT-S and ViT-B).").range(1, 1LL << 22),
        ParamSpec::integer("workload.heads", "Attention heads; must divide d_model (ViT-S: 6, ViT-B: 12).")
            .range(1, 1LL << 16),
        ParamSpec::integer("workload.batch", "Images per step (global batch; Beyer et al. 2022: 1024).")
            .range(1, 1LL << 24),
        ParamSpec::integer("workload.image_size", "Height and width of the input images (a multiple of patch_size).")
            .range(1, 1LL << 16)
            .def("224"),
        ParamSpec::integer("workload.patch_size", "Height and width of a patch, the stem's window and stride (/16).")
            .range(1, 1LL << 12)
            .def("16"),
        ParamSpec::integer("workload.classes", "Output classes (ImageNet-1k: 1000).").range(2, 1LL << 24).def("1000"),
        ParamSpec::choice("workload.posemb", {"sincos2d", "learned"},
                          "Position embedding: sincos2d, the fixed 2-D sin-cos embedding of the patch grid (Beyer et "
                          "al. 2022; d_model a multiple of 4); learned, a trained table of one row per patch (the "
                          "original ViT's 1-D embedding).")
            .def("sincos2d"),
        ParamSpec::choice("workload.pool", {"gap", "cls"},
                          "What the head reads: gap, the mean of the tokens after the final layer norm (global "
                          "average pooling, Beyer et al. 2022); cls, a learned class token put before the patches "
                          "(the original ViT's; with posemb: learned its table has a row for it, with sincos2d it "
                          "gets none, as big_vision's pool_type tok) and read from the first position.")
            .def("gap"),
        ParamSpec::boolean("workload.pre_logits",
                           "A dense layer of d_model with tanh between the pooled tokens and the classifier "
                           "(big_vision's rep_size, as its ViT-S/16 ImageNet-1k config sets it).")
            .def("false"),
    };
    for (auto& s : training_param_specs("adamw", "0.001")) p.push_back(s);
    return p;
  }

  void validate(const ParamSet& p) const override {
    validate_training(p);
    auto ll = [](int64_t v) { return static_cast<long long>(v); };
    const int64_t d = p.i("workload.d_model"), h = p.i("workload.heads");
    if (d % h != 0)
      throw Error(Err::NotDivisible, p.where("workload.heads"),
                  strprintf("workload.d_model = %lld is not divisible by workload.heads = %lld; each head gets "
                            "d_model / heads features (ViT-S/16: 384 over 6)",
                            ll(d), ll(h)),
                  "workload.heads");
    const int64_t s = p.i("workload.image_size"), patch = p.i("workload.patch_size");
    if (s % patch != 0) {
      const int64_t below = s / patch * patch, above = below + patch;
      throw Error(Err::NotDivisible, p.where("workload.patch_size"),
                  strprintf("workload.patch_size = %lld does not divide workload.image_size = %lld: the patches "
                            "tile the image without overlap or remainder; choose an image size that is a multiple "
                            "of the patch (%s%lld) or a patch that divides it",
                            ll(patch), ll(s), below > 0 ? (std::to_string(below) + " or ").c_str() : "",
                            ll(above)),
                  "workload.patch_size");
    }
    if (p.s("workload.posemb") == "sincos2d" && d % 4 != 0)
      throw Error(Err::NotDivisible, p.where("workload.d_model"),
                  strprintf("workload.posemb: sincos2d gives a quarter of the features to each of sin x, cos x, "
                            "sin y and cos y, so workload.d_model must be a multiple of 4, not %lld (or use "
                            "posemb: learned)",
                            ll(d)),
                  "workload.d_model");
  }

  ModelGraph build(const ParamSet& p) const override {
    const int64_t L = p.i("workload.layers"), D = p.i("workload.d_model"), F = p.i("workload.d_ff");
    const int64_t H = p.i("workload.heads"), B = p.i("workload.batch"), C = p.i("workload.classes");
    const int64_t patch = p.i("workload.patch_size"), grid = p.i("workload.image_size") / patch;
    const int64_t N = grid * grid, K = patch * patch * kChannels;
    ModelGraph g("vit");
    GraphBuilder b(g, training_dtype(p), training_weight_dtype(p));
    auto norm = [&](TensorId x, const std::string& name) {
      return b.layer_norm(x, b.param(name + ".gamma", {D}), b.param(name + ".beta", {D}), name, kEps);
    };
    auto dense = [&](TensorId x, int64_t out, const std::string& name) {
      const int64_t in = g.tensor(x).shape.back();
      return b.bias_add(b.matmul(x, b.param(name + ".w", {in, out}), name), b.param(name + ".b", {out}),
                        name + ".bias");
    };
    TensorId images = b.input("images", {B, N, K}, training_dtype(p));
    TensorId labels = b.label("labels", {B});

    // Cells (what a pipeline cuts between): the patch embedding, each block, and the head with the loss.
    b.set_cell(0);
    TensorId x = b.bias_add(b.einsum(images, b.param("embedding.w", {K, D}), "bnk,kd->bnd", "embedding"),
                            b.param("embedding.b", {D}), "embedding.bias");
    const bool cls = p.s("workload.pool") == "cls";
    if (p.s("workload.posemb") == "sincos2d") {
      x = b.timing_signal(x, "posemb", grid);
      if (cls) x = b.prepend_token(x, b.param("cls_token", {D}), "cls");
    } else {
      // The original ViT puts the class token first and then adds a table of N + 1 rows.
      if (cls) x = b.prepend_token(x, b.param("cls_token", {D}), "cls");
      // A weight, though added like a bias (big_vision's pos_embedding; AdamW does not decay it: not a kernel).
      x = b.bias_add(x, b.param("pos_embedding", {cls ? N + 1 : N, D}), "posemb");
    }

    AttentionSpec attn;
    attn.heads = H;
    attn.head_dim = D / H;
    attn.bias = true;
    for (int64_t l = 0; l < L; ++l) {
      const std::string n = "layer" + std::to_string(l);
      b.set_cell(static_cast<int32_t>(l + 1));
      const TensorId h1 = norm(x, n + ".ln1");
      x = b.add(x, attention(b, h1, h1, attn, n + ".attn"), n + ".attn.residual");
      x = b.add(x, dense_ffn(b, norm(x, n + ".ln2"), F, "gelu", true, n + ".ffn"), n + ".ffn.residual");
    }

    b.set_cell(static_cast<int32_t>(L + 1));
    TensorId pooled;
    if (cls) {
      // The class token's output: the first position.
      pooled = b.reshape(b.crop(norm(x, "encoder_norm"), 1, 1, "pool"), {B, D}, "pool.rows");
    } else {
      // Global average pooling: the tokens as the grid they came from, averaged by one window over all of it.
      const TensorId hf = b.reshape(norm(x, "encoder_norm"), {B, grid, grid, D}, "encoder_norm.grid");
      OpAttrs::Window all;
      all.kh = all.kw = grid;
      pooled = b.reshape(b.avg_pool(hf, all, "pool"), {B, D}, "pool.rows");
    }
    if (p.b("workload.pre_logits")) pooled = b.tanh(dense(pooled, D, "pre_logits"), "pre_logits.tanh");
    TensorId logits = dense(pooled, C, "head");
    return finish_training_step(b, cross_entropy_loss(b, logits, labels, {}), p);
  }
};

PODSIM_REGISTER_WORKLOAD(VitWorkload, "vit",
                         "Vision Transformer image classification (patch embedding, pre-LN encoder, global average "
                         "pooling), a training step");

}  // namespace
}  // namespace podsim

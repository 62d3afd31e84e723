// workload.model: efficientnet — EfficientNet (Tan & Le 2019) as the TPU reference implementation builds it
// (tensorflow/tpu models/official/efficientnet: efficientnet_builder.py's block strings and round_filters /
// round_repeats, efficientnet_model.py's MBConv block): images [batch, S, S, 3] (NHWC) ->
//   stem: 3x3/2 convolution to round_filters(32), batch norm, swish
//   seven stages of MBConv blocks (B0's table below; widths by round_filters(c w), repeats by ceil(d r)), each:
//     1x1 expansion to e x the block's input features (none when e = 1), batch norm, swish
//     k x k depthwise convolution (stride s on the stage's first block), batch norm, swish
//     squeeze-and-excitation: global average pool, dense to max(1, int(input features / 4)) with bias, swish, dense
//     back to the expanded width with bias, sigmoid, the expanded maps scaled per feature by it
//     1x1 projection, batch norm (no activation); the block's input added when its stride is 1 and in == out
//   head: 1x1 convolution to round_filters(1280), batch norm, swish, global average pool, dense to `classes`
// -> softmax cross-entropy -> backward -> optimizer update (and the batch norms' moving averages, momentum 0.99).
// Convolutions have no bias and TensorFlow's SAME padding (the extra row and column after, when the padding is odd);
// batch norms (epsilon 1e-3) are training-mode over groups of workload.bn_batch examples. swish(x) = x sigmoid(x)
// (SiLU). The squeeze-and-excitation's two 1x1 convolutions of a 1 x 1 map are dense layers here, the same
// multiply-adds. Each block is a model cell (the stem the first, the head the last).
// Not modelled: dropout before the classifier and drop-connect on the residual branches (random masks of a
// training step that change neither its shapes nor its cost beyond one elementwise multiply), label smoothing, the
// reference's L2 weight decay (1e-5, a term of the loss) and its moving average of the weights.
#include <cmath>

#include "base/text.h"
#include "workloads/i_workload.h"
#include "workloads/layout.h"
#include "workloads/training.h"

namespace podsim {
namespace {

constexpr double kBnEps = 1e-3, kBnMomentum = 0.99;
constexpr int64_t kTotalStride = 32;  // the stem's and the four stride-2 stages'

// B0's stages (efficientnet_builder.py: r{repeats}_k{kernel}_s{stride}_e{expand}_i{in}_o{out}_se0.25).
struct Stage {
  int64_t repeats, kernel, stride, expand, in, out;
};
constexpr Stage kStages[] = {{1, 3, 1, 1, 32, 16},  {2, 3, 2, 6, 16, 24},   {2, 5, 2, 6, 24, 40},
                             {3, 3, 2, 6, 40, 80},  {3, 5, 1, 6, 80, 112},  {4, 5, 2, 6, 112, 192},
                             {1, 3, 1, 6, 192, 320}};

// round_filters: c w to a multiple of 8 (at least 8), 8 more when the rounding lost over 10 %.
int64_t round_filters(int64_t filters, double width) {
  const double f = static_cast<double>(filters) * width;
  int64_t n = std::max<int64_t>(8, static_cast<int64_t>(f + 4) / 8 * 8);
  if (static_cast<double>(n) < 0.9 * f) n += 8;
  return n;
}

// round_repeats: ceil(d r).
int64_t round_repeats(int64_t repeats, double depth) {
  return static_cast<int64_t>(std::ceil(depth * static_cast<double>(repeats)));
}

// TensorFlow's SAME padding along one dimension of `in` positions: ceil(in / stride) outputs, the padding split with
// the odd one after.
void same_padding(int64_t in, int64_t k, int64_t stride, int64_t& lo, int64_t& hi) {
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>((out - 1) * stride + k - in, 0);
  lo = total / 2;
  hi = total - lo;
}

OpAttrs::Window same_window(int64_t size, int64_t k, int64_t stride) {
  OpAttrs::Window w;
  w.kh = w.kw = k;
  w.sh = w.sw = stride;
  same_padding(size, k, stride, w.pt, w.pb);
  same_padding(size, k, stride, w.pl, w.pr);
  return w;
}

class EfficientNetWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    std::vector<ParamSpec> p = {
        ParamSpec::real("workload.width_coefficient",
                        "Width multiplier w: each stage's features round_filters(c w), multiples of 8 (B0: 1.0, B7: "
                        "2.0; the efficientnet-b* presets).")
            .positive(16)
            .def("1.0"),
        ParamSpec::real("workload.depth_coefficient",
                        "Depth multiplier d: each stage's blocks ceil(d r) (B0: 1.0, B7: 3.1).")
            .positive(16)
            .def("1.0"),
        ParamSpec::integer("workload.batch", "Images per step (global batch; the TPU reference: 2048).")
            .range(1, 1LL << 24),
        ParamSpec::integer("workload.image_size",
                           "Height and width of the input images (B0: 224, B7: 600); at least 32, the network's "
                           "total stride.")
            .range(1, 8192)
            .def("224"),
        ParamSpec::integer("workload.classes", "Output classes.").range(2, 1LL << 24).def("1000"),
        ParamSpec::integer("workload.bn_batch",
                           "Examples per batch-norm group, as workload.model: resnet takes it (0: each data-parallel "
                           "replica's examples, the per-replica batch norm of the TPU reference's TpuBatchNormalization "
                           "on up to 8 shards).")
            .range(0, 1LL << 24)
            .def("0"),
    };
    for (auto& s : training_param_specs("rmsprop", "0.128")) p.push_back(s);
    return p;
  }

  void validate(const ParamSet& p) const override {
    validate_training(p);
    auto ll = [](int64_t v) { return static_cast<long long>(v); };
    const int64_t size = p.i("workload.image_size");
    if (size < kTotalStride)
      throw Error(Err::OutOfRange, p.where("workload.image_size"),
                  strprintf("workload.image_size = %lld is smaller than EfficientNet's total stride %lld (the stem's "
                            "and four stride-2 stages'): the last stages would convolve maps of padding; choose at "
                            "least %lld (B0: 224)",
                            ll(size), ll(kTotalStride), ll(kTotalStride)),
                  "workload.image_size");
    validate_bn_batch(p);
  }

  ModelGraph build(const ParamSet& p) const override {
    const double width = p.f("workload.width_coefficient"), depth = p.f("workload.depth_coefficient");
    const int64_t batch = p.i("workload.batch"), size = p.i("workload.image_size");
    const int64_t group = p.i("workload.bn_batch");
    ModelGraph g("efficientnet");
    GraphBuilder b(g, training_dtype(p), training_weight_dtype(p));
    int32_t cell = 0;
    b.set_cell(cell);
    auto bn = [&](TensorId h, const std::string& n) {
      const int64_t c = g.tensor(h).shape[3];
      return b.batch_norm(h, b.param(n + ".gamma", {c}), b.param(n + ".beta", {c}), group, n, kBnEps, kBnMomentum);
    };
    auto conv = [&](TensorId x, int64_t k, int64_t cout, int64_t stride, const std::string& n) {
      const std::vector<int64_t> s = g.tensor(x).shape;  // a copy: param() adds to the graph's tensors
      TensorId w = b.param(n + ".w", {k, k, s[3], cout});
      return b.conv2d(x, w, same_window(s[1], k, stride), n);
    };
    // The global average pool of [B, H, W, C] as [B, C].
    auto pool = [&](TensorId x, const std::string& n) {
      const auto s = g.tensor(x).shape;
      OpAttrs::Window all;
      all.kh = s[1];
      all.kw = s[2];
      return b.reshape(b.avg_pool(x, all, n), {s[0], s[3]}, n + ".flat");
    };
    auto dense = [&](TensorId x, int64_t out, const std::string& n) {
      const int64_t in = g.tensor(x).shape[1];
      return b.bias_add(b.matmul(x, b.param(n + ".w", {in, out}), n), b.param(n + ".b", {out}), n + ".bias");
    };

    TensorId x = b.input("images", {batch, size, size, 3}, training_dtype(p));
    x = b.silu(bn(conv(x, 3, round_filters(32, width), 2, "stem.conv"), "stem.bn"), "stem.swish");
    TensorId labels = b.label("labels", {batch});
    int64_t index = 0;
    for (size_t stage = 0; stage < std::size(kStages); ++stage) {
      const Stage& st = kStages[stage];
      const int64_t out = round_filters(st.out, width);
      for (int64_t blk = 0; blk < round_repeats(st.repeats, depth); ++blk, ++index) {
        b.set_cell(++cell);
        const std::string n = "blocks." + std::to_string(index);
        const int64_t in = g.tensor(x).shape[3], stride = blk == 0 ? st.stride : 1;
        const int64_t expanded = in * st.expand;
        TensorId h = x;
        if (st.expand != 1) h = b.silu(bn(conv(h, 1, expanded, 1, n + ".expand"), n + ".expand.bn"), n + ".expand.swish");
        const int64_t hs = g.tensor(h).shape[1];
        TensorId dw = b.param(n + ".depthwise.w", {st.kernel, st.kernel, expanded});
        h = b.depthwise_conv2d(h, dw, same_window(hs, st.kernel, stride), n + ".depthwise");
        h = b.silu(bn(h, n + ".depthwise.bn"), n + ".depthwise.swish");
        // Squeeze-and-excitation, its width from the block's input features (as the reference's se_ratio does).
        const int64_t squeezed = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(in) * 0.25));
        TensorId se = b.silu(dense(pool(h, n + ".se.pool"), squeezed, n + ".se.reduce"), n + ".se.swish");
        se = b.sigmoid(dense(se, expanded, n + ".se.expand"), n + ".se.gate");
        h = b.channel_scale(h, se, n + ".se.scale");
        h = bn(conv(h, 1, out, 1, n + ".project"), n + ".project.bn");
        x = stride == 1 && in == out ? b.add(h, x, n + ".add") : h;
      }
    }
    b.set_cell(++cell);
    x = b.silu(bn(conv(x, 1, round_filters(1280, width), 1, "head.conv"), "head.bn"), "head.swish");
    TensorId logits = dense(pool(x, "head.pool"), p.i("workload.classes"), "fc");
    TensorId loss = b.softmax_cross_entropy(logits, labels, "loss");
    ModelGraph step = finish_training_step(b, loss, p);
    assign_image_layouts(step, image_layouts_from(p.s("run.layout")));
    return step;
  }

  std::string default_strategy() const override { return "single_device"; }
};

PODSIM_REGISTER_WORKLOAD(EfficientNetWorkload, "efficientnet",
                         "EfficientNet (B0..B7 by width and depth coefficients): MBConv blocks with depthwise "
                         "convolutions and squeeze-and-excitation, a training step");

}  // namespace
}  // namespace podsim

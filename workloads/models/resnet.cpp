// workload.model: resnet — ResNet v1.5 (He et al. 2016, as the TPU and MLPerf reference implementations build it:
// the stride of a bottleneck on its 3x3 convolution) for image classification: images[batch, S, S, 3] (NHWC) ->
// stem (7x7/2 convolution, batch norm, ReLU, 3x3/2 max pool) -> four stages of basic (depth 18, 34) or bottleneck
// (50, 101, 152) blocks -> global average pool -> dense to `classes` -> softmax cross-entropy -> backward ->
// optimizer update (and the batch norms' moving averages). Convolutions have no bias; every one is followed by a
// training-mode batch norm over groups of workload.bn_batch examples. Each block is a model cell (the stem the
// first, the head the last).
//
// space_to_depth (the TPU reference implementations' stem optimization): the input arrives as [batch, S/2, S/2, 12]
// (each 2x2 block of pixels as 12 channels) and the stem is a 4x4 stride-1 convolution over 12 channels, which
// fills the systolic array's contraction better and moves a quarter of the padded input bytes (docs/model.md). Its
// filter has 4 * 4 * 12 * 64 weights instead of 7 * 7 * 3 * 64.
#include "base/error.h"
#include "workloads/i_workload.h"
#include "workloads/layout.h"
#include "workloads/training.h"

namespace podsim {
namespace {

struct Layout {
  std::vector<int64_t> blocks;
  bool bottleneck;
};

Layout layout_of(int64_t depth) {
  switch (depth) {
    case 18: return {{2, 2, 2, 2}, false};
    case 34: return {{3, 4, 6, 3}, false};
    case 50: return {{3, 4, 6, 3}, true};
    case 101: return {{3, 4, 23, 3}, true};
    default: return {{3, 8, 36, 3}, true};
  }
}

OpAttrs::Window window(int64_t k, int64_t stride, int64_t pad) {
  OpAttrs::Window w;
  w.kh = w.kw = k;
  w.sh = w.sw = stride;
  w.pt = w.pb = w.pl = w.pr = pad;
  return w;
}

class ResNetWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    std::vector<ParamSpec> p = {
        ParamSpec::choice("workload.depth", {"18", "34", "50", "101", "152"}, "ResNet depth (v1.5).").def("50"),
        ParamSpec::integer("workload.batch", "Images per step (global batch).").range(1, 1LL << 24),
        ParamSpec::integer("workload.image_size", "Height and width of the input images.").range(32, 4096).def("224"),
        ParamSpec::integer("workload.classes", "Output classes.").range(2, 1LL << 24).def("1000"),
        ParamSpec::boolean("workload.space_to_depth",
                           "Feed the stem 2x2 blocks of pixels as 12 channels and make it a 4x4 stride-1 "
                           "convolution (the TPU reference implementations' stem).")
            .def("false"),
        ParamSpec::integer("workload.bn_batch",
                           "Examples per batch-norm group: batch statistics over each run of this many consecutive "
                           "examples. 0: each data-parallel replica's examples (the per-replica batch norm TensorFlow's "
                           "and Flax's batch norm compute under data parallelism), the whole batch on one replica. A "
                           "multiple of the per-replica batch makes groups of replicas whose statistics are "
                           "all-reduced (Ying et al. 2018's distributed batch norm).")
            .range(0, 1LL << 24)
            .def("0"),
        ParamSpec::integer("workload.bn_group",
                           "Data-parallel replicas per batch-norm group, as Ying et al. 2018 write it (1: per-replica "
                           "batch norm; N: the statistics of N neighbouring replicas all-reduced together; 0: unset, "
                           "workload.bn_batch applies). Sets workload.bn_batch to N times the per-replica batch; N "
                           "must divide the data axis.")
            .range(0, 1LL << 24)
            .def("0"),
    };
    for (auto& s : training_param_specs("sgd", "0.1")) p.push_back(s);
    return p;
  }

  void validate(const ParamSet& p) const override {
    validate_training(p);
    validate_bn_batch(p);
    if (p.b("workload.space_to_depth") && p.i("workload.image_size") % 2 != 0)
      throw Error(Err::NotDivisible, p.where("workload.space_to_depth"),
                  "workload.space_to_depth needs an even image_size (2x2 blocks), not " +
                      std::to_string(p.i("workload.image_size")),
                  "workload.space_to_depth");
  }

  ModelGraph build(const ParamSet& p) const override {
    const int64_t depth = std::stoll(p.s("workload.depth"));
    const int64_t batch = p.i("workload.batch"), size = p.i("workload.image_size");
    const int64_t group = p.i("workload.bn_batch");
    const bool s2d = p.b("workload.space_to_depth");
    const Layout lay = layout_of(depth);
    ModelGraph g("resnet" + std::to_string(depth));
    GraphBuilder b(g, training_dtype(p), training_weight_dtype(p));
    int32_t cell = 0;
    b.set_cell(cell);
    auto conv_bn = [&](TensorId x, int64_t k, int64_t cout, int64_t stride, const std::string& n, bool relu) {
      const int64_t cin = g.tensor(x).shape[3];
      TensorId w = b.param(n + ".conv.w", {k, k, cin, cout});
      TensorId h = b.conv2d(x, w, window(k, stride, (k - 1) / 2), n + ".conv");
      TensorId gamma = b.param(n + ".bn.gamma", {cout});
      TensorId beta = b.param(n + ".bn.beta", {cout});
      h = b.batch_norm(h, gamma, beta, group, n + ".bn");
      return relu ? b.relu(h, n + ".relu") : h;
    };
    TensorId x;
    if (s2d) {
      x = b.input("images", {batch, size / 2, size / 2, 12}, training_dtype(p));
      TensorId w = b.param("stem.conv.w", {4, 4, 12, 64});
      OpAttrs::Window win = window(4, 1, 2);
      win.pb = win.pr = 1;
      TensorId h = b.conv2d(x, w, win, "stem.conv");
      h = b.batch_norm(h, b.param("stem.bn.gamma", {64}), b.param("stem.bn.beta", {64}), group, "stem.bn");
      x = b.relu(h, "stem.relu");
    } else {
      x = b.input("images", {batch, size, size, 3}, training_dtype(p));
      TensorId w = b.param("stem.conv.w", {7, 7, 3, 64});
      TensorId h = b.conv2d(x, w, window(7, 2, 3), "stem.conv");
      h = b.batch_norm(h, b.param("stem.bn.gamma", {64}), b.param("stem.bn.beta", {64}), group, "stem.bn");
      x = b.relu(h, "stem.relu");
    }
    x = b.max_pool(x, window(3, 2, 1), "stem.pool");
    TensorId labels = b.label("labels", {batch});
    const int64_t expansion = lay.bottleneck ? 4 : 1;
    for (size_t stage = 0; stage < 4; ++stage) {
      const int64_t width = 64 << stage;
      for (int64_t blk = 0; blk < lay.blocks[stage]; ++blk) {
        b.set_cell(++cell);
        const std::string n = "layer" + std::to_string(stage + 1) + "." + std::to_string(blk);
        const int64_t stride = blk == 0 && stage > 0 ? 2 : 1;
        const int64_t cin = g.tensor(x).shape[3], cout = width * expansion;
        TensorId h;
        if (lay.bottleneck) {
          h = conv_bn(x, 1, width, 1, n + ".a", true);
          h = conv_bn(h, 3, width, stride, n + ".b", true);
          h = conv_bn(h, 1, cout, 1, n + ".c", false);
        } else {
          h = conv_bn(x, 3, width, stride, n + ".a", true);
          h = conv_bn(h, 3, width, 1, n + ".b", false);
        }
        const TensorId shortcut = stride != 1 || cin != cout ? conv_bn(x, 1, cout, stride, n + ".down", false) : x;
        x = b.relu(b.add(h, shortcut, n + ".add"), n + ".out");
      }
    }
    b.set_cell(++cell);
    const auto s = g.tensor(x).shape;
    OpAttrs::Window all;
    all.kh = s[1];
    all.kw = s[2];
    TensorId pooled = b.reshape(b.avg_pool(x, all, "head.pool"), {batch, s[3]}, "head.flat");
    const int64_t classes = p.i("workload.classes");
    TensorId logits = b.bias_add(b.matmul(pooled, b.param("fc.w", {s[3], classes}), "fc"),
                                 b.param("fc.b", {classes}), "fc.bias");
    TensorId loss = b.softmax_cross_entropy(logits, labels, "loss");
    ModelGraph out = finish_training_step(b, loss, p);
    assign_image_layouts(out, image_layouts_from(p.s("run.layout")));
    return out;
  }

  std::string default_strategy() const override { return "single_device"; }
};

PODSIM_REGISTER_WORKLOAD(ResNetWorkload, "resnet",
                         "ResNet v1.5 (depth 18..152) image classification with batch norm, a training step");

}  // namespace
}  // namespace podsim

// workload.model: ssd — the Single Shot MultiBox Detector (Liu et al. 2016) with a ResNet-34 backbone, as MLPerf
// v0.6's object-detection benchmark and Google's TPU submission build it (ssd_architecture.py, ssd_constants.py,
// ssd_model.py; the preset ssd-resnet34): images [batch, S, S, 3] (NHWC, 300 x 300) ->
//   ResNet-34 without its last stage: the 7x7/2 stem convolution, batch norm, ReLU and 3x3/2 max pool; layer1 (3
//   basic blocks of 64), layer2 (4 of 128, stride 2 in the first); layer3 (6 of 256) at stride 1, its output (38 x 38
//   x 256) the first feature map. Convolutions without bias, each followed by a training-mode batch norm over groups
//   of workload.bn_batch examples, as in workload.model: resnet.
//   five extra layers, each a 1x1 convolution and a 3x3 one, both with bias and ReLU and no batch norm: 1x1 to 256
//   then 3x3/2 to 512 (19 x 19, map 2); 1x1 256, 3x3/2 512 (10 x 10, map 3); 1x1 128, 3x3/2 256 (5 x 5, map 4);
//   1x1 128, 3x3 VALID 256 (3 x 3, map 5); 1x1 128, 3x3 VALID 256 (1 x 1, map 6).
//   on each map m, k_m = 4, 6, 6, 6, 4, 4 anchors per position: a class head (3x3 convolution with bias to
//   k_m x classes) and a box head (3x3 with bias to k_m x 4), reshaped to [batch, H W k_m, classes] and [.., 4]:
//   38^2 4 + 19^2 6 + 10^2 6 + 5^2 6 + 3^2 4 + 4 = 8732 anchors at 300 pixels.
// -> MultiBox loss: the input pipeline matches the anchors to the ground-truth boxes (IoU >= 0.5) and encodes them,
// as MLPerf's TPU code does on the host: the step's inputs are each anchor's class label [batch, A] (0: background),
// its encoded box target [batch, A, 4] and each image's matched count [batch]. Per anchor the softmax cross-entropy
// (workloads/ops/anchor_cross_entropy.cpp); hard-negative mining keeps the 3 x matched background anchors of highest
// cross-entropy (a top-k mask, workloads/ops/topk_mask.cpp); the loss sums the cross-entropy of positives and mined
// negatives and the positives' smooth-L1 box loss, each image's terms over its matched count, averaged over the batch
// (workloads/ops/multibox_loss.cpp) -> backward -> optimizer update (momentum 0.9, with the L2 weight decay of every
// variable as workload.weight_decay: 5e-4 in Google's code) and the batch norms' moving averages.
// Each residual block, extra layer and the heads with the loss are model cells.
// workload.width (64) scales every feature count, backbone, extras and heads' inputs alike, by width / 64: a
// narrower network of the same structure (the tests' numerics).
// workload.space_to_depth: the stem as workload.model: resnet's (a 4x4/1 convolution over 2x2 blocks of pixels).
// Not modelled (docs/model.md): the anchors' (k, H, W) order of the reference's head reshape (a transpose of each
// head's output: here (H, W, k), the targets made in that order), the backbone's ImageNet initialisation and zero-
// initialised last batch-norm scale of each block (values, not costs), the input pipeline's matching itself, and
// evaluation (NMS).
#include "base/error.h"
#include "base/text.h"
#include "workloads/i_workload.h"
#include "workloads/layout.h"
#include "workloads/training.h"

namespace podsim {
namespace {

constexpr int64_t kNegativesPerPositive = 3;
constexpr int64_t kAnchorsPerPosition[6] = {4, 6, 6, 6, 4, 4};
// The extra layers: the 1x1 convolution's features, the 3x3's, its stride (1: VALID, no padding).
struct Extra {
  int64_t mid, out, stride;
};
constexpr Extra kExtras[5] = {{256, 512, 2}, {256, 512, 2}, {128, 256, 2}, {128, 256, 1}, {128, 256, 1}};

OpAttrs::Window window(int64_t k, int64_t stride, int64_t pad) {
  OpAttrs::Window w;
  w.kh = w.kw = k;
  w.sh = w.sw = stride;
  w.pt = w.pb = w.pl = w.pr = pad;
  return w;
}

int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad) { return (in + 2 * pad - k) / stride + 1; }

// The six feature maps' heights (and widths) for images of `size` pixels; a map below one row is 0.
std::vector<int64_t> map_sizes(int64_t size) {
  int64_t s = out_size(size, 7, 2, 3);  // stem
  s = out_size(s, 3, 2, 1);             // max pool
  s = out_size(s, 3, 2, 1);             // layer2
  std::vector<int64_t> maps = {s};
  for (const Extra& e : kExtras) {
    s = e.stride == 2 ? out_size(s, 3, 2, 1) : s - 2;
    maps.push_back(std::max<int64_t>(s, 0));
  }
  return maps;
}

class SsdWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    std::vector<ParamSpec> p = {
        ParamSpec::integer("workload.batch", "Images per step (global batch; MLPerf v0.6 on TPU: 1024 or 2048).")
            .range(1, 1LL << 24),
        ParamSpec::integer("workload.image_size",
                           "Height and width of the input images (MLPerf's SSD: 300, the size its 8732 anchors are "
                           "laid out for); at least 257, the smallest whose sixth feature map keeps a row.")
            .range(1, 4096)
            .def("300"),
        ParamSpec::integer("workload.classes", "Object classes including the background (COCO: 81).")
            .range(2, 1LL << 20)
            .def("81"),
        ParamSpec::integer("workload.width",
                           "Features of the backbone's first stage (ResNet-34: 64); every layer's features scale by "
                           "width / 64 (the heads' outputs stay k x classes and k x 4).")
            .range(1, 4096)
            .def("64"),
        ParamSpec::boolean("workload.space_to_depth",
                           "Feed the stem 2x2 blocks of pixels as 12 channels and make it a 4x4 stride-1 "
                           "convolution, as workload.model: resnet (Google's conv0_space_to_depth, on from v3-128).")
            .def("false"),
        ParamSpec::integer("workload.bn_batch",
                           "Examples per batch-norm group, as workload.model: resnet takes it (0: each data-parallel "
                           "replica's examples).")
            .range(0, 1LL << 24)
            .def("0"),
        ParamSpec::integer("workload.bn_group",
                           "Data-parallel replicas per batch-norm group, as workload.model: resnet takes it (Google's "
                           "TPU SSD: distributed_group_size, 2 on a v3-32); 0: unset, workload.bn_batch applies.")
            .range(0, 1LL << 24)
            .def("0"),
    };
    for (auto& s : training_param_specs("momentum", "0.096")) p.push_back(s);
    return p;
  }

  void validate(const ParamSet& p) const override {
    validate_training(p);
    auto ll = [](int64_t v) { return static_cast<long long>(v); };
    const int64_t size = p.i("workload.image_size");
    const std::vector<int64_t> maps = map_sizes(size);
    // The maps shrink monotonically: the sixth keeps a row when the VALID 3x3 convolutions of the last two extra
    // layers fit (maps 4 and 5 of at least 5 and 3 rows).
    if (maps.back() < 1)
      throw Error(Err::OutOfRange, p.where("workload.image_size"),
                  strprintf("workload.image_size = %lld gives SSD feature maps of %s rows: the last extra layers' "
                            "VALID 3x3 convolutions need maps 4 and 5 of at least 5 and 3 rows, so that the sixth "
                            "map, and its detection head, keep one; choose at least 257 (MLPerf: 300)",
                            ll(size), join_ints(maps).c_str()),
                  "workload.image_size");
    if (p.b("workload.space_to_depth") && size % 2 != 0)
      throw Error(Err::NotDivisible, p.where("workload.space_to_depth"),
                  strprintf("workload.space_to_depth needs an even image_size (2x2 blocks), not %lld", ll(size)),
                  "workload.space_to_depth");
    validate_bn_batch(p);
  }

  ModelGraph build(const ParamSet& p) const override {
    const int64_t batch = p.i("workload.batch"), size = p.i("workload.image_size");
    const int64_t classes = p.i("workload.classes"), width = p.i("workload.width");
    const int64_t group = p.i("workload.bn_batch");
    auto features = [&](int64_t f) { return std::max<int64_t>(1, f * width / 64); };
    ModelGraph g("ssd");
    GraphBuilder b(g, training_dtype(p), training_weight_dtype(p));
    int32_t cell = 0;
    b.set_cell(cell);
    auto conv = [&](TensorId x, int64_t k, int64_t cout, const OpAttrs::Window& win, const std::string& n) {
      const int64_t cin = g.tensor(x).shape[3];
      return b.conv2d(x, b.param(n + ".conv.w", {k, k, cin, cout}), win, n + ".conv");
    };
    auto conv_bn = [&](TensorId x, int64_t k, int64_t cout, int64_t stride, const std::string& n, bool relu) {
      TensorId h = conv(x, k, cout, window(k, stride, (k - 1) / 2), n);
      h = b.batch_norm(h, b.param(n + ".bn.gamma", {cout}), b.param(n + ".bn.beta", {cout}), group, n + ".bn");
      return relu ? b.relu(h, n + ".relu") : h;
    };
    // A convolution with bias (the extra layers and the heads).
    auto conv_bias = [&](TensorId x, int64_t k, int64_t cout, const OpAttrs::Window& win, const std::string& n) {
      return b.bias_add(conv(x, k, cout, win, n), b.param(n + ".b", {cout}), n + ".bias");
    };

    TensorId x;
    if (p.b("workload.space_to_depth")) {  // the 7x7/2 stem as a 4x4/1 convolution of 2x2 blocks (workloads/models/resnet.cpp)
      x = b.input("images", {batch, size / 2, size / 2, 12}, training_dtype(p));
      OpAttrs::Window win = window(4, 1, 2);
      win.pb = win.pr = 1;
      TensorId h = conv(x, 4, features(64), win, "stem");
      h = b.batch_norm(h, b.param("stem.bn.gamma", {features(64)}), b.param("stem.bn.beta", {features(64)}), group,
                       "stem.bn");
      x = b.relu(h, "stem.relu");
    } else {
      x = b.input("images", {batch, size, size, 3}, training_dtype(p));
      x = conv_bn(x, 7, features(64), 2, "stem", true);
    }
    x = b.max_pool(x, window(3, 2, 1), "stem.pool");
    const int64_t blocks[3] = {3, 4, 6};
    for (int64_t stage = 0; stage < 3; ++stage)
      for (int64_t blk = 0; blk < blocks[stage]; ++blk) {
        b.set_cell(++cell);
        const std::string n = "layer" + std::to_string(stage + 1) + "." + std::to_string(blk);
        const int64_t stride = blk == 0 && stage == 1 ? 2 : 1;  // layer3 at stride 1
        const int64_t cin = g.tensor(x).shape[3], cout = features(64 << stage);
        TensorId h = conv_bn(x, 3, cout, stride, n + ".a", true);
        h = conv_bn(h, 3, cout, 1, n + ".b", false);
        const TensorId shortcut = stride != 1 || cin != cout ? conv_bn(x, 1, cout, stride, n + ".down", false) : x;
        x = b.relu(b.add(h, shortcut, n + ".add"), n + ".out");
      }
    std::vector<TensorId> maps = {x};
    for (size_t e = 0; e < std::size(kExtras); ++e) {
      b.set_cell(++cell);
      const Extra& ex = kExtras[e];
      const std::string n = "extra" + std::to_string(e + 1);
      TensorId h = b.relu(conv_bias(x, 1, features(ex.mid), window(1, 1, 0), n + ".a"), n + ".a.relu");
      x = b.relu(conv_bias(h, 3, features(ex.out), window(3, ex.stride, ex.stride == 2 ? 1 : 0), n + ".b"),
                 n + ".b.relu");
      maps.push_back(x);
    }

    // The heads and the loss: the last cell.
    b.set_cell(++cell);
    std::vector<TensorId> logits, boxes;
    int64_t anchors = 0;
    for (size_t m = 0; m < maps.size(); ++m) {
      const std::vector<int64_t> s = g.tensor(maps[m]).shape;
      const int64_t k = kAnchorsPerPosition[m], n = s[1] * s[2] * k;
      const std::string name = "head" + std::to_string(m + 1);
      TensorId c = conv_bias(maps[m], 3, k * classes, window(3, 1, 1), name + ".class");
      TensorId r = conv_bias(maps[m], 3, k * 4, window(3, 1, 1), name + ".box");
      logits.push_back(b.reshape(c, {batch, n, classes}, name + ".class.anchors"));
      boxes.push_back(b.reshape(r, {batch, n, 4}, name + ".box.anchors"));
      anchors += n;
    }
    const TensorId labels = b.label("class_targets", {batch, anchors});
    const TensorId targets = b.input("box_targets", {batch, anchors, 4}, DType::F32);
    const TensorId matched = b.input("matched", {batch}, DType::I32);
    auto add_op = [&](const std::string& name, OpKind kind, std::vector<TensorId> in, std::vector<TensorId> out,
                      OpAttrs attrs) {
      Op op;
      op.name = name;
      op.kind = kind;
      op.phase = Phase::Loss;
      op.cell = cell;
      op.inputs = std::move(in);
      op.outputs = std::move(out);
      op.attrs = std::move(attrs);
      g.add_op(op);
    };
    auto per_anchor = [&](const std::string& name) {
      return g.add_tensor({name, {batch, anchors}, DType::F32, TensorRole::Activation});
    };
    const TensorId ce = per_anchor("loss.ce"), negatives = per_anchor("loss.negatives"), lse = per_anchor("loss.lse");
    std::vector<TensorId> in = logits;
    in.push_back(labels);
    add_op("loss.class", OpKind::AnchorCrossEntropy, in, {ce, negatives, lse}, {});
    const TensorId mined = per_anchor("loss.mined");
    g.tensor(mined).stop_gradient = true;
    OpAttrs topk;
    topk.alpha = static_cast<double>(kNegativesPerPositive);
    add_op("loss.mining", OpKind::TopKMask, {negatives, matched}, {mined}, topk);
    const TensorId loss = g.add_tensor({"loss", {1}, DType::F32, TensorRole::Loss});
    in = {ce, mined, labels, matched, targets};
    in.insert(in.end(), boxes.begin(), boxes.end());
    OpAttrs mean;
    mean.count = batch;
    add_op("loss", OpKind::MultiboxLoss, in, {loss}, mean);
    ModelGraph step = finish_training_step(b, loss, p);
    assign_image_layouts(step, image_layouts_from(p.s("run.layout")));
    return step;
  }

  std::string default_strategy() const override { return "single_device"; }

 private:
  static std::string join_ints(const std::vector<int64_t>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s;
  }
};

PODSIM_REGISTER_WORKLOAD(SsdWorkload, "ssd",
                         "SSD with a ResNet-34 backbone (MLPerf v0.6's detector): six feature maps, class and box "
                         "heads, the MultiBox loss with hard-negative mining; a training step");

}  // namespace
}  // namespace podsim

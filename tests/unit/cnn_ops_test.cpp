// The convolutional ops (workloads/ops/conv2d.cpp, pool.cpp, batch_norm.cpp): forward kernels against direct
// loops written here, gradients against central finite differences of a loss, the MXU mapping and the bytes in
// XLA's layouts of convolutions and batch norm against hand counts, and groups of consecutive ranks (their fusion:
// cnn_fusion_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "plan/mesh.h"
#include "workloads/builder.h"
#include "workloads/layout.h"
#include "workloads/ops/op_kind.h"
#include "base/error.h"
#include "workloads/reference.h"
#include "tests/unit/cnn_test_util.h"
#include "tests/unit/finite_difference.h"

using namespace podsim;
using podsim::test::win;

namespace {

void randomise(const ModelGraph& g, TensorStore& s, uint64_t seed) {
  init_step_inputs(g, s, seed);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, 1);
  for (size_t i = 0; i < g.num_tensors(); ++i) {
    const TensorInfo& t = g.tensor(static_cast<TensorId>(i));
    if (g.producer(static_cast<TensorId>(i)) >= 0 || t.dtype == DType::I32) continue;
    for (float& x : s.get_mut(static_cast<TensorId>(i)).data) x = static_cast<float>(nd(rng));
  }
}

float at(const Tensor& t, const std::vector<int64_t>& shape, int64_t b, int64_t h, int64_t w, int64_t c) {
  return t.data[static_cast<size_t>(((b * shape[1] + h) * shape[2] + w) * shape[3] + c)];
}

// conv2d against the definition, for one window.
void check_conv(const std::vector<int64_t>& xs, const std::vector<int64_t>& ws, const OpAttrs::Window& w) {
  ModelGraph g("conv");
  GraphBuilder b(g, DType::F32);
  TensorId x = b.param("x", xs), f = b.param("w", ws);
  TensorId y = b.conv2d(x, f, w, "conv");
  TensorStore s;
  randomise(g, s, 7);
  run_reference(g, s);
  const auto& ys = g.tensor(y).shape;
  EXPECT_EQ(ys[1], (xs[1] + w.pt + w.pb - ws[0]) / w.sh + 1);
  EXPECT_EQ(ys[2], (xs[2] + w.pl + w.pr - ws[1]) / w.sw + 1);
  double worst = 0;
  for (int64_t n = 0; n < ys[0]; ++n)
    for (int64_t oh = 0; oh < ys[1]; ++oh)
      for (int64_t ow = 0; ow < ys[2]; ++ow)
        for (int64_t co = 0; co < ys[3]; ++co) {
          double ref = 0;
          for (int64_t i = 0; i < ws[0]; ++i)
            for (int64_t j = 0; j < ws[1]; ++j)
              for (int64_t ci = 0; ci < ws[2]; ++ci) {
                const int64_t ih = oh * w.sh - w.pt + i, iw = ow * w.sw - w.pl + j;
                if (ih < 0 || iw < 0 || ih >= xs[1] || iw >= xs[2]) continue;
                ref += static_cast<double>(at(s.get(x), xs, n, ih, iw, ci)) *
                       s.get(f).data[static_cast<size_t>(((i * ws[1] + j) * ws[2] + ci) * ws[3] + co)];
              }
          worst = std::max(worst, std::fabs(ref - at(s.get(y), ys, n, oh, ow, co)));
        }
  EXPECT_LT(worst, 1e-4);
}

// Builds `make`'s forward ops on parameters, a cross-entropy loss of its output, and the backward pass; checks the
// gradient of every parameter against central differences of the loss.
void check_gradients(const std::string& what, const std::function<TensorId(GraphBuilder&)>& make, double h = 1e-2) {
  SCOPED_TRACE(what);
  ModelGraph g("grad");
  GraphBuilder b(g, DType::F32);
  TensorId out = make(b);
  const auto shape = g.tensor(out).shape;
  const int64_t c = shape.back(), rows = g.tensor(out).elements() / c;
  TensorId logits = b.reshape(out, {rows, c}, "flat");
  TensorId loss = b.softmax_cross_entropy(logits, b.label("labels", {rows}), "loss");
  b.backward(loss);
  TensorStore s;
  randomise(g, s, 42);
  run_reference(g, s);
  auto forward_loss = [&] {
    for (OpId id : g.topological_order())
      if (g.op(id).phase == Phase::Forward || g.op(id).phase == Phase::Loss) run_op(g, g.op(id), s);
    return static_cast<double>(s.get(loss).data[0]);
  };
  int checked = 0;
  for (TensorId p : b.params()) {
    TensorId gid = b.grad_of(p);
    ASSERT_GE(gid, 0) << "no gradient for " << g.tensor(p).name;
    checked += expect_gradient(s.get(gid).data, s.get_mut(p).data, forward_loss,
                               {.h = h, .abs = 2e-4, .samples = 30}, g.tensor(p).name);
  }
  EXPECT_GT(checked, 0);
}

}  // namespace

TEST(CnnOpsTest, Conv2dForwardAgainstDirectLoop) {
  check_conv({2, 5, 5, 3}, {3, 3, 3, 4}, win(3, 3, 1, 1, 1, 1, 1, 1));    // SAME 3x3
  check_conv({2, 9, 9, 3}, {7, 7, 3, 4}, win(7, 7, 2, 2, 3, 3, 3, 3));    // the stem: 7x7/2, pad 3
  check_conv({1, 6, 7, 2}, {1, 7, 2, 3}, win(1, 7, 1, 1, 0, 0, 3, 3));    // 1x7
  check_conv({1, 7, 6, 2}, {7, 1, 2, 3}, win(7, 1, 1, 1, 3, 3, 0, 0));    // 7x1
  check_conv({2, 7, 7, 4}, {1, 1, 4, 5}, win(1, 1, 2, 2, 0, 0, 0, 0));    // 1x1/2 VALID (a shortcut)
  check_conv({1, 6, 6, 3}, {4, 4, 3, 2}, win(4, 4, 1, 1, 2, 1, 2, 1));    // explicit, uneven (space-to-depth stem)
  check_conv({1, 8, 5, 2}, {3, 2, 2, 3}, win(3, 2, 3, 2, 0, 2, 1, 0));    // odd strides and padding
}

// A window larger than its padded input is refused when the graph is built, naming the op, the dimension and
// the sizes: a 5 x 5 filter over a 3 x 3 map with one row of padding above and none elsewhere (3 + 1 < 5 rows).
TEST(CnnOpsTest, WindowLargerThanThePaddedInputIsAnError) {
  ModelGraph g("conv");
  GraphBuilder b(g, DType::F32);
  const TensorId x = b.param("x", {1, 3, 3, 2}), f = b.param("w", {5, 5, 2, 4});
  try {
    b.conv2d(x, f, win(5, 5, 1, 1, 1, 0, 0, 0), "stem");
    FAIL() << "a 5 x 5 window over a 3 x 3 map was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), Err::OutOfRange);
    EXPECT_NE(e.message().find("op 'stem': a window of 5 along height is larger than the padded input "
                                         "(3 + 1 padding)"),
              std::string::npos)
        << e.what();
  }
  // With two rows of padding on each side it fits (3 + 4 >= 5): one output row per input row.
  EXPECT_EQ(g.tensor(b.conv2d(x, f, win(5, 5, 1, 1, 2, 2, 2, 2), "fits")).shape, (std::vector<int64_t>{1, 3, 3, 4}));
}

TEST(CnnOpsTest, ConvolutionGradients) {
  check_gradients("3x3 stride 2", [](GraphBuilder& b) {
    return b.conv2d(b.param("x", {2, 5, 5, 3}), b.param("w", {3, 3, 3, 4}), win(3, 3, 2, 2, 1, 1, 1, 1), "c");
  });
  check_gradients("1x7 and 7x1", [](GraphBuilder& b) {
    TensorId h = b.conv2d(b.param("x", {1, 6, 6, 2}), b.param("w1", {1, 7, 2, 3}), win(1, 7, 1, 1, 0, 0, 3, 3), "c1");
    return b.conv2d(h, b.param("w2", {7, 1, 3, 2}), win(7, 1, 1, 1, 3, 3, 0, 0), "c2");
  });
  check_gradients("uneven padding, stride 3x2", [](GraphBuilder& b) {
    return b.conv2d(b.param("x", {2, 8, 5, 2}), b.param("w", {3, 2, 2, 3}), win(3, 2, 3, 2, 0, 2, 1, 0), "c");
  });
}

TEST(CnnOpsTest, PoolingForwardAndGradients) {
  ModelGraph g("pool");
  GraphBuilder b(g, DType::F32);
  const std::vector<int64_t> xs = {2, 5, 5, 3};
  TensorId x = b.param("x", xs);
  const auto w = win(3, 3, 2, 2, 1, 1, 1, 1);
  TensorId mx = b.max_pool(x, w, "max"), av = b.avg_pool(x, w, "avg");
  TensorStore s;
  randomise(g, s, 3);
  run_reference(g, s);
  const auto& ys = g.tensor(mx).shape;
  ASSERT_EQ(ys, (std::vector<int64_t>{2, 3, 3, 3}));
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t oh = 0; oh < 3; ++oh)
      for (int64_t ow = 0; ow < 3; ++ow)
        for (int64_t c = 0; c < 3; ++c) {
          double m = -1e30, sum = 0;
          int count = 0;
          for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = 0; j < 3; ++j) {
              const int64_t ih = oh * 2 - 1 + i, iw = ow * 2 - 1 + j;
              if (ih < 0 || iw < 0 || ih >= 5 || iw >= 5) continue;
              const double v = at(s.get(x), xs, n, ih, iw, c);
              m = std::max(m, v), sum += v, ++count;
            }
          EXPECT_FLOAT_EQ(at(s.get(mx), ys, n, oh, ow, c), static_cast<float>(m));
          EXPECT_NEAR(at(s.get(av), ys, n, oh, ow, c), sum / count, 1e-6);  // the valid positions only
        }
  check_gradients("max pool", [&](GraphBuilder& bb) { return bb.max_pool(bb.param("x", {2, 5, 5, 3}), w, "p"); },
                  1e-3);
  check_gradients("avg pool", [&](GraphBuilder& bb) { return bb.avg_pool(bb.param("x", {2, 5, 5, 3}), w, "p"); });
  check_gradients("global avg pool", [&](GraphBuilder& bb) {
    return bb.avg_pool(bb.param("x", {2, 3, 4, 3}), win(3, 4, 1, 1, 0, 0, 0, 0), "p");
  });
}

TEST(CnnOpsTest, BatchNormForwardAndGradients) {
  // Forward: groups of 2 of a batch of 4, against the definition.
  ModelGraph g("bn");
  GraphBuilder b(g, DType::F32);
  const std::vector<int64_t> xs = {4, 3, 2, 5};
  TensorId x = b.param("x", xs), gamma = b.param("gamma", {5}), beta = b.param("beta", {5});
  TensorId y = b.batch_norm(x, gamma, beta, 2, "bn");
  TensorStore s;
  randomise(g, s, 5);
  run_reference(g, s);
  for (int64_t grp = 0; grp < 2; ++grp)
    for (int64_t c = 0; c < 5; ++c) {
      double m = 0, v = 0;
      const int n = 2 * 3 * 2;
      for (int64_t e = grp * 2; e < grp * 2 + 2; ++e)
        for (int64_t h = 0; h < 3; ++h)
          for (int64_t w = 0; w < 2; ++w) m += at(s.get(x), xs, e, h, w, c);
      m /= n;
      for (int64_t e = grp * 2; e < grp * 2 + 2; ++e)
        for (int64_t h = 0; h < 3; ++h)
          for (int64_t w = 0; w < 2; ++w) v += std::pow(at(s.get(x), xs, e, h, w, c) - m, 2);
      v /= n;
      for (int64_t e = grp * 2; e < grp * 2 + 2; ++e)
        for (int64_t h = 0; h < 3; ++h)
          for (int64_t w = 0; w < 2; ++w) {
            const double ref = (at(s.get(x), xs, e, h, w, c) - m) / std::sqrt(v + 1e-5) * s.get(gamma).data[c] +
                               s.get(beta).data[c];
            EXPECT_NEAR(at(s.get(y), xs, e, h, w, c), ref, 1e-5);
          }
    }
  check_gradients("whole batch", [](GraphBuilder& bb) {
    return bb.batch_norm(bb.param("x", {3, 3, 2, 4}), bb.param("g", {4}), bb.param("b", {4}), 0, "bn");
  });
  check_gradients("groups of 2, then ReLU and a residual add", [](GraphBuilder& bb) {
    TensorId xx = bb.param("x", {4, 2, 3, 3});
    TensorId h = bb.relu(bb.batch_norm(xx, bb.param("g", {3}), bb.param("b", {3}), 2, "bn"), "relu");
    return bb.add(h, xx, "res");
  });
}

TEST(CnnOpsTest, BatchNormMovingAveragesAreUpdatedByTheOptimizer) {
  ModelGraph g("bn");
  GraphBuilder b(g, DType::F32);
  TensorId x = b.param("x", {2, 2, 2, 3});
  TensorId y = b.batch_norm(x, b.param("g", {3}), b.param("b", {3}), 0, "bn", 1e-5, 0.9);
  TensorId loss = b.softmax_cross_entropy(b.reshape(y, {8, 3}, "flat"), b.label("labels", {8}), "loss");
  b.backward(loss);
  b.optimizer({});
  TensorStore s;
  randomise(g, s, 1);
  run_reference(g, s);
  const TensorId mm = g.find_tensor("bn.moving_mean"), nm = g.find_tensor("bn.moving_mean.new");
  const TensorId mean = g.find_tensor("bn.mean");
  ASSERT_GE(nm, 0);
  EXPECT_EQ(g.tensor(nm).role, TensorRole::Updated);
  EXPECT_EQ(g.tensor(nm).updates, mm);
  for (size_t i = 0; i < s.get(nm).data.size(); ++i)
    EXPECT_NEAR(s.get(nm).data[i], 0.9 * s.get(mm).data[i] + 0.1 * s.get(mean).data[i], 1e-6);
}

// The stem of ResNet-50 at 224 on the MXU and in HBM. The GEMM: M = 256 x 112 x 112 rows, K = 7 x 7 x 3 = 147
// contracted, N = 64 output features; FLOPs are the convolution's own. Layouts (workloads/layout.h): the input image
// is stored batch-minor (3 channels in a sublane tile of 4, the 256 images on two 128-lane rows); the output, an
// image activation, features-minor (64 features take 128 lanes) with the batch on sublanes, as run.layout:
// xla_features_minor keeps it (xla would put these 256 images on the lanes: the last test of this file); the
// filter row-major, (3 -> 4, 64 -> 128). Fed tap by tap, the batch-minor input puts the batch on the MXU's columns:
// for each of the 112 x 112 output positions, K = 49 taps x 4 held, the 64 output features streamed, N = 256 images.
TEST(CnnOpsTest, ConvolutionGemmAndLayouts) {
  ModelGraph g("stem");
  GraphBuilder b(g, DType::BF16);
  TensorId x = b.input("x", {256, 224, 224, 3}, DType::BF16);
  TensorId y = b.conv2d(x, b.param("w", {7, 7, 3, 64}), win(7, 7, 2, 2, 3, 3, 3, 3), "stem");
  TensorId z = b.conv2d(b.relu(y, "relu"), b.param("w2", {3, 3, 64, 64}), win(3, 3, 1, 1, 1, 1, 1, 1), "conv2");
  assign_image_layouts(g, ImageLayouts::XlaFeaturesMinor);
  const Op& op = g.op(g.producer(y));
  const GemmDims d = gemm_dims(g, op);
  EXPECT_EQ(d.m, 256 * 112 * 112);
  EXPECT_EQ(d.k, 147);
  EXPECT_EQ(d.n, 64);
  EXPECT_EQ(d.fed_batch, 112 * 112);
  EXPECT_EQ(d.fed_m, 64);
  EXPECT_EQ(d.fed_k, 49 * 4);
  EXPECT_EQ(d.fed_n, 256);
  EXPECT_TRUE(d.fed_swap);
  const OpCost c = op_cost(g, op);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 256 * 112 * 112 * 147 * 64);
  EXPECT_EQ(g.tensor(x).layout, Layout::ImageBatchMinor);
  EXPECT_EQ(g.tensor(y).layout, Layout::Image);
  EXPECT_EQ(g.tensor(op.inputs[1]).layout, Layout::Tiled);
  const double x_stored = 224.0 * 224 * 4 * 256 * 2;  // H, W, C (3 -> 4), N (256 lanes)
  EXPECT_DOUBLE_EQ(g.tensor(x).stored_bytes(), x_stored);
  EXPECT_DOUBLE_EQ(g.tensor(op.inputs[1]).stored_bytes(), 7.0 * 7 * 4 * 128 * 2);  // HWIO: 3 -> 4, 64 -> 128
  EXPECT_DOUBLE_EQ(g.tensor(y).stored_bytes(), 112.0 * 112 * 256 * 128 * 2);       // H, W, N, C (64 -> 128)
  EXPECT_DOUBLE_EQ(c.bytes_read, x_stored + 7.0 * 7 * 4 * 128 * 2);
  // The operands' bytes are the tensors' as stored, not the im2col matrix's.
  EXPECT_DOUBLE_EQ(d.a_bytes, x_stored);
  // A 3x3 over 64 features fed tap by tap: each tap's 64 features take a 128-lane vector, K = 9 x 128.
  const GemmDims d2 = gemm_dims(g, g.op(g.producer(z)));
  EXPECT_EQ(d2.k, 9 * 64);
  EXPECT_EQ(d2.fed_k, 9 * 128);
  EXPECT_EQ(d2.fed_batch, 0);
  // The relu between them is an image activation too (layouts propagate through elementwise ops); row_major tiles
  // the shape's own two minor dimensions instead ([..., W, C]: 112 -> 112, 64 -> 128).
  EXPECT_EQ(g.tensor(g.op(g.producer(z)).inputs[0]).layout, Layout::Image);
  assign_image_layouts(g, ImageLayouts::RowMajor);
  EXPECT_EQ(g.tensor(x).layout, Layout::Tiled);
  EXPECT_DOUBLE_EQ(g.tensor(x).stored_bytes(), 256.0 * 224 * 224 * 128 * 2);
  // Backward convolutions do the forward's multiply-adds.
  GraphBuilder bb(g, DType::BF16);
  const auto grads = find_op_kind(OpKind::Conv2d)->grad(bb, op, {y});
  (void)grads;
  for (const Op& o : g.ops())
    if ((o.kind == OpKind::Conv2dInputGrad || o.kind == OpKind::Conv2dFilterGrad) && o.name.rfind("stem", 0) == 0) {
      EXPECT_DOUBLE_EQ(op_cost(g, o).flops, c.flops) << o.name;
    }
}

TEST(CnnOpsTest, GroupsOfConsecutiveRanks) {
  Torus t({8, 2}, {true, true});
  Mesh m = Mesh::layout({"data"}, {16}, t, {});
  EXPECT_EQ(m.members(5, {"data"}, 2), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(m.members(6, {"data"}, 4), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(m.members(9, {"data"}, 8), (std::vector<int64_t>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(m.members(9, {"data"}, 0).size(), 16u);
  EXPECT_EQ(m.group(5, {"data"}, 2).rank, 1);
  EXPECT_FALSE(m.group(5, {"data"}, 2).shape.wrap[0]);  // a line of 2 on a ring of 8
  EXPECT_TRUE(m.group(5, {"data"}, 8).shape.wrap[0]);   // the whole x ring
}

namespace {

// Bytes of tensors in XLA's TPU layouts, written here from docs/model.md ("Layouts") rather than taken from the
// model. A tile is 128 lanes by 1, 2, 4 or 8 sublanes (the smallest that holds the dimension, else a multiple of 8).
double sublane_tile(int64_t n) { return n <= 1 ? 1 : n <= 2 ? 2 : n <= 4 ? 4 : static_cast<double>((n + 7) / 8 * 8); }
double lane_tile(int64_t n) { return static_cast<double>((n + 127) / 128 * 128); }
// An image activation [N, H, W, C] stored H, W, N, C: the features on the lanes, the batch on the sublanes.
double image_bytes(int64_t n, int64_t h, int64_t w, int64_t c, double bytes_per_element) {
  return static_cast<double>(h * w) * sublane_tile(n) * lane_tile(c) * bytes_per_element;
}
// An input image [N, H, W, C] stored H, W, C, N: the batch on the lanes, the features on the sublanes.
double batch_minor_bytes(int64_t n, int64_t h, int64_t w, int64_t c, double bytes_per_element) {
  return static_cast<double>(h * w) * sublane_tile(c) * lane_tile(n) * bytes_per_element;
}
// Row-major with the two minor dimensions tiled (filters [KH, KW, Ci, Co], per-channel vectors and statistics).
double tiled_bytes(std::vector<int64_t> shape, double bytes_per_element) {
  double n = lane_tile(shape.back()) * bytes_per_element;
  if (shape.size() >= 2) n *= sublane_tile(shape[shape.size() - 2]);
  for (size_t d = 0; d + 2 < shape.size(); ++d) n *= static_cast<double>(shape[d]);
  return n;
}

const Op& op_of_kind(const ModelGraph& g, OpKind kind) {
  for (const Op& op : g.ops())
    if (op.kind == kind) return op;
  ADD_FAILURE() << "no op of kind " << op_kind_name(kind);
  return g.op(0);
}

}  // namespace

// A 3x3/2 convolution, pad 1, of a 9-row map (odd: 5 output rows) with 48 input and 96 output features, bf16, in
// each of its three directions: the GEMM on the MXU (docs/model.md, "Convolutions on the MXU"), its FLOPs and the
// HBM bytes of its operands and result in XLA's layouts. Rows M stream, K is contracted, N fills the columns:
//   forward       x, w -> y    M = B Ho Wo, K = KH KW Ci, N = Co
//   input grad   dy, w -> dx   M = B Ho Wo, K = KH KW Co, N = Ci   (48 features: half the array's columns)
//   filter grad  x, dy -> dw   M = KH KW Ci, K = B Ho Wo, N = Co
// Every direction does the forward's 2 M K N multiply-adds. Fed tap by tap, each tap's contracted (or, for the
// filter gradient, its held) features take a whole 128-lane vector: 48 and 96 features both pad to 128.
// The batch of 4 takes a 4-sublane tile of the image activations, not 8: x [4, 9, 9, 48] is 9 x 9 x 4 x 128
// elements as stored, y [4, 5, 5, 96] 5 x 5 x 4 x 128, and the filter [3, 3, 48, 96] 3 x 3 x 48 x 128.
TEST(CnnOpsTest, ConvolutionCostInEachDirection) {
  constexpr int64_t B = 4, H = 9, W = 9, Ci = 48, Co = 96, KH = 3, KW = 3, Ho = 5, Wo = 5;
  constexpr double bf16 = 2;
  ModelGraph g("conv");
  GraphBuilder b(g, DType::BF16);
  const TensorId x = b.param("x", {B, H, W, Ci}), w = b.param("w", {KH, KW, Ci, Co});
  const TensorId y = b.conv2d(x, w, win(3, 3, 2, 2, 1, 1, 1, 1), "conv");
  ASSERT_EQ(g.tensor(y).shape, (std::vector<int64_t>{B, Ho, Wo, Co}));
  b.backward(b.softmax_cross_entropy(b.reshape(y, {B * Ho * Wo, Co}, "flat"), b.label("labels", {B * Ho * Wo}),
                                     "loss"));
  assign_image_layouts(g, ImageLayouts::Xla);
  const double x_bytes = 9.0 * 9 * 4 * 128 * bf16, w_bytes = 3.0 * 3 * 48 * 128 * bf16,
               y_bytes = 5.0 * 5 * 4 * 128 * bf16;
  ASSERT_DOUBLE_EQ(x_bytes, image_bytes(B, H, W, Ci, bf16));
  ASSERT_DOUBLE_EQ(w_bytes, tiled_bytes({KH, KW, Ci, Co}, bf16));
  ASSERT_DOUBLE_EQ(y_bytes, image_bytes(B, Ho, Wo, Co, bf16));
  const double rows = B * Ho * Wo, taps = KH * KW, flops = 2.0 * rows * taps * Ci * Co;
  struct Direction {
    OpKind kind;
    int64_t m, k, n;
    int64_t fed_m, fed_k;  // 0: as m, k
    double read, written;
  };
  for (const Direction& d :
       {Direction{OpKind::Conv2d, B * Ho * Wo, KH * KW * Ci, Co, 0, KH * KW * 128, x_bytes + w_bytes, y_bytes},
        Direction{OpKind::Conv2dInputGrad, B * Ho * Wo, KH * KW * Co, Ci, 0, KH * KW * 128, y_bytes + w_bytes,
                  x_bytes},
        Direction{OpKind::Conv2dFilterGrad, KH * KW * Ci, B * Ho * Wo, Co, KH * KW * 128, 0, x_bytes + y_bytes,
                  w_bytes}}) {
    const Op& op = op_of_kind(g, d.kind);
    SCOPED_TRACE(op.name);
    const GemmDims gd = gemm_dims(g, op);
    EXPECT_EQ(gd.m, d.m);
    EXPECT_EQ(gd.k, d.k);
    EXPECT_EQ(gd.n, d.n);
    EXPECT_EQ(gd.fed_m, d.fed_m);
    EXPECT_EQ(gd.fed_k, d.fed_k);
    EXPECT_EQ(gd.fed_batch, 0);
    EXPECT_FALSE(gd.fed_swap);
    const OpCost c = op_cost(g, op);
    EXPECT_EQ(c.unit, Unit::Mxu);
    EXPECT_DOUBLE_EQ(c.flops, flops);
    EXPECT_DOUBLE_EQ(c.bytes_read, d.read);
    EXPECT_DOUBLE_EQ(c.bytes_written, d.written);
  }
}

// The filter gradient of a convolution over the network's input, which XLA stores batch-minor: x [8, 9, 9, 3]
// takes 9 x 9 x 4 (3 channels on 4 sublanes) x 128 (8 images on the lanes). Fed per output position (5 x 5 of
// them, summed into one result) as the forward is: the window is held, its 3 x 3 taps' 4-sublane channels on the
// array's columns (N = 36) and the batch on its rows (K = 8), and the output gradient's 16 features stream through
// (M = 16, the op's second operand); the MXU's result leaves it once.
TEST(CnnOpsTest, FilterGradientOfABatchMinorInputSumsThePositions) {
  constexpr int64_t B = 8, H = 9, W = 9, Ci = 3, Co = 16, Ho = 5, Wo = 5;
  constexpr double bf16 = 2;
  ModelGraph g("stem");
  GraphBuilder b(g, DType::BF16);
  const TensorId x = b.input("x", {B, H, W, Ci}, DType::BF16);
  const TensorId y = b.conv2d(x, b.param("w", {3, 3, Ci, Co}), win(3, 3, 2, 2, 1, 1, 1, 1), "stem");
  b.backward(b.softmax_cross_entropy(b.reshape(y, {B * Ho * Wo, Co}, "flat"), b.label("labels", {B * Ho * Wo}),
                                     "loss"));
  assign_image_layouts(g, ImageLayouts::Xla);
  const double x_bytes = 9.0 * 9 * 4 * 128 * bf16, dy_bytes = 5.0 * 5 * 8 * 128 * bf16,
               dw_bytes = 3.0 * 3 * 4 * 128 * bf16;
  ASSERT_DOUBLE_EQ(x_bytes, batch_minor_bytes(B, H, W, Ci, bf16));
  ASSERT_DOUBLE_EQ(dy_bytes, image_bytes(B, Ho, Wo, Co, bf16));
  ASSERT_DOUBLE_EQ(dw_bytes, tiled_bytes({3, 3, Ci, Co}, bf16));
  const Op& op = op_of_kind(g, OpKind::Conv2dFilterGrad);
  const GemmDims d = gemm_dims(g, op);
  EXPECT_EQ(d.m, 3 * 3 * Ci);
  EXPECT_EQ(d.k, B * Ho * Wo);
  EXPECT_EQ(d.n, Co);
  EXPECT_EQ(d.fed_batch, Ho * Wo);
  EXPECT_EQ(d.fed_m, Co);
  EXPECT_EQ(d.fed_k, B);
  EXPECT_EQ(d.fed_n, 3 * 3 * 4);
  EXPECT_TRUE(d.fed_sum);
  EXPECT_TRUE(d.fed_swap);   // dy streams, the window is held
  EXPECT_FALSE(d.a_shared);  // both differ per output position
  EXPECT_FALSE(d.b_shared);
  const OpCost c = op_cost(g, op);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * B * Ho * Wo * 9 * Ci * Co);
  EXPECT_DOUBLE_EQ(c.bytes_read, x_bytes + dy_bytes);
  EXPECT_DOUBLE_EQ(c.bytes_written, dw_bytes);
}

// Batch normalization's cost, from its passes over the tensors in XLA's layouts (x [8, 7, 7, 64] bf16, an image:
// 7 x 7 x 8 x 128 as stored; the statistics [8, 64] fp32, one row per example, 8 x 128; gamma and beta [64] bf16,
// 128 lanes):
//   statistics   one pass over x (a reduction over the whole tensor: 3 operations and 2 cross-lane steps an
//                element), writing mean and rstd;
//   apply        one pass over x with the statistics, gamma and beta (elementwise, fusible), writing y;
//   gradient     two passes over dy, x, the statistics and gamma (the group sums, 4 operations and 2 reduction
//                steps an element, then dx, 6 more), writing dx, dgamma, dbeta.
TEST(CnnOpsTest, BatchNormCostIsItsPassesOverTheStoredTensors) {
  constexpr int64_t B = 8, H = 7, W = 7, C = 64;
  constexpr double bf16 = 2, f32 = 4;
  constexpr double stats_passes = 1, apply_passes = 1, grad_passes = 2;
  ModelGraph g("bn");
  GraphBuilder b(g, DType::BF16);
  const TensorId x = b.param("x", {B, H, W, C});
  const TensorId y = b.batch_norm(x, b.param("gamma", {C}), b.param("beta", {C}), 0, "bn");
  b.backward(b.softmax_cross_entropy(b.reshape(y, {B * H * W, C}, "flat"), b.label("labels", {B * H * W}), "loss"));
  assign_image_layouts(g, ImageLayouts::Xla);
  const double x_bytes = 7.0 * 7 * 8 * 128 * bf16, stat_bytes = 8.0 * 128 * f32, param_bytes = 128.0 * bf16;
  ASSERT_DOUBLE_EQ(x_bytes, image_bytes(B, H, W, C, bf16));
  ASSERT_DOUBLE_EQ(stat_bytes, tiled_bytes({B, C}, f32));
  ASSERT_DOUBLE_EQ(param_bytes, tiled_bytes({C}, bf16));
  const double elements = B * H * W * C;

  const OpCost stats = op_cost(g, op_of_kind(g, OpKind::BatchNormStats));
  EXPECT_DOUBLE_EQ(stats.bytes_read, stats_passes * x_bytes);
  EXPECT_DOUBLE_EQ(stats.bytes_written, 2 * stat_bytes);  // mean, rstd
  EXPECT_DOUBLE_EQ(stats.vector.elements, elements);
  EXPECT_DOUBLE_EQ(stats.vector.simple, 3);
  EXPECT_DOUBLE_EQ(stats.vector.reduce, 2);
  EXPECT_TRUE(stats.reduction);
  EXPECT_TRUE(stats.whole_tensor);

  const OpCost apply = op_cost(g, op_of_kind(g, OpKind::BatchNormApply));
  EXPECT_DOUBLE_EQ(apply.bytes_read, apply_passes * (x_bytes + 2 * stat_bytes + 2 * param_bytes));
  EXPECT_DOUBLE_EQ(apply.bytes_written, x_bytes);
  EXPECT_DOUBLE_EQ(apply.vector.elements, elements);
  EXPECT_DOUBLE_EQ(apply.vector.simple, 3);
  EXPECT_TRUE(apply.fusible);

  const OpCost grad = op_cost(g, op_of_kind(g, OpKind::BatchNormGrad));
  EXPECT_DOUBLE_EQ(grad.bytes_read, grad_passes * (2 * x_bytes + 2 * stat_bytes + param_bytes));  // dy, x, ..., gamma
  EXPECT_DOUBLE_EQ(grad.bytes_written, x_bytes + 2 * param_bytes);                             // dx, dgamma, dbeta
  EXPECT_DOUBLE_EQ(grad.vector.elements, elements);
  EXPECT_DOUBLE_EQ(grad.vector.simple, 4 + 6);
  EXPECT_DOUBLE_EQ(grad.vector.reduce, 2);
  EXPECT_TRUE(grad.reduction);
  EXPECT_TRUE(grad.whole_tensor);
  EXPECT_TRUE(grad.two_pass);
  EXPECT_DOUBLE_EQ(grad.first_pass.simple, 4);
  EXPECT_DOUBLE_EQ(grad.first_pass.reduce, 2);
}

// XLA's layout assignment puts on the 128 lanes whichever of an activation's features and batch pads less on a
// device (run.layout: xla). A 3 x 3 convolution from 64 to 64 features over 8 x 8 maps: at a batch of 256, x
// [256, 8, 8, 64] is stored 8 x 8 x 64 x 256 (the batch on the lanes, no padding) where features-minor it would take
// 8 x 8 x 256 x 128, twice its bytes; at a batch of 16 the features stay on the lanes (16 images would pad to 128).
// Batch-minor, each direction is fed per position as the network's input image is (the window held, its taps'
// features packed on the sublanes: K = 9 x 64 = 576, five folds instead of nine):
//   forward       window [9 x 64, B] held, the filter's 64 output features stream     M = 64, K = 576, N = B
//   input grad    dy's window [9 x 64, B] held, the 64 input features stream         M = 64, K = 576, N = B
//   filter grad   x's window [B, 9 x 64] held, dy's 64 features stream (summed)      M = 64, K = B, N = 576
// With run.layout: xla_features_minor every activation keeps its features on the lanes.
TEST(CnnOpsTest, AnActivationTakesTheLanesWithWhicheverOfBatchAndFeaturesPadsLess) {
  constexpr int64_t H = 8, W = 8, C = 64, P = H * W;
  constexpr double bf16 = 2;
  auto build = [&](ModelGraph& g, int64_t batch, ImageLayouts mode) {
    GraphBuilder b(g, DType::BF16);
    const TensorId x = b.param("x", {batch, H, W, C});
    const TensorId y = b.conv2d(x, b.param("w", {3, 3, C, C}), win(3, 3, 1, 1, 1, 1, 1, 1), "conv");
    b.backward(b.softmax_cross_entropy(b.reshape(y, {batch * P, C}, "flat"), b.label("labels", {batch * P}), "loss"));
    assign_image_layouts(g, mode);
    return x;
  };
  {
    ModelGraph g("wide");
    const TensorId x = build(g, 256, ImageLayouts::Xla);
    EXPECT_TRUE(g.tensor(x).batch_minor());
    EXPECT_DOUBLE_EQ(g.tensor(x).stored_bytes(), static_cast<double>(P) * C * 256 * bf16);
    EXPECT_DOUBLE_EQ(g.tensor(x).stored_bytes(), g.tensor(x).bytes());
    struct Fed {
      OpKind kind;
      int64_t m, k, n;
      bool sum;
    };
    for (const Fed& f : {Fed{OpKind::Conv2d, C, 9 * C, 256, false}, Fed{OpKind::Conv2dInputGrad, C, 9 * C, 256, false},
                         Fed{OpKind::Conv2dFilterGrad, C, 256, 9 * C, true}}) {
      const GemmDims d = gemm_dims(g, op_of_kind(g, f.kind));
      SCOPED_TRACE(op_kind_name(f.kind));
      EXPECT_EQ(d.fed_batch, P);
      EXPECT_EQ(d.fed_m, f.m);
      EXPECT_EQ(d.fed_k, f.k);
      EXPECT_EQ(d.fed_n, f.n);
      EXPECT_TRUE(d.fed_swap);
      EXPECT_EQ(d.fed_sum, f.sum);
    }
  }
  {
    ModelGraph g("features");
    const TensorId x = build(g, 256, ImageLayouts::XlaFeaturesMinor);
    EXPECT_FALSE(g.tensor(x).batch_minor());
    EXPECT_DOUBLE_EQ(g.tensor(x).stored_bytes(), static_cast<double>(P) * 256 * 128 * bf16);
    EXPECT_EQ(gemm_dims(g, op_of_kind(g, OpKind::Conv2d)).fed_k, 9 * 128);
  }
  {
    ModelGraph g("narrow");
    const TensorId x = build(g, 16, ImageLayouts::Xla);
    EXPECT_FALSE(g.tensor(x).batch_minor());
    EXPECT_DOUBLE_EQ(g.tensor(x).stored_bytes(), static_cast<double>(P) * 16 * 128 * bf16);
    EXPECT_FALSE(gemm_dims(g, op_of_kind(g, OpKind::Conv2d)).fed_swap);
  }
}

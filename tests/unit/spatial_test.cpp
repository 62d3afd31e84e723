// Spatial partitioning (spmd's strategy.spatial, plan/halo.h): feature maps split along their height, halos
// exchanged by collective-permutes. The halo geometry against hand counts; a small convolutional network with odd
// local heights, strides 1 and 2, 7x7, 3x3, 1x1 and 5x1 filters, SAME, asymmetric and VALID padding and a padded
// max pool reproduces the single-device step split 4 ways, alone and with data parallelism, and its
// collective-permutes are pinned by hand; so does the network at a height the axis does not divide.
#include "plan/halo.h"
#include "tests/unit/plan_steps.h"
#include "workloads/builder.h"

using namespace podsim;
using namespace podsim::plan_steps;

namespace {

HaloGeometry geometry(int64_t n, int64_t h, int64_t ho, int64_t k, int64_t s, int64_t pt) {
  HaloGeometry g;
  const std::string why = halo_geometry(n, h, ho, k, s, pt, g);
  EXPECT_EQ(why, "");
  return g;
}

OpAttrs::Window window(int64_t k, int64_t s, int64_t pt, int64_t pb) {
  OpAttrs::Window w;
  w.kh = w.kw = k;
  w.sh = w.sw = s;
  w.pt = w.pl = pt;
  w.pb = w.pr = pb;
  return w;
}

// images [B, H, 9, 3] -> c1 7x7/2 pad 3 -> bn -> relu -> p1 max 3x3/2 pad 1 -> c2 3x3 pad 1 -> bn -> relu, + p1 ->
// c3 3x3/2 pad (0, 1) and c4 1x1/2, added -> c5 5x1 VALID -> bn -> relu -> global average pool -> fc -> loss.
ModelGraph network(int64_t batch, int64_t height) {
  ModelGraph g("spatial");
  GraphBuilder b(g, DType::F32);
  auto bn = [&](TensorId x, const std::string& n) {
    const int64_t c = g.tensor(x).shape[3];
    return b.relu(b.batch_norm(x, b.param(n + ".gamma", {c}), b.param(n + ".beta", {c}), 0, n), n + ".relu");
  };
  TensorId x = b.input("images", {batch, height, 9, 3}, DType::F32);
  TensorId h = bn(b.conv2d(x, b.param("c1.w", {7, 7, 3, 4}), window(7, 2, 3, 3), "c1"), "bn1");
  TensorId p = b.max_pool(h, window(3, 2, 1, 1), "p1");
  h = bn(b.conv2d(p, b.param("c2.w", {3, 3, 4, 4}), window(3, 1, 1, 1), "c2"), "bn2");
  TensorId r = b.relu(b.add(h, p, "res1"), "res1.relu");
  OpAttrs::Window same = window(3, 2, 0, 1);
  same.pl = 1;
  TensorId a = b.conv2d(r, b.param("c3.w", {3, 3, 4, 8}), same, "c3");
  TensorId d = b.conv2d(r, b.param("c4.w", {1, 1, 4, 8}), window(1, 2, 0, 0), "c4");
  r = b.relu(b.add(a, d, "res2"), "res2.relu");
  OpAttrs::Window valid;
  h = bn(b.conv2d(r, b.param("c5.w", {5, 1, 8, 8}), valid, "c5"), "bn3");
  const auto s = g.tensor(h).shape;
  OpAttrs::Window all;
  all.kh = s[1];
  all.kw = s[2];
  TensorId pooled = b.reshape(b.avg_pool(h, all, "pool"), {batch, s[3]}, "flat");
  TensorId logits = b.matmul(pooled, b.param("fc.w", {s[3], 5}), "fc");
  b.backward(b.softmax_cross_entropy(logits, b.label("labels", {batch}), "loss"));
  b.optimizer({});
  return g;
}

Step spatial_step(const std::string& dims, const std::string& mesh, const std::string& strategy, int64_t batch,
                  int64_t height) {
  Experiment e = load_experiment_text(hardware(dims) +
                                          "workload: {model: resnet, depth: 18, image_size: 32, batch: 4, dtype: fp32}\n"
                                          "strategy: {name: " + strategy + ", spmd_axes: [spatial], spatial: true}\n" +
                                          mesh,
                                      "plan.yaml");
  e.run.combine_threshold = 0;
  ModelGraph g = network(batch, height);
  Plan p = make_plan(g, e);
  validate_plan(p, g, e.hardware.pod.chips());
  return {e, g, p};
}

std::string permute(const std::string& t, double bytes) { return line("collective_permute", t, "spatial", -1, bytes, bytes); }

// The collective-permutes of a program, as collectives() writes them.
std::vector<std::string> permutes(const Program& p) {
  std::vector<std::string> out;
  for (const std::string& l : collectives(p))
    if (l.rfind("collective_permute", 0) == 0) out.push_back(l);
  return out;
}

}  // namespace

// Device i's output rows [i Ho/n, (i + 1) Ho/n) read input rows from i (Ho/n) s - pt on, (Ho/n - 1) s + k of them.
TEST(SpatialTest, HaloGeometryByHand) {
  // ResNet's 3x3/2 pad 1 at 56 rows over 4: 14 rows each, 7 out; window 6 * 2 + 3 = 15 from row 14i - 1: one row
  // from above, none from below.
  HaloGeometry g = geometry(4, 56, 28, 3, 2, 1);
  EXPECT_EQ(g.rows, 14);
  EXPECT_EQ(g.out_rows, 7);
  EXPECT_EQ(g.window, 15);
  EXPECT_EQ(g.lo, 1);
  EXPECT_EQ(g.hi, 0);
  EXPECT_FALSE(g.trivial);
  // 3x3 pad 1: a row each way.
  g = geometry(4, 8, 8, 3, 1, 1);
  EXPECT_EQ(g.window, 4);
  EXPECT_EQ(g.lo, 1);
  EXPECT_EQ(g.hi, 1);
  // The 7x7/2 stem pad 3: 3 rows from above, (4 - 1) * 2 + 7 - 3 - 8 = 2 from below.
  g = geometry(4, 32, 16, 7, 2, 3);
  EXPECT_EQ(g.window, 13);
  EXPECT_EQ(g.lo, 3);
  EXPECT_EQ(g.hi, 2);
  // VALID 3x3 at 10 rows over 2 (8 out): device 1 reads rows 4..9 (one from above), device 0 rows 0..5 (one from
  // below).
  g = geometry(2, 10, 8, 3, 1, 0);
  EXPECT_EQ(g.window, 6);
  EXPECT_EQ(g.step, 4);
  EXPECT_EQ(g.lo, 1);
  EXPECT_EQ(g.hi, 1);
  // 1x1/2 and 2x2/2 read only their own rows.
  EXPECT_TRUE(geometry(4, 16, 8, 1, 2, 0).trivial);
  EXPECT_TRUE(geometry(4, 16, 8, 2, 2, 0).trivial);
  // Maps the split cannot take.
  HaloGeometry bad;
  EXPECT_NE(halo_geometry(4, 2, 2, 3, 1, 1, bad).find("fewer than the 4 devices"), std::string::npos);
  EXPECT_NE(halo_geometry(4, 8, 8, 7, 1, 3, bad).find("reach 3 rows past a device's 2 rows"), std::string::npos);
}

// Split 4 ways along the height (96 rows: 24 per device, 12 after c1, 6 after p1, 3 after c3: odd): the step as one
// chip computes it, with the halos each layer needs (batch 4, width 9, fp32):
//   c1 7x7/2 pad 3 over 24 rows: 3 rows from above [4, 3, 9, 3] (1296 B), 2 from below (864 B), forward and again
//      for the filter gradient (the images have no gradient);
//   p1 3x3/2 pad 1 over 12 rows: 1 row from above [4, 1, 5, 4] (320 B), forward, for the gradient's window, and
//      its gradient's row sent back up;
//   c2 3x3 pad 1 over 6 rows: a row each way [4, 1, 3, 4] (192 B), forward, input gradient (sent back), filter
//      gradient;
//   c3 3x3/2 pad (0, 1): one row from below (192 B), three times; c4 1x1/2: none;
//   c5 5x1 VALID over 3 rows (8 out of 12: device i's window starts at 2i, rows 3i - 3 .. 3i + 2 of a device's
//      3i .. 3i + 2): 3 rows each way [4, 3, 2, 8] (768 B), three times.
TEST(SpatialTest, SpatialSplitReproducesTheStepWithItsHalos) {
  const Step s = spatial_step("[4, 1]", "mesh: {axes: [spatial], shape: [4]}\n", "spmd", 4, 96);
  const Program& p = s.plan.programs[0];
  EXPECT_EQ(permutes(p), sorted({permute("c1.halo.last", 1296), permute("c1.halo.first", 864),
                                 permute("c1.dw.halo.last", 1296), permute("c1.dw.halo.first", 864),
                                 permute("p1.halo.last", 320), permute("p1.dx.halo.last", 320),
                                 permute("p1.dx.halo.up", 320),
                                 permute("c2.halo.last", 192), permute("c2.halo.first", 192),
                                 permute("c2.dx.halo.up", 192), permute("c2.dx.halo.down", 192),
                                 permute("c2.dw.halo.last", 192), permute("c2.dw.halo.first", 192),
                                 permute("c3.halo.first", 192), permute("c3.dx.halo.down", 192),
                                 permute("c3.dw.halo.first", 192),
                                 permute("c5.halo.last", 768), permute("c5.halo.first", 768),
                                 permute("c5.dx.halo.up", 768), permute("c5.dx.halo.down", 768),
                                 permute("c5.dw.halo.last", 768), permute("c5.dw.halo.first", 768)}));
  // Each batch norm all-reduces its sums over the spatial axis: x's and the squared deviations' forward ([2, C]
  // fp32 each), dy's and dy * xhat's backward ([4, C]); the filters' gradients are partial sums over it; the
  // global pool gathers the last map's rows.
  const auto lines = collectives(p);
  auto has = [&](const std::string& l) { return std::find(lines.begin(), lines.end(), l) != lines.end(); };
  for (const char* bn : {"bn1", "bn2"}) {
    EXPECT_TRUE(has(ar(std::string(bn) + ".stats.sum", "spatial", 2 * 4 * 4))) << bn;
    EXPECT_TRUE(has(ar(std::string(bn) + ".stats.m2", "spatial", 2 * 4 * 4))) << bn;
    EXPECT_TRUE(has(ar(std::string(bn) + ".grad.sums", "spatial", 4 * 4 * 4))) << bn;
  }
  EXPECT_TRUE(has(ar("bn3.grad.sums", "spatial", 4 * 8 * 4)));
  EXPECT_TRUE(has(ar("c5.w.grad", "spatial", 5 * 1 * 8 * 8 * 4)));
  EXPECT_TRUE(has(ag("bn3.relu", "spatial", 1, 4 * 2 * 2 * 8 * 4, 4 * 8 * 2 * 8 * 4)));
  expect_reproduces_the_step(s);
}

// With data parallelism: 2 replicas of 2 images, each split 4 ways; the halos are a replica's (half the bytes),
// batch statistics (the whole batch's) all-reduced over data and spatial, gradients over both.
TEST(SpatialTest, SpatialTimesDataReproducesTheStep) {
  const Step s = spatial_step("[4, 2]", "mesh: {axes: [data, spatial], shape: [2, 4]}\n", "[data_parallel, spmd]", 4,
                              96);
  const Program& p = s.plan.programs[0];
  const auto got = permutes(p);
  EXPECT_EQ(got.size(), 22u);
  auto has = [&](const std::string& l) { return std::find(got.begin(), got.end(), l) != got.end(); };
  EXPECT_TRUE(has(permute("c1.halo.last", 1296 / 2)));
  EXPECT_TRUE(has(permute("c5.dx.halo.up", 768 / 2)));
  const auto lines = collectives(p);
  EXPECT_NE(std::find(lines.begin(), lines.end(), ar("bn1.stats.sum", "data,spatial", 2 * 4 * 4)), lines.end());
  EXPECT_NE(std::find(lines.begin(), lines.end(), ar("c1.w.grad", "data,spatial", 7 * 7 * 3 * 4 * 4)), lines.end());
  expect_reproduces_the_step(s);
}

// Heights the axis does not divide (80 rows over 4): the last devices' shards are padded, and the step is still the
// one chip's. c3 (3x3/2 pad (0, 1)) takes 20 rows, 5 per device, to 10, 3 per device (the last holds 1 real row):
// device i's window starts at row 6i, 1 row below its own first per device further down, so it needs up to 4 rows
// from below; c4 (1x1/2) no halo but its padded output rows masked; c5 (5x1 VALID) 10 rows to 6, 2 per device (the
// last device's all padding) with 2 rows from above and 3 from below; bn3's statistics count only the map's rows.
TEST(SpatialTest, UnevenSplitsReproduceTheStep) {
  HaloGeometry g = geometry(4, 20, 10, 3, 2, 0);
  EXPECT_EQ(g.rows, 5);
  EXPECT_EQ(g.out_rows, 3);
  EXPECT_EQ(g.lo, 0);
  EXPECT_EQ(g.hi, 4);
  g = geometry(4, 10, 6, 5, 1, 0);
  EXPECT_EQ(g.lo, 2);
  EXPECT_EQ(g.hi, 3);
  const Step s = spatial_step("[4, 1]", "mesh: {axes: [spatial], shape: [4]}\n", "spmd", 4, 80);
  const auto got = permutes(s.plan.programs[0]);
  auto has = [&](const std::string& l) { return std::find(got.begin(), got.end(), l) != got.end(); };
  EXPECT_TRUE(has(permute("c3.halo.first", 4 * 4 * 3 * 4 * 4)));  // 4 rows of [4, 5, 3, 4]
  EXPECT_TRUE(has(permute("c5.halo.last", 4 * 2 * 2 * 8 * 4)));   // 2 rows of [4, 3, 2, 8]
  EXPECT_TRUE(has(permute("c5.halo.first", 4 * 3 * 2 * 8 * 4)));
  expect_reproduces_the_step(s);
  expect_reproduces_the_step(
      spatial_step("[4, 2]", "mesh: {axes: [data, spatial], shape: [2, 4]}\n", "[data_parallel, spmd]", 4, 80));
}

// A split finer than a map is refused, naming the layer and its height (40 rows: c5 takes c3's 5 rows to 1, fewer
// than the 4 devices).
TEST(SpatialTest, ASplitFinerThanAMapIsRefused) {
  try {
    spatial_step("[4, 1]", "mesh: {axes: [spatial], shape: [4]}\n", "spmd", 4, 40);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), Err::SpatialSplit);
    EXPECT_NE(e.message().find("'c5' (height 5)"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("fewer than the 4 devices"), std::string::npos) << e.message();
  }
}

// workload.model: amoebanet — AmoebaNet-D (L, D) (Real et al. 2019) as GPipe (Huang et al. 2019) built it, after
// the TensorFlow TPU reference implementation (../shared/reference/cnn-models.md section 2): images[batch, S, S, 3]
// -> stem (ReLU, 3x3/2 convolution to D/4 channels, batch norm) -> two reduction cells -> L/3 normal cells, a
// reduction cell, L/3 normal cells, a reduction cell, L/3 normal cells (width D, 2D, 4D) -> global average pool ->
// dense (with bias) to `classes` -> softmax cross-entropy -> backward -> optimizer update.
//
// A cell reads the outputs of the two cells before it (prev, prev_prev), makes each c channels wide (state 0 from
// prev by ReLU, 1x1 convolution, batch norm; state 1 from prev_prev the same way, by a factorized reduction when
// prev_prev is twice prev's size, or as it is when it already is c wide), adds five pairs of operations (states 2..6;
// the tables are below) and concatenates some states along the channels (4c for a normal cell, 3c for a reduction
// cell). In a reduction cell an operation reading state 0 or 1 has stride 2. Every convolution has no bias and is
// followed by a training-mode batch norm over groups of workload.bn_batch examples.
//
// Each cell is a model cell (a pipeline unit: strategy pipeline cuts between them); the stem is cell 0 and the
// classifier cell L + 5.
#include "base/error.h"
#include "workloads/i_workload.h"
#include "workloads/layout.h"
#include "workloads/training.h"

namespace podsim {
namespace {

enum class CellOp { Conv1x1, Conv3x3, Conv1x7, MaxPool3, AvgPool3, MaxPool2, Identity };

struct Pair {
  int state;
  CellOp op;
};

struct CellSpec {
  Pair pairs[5][2];
  std::vector<int> output;
};

// cnn-models.md section 2's tables.
const CellSpec kNormal = {{{{1, CellOp::Conv1x1}, {1, CellOp::MaxPool3}},
                           {{1, CellOp::Identity}, {0, CellOp::Conv1x7}},
                           {{0, CellOp::Conv1x1}, {0, CellOp::Conv1x7}},
                           {{2, CellOp::MaxPool3}, {2, CellOp::Identity}},
                           {{1, CellOp::AvgPool3}, {5, CellOp::Conv1x1}}},
                          {0, 3, 4, 6}};
const CellSpec kReduction = {{{{0, CellOp::MaxPool2}, {0, CellOp::MaxPool3}},
                              {{2, CellOp::Identity}, {1, CellOp::Conv3x3}},
                              {{2, CellOp::Conv1x7}, {2, CellOp::MaxPool3}},
                              {{3, CellOp::Identity}, {1, CellOp::MaxPool2}},
                              {{2, CellOp::AvgPool3}, {3, CellOp::Conv1x1}}},
                             {4, 5, 6}};

OpAttrs::Window window(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw) {
  OpAttrs::Window w;
  w.kh = kh, w.kw = kw, w.sh = sh, w.sw = sw;
  w.pt = w.pb = ph;
  w.pl = w.pr = pw;
  return w;
}

class Net {
 public:
  Net(ModelGraph& g, GraphBuilder& b, int64_t group) : m_g(g), m_b(b), m_group(group) {}

  int64_t channels(TensorId x) const { return m_g.tensor(x).shape[3]; }
  int64_t size(TensorId x) const { return m_g.tensor(x).shape[1]; }

  TensorId bn(TensorId x, const std::string& n) {
    const int64_t c = channels(x);
    return m_b.batch_norm(x, m_b.param(n + ".bn.gamma", {c}), m_b.param(n + ".bn.beta", {c}), m_group, n + ".bn");
  }
  // Convolution (no bias) then batch norm; ReLU first when `relu`.
  TensorId conv_bn(TensorId x, int64_t kh, int64_t kw, int64_t cout, const OpAttrs::Window& w, const std::string& n,
                   bool relu = true) {
    if (relu) x = m_b.relu(x, n + ".relu");
    TensorId f = m_b.param(n + ".conv.w", {kh, kw, channels(x), cout});
    return bn(m_b.conv2d(x, f, w, n + ".conv"), n);
  }
  // ReLU, two 1x1 stride-2 convolutions of c/2 outputs (the second reading the input one pixel down and right: a
  // padding of -1 before and +1 after, as XLA's convolution padding allows), concatenated, batch norm.
  TensorId factorized_reduction(TensorId x, int64_t c, const std::string& n) {
    x = m_b.relu(x, n + ".relu");
    TensorId a = m_b.conv2d(x, m_b.param(n + ".path1.w", {1, 1, channels(x), c / 2}), window(1, 1, 2, 2, 0, 0),
                            n + ".path1");
    OpAttrs::Window shifted = window(1, 1, 2, 2, 0, 0);
    shifted.pt = shifted.pl = -1;
    shifted.pb = shifted.pr = 1;
    TensorId b = m_b.conv2d(x, m_b.param(n + ".path2.w", {1, 1, channels(x), c / 2}), shifted, n + ".path2");
    return bn(m_b.concat({a, b}, n + ".concat"), n);
  }

  TensorId op(CellOp kind, TensorId x, int64_t c, int64_t s, const std::string& n) {
    switch (kind) {
      case CellOp::Conv1x1: return conv_bn(x, 1, 1, c, window(1, 1, s, s, 0, 0), n);
      case CellOp::Conv3x3: {
        TensorId h = conv_bn(x, 1, 1, c / 4, window(1, 1, 1, 1, 0, 0), n + ".a");
        h = conv_bn(h, 3, 3, c / 4, window(3, 3, s, s, 1, 1), n + ".b");
        return conv_bn(h, 1, 1, c, window(1, 1, 1, 1, 0, 0), n + ".c");
      }
      case CellOp::Conv1x7: {
        TensorId h = conv_bn(x, 1, 1, c / 4, window(1, 1, 1, 1, 0, 0), n + ".a");
        h = conv_bn(h, 1, 7, c / 4, window(1, 7, 1, s, 0, 3), n + ".b");
        h = conv_bn(h, 7, 1, c / 4, window(7, 1, s, 1, 3, 0), n + ".c");
        return conv_bn(h, 1, 1, c, window(1, 1, 1, 1, 0, 0), n + ".d");
      }
      case CellOp::MaxPool3: return m_b.max_pool(x, window(3, 3, s, s, 1, 1), n);
      case CellOp::AvgPool3: return m_b.avg_pool(x, window(3, 3, s, s, 1, 1), n);
      case CellOp::MaxPool2: return m_b.max_pool(x, window(2, 2, s, s, 0, 0), n);
      case CellOp::Identity: return s == 1 ? x : factorized_reduction(x, c, n);
    }
    return x;
  }

  // One cell of width c over (prev, prev_prev); `reduction_prev`: prev_prev is twice prev's height and width.
  TensorId cell(const CellSpec& spec, bool reduction, TensorId prev, TensorId prev_prev, bool reduction_prev,
                int64_t c, const std::string& n) {
    std::vector<TensorId> st;
    st.push_back(conv_bn(prev, 1, 1, c, window(1, 1, 1, 1, 0, 0), n + ".pre0"));
    if (reduction_prev) st.push_back(factorized_reduction(prev_prev, c, n + ".pre1"));
    else if (channels(prev_prev) != c) st.push_back(conv_bn(prev_prev, 1, 1, c, window(1, 1, 1, 1, 0, 0), n + ".pre1"));
    else st.push_back(prev_prev);
    for (int k = 0; k < 5; ++k) {
      TensorId sum = -1;
      for (int j = 0; j < 2; ++j) {
        const Pair& p = spec.pairs[k][j];
        const int64_t s = reduction && p.state < 2 ? 2 : 1;
        const std::string on = n + ".s" + std::to_string(k + 2) + (j == 0 ? "a" : "b");
        TensorId y = op(p.op, st[static_cast<size_t>(p.state)], c, s, on);
        sum = j == 0 ? y : m_b.add(sum, y, n + ".s" + std::to_string(k + 2));
      }
      st.push_back(sum);
    }
    std::vector<TensorId> out;
    for (int i : spec.output) out.push_back(st[static_cast<size_t>(i)]);
    return m_b.concat(out, n + ".out");
  }

 private:
  ModelGraph& m_g;
  GraphBuilder& m_b;
  int64_t m_group;
};

// strategy.micro_batches when the step runs as a pipeline, else 0.
int64_t micro_batches(const ParamSet& p) { return p.has("strategy.micro_batches") ? p.i("strategy.micro_batches") : 0; }

class AmoebaNetWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    std::vector<ParamSpec> p = {
        ParamSpec::integer("workload.cells", "L: normal cells, a multiple of 3 (L/3 at each of the three widths).")
            .range(3, 1 << 12)
            .def("18"),
        ParamSpec::integer("workload.filters", "D: the filters of the first normal cells (a multiple of 8).")
            .range(8, 1 << 16)
            .def("256"),
        ParamSpec::integer("workload.batch", "Images per step (global batch).").range(1, 1LL << 24),
        ParamSpec::integer("workload.image_size", "Height and width of the input images (a multiple of 32).")
            .range(32, 4096)
            .def("224"),
        ParamSpec::integer("workload.classes", "Output classes.").range(2, 1LL << 24).def("1000"),
        ParamSpec::integer("workload.bn_batch",
                           "Examples per batch-norm group: batch statistics over each run of this many consecutive "
                           "examples (0: each data-parallel replica's examples, the whole batch on one replica; under "
                           "strategy pipeline, each micro-batch, as GPipe).")
            .range(0, 1LL << 24)
            .def("0"),
    };
    for (auto& s : training_param_specs("adam", "0.001")) p.push_back(s);
    return p;
  }

  void validate(const ParamSet& p) const override {
    validate_training(p);
    const int64_t cells = p.i("workload.cells"), filters = p.i("workload.filters");
    if (cells % 3 != 0)
      throw Error(Err::NotDivisible, p.where("workload.cells"),
                  "workload.cells = " + std::to_string(cells) +
                      " is not a multiple of 3: AmoebaNet-D has L/3 normal cells at each of its three widths "
                      "(e.g. 6, 18, 36)",
                  "workload.cells");
    if (filters % 8 != 0)
      throw Error(Err::NotDivisible, p.where("workload.filters"),
                  "workload.filters = " + std::to_string(filters) +
                      " is not a multiple of 8: the first reduction cell's convolutions are D/8 wide (e.g. 208, 256)",
                  "workload.filters");
    const int64_t size = p.i("workload.image_size");
    if (size % 32 != 0)
      throw Error(Err::NotDivisible, p.where("workload.image_size"),
                  "workload.image_size = " + std::to_string(size) +
                      " is not a multiple of 32: the stem and four reduction cells halve it five times (e.g. 32, 224)",
                  "workload.image_size");
    const int64_t batch = p.i("workload.batch"), group = p.i("workload.bn_batch");
    const int64_t micro = micro_batches(p);
    if (group > 0 && micro > 0 && batch % micro == 0 && (batch / micro) % group != 0)
      throw Error(Err::NotDivisible, p.where("workload.bn_batch"),
                  "workload.bn_batch = " + std::to_string(group) + " does not divide the pipeline's micro-batch of " +
                      std::to_string(batch / micro) + " examples: a stage normalizes one micro-batch at a time (GPipe); "
                      "choose a divisor of it (0: the whole micro-batch)",
                  "workload.bn_batch");
    if (group > 0 && batch % group != 0)
      throw Error(Err::NotDivisible, p.where("workload.bn_batch"),
                  "workload.bn_batch = " + std::to_string(group) + " does not divide workload.batch = " +
                      std::to_string(batch) + "; choose a divisor of the batch (or 0 for each data-parallel replica's examples)",
                  "workload.bn_batch");
  }

  ModelGraph build(const ParamSet& p) const override {
    const int64_t L = p.i("workload.cells"), D = p.i("workload.filters");
    const int64_t batch = p.i("workload.batch"), size = p.i("workload.image_size");
    ModelGraph g("amoebanet_d_" + std::to_string(L) + "_" + std::to_string(D));
    GraphBuilder b(g, training_dtype(p), training_weight_dtype(p));
    // Under a pipeline a stage normalizes each micro-batch (GPipe): groups of batch / micro_batches at most.
    const int64_t micro = micro_batches(p);
    const int64_t group = p.i("workload.bn_batch") > 0 || micro <= 0 ? p.i("workload.bn_batch") : batch / micro;
    Net net(g, b, group);
    int32_t unit = 0;
    b.set_cell(unit);
    TensorId x = b.input("images", {batch, size, size, 3}, training_dtype(p));
    TensorId labels = b.label("labels", {batch});
    x = net.conv_bn(x, 3, 3, D / 4, window(3, 3, 2, 2, 1, 1), "stem");
    TensorId prev = x, prev_prev = x;
    bool reduction_prev = false;
    int64_t c = D / 4;
    int index = 0;
    auto add_cell = [&](bool reduction) {
      b.set_cell(++unit);
      const std::string n = "cell" + std::to_string(index++);
      TensorId out = net.cell(reduction ? kReduction : kNormal, reduction, prev, prev_prev, reduction_prev, c, n);
      prev_prev = prev;
      prev = out;
      reduction_prev = reduction;
    };
    for (int r = 0; r < 2; ++r) {
      c *= 2;
      add_cell(true);
    }
    for (int grp = 0; grp < 3; ++grp) {
      if (grp > 0) {
        c *= 2;
        add_cell(true);
      }
      for (int64_t i = 0; i < L / 3; ++i) add_cell(false);
    }
    b.set_cell(++unit);
    const auto s = g.tensor(prev).shape;
    OpAttrs::Window all;
    all.kh = s[1];
    all.kw = s[2];
    TensorId pooled = b.reshape(b.avg_pool(prev, all, "head.pool"), {batch, s[3]}, "head.flat");
    const int64_t classes = p.i("workload.classes");
    TensorId logits = b.bias_add(b.matmul(pooled, b.param("fc.w", {s[3], classes}), "fc"),
                                 b.param("fc.b", {classes}), "fc.bias");
    ModelGraph out = finish_training_step(b, b.softmax_cross_entropy(logits, labels, "loss"), p);
    assign_image_layouts(out, image_layouts_from(p.s("run.layout")));
    return out;
  }

  std::string default_strategy() const override { return "single_device"; }
};

PODSIM_REGISTER_WORKLOAD(AmoebaNetWorkload, "amoebanet",
                         "AmoebaNet-D (L, D) image classification as GPipe built it, a training step");

}  // namespace
}  // namespace podsim

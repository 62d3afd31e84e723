// workload.model: conv — one 2-D convolution, in one direction, forward only: the unit for op-level studies of
// convolutions on the MXU and for posing a measured convolution fusion as it ran (tools/calibrate).
//
//   direction: forward      x[B, H, W, Ci] * w[KH, KW, Ci, Co] -> y[B, Ho, Wo, Co]
//              input_grad   dy[B, Ho, Wo, Co] with w -> dx[B, H, W, Ci]
//              filter_grad  x with dy -> dw[KH, KW, Ci, Co]
//
// The fused work of a real convolution fusion can be posed too (docs/model.md, "Convolutions on the MXU"):
// filter_dtype: fp32 stores the filter in fp32 and converts it inside the fusion (mixed-precision master weights);
// out_dtype: fp32 writes the result in fp32; prologue_inputs = E adds E further tensors of the main activation
// operand's shape to it before the MXU reads it (x forward, dy backward: the batch norm and ReLU work XLA fuses into
// a convolution's operand); statistics: true computes per-channel batch-norm statistics of the result (a reduction
// XLA fuses into the convolution as a second output).
#include <string>

#include "base/error.h"
#include "workloads/i_workload.h"
#include "workloads/layout.h"

namespace podsim {
namespace {

class ConvWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    return {
        ParamSpec::integer("workload.batch", "Images B.").range(1, 1LL << 24),
        ParamSpec::integer("workload.height", "Input height H.").range(1, 1LL << 20),
        ParamSpec::integer("workload.width", "Input width W.").range(1, 1LL << 20),
        ParamSpec::integer("workload.in_features", "Input features Ci.").range(1, 1LL << 20),
        ParamSpec::integer("workload.out_features", "Output features Co.").range(1, 1LL << 20),
        ParamSpec::int_list("workload.kernel", "Filter height and width [KH, KW] (one value: square).")
            .one_or_more()
            .def("[3, 3]"),
        ParamSpec::integer("workload.stride", "Stride along both dimensions.").range(1, 64).def("1"),
        ParamSpec::choice("workload.padding", {"same", "valid"},
                          "same: the output has ceil(H / stride) rows and columns, the padding split as TensorFlow "
                          "splits it (the odd one after); valid: no padding.")
            .def("same"),
        ParamSpec::choice("workload.direction", {"forward", "input_grad", "filter_grad"},
                          "Which convolution runs: the forward one, or one of the two of its gradient.")
            .def("forward"),
        ParamSpec::choice("workload.dtype", {"bf16", "fp32"}, "Type of the activations (and of the filter).")
            .def("bf16"),
        ParamSpec::choice("workload.filter_dtype", {"same", "fp32"},
                          "Storage type of the filter read by the forward and input-gradient convolutions: same as "
                          "workload.dtype, or fp32 converted inside the convolution's fusion.")
            .def("same"),
        ParamSpec::choice("workload.out_dtype", {"same", "fp32"}, "Type of the convolution's result.").def("same"),
        ParamSpec::integer("workload.prologue_inputs",
                           "Elementwise prologue: this many adds of further tensors of the main activation "
                           "operand's shape (x forward, dy for the gradients) to it before the MXU reads it.")
            .range(0, 16)
            .def("0"),
        ParamSpec::choice("workload.input_layout", {"image", "batch_minor"},
                          "How the input x is stored (forward and filter gradient): as an image activation "
                          "(features on the lanes) or as an input image batch-minor (docs/model.md, \"Layouts\").")
            .def("image"),
        ParamSpec::boolean("workload.statistics",
                           "Per-channel batch-norm statistics of the result (mean and inverse deviation), as a "
                           "forward convolution fusion of a batch-normalized network writes them.")
            .def("false"),
    };
  }

  void validate(const ParamSet& p) const override {
    const auto k = p.ints("workload.kernel");
    if (k.size() > 2 || k.empty())
      throw Error(Err::OutOfRange, p.where("workload.kernel"),
                  "workload.kernel has " + std::to_string(k.size()) + " entries; give [KH, KW] or one size");
    for (int64_t v : k)
      if (v < 1 || v > 64)
        throw Error(Err::OutOfRange, p.where("workload.kernel"),
                    "workload.kernel = " + std::to_string(v) + " is outside [1, 64]");
    if (p.s("workload.padding") == "valid" &&
        (k.front() > p.i("workload.height") || k.back() > p.i("workload.width")))
      throw Error(Err::OutOfRange, p.where("workload.kernel"),
                  "workload.kernel is larger than the input with workload.padding = valid");
    if (p.b("workload.statistics") && p.s("workload.direction") == "filter_grad")
      throw Error(Err::BadChoice, p.where("workload.statistics"),
                  "workload.statistics is for a convolution whose result is an activation (forward, input_grad), "
                  "not a filter gradient");
  }

  ModelGraph build(const ParamSet& p) const override {
    const auto k = p.ints("workload.kernel");
    const int64_t b = p.i("workload.batch"), h = p.i("workload.height"), w = p.i("workload.width");
    const int64_t ci = p.i("workload.in_features"), co = p.i("workload.out_features");
    const int64_t kh = k.front(), kw = k.back(), s = p.i("workload.stride");
    const DType dt = p.s("workload.dtype") == "bf16" ? DType::BF16 : DType::F32;
    const DType out_dt = p.s("workload.out_dtype") == "fp32" ? DType::F32 : dt;
    const std::string dir = p.s("workload.direction");

    OpAttrs::Window win;
    win.kh = kh;
    win.kw = kw;
    win.sh = win.sw = s;
    int64_t ho = 0, wo = 0;
    if (p.s("workload.padding") == "same") {
      // TensorFlow's SAME: the output ceil(in / stride), the total padding split with the odd row after.
      ho = (h + s - 1) / s, wo = (w + s - 1) / s;
      const int64_t ph = std::max<int64_t>(0, (ho - 1) * s + kh - h), pw = std::max<int64_t>(0, (wo - 1) * s + kw - w);
      win.pt = ph / 2, win.pb = ph - ph / 2, win.pl = pw / 2, win.pr = pw - pw / 2;
    } else {
      ho = (h - kh) / s + 1, wo = (w - kw) / s + 1;
    }

    ModelGraph g("conv");
    auto tensor = [&](const std::string& name, std::vector<int64_t> shape, DType d, TensorRole r) {
      return g.add_tensor({name, std::move(shape), d, r});
    };
    auto op = [&](const std::string& name, OpKind kind, std::vector<TensorId> in, std::vector<TensorId> out) {
      Op o;
      o.name = name;
      o.kind = kind;
      o.phase = Phase::Forward;
      o.cell = 0;
      o.inputs = std::move(in);
      o.outputs = std::move(out);
      o.attrs.window = win;
      g.add_op(o);
    };
    const std::vector<int64_t> xs = {b, h, w, ci}, ys = {b, ho, wo, co}, fs = {kh, kw, ci, co};

    // The filter the forward and input-gradient convolutions read, converted from fp32 inside the fusion if asked.
    auto filter = [&] {
      const bool convert = p.s("workload.filter_dtype") == "fp32" && dt != DType::F32;
      TensorId f = tensor(convert ? "w_fp32" : "w", fs, convert ? DType::F32 : dt, TensorRole::Parameter);
      if (!convert) return f;
      TensorId fc = tensor("w", fs, dt, TensorRole::Activation);
      Op cv;
      cv.name = "convert_w";
      cv.kind = OpKind::Scale;  // x 1: the store rounds to the output's type
      cv.phase = Phase::Forward;
      cv.cell = 0;
      cv.inputs = {f};
      cv.outputs = {fc};
      cv.attrs.alpha = 1.0;
      g.add_op(cv);
      return fc;
    };
    // The main activation operand with the prologue's adds.
    auto with_prologue = [&](TensorId t, const std::vector<int64_t>& shape, const std::string& name) {
      const int64_t n = p.i("workload.prologue_inputs");
      for (int64_t i = 0; i < n; ++i) {
        const std::string k = std::to_string(i);
        TensorId e = tensor("p" + k, shape, dt, TensorRole::Input);
        TensorId out = tensor(name + ".p" + k, shape, dt, TensorRole::Activation);
        op("prologue_add" + k, OpKind::Add, {t, e}, {out});
        t = out;
      }
      return t;
    };

    TensorId result = -1, batch_minor = -1;
    if (dir == "forward") {
      TensorId x = tensor("x", xs, dt, TensorRole::Input);
      batch_minor = p.s("workload.input_layout") == "batch_minor" ? x : -1;
      x = with_prologue(x, xs, "x");
      TensorId f = filter();
      result = tensor("y", ys, out_dt, TensorRole::Activation);
      op("conv", OpKind::Conv2d, {x, f}, {result});
    } else if (dir == "input_grad") {
      TensorId dy = with_prologue(tensor("dy", ys, dt, TensorRole::Input), ys, "dy");
      TensorId f = filter();
      result = tensor("dx", xs, out_dt, TensorRole::Activation);
      op("conv.dx", OpKind::Conv2dInputGrad, {dy, f}, {result});
    } else {
      TensorId x = tensor("x", xs, dt, TensorRole::Input);
      batch_minor = p.s("workload.input_layout") == "batch_minor" ? x : -1;
      TensorId dy = with_prologue(tensor("dy", ys, dt, TensorRole::Input), ys, "dy");
      result = tensor("dw", fs, out_dt, TensorRole::Activation);
      op("conv.dw", OpKind::Conv2dFilterGrad, {x, dy}, {result});
    }
    g.tensor(result).result = true;
    if (p.b("workload.statistics")) {
      const auto& rs = g.tensor(result).shape;
      const std::vector<int64_t> rows = {rs[0], rs[3]};
      TensorId mean = tensor("mean", rows, DType::F32, TensorRole::Activation);
      TensorId rstd = tensor("rstd", rows, DType::F32, TensorRole::Activation);
      Op st;
      st.name = "statistics";
      st.kind = OpKind::BatchNormStats;
      st.phase = Phase::Forward;
      st.cell = 0;
      st.inputs = {result};
      st.outputs = {mean, rstd};
      st.attrs.count = 0;
      st.attrs.eps = 1e-5;
      g.add_op(st);
    }
    // Every 4-D input is posed as an activation (a step input here, which layout assignment would take for an
    // input image) unless workload.input_layout says x is one.
    assign_image_layouts(g, image_layouts_from(p.s("run.layout")));
    for (TensorId t = 0; t < static_cast<TensorId>(g.num_tensors()); ++t)
      if (g.tensor(t).layout == Layout::ImageBatchMinor && t != batch_minor) g.tensor(t).layout = Layout::Image;
    return g;
  }
};

PODSIM_REGISTER_WORKLOAD(ConvWorkload, "conv", "One 2-D convolution in one direction (op-level studies)");

}  // namespace
}  // namespace podsim

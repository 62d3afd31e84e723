// workload.model: loop — one elementwise (loop) fusion over an image activation, forward only: the unit for posing a
// measured loop fusion as it ran (tools/calibrate): the activation-sized tensors it reads and writes, the per-channel
// vectors it reads (a batch norm's folded scale and offset), and the per-channel sums it writes (a batch-norm
// gradient's). Its ops are the step's own kinds, which the compiler fuses into one kernel:
//
//   y = relu(x0 + x1 + ... + c0 + c1 + ...)      inputs added, channel vectors added as biases, a ReLU
//   outputs: y (and copies of it at other types); channel_outputs: the batch-norm statistics of y
#include <string>

#include "base/error.h"
#include "workloads/i_workload.h"
#include "workloads/layout.h"

namespace podsim {
namespace {

DType dtype_of(const std::string& s) { return s == "fp32" ? DType::F32 : DType::BF16; }

class LoopWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    return {
        ParamSpec::int_list("workload.shape", "The image activation's shape [N, H, W, C] the fusion loops over."),
        ParamSpec::choice_list("workload.inputs", {"bf16", "fp32"},
                               "Types of the activation-sized tensors it reads (one entry each).")
            .def("[bf16]"),
        ParamSpec::integer("workload.channel_inputs", "Per-channel fp32 vectors [C] it reads (added as biases).")
            .range(0, 16)
            .def("0"),
        ParamSpec::choice_list("workload.outputs", {"bf16", "fp32"},
                               "Types of the activation-sized tensors it writes (one entry each; none: it writes "
                               "only per-channel sums).")
            .def("[bf16]"),
        ParamSpec::boolean("workload.channel_outputs",
                           "Writes per-channel sums of its result (a batch-norm gradient's, as statistics).")
            .def("false"),
    };
  }

  void validate(const ParamSet& p) const override {
    if (p.ints("workload.shape").size() != 4)
      throw Error(Err::OutOfRange, p.where("workload.shape"),
                  "workload.shape has " + std::to_string(p.ints("workload.shape").size()) +
                      " entries; give an image activation's [N, H, W, C]");
    for (int64_t d : p.ints("workload.shape"))
      if (d < 1) throw Error(Err::OutOfRange, p.where("workload.shape"), "workload.shape needs positive sizes");
    if (p.strings("workload.inputs").empty())
      throw Error(Err::OutOfRange, p.where("workload.inputs"), "workload.inputs needs at least one tensor");
    if (p.strings("workload.outputs").empty() && !p.b("workload.channel_outputs"))
      throw Error(Err::OutOfRange, p.where("workload.outputs"),
                  "the fusion writes nothing: give workload.outputs or workload.channel_outputs: true");
  }

  ModelGraph build(const ParamSet& p) const override {
    const std::vector<int64_t> shape = p.ints("workload.shape");
    const int64_t c = shape[3];
    ModelGraph g("loop");
    int n = 0;
    auto op = [&](OpKind kind, std::vector<TensorId> in, std::vector<TensorId> out) {
      Op o;
      const std::string k = std::to_string(n++);
      o.name = "op" + k;
      o.kind = kind;
      o.phase = Phase::Forward;
      o.cell = 0;
      o.inputs = std::move(in);
      o.outputs = std::move(out);
      o.attrs.alpha = 1.0;
      g.add_op(o);
    };
    const auto inputs = p.strings("workload.inputs");
    TensorId y = g.add_tensor({"x0", shape, dtype_of(inputs[0]), TensorRole::Input});
    const DType dt = g.tensor(y).dtype;
    auto next = [&](DType d) {
      const std::string k = std::to_string(n);
      return g.add_tensor({"t" + k, shape, d, TensorRole::Activation});
    };
    for (size_t i = 1; i < inputs.size(); ++i) {
      const std::string k = std::to_string(i);
      TensorId x = g.add_tensor({"x" + k, shape, dtype_of(inputs[i]), TensorRole::Input});
      TensorId out = next(dt);
      op(OpKind::Add, {y, x}, {out});
      y = out;
    }
    for (int64_t i = 0; i < p.i("workload.channel_inputs"); ++i) {
      const std::string k = std::to_string(i);
      TensorId v = g.add_tensor({"c" + k, {c}, DType::F32, TensorRole::Input});
      TensorId out = next(dt);
      op(OpKind::BiasAdd, {y, v}, {out});
      y = out;
    }
    TensorId r = next(dt);
    op(OpKind::Relu, {y}, {r});
    for (const std::string& o : p.strings("workload.outputs")) {
      TensorId out = next(dtype_of(o));
      op(OpKind::Scale, {r}, {out});  // x 1: the store rounds to the output's type
      g.tensor(out).result = true;
    }
    if (p.b("workload.channel_outputs")) {
      Op st;
      st.name = "sums";
      st.kind = OpKind::BatchNormStats;
      st.phase = Phase::Forward;
      st.cell = 0;
      st.inputs = {r};
      st.outputs = {g.add_tensor({"sum", {shape[0], c}, DType::F32, TensorRole::Activation}),
                    g.add_tensor({"sum_sq", {shape[0], c}, DType::F32, TensorRole::Activation})};
      g.tensor(st.outputs[0]).result = true;
      g.tensor(st.outputs[1]).result = true;
      g.add_op(st);
    }
    // Every activation-sized tensor an image activation (features on the lanes), as a network's are.
    assign_image_layouts(g, image_layouts_from(p.s("run.layout")));
    for (TensorId t = 0; t < static_cast<TensorId>(g.num_tensors()); ++t)
      if (g.tensor(t).shape == shape) g.tensor(t).layout = p.s("run.layout") == "xla" ? Layout::Image : Layout::Tiled;
    return g;
  }
};

PODSIM_REGISTER_WORKLOAD(LoopWorkload, "loop", "One elementwise fusion over an image activation (op-level studies)");

}  // namespace
}  // namespace podsim

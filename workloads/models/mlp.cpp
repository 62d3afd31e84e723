// workload.model: mlp — a stack of dense layers: x[batch, input] -> layers x (matmul, bias, activation) ->
// matmul to classes + bias -> softmax cross-entropy against labels[batch] -> backward -> optimizer update.
#include "workloads/i_workload.h"
#include "workloads/training.h"

namespace podsim {
namespace {

class MlpWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    std::vector<ParamSpec> p = {
        ParamSpec::integer("workload.batch", "Examples per step.").range(1, 1LL << 24),
        ParamSpec::integer("workload.input", "Input features.").range(1, 1LL << 24),
        ParamSpec::integer("workload.hidden", "Width of each hidden layer.").range(1, 1LL << 24),
        ParamSpec::integer("workload.layers", "Hidden layers.").range(1, 10000),
        ParamSpec::integer("workload.classes", "Output classes.").range(2, 1LL << 24),
        ParamSpec::choice("workload.activation", {"relu", "gelu"}, "Hidden-layer activation.").def("relu"),
    };
    for (auto& s : training_param_specs("sgd", "0.01")) p.push_back(s);
    return p;
  }

  void validate(const ParamSet& p) const override { validate_training(p); }

  ModelGraph build(const ParamSet& p) const override {
    const int64_t batch = p.i("workload.batch"), width = p.i("workload.hidden");
    ModelGraph g("mlp");
    GraphBuilder b(g, training_dtype(p), training_weight_dtype(p));
    TensorId x = b.input("x", {batch, p.i("workload.input")}, training_dtype(p));
    TensorId labels = b.label("labels", {batch});
    bool gelu = p.s("workload.activation") == "gelu";
    int64_t in = p.i("workload.input");
    for (int64_t l = 0; l < p.i("workload.layers"); ++l) {
      std::string n = "fc" + std::to_string(l);
      b.set_cell(static_cast<int32_t>(l));  // each layer a cell; the output layer and the loss the last
      TensorId w = b.param(n + ".w", {in, width});
      TensorId bias = b.param(n + ".b", {width});
      TensorId h = b.bias_add(b.matmul(x, w, n), bias, n + ".bias");
      x = gelu ? b.gelu(h, n + ".gelu") : b.relu(h, n + ".relu");
      in = width;
    }
    b.set_cell(static_cast<int32_t>(p.i("workload.layers")));
    TensorId w = b.param("out.w", {in, p.i("workload.classes")});
    TensorId bias = b.param("out.b", {p.i("workload.classes")});
    TensorId logits = b.bias_add(b.matmul(x, w, "out"), bias, "out.bias");
    TensorId loss = b.softmax_cross_entropy(logits, labels, "loss");
    return finish_training_step(b, loss, p);
  }
};

PODSIM_REGISTER_WORKLOAD(MlpWorkload, "mlp", "Stack of dense layers with activation, a training step");

}  // namespace
}  // namespace podsim

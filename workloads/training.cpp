#include "workloads/training.h"

namespace podsim {

std::vector<ParamSpec> training_param_specs(const std::string& default_optimizer, const std::string& default_lr) {
  return {
      ParamSpec::choice("workload.dtype", {"bf16", "fp32"},
                        "Storage type of weights and activations; the MXU takes bf16 inputs and accumulates in fp32.")
          .def("bf16"),
      ParamSpec::choice("workload.weight_dtype", {"bf16", "fp32"},
                        "Storage type of the weights, their gradients and updates (default workload.dtype). fp32 with "
                        "dtype bf16 is mixed precision: fp32 master weights, each cast to a bf16 copy where the step "
                        "reads it, the copy's gradient cast back to fp32 (docs/model.md).")
          .optional(),
      ParamSpec::choice("workload.optimizer", {"sgd", "adam"}, "Optimizer; Adam keeps two fp32 state tensors per "
                                                               "weight.")
          .def(default_optimizer),
      ParamSpec::real("workload.learning_rate", "Learning rate.").positive(100).def(default_lr),
      ParamSpec::real("workload.beta1", "Adam first-moment decay.").range(0, 0.999999).def("0.9"),
      ParamSpec::real("workload.beta2", "Adam second-moment decay.").range(0, 0.999999999).def("0.999"),
      ParamSpec::real("workload.eps", "Adam epsilon.").positive(1).def("1e-8"),
  };
}

DType training_dtype(const ParamSet& p) { return p.s("workload.dtype") == "bf16" ? DType::BF16 : DType::F32; }

DType training_weight_dtype(const ParamSet& p) {
  if (!p.has("workload.weight_dtype")) return training_dtype(p);
  return p.s("workload.weight_dtype") == "bf16" ? DType::BF16 : DType::F32;
}

OptimizerConfig training_optimizer(const ParamSet& p) {
  OptimizerConfig c;
  c.kind = p.s("workload.optimizer") == "adam" ? Optimizer::Adam : Optimizer::Sgd;
  c.learning_rate = p.f("workload.learning_rate");
  c.beta1 = p.f("workload.beta1");
  c.beta2 = p.f("workload.beta2");
  c.eps = p.f("workload.eps");
  return c;
}

}  // namespace podsim

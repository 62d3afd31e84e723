// workload.model: matmul — one M x K @ K x N product, forward only: the unit for op-level studies (and for
// comparing MXU cycles with other systolic-array simulators). With workload.batch = B > 1 it is a batched product
// [B, M, K] x [B, K, N] -> [B, M, N], as attention's score and context matmuls are: both operands change with the
// batch element, so neither stays in the MXU from one element to the next.
#include "workloads/i_workload.h"

namespace podsim {
namespace {

class MatmulWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    return {
        ParamSpec::integer("workload.m", "Rows of the left operand (streamed through the MXU).").range(1, 1LL << 31),
        ParamSpec::integer("workload.k", "Contracting dimension (mapped onto MXU rows).").range(1, 1LL << 31),
        ParamSpec::integer("workload.n", "Columns of the right operand (mapped onto MXU columns).").range(1, 1LL << 31),
        ParamSpec::integer("workload.batch",
                           "Batch of independent products [B, M, K] x [B, K, N] (attention's matmuls); 1: one "
                           "M x K x N product.")
            .range(1, 1LL << 31)
            .def("1"),
        ParamSpec::choice("workload.dtype", {"bf16", "fp32"},
                          "Operand type; the MXU always accumulates in fp32.")
            .def("bf16"),
    };
  }

  ModelGraph build(const ParamSet& p) const override {
    int64_t m = p.i("workload.m"), k = p.i("workload.k"), n = p.i("workload.n"), batch = p.i("workload.batch");
    DType dt = p.s("workload.dtype") == "bf16" ? DType::BF16 : DType::F32;
    ModelGraph g("matmul");
    const bool batched = batch > 1;
    auto shape = [&](int64_t r, int64_t c) {
      return batched ? std::vector<int64_t>{batch, r, c} : std::vector<int64_t>{r, c};
    };
    TensorId a = g.add_tensor({"a", shape(m, k), dt, TensorRole::Input});
    TensorId b = g.add_tensor({"b", shape(k, n), dt, batched ? TensorRole::Input : TensorRole::Parameter});
    TensorId c = g.add_tensor({"c", shape(m, n), dt, TensorRole::Activation});
    Op op;
    op.name = "matmul";
    op.kind = OpKind::MatMul;
    op.phase = Phase::Forward;
    op.cell = 0;
    op.inputs = {a, b};
    op.outputs = {c};
    op.attrs.equation = batched ? "bmk,bkn->bmn" : "mk,kn->mn";
    g.add_op(op);
    return g;
  }
};

PODSIM_REGISTER_WORKLOAD(MatmulWorkload, "matmul", "One M x K @ K x N product, forward only (op-level studies)");

}  // namespace
}  // namespace podsim

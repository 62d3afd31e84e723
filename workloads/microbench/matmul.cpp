// workload.model: matmul — one M x K @ K x N product, forward only: the unit for op-level studies (and for
// comparing MXU cycles with other systolic-array simulators). With workload.batch = B > 1 it is a batched product
// [B, M, K] x [B, K, N] -> [B, M, N], as attention's score and context matmuls are: both operands change with the
// batch element, so neither stays in the MXU from one element to the next.
// The fused work of a real matmul fusion can be posed too: workload.b_dtype = fp32 stores B in fp32 and converts it
// to the operand type inside the matmul's fusion (mixed-precision weights: XLA fuses the convert into the dot's
// fusion), and workload.epilogue_inputs = E adds E elementwise adds of other [.., M, N] tensors to the result
// (residual-like epilogue operands the fusion reads), run on the VPU as the matmul's output fusion.
#include <string>

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
        ParamSpec::choice("workload.b_dtype", {"same", "fp32"},
                          "Storage type of B: same as workload.dtype, or fp32 converted to workload.dtype inside "
                          "the matmul's fusion (an fp32 master weight; the fusion reads 4 bytes per element and the "
                          "VPU converts each element).")
            .def("same"),
        ParamSpec::integer("workload.epilogue_inputs",
                           "Elementwise epilogue: this many adds of further [batch, M, N] tensors (of workload.dtype) "
                           "to the result, fused into the matmul (the fusion reads each of them once; the VPU adds).")
            .range(0, 16)
            .def("0"),
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
    const bool convert = p.s("workload.b_dtype") == "fp32" && dt != DType::F32;
    const int64_t epilogue = p.i("workload.epilogue_inputs");
    const TensorRole b_role = batched ? TensorRole::Input : TensorRole::Parameter;
    TensorId b = g.add_tensor({convert ? "b_fp32" : "b", shape(k, n), convert ? DType::F32 : dt, b_role});
    if (convert) {
      // B converted to the operand type: a dtype-changing elementwise op that the compiler fuses into the matmul.
      TensorId bc = g.add_tensor({"b", shape(k, n), dt, TensorRole::Activation});
      Op cv;
      cv.name = "convert_b";
      cv.kind = OpKind::Scale;  // x 1: the store rounds to the output's type
      cv.phase = Phase::Forward;
      cv.cell = 0;
      cv.inputs = {b};
      cv.outputs = {bc};
      cv.attrs.alpha = 1.0;
      g.add_op(cv);
      b = bc;
    }
    TensorId c = g.add_tensor({epilogue > 0 ? "ab" : "c", shape(m, n), dt, TensorRole::Activation});
    Op op;
    op.name = "matmul";
    op.kind = OpKind::MatMul;
    op.phase = Phase::Forward;
    op.cell = 0;
    op.inputs = {a, b};
    op.outputs = {c};
    op.attrs.equation = batched ? "bmk,bkn->bmn" : "mk,kn->mn";
    g.add_op(op);
    for (int64_t i = 0; i < epilogue; ++i) {
      const std::string k = std::to_string(i);
      TensorId e = g.add_tensor({"e" + k, shape(m, n), dt, TensorRole::Input});
      TensorId out = g.add_tensor({i + 1 == epilogue ? "c" : "ab" + k, shape(m, n), dt, TensorRole::Activation});
      Op add;
      add.name = "epilogue_add" + k;
      add.kind = OpKind::Add;
      add.phase = Phase::Forward;
      add.cell = 0;
      add.inputs = {c, e};
      add.outputs = {out};
      g.add_op(add);
      c = out;
    }
    return g;
  }
};

PODSIM_REGISTER_WORKLOAD(MatmulWorkload, "matmul", "One M x K @ K x N product, forward only (op-level studies)");

}  // namespace
}  // namespace podsim

#include "workloads/builder.h"

namespace podsim {

GraphBuilder::GraphBuilder(ModelGraph& g, DType dtype) : m_g(g), m_dtype(dtype) {}

TensorId GraphBuilder::emit(const std::string& name, OpKind kind, Phase phase, std::vector<TensorId> inputs,
                            std::vector<int64_t> out_shape, DType out_dtype, TensorRole role, OpAttrs attrs) {
  TensorInfo t;
  t.name = name;
  t.shape = std::move(out_shape);
  t.dtype = out_dtype;
  t.role = role;
  TensorId out = m_g.add_tensor(std::move(t));
  Op op;
  op.name = name;
  op.kind = kind;
  op.phase = phase;
  op.inputs = std::move(inputs);
  op.outputs = {out};
  op.attrs = std::move(attrs);
  m_g.add_op(std::move(op));
  return out;
}

}  // namespace podsim

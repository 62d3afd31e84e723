// ModelGraph: one logical training step as a DAG of ops on logical tensors (Boost.Graph inside; this header stays
// light). Ops are added in a valid execution order; edges run from the producer of each input to the consumer.
//
//   ModelGraph g("mlp");
//   TensorId x = g.add_tensor({"x", {64, 256}, DType::BF16, TensorRole::Input});
//   ...
//   OpId mm = g.add_op({"fc1", OpKind::MatMul, Phase::Forward, {x, w}, {h}, attrs});
//   for (OpId id : g.topological_order()) ...
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "workloads/op.h"
#include "workloads/tensor_info.h"

namespace podsim {

enum class FlopsConvention : uint8_t { Palm, MaxText };
const char* flops_convention_name(FlopsConvention c);  // "palm", "maxtext"
FlopsConvention flops_convention(const std::string& name);  // throws Error(Internal) for another name

class ModelGraph {
 public:
  explicit ModelGraph(std::string name = "step");
  ModelGraph(const ModelGraph& other);
  ModelGraph& operator=(const ModelGraph& other);
  ModelGraph(ModelGraph&&) noexcept;
  ModelGraph& operator=(ModelGraph&&) noexcept;
  ~ModelGraph();

  const std::string& name() const { return m_name; }

  TensorId add_tensor(TensorInfo t);
  // Adds the op and an edge from the producer of each input; an input must already exist. Returns the op id.
  OpId add_op(Op op);
  // Orders `after` behind `before` without a tensor between them (a schedule's control dependency).
  void add_control(OpId before, OpId after);

  const TensorInfo& tensor(TensorId id) const { return m_tensors.at(id); }
  TensorInfo& tensor(TensorId id) { return m_tensors.at(id); }
  const Op& op(OpId id) const { return m_ops.at(id); }
  Op& op(OpId id) { return m_ops.at(id); }
  const std::vector<TensorInfo>& tensors() const { return m_tensors; }
  const std::vector<Op>& ops() const { return m_ops; }
  size_t num_ops() const { return m_ops.size(); }
  size_t num_tensors() const { return m_tensors.size(); }

  TensorId find_tensor(const std::string& name) const;  // -1 when absent
  OpId producer(TensorId t) const;                      // -1 for step inputs (parameters, batch, state)
  const std::vector<OpId>& consumers(TensorId t) const;

  std::vector<OpId> predecessors(OpId op) const;  // via Boost.Graph in-edges, sorted, unique
  std::vector<OpId> successors(OpId op) const;
  // A topological order (Boost.Graph); ties keep insertion order, so it is deterministic.
  std::vector<OpId> topological_order() const;

  double total_flops() const;  // sum of op_flops over all ops
  // Model FLOPs: those of the ops that run on the matrix unit (matmuls, convolutions, fused attention), forward, loss
  // and backward, each op once, as the step's definition counts them (a fused attention kernel's recomputed scores
  // and masked blocks left out: OpCost::model_flops); optimizer updates and re-materialized copies (Op::recompute)
  // left out. On the logical step (one device, before any strategy) this is what MFU counts (docs/outputs.md).
  // The convention decides causal attention's (query, key) square (OpCost::causal_flops):
  //   Palm     PaLM's Appendix B (Chowdhery et al. 2022): 6N + 12 L H Q T per token, attention over the whole square
  //   MaxText  MaxText's calculate_tflops_training_per_device (maxtext_utils.py): causal attention half of it
  double model_flops(FlopsConvention convention = FlopsConvention::Palm) const;
  double matmul_flops() const { return model_flops(FlopsConvention::Palm); }

 private:
  struct Impl;
  std::string m_name;
  std::vector<TensorInfo> m_tensors;
  std::vector<Op> m_ops;
  std::vector<OpId> m_producer;
  std::vector<std::vector<OpId>> m_consumers;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace podsim

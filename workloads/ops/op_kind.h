// Internal to workloads/: the table of op kinds. Each file in workloads/ops/ defines the kinds it owns (cost,
// kernel, gradient rule) and registers them:
//
//   static const bool reg = register_op_kind({OpKind::Relu, "relu", Unit::Vpu, relu_cost, relu_kernel, relu_grad});
//
// Contract: cost() is pure; partition() follows plan/op_sharding.h; kernel() reads only op.inputs from the store and writes every op.outputs;
// grad() receives the gradient of each output (-1 where the output does not influence the loss) and returns the
// gradient of each input (-1 where none flows, e.g. integer ids), emitting Backward ops through the builder.
#pragma once

#include <vector>

#include "plan/op_sharding.h"
#include "workloads/builder.h"
#include "workloads/op_def.h"

namespace podsim {

struct OpKindDef {
  OpKind kind;
  const char* name;
  Unit unit;
  OpCost (*cost)(const ModelGraph& g, const Op& op);
  void (*kernel)(const ModelGraph& g, const Op& op, TensorStore& store);
  std::vector<TensorId> (*grad)(GraphBuilder& b, const Op& op, const std::vector<TensorId>& out_grads);
  // How the op runs on sharded tensors (plan/op_sharding.h); nullptr: it runs on whole tensors only.
  PartitionRule partition = nullptr;
  // A kernel with GEMMs of several shapes (workloads/op_def.h kernel_gemms); nullptr for the others.
  std::vector<GemmPass> (*gemms)(const ModelGraph& g, const Op& op) = nullptr;
  // The GEMM an MXU kind performs (gemm_dims), when it is neither a matmul nor a 2-D convolution: an imported
  // module's convolutions and fused attention (workloads/ops/array_cost.cpp). nullptr: none.
  GemmDims (*gemm)(const ModelGraph& g, const Op& op) = nullptr;
};

bool register_op_kind(const OpKindDef& def);
const OpKindDef* find_op_kind(OpKind kind);  // nullptr when no file registered it

// The GEMM of a convolution op (workloads/ops/conv2d.cpp).
GemmDims conv_gemm_dims(const ModelGraph& g, const Op& op);

// Bytes of all inputs / outputs as stored in HBM (TensorInfo::stored_bytes: their layout's padding included).
double input_bytes(const ModelGraph& g, const Op& op);
double output_bytes(const ModelGraph& g, const Op& op);

}  // namespace podsim

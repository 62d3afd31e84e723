#include "workloads/ops/op_kind.h"

#include <array>

#include "base/error.h"

namespace podsim {
namespace {

constexpr size_t kKinds = static_cast<size_t>(OpKind::Traffic) + 1;

std::array<const OpKindDef*, kKinds>& table() {
  static std::array<const OpKindDef*, kKinds> t{};
  return t;
}

}  // namespace

bool register_op_kind(const OpKindDef& def) {
  table()[static_cast<size_t>(def.kind)] = new OpKindDef(def);  // lives for the program
  return true;
}

const OpKindDef* find_op_kind(OpKind kind) { return table()[static_cast<size_t>(kind)]; }

PartitionRule partition_rule(OpKind kind) {
  const OpKindDef* d = find_op_kind(kind);
  return d ? d->partition : nullptr;
}

double input_bytes(const ModelGraph& g, const Op& op) {
  double b = 0;
  for (TensorId t : op.inputs) b += g.tensor(t).stored_bytes();
  return b;
}

double output_bytes(const ModelGraph& g, const Op& op) {
  double b = 0;
  for (TensorId t : op.outputs) b += g.tensor(t).stored_bytes();
  return b;
}

const char* unit_name(Unit u) {
  switch (u) {
    case Unit::Mxu: return "MXU";
    case Unit::Vpu: return "VPU";
    case Unit::Ici: return "ICI";
    case Unit::Host: return "host";
  }
  return "?";
}

const char* hbm_pattern_name(HbmPattern p) {
  switch (p) {
    case HbmPattern::Stream: return "stream";
    case HbmPattern::Strided: return "strided";
    case HbmPattern::Gather: return "gather";
    case HbmPattern::ReadModifyWrite: return "read_modify_write";
  }
  return "?";
}

const char* op_kind_name(OpKind k) {
  if (const OpKindDef* d = find_op_kind(k)) return d->name;
  return "unregistered";
}

bool is_communication(OpKind k) { return k >= OpKind::AllReduce; }

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Forward: return "forward";
    case Phase::Loss: return "loss";
    case Phase::Backward: return "backward";
    case Phase::Optimizer: return "optimizer";
    case Phase::Communication: return "communication";
  }
  return "?";
}

OpCost op_cost(const ModelGraph& g, const Op& op) {
  const OpKindDef* d = find_op_kind(op.kind);
  if (!d || !d->cost) throw Error(Err::Internal, std::string("no cost model for op '") + op.name + "'");
  return d->cost(g, op);
}

void run_op(const ModelGraph& g, const Op& op, TensorStore& store) {
  const OpKindDef* d = find_op_kind(op.kind);
  if (!d || !d->kernel)
    throw Error(Err::Internal, std::string("op '") + op.name + "' (" + op_kind_name(op.kind) + ") has no kernel");
  d->kernel(g, op, store);
}

}  // namespace podsim

#include "hw/compiler/lower.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "hw/compiler/memory_plan.h"
#include "hw/compiler/tiling.h"
#include "hw/timing/mxu_timing.h"

namespace podsim {
namespace {

constexpr int kMaxGroups = 16;
constexpr size_t kMaxFusion = 16;
constexpr double kVpuGroupBytes = 256.0 * 1024;

int clamp_groups(double g) { return static_cast<int>(std::clamp(g, 1.0, static_cast<double>(kMaxGroups))); }

bool consumes_output_of(const ModelGraph& g, OpId consumer, OpId producer) {
  for (TensorId t : g.op(consumer).inputs)
    if (g.producer(t) == producer) return true;
  return false;
}

// Splits `order` into groups: fusible chains, or single ops.
std::vector<std::vector<OpId>> fuse(const ModelGraph& g, const std::vector<OpId>& order) {
  std::vector<std::vector<OpId>> groups;
  for (OpId id : order) {
    const Op& op = g.op(id);
    bool fusible = !is_communication(op.kind) && op_cost(g, op).fusible;
    if (fusible && !groups.empty() && groups.back().size() < kMaxFusion) {
      OpId last = groups.back().back();
      const Op& prev = g.op(last);
      if (!is_communication(prev.kind) && op_cost(g, prev).fusible && consumes_output_of(g, id, last)) {
        groups.back().push_back(id);
        continue;
      }
    }
    groups.push_back({id});
  }
  return groups;
}

void lower_gemm(const ModelGraph& g, const Op& op, const ChipConfig& chip, ExecOp& e) {
  const GemmDims a = gemm_dims(g, op);
  const TensorInfo& ia = g.tensor(op.inputs[0]);
  const TensorInfo& ib = g.tensor(op.inputs[1]);
  const TensorInfo& ic = g.tensor(op.outputs[0]);
  MxuShape shape{chip.mxu.rows, chip.mxu.cols, chip.mxu.weight_double_buffer};
  const int64_t cores = chip.tensorcores;
  int64_t batch = a.batch, m = a.m, k = a.k, n = a.n;
  int64_t n_blocks = ceil_div(n, shape.cols);
  const bool a_shared = a.a_shared, b_shared = a.b_shared;
  const char* split = "none";
  int used = 1;
  if (cores > 1 && batch >= cores) {
    split = "batch";
    batch = ceil_div(batch, cores);
    used = static_cast<int>(cores);
  } else if (cores > 1 && n_blocks >= cores) {
    split = "n";
    n = ceil_div(n_blocks, cores) * shape.cols;
    n = std::min(n, a.n);
    used = static_cast<int>(cores);
  } else if (cores > 1 && m >= 8 * cores) {
    split = "m";
    m = ceil_div(m, cores);
    used = static_cast<int>(cores);
  }
  TilingInput ti;
  ti.batch = batch;
  ti.m = m;
  ti.k = k;
  ti.n = n;
  ti.a_elem = dtype_bytes(ia.dtype);
  ti.b_elem = dtype_bytes(ib.dtype);
  ti.c_elem = dtype_bytes(ic.dtype);
  ti.a_shared = a_shared;
  ti.b_shared = b_shared;
  ti.vmem = chip.vmem;
  ti.cmem = chip.cmem;
  ti.mxu_cols = shape.cols;
  GemmTiling t = tile_gemm(ti);
  e.cores = used;
  e.gemm.batch = a.batch;
  e.gemm.m = a.m;
  e.gemm.k = a.k;
  e.gemm.n = a.n;
  e.gemm.split = split;
  e.gemm.m_tile = t.m_tile;
  e.gemm.n_tile = t.n_tile;
  e.gemm.core_folds = batch * ceil_div(k, shape.rows) * ceil_div(n, shape.cols) * t.m_tiles;
  e.gemm.rows_per_fold = ceil_div(m, t.m_tiles);
  e.core_hbm_read = t.hbm_read;
  e.core_hbm_write = t.hbm_write;
  int64_t folds_per_mxu = ceil_div(e.gemm.core_folds, chip.mxu.count);
  e.groups = clamp_groups(static_cast<double>(folds_per_mxu));
}

void lower_vector(const ModelGraph& g, const std::vector<OpId>& members, const ChipConfig& chip, ExecOp& e) {
  std::set<OpId> inside(members.begin(), members.end());
  std::set<TensorId> produced_inside;
  for (OpId id : members)
    for (TensorId t : g.op(id).outputs) produced_inside.insert(t);
  double read = 0, write = 0, run = 0;
  double simple = 0, trans = 0, div = 0, red = 0, elements = 0;
  std::set<TensorId> counted;
  for (OpId id : members) {
    const Op& op = g.op(id);
    OpCost c = op_cost(g, op);
    run = std::max(run, c.read_run);
    for (TensorId t : op.inputs)
      if (!produced_inside.count(t) && counted.insert(t).second) read += g.tensor(t).bytes();
    for (TensorId t : op.outputs) {
      bool outside = g.consumers(t).empty();
      for (OpId c2 : g.consumers(t)) outside = outside || !inside.count(c2);
      if (outside) write += g.tensor(t).bytes();
    }
    elements = std::max(elements, c.vector.elements);
    simple += c.vector.simple * c.vector.elements;
    trans += c.vector.transcendental * c.vector.elements;
    div += c.vector.divide * c.vector.elements;
    red += c.vector.reduce * c.vector.elements;
  }
  const int64_t cores = chip.tensorcores;
  int used = elements >= static_cast<double>(cores * chip.vpu.lanes * chip.vpu.sublanes) ? static_cast<int>(cores) : 1;
  e.cores = used;
  if (elements > 0) {
    e.core_vector.elements = elements / used;
    e.core_vector.simple = simple / elements;
    e.core_vector.transcendental = trans / elements;
    e.core_vector.divide = div / elements;
    e.core_vector.reduce = red / elements;
  }
  e.core_hbm_read = read / used;
  e.core_hbm_write = write / used;
  e.read_run = run;
  e.groups = clamp_groups(std::ceil((e.core_hbm_read + e.core_hbm_write) / kVpuGroupBytes));
}

}  // namespace

ExecProgram lower(const ModelGraph& g, const std::vector<OpId>& order, const ChipConfig& chip) {
  ExecProgram ep;
  std::vector<int32_t> exec_of_op(g.num_ops(), -1);
  for (const auto& members : fuse(g, order)) {
    ExecOp e;
    const Op& first = g.op(members.front());
    e.members = members;
    e.kind = first.kind;
    e.phase = first.phase;
    if (members.size() == 1) {
      e.name = first.name;
    } else {
      e.name = "fusion(" + first.name + " .. " + g.op(members.back()).name + ")";
    }
    for (OpId id : members) {
      OpCost c = op_cost(g, g.op(id));
      e.flops += c.flops;
      if (c.unit == Unit::Mxu) e.model_flops += c.flops;
      e.logical_bytes += c.bytes_read + c.bytes_written;
      e.unit = c.unit;
    }
    if (e.unit == Unit::Mxu) {
      lower_gemm(g, first, chip, e);
    } else if (e.unit == Unit::Vpu) {
      lower_vector(g, members, chip, e);
    }
    // Dependencies: the exec ops producing this op's inputs.
    std::set<int32_t> deps;
    int32_t self = static_cast<int32_t>(ep.ops.size());
    for (OpId id : members)
      for (TensorId t : g.op(id).inputs) {
        OpId p = g.producer(t);
        if (p >= 0 && exec_of_op[p] >= 0 && exec_of_op[p] != self) deps.insert(exec_of_op[p]);
      }
    e.deps.assign(deps.begin(), deps.end());
    for (OpId id : members) exec_of_op[id] = self;
    ep.ops.push_back(std::move(e));
  }
  // Tensors produced and consumed only inside a fusion never touch HBM.
  for (const ExecOp& e : ep.ops) {
    if (e.members.size() < 2) continue;
    std::set<OpId> inside(e.members.begin(), e.members.end());
    for (OpId id : e.members)
      for (TensorId t : g.op(id).outputs) {
        bool internal = !g.consumers(t).empty();
        for (OpId c : g.consumers(t)) internal = internal && inside.count(c);
        if (internal) ep.on_chip.push_back(t);
      }
  }
  ep.memory = plan_memory(g, ep);
  return ep;
}

}  // namespace podsim

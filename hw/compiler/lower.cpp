#include "hw/compiler/lower.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "hw/compiler/memory_plan.h"
#include "hw/compiler/tiling.h"
#include "hw/timing/mxu_timing.h"
#include "base/error.h"
#include "base/text.h"

namespace podsim {
namespace {

constexpr int kMaxGroups = 16;
constexpr double kVpuGroupBytes = 256.0 * 1024;

int clamp_groups(double g) { return static_cast<int>(std::clamp(g, 1.0, static_cast<double>(kMaxGroups))); }

// HBM traffic and vector work of a fusion's members, seen from outside the fusion.
struct MemberTraffic {
  double read = 0, write = 0;      // whole op, all cores
  double matmul_out_write = 0;     // bytes of the matmul's own result that leave the fusion (0: kept in VMEM)
  VectorWork vector;               // vector-unit work of the VPU members
  HbmPattern read_pattern = HbmPattern::Stream, write_pattern = HbmPattern::Stream;
  double run = 0;
};

// Ranks access patterns: a fusion takes the costliest of its members'.
int cost_rank(HbmPattern p) {
  switch (p) {
    case HbmPattern::Stream: return 0;
    case HbmPattern::ReadModifyWrite: return 1;
    case HbmPattern::Strided: return 2;
    case HbmPattern::Gather: return 3;
  }
  return 0;
}

MemberTraffic member_traffic(const ModelGraph& g, const std::vector<OpId>& members) {
  MemberTraffic m;
  std::set<OpId> inside(members.begin(), members.end());
  std::set<TensorId> produced, read;
  double simple = 0, trans = 0, div = 0, red = 0;
  for (OpId id : members) {
    const Op& op = g.op(id);
    OpCost c = op_cost(g, op);
    if (c.unit == Unit::Mxu) {  // a kernel on the MXU with vector work of its own (fused attention's softmax)
      simple += c.vector.simple * c.vector.elements;
      trans += c.vector.transcendental * c.vector.elements;
      div += c.vector.divide * c.vector.elements;
      red += c.vector.reduce * c.vector.elements;
      m.vector.elements = std::max(m.vector.elements, c.vector.elements);
    }
    if (c.unit == Unit::Vpu) {
      // Reads: what the op's cost says it reads, less the inputs already on chip (made or read by a member). An
      // operand prologue (a convert feeding the matmul) is read by the matmul's tiling, at the source type.
      bool prologue = !op.outputs.empty();
      for (TensorId t : op.outputs) {
        prologue = prologue && !g.consumers(t).empty();
        for (OpId c2 : g.consumers(t)) prologue = prologue && inside.count(c2) && op_cost(g, g.op(c2)).unit == Unit::Mxu;
      }
      double skip = prologue ? c.bytes_read : 0.0;
      for (TensorId t : op.inputs)
        if (produced.count(t) || read.count(t)) skip += g.tensor(t).bytes();
      m.read += std::max(0.0, c.bytes_read - skip);
      for (TensorId t : op.inputs) read.insert(t);
      m.vector.elements = std::max(m.vector.elements, c.vector.elements);
      simple += c.vector.simple * c.vector.elements;
      trans += c.vector.transcendental * c.vector.elements;
      div += c.vector.divide * c.vector.elements;
      red += c.vector.reduce * c.vector.elements;
      if (cost_rank(c.pattern) > cost_rank(m.read_pattern)) m.read_pattern = c.pattern;
      if (cost_rank(c.write_pattern) > cost_rank(m.write_pattern)) m.write_pattern = c.write_pattern;
      if (c.pattern == HbmPattern::Gather || c.pattern == HbmPattern::Strided ||
          c.write_pattern == HbmPattern::Gather)
        m.run = std::max(m.run, c.read_run);
    }
    // Writes: outputs someone outside the fusion reads, or nobody reads (step results), in the proportion the
    // op's cost writes its outputs (an op that keeps an output on chip says so with bytes_written).
    double out_bytes = 0;
    for (TensorId t : op.outputs) out_bytes += g.tensor(t).bytes();
    const double written = out_bytes > 0 ? c.bytes_written / out_bytes : 0.0;
    for (TensorId t : op.outputs) {
      bool leaves = g.consumers(t).empty();
      for (OpId c2 : g.consumers(t)) leaves = leaves || !inside.count(c2);
      if (!leaves) continue;
      if (c.unit == Unit::Mxu) m.matmul_out_write += g.tensor(t).bytes();
      else m.write += g.tensor(t).bytes() * written;
    }
    for (TensorId t : op.outputs) produced.insert(t);
  }
  if (m.vector.elements > 0) {
    m.vector.simple = simple / m.vector.elements;
    m.vector.transcendental = trans / m.vector.elements;
    m.vector.divide = div / m.vector.elements;
    m.vector.reduce = red / m.vector.elements;
  }
  return m;
}

void lower_gemm(const ModelGraph& g, const Op& op, const std::vector<OpId>& members, const ChipConfig& chip,
                const MemberTraffic& epi, ExecOp& e) {
  const GemmDims a = gemm_dims(g, op);
  const TensorInfo& ic = g.tensor(op.outputs[0]);
  MxuShape shape{chip.mxu.rows, chip.mxu.cols, chip.mxu.weight_double_buffer};
  const int64_t cores = chip.tensorcores;
  int64_t batch = a.batch, m = a.m, k = a.k, n = a.n;
  int64_t n_blocks = ceil_div(n, shape.cols);
  const char* split = "none";
  int used = 1;
  if (cores > 1 && batch >= cores) {
    split = "batch";
    batch = ceil_div(batch, cores);
    used = static_cast<int>(cores);
  } else if (cores > 1 && n_blocks >= cores) {
    split = "n";
    n = std::min(ceil_div(n_blocks, cores) * shape.cols, a.n);
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
  // An operand made inside the fusion by a prologue (a convert) is read from HBM at its source type.
  auto stored_bytes = [&](TensorId t) {
    OpId p = g.producer(t);
    if (p >= 0 && std::count(members.begin(), members.end(), p) && g.op(p).inputs.size() == 1)
      return dtype_bytes(g.tensor(g.op(p).inputs[0]).dtype);
    return dtype_bytes(g.tensor(t).dtype);
  };
  ti.a_elem = stored_bytes(op.inputs[0]);
  ti.b_elem = stored_bytes(op.inputs[1]);
  ti.c_elem = dtype_bytes(ic.dtype);
  if (a.a_elem > 0) ti.a_elem = a.a_elem;
  if (a.b_elem > 0) ti.b_elem = a.b_elem;
  if (a.c_elem > 0) ti.c_elem = a.c_elem;
  ti.a_shared = a.a_shared;
  ti.b_shared = a.b_shared;
  ti.vmem = chip.vmem;
  ti.cmem = chip.cmem;
  ti.mxu_cols = shape.cols;
  GemmTiling t = tile_gemm(ti);
  if (!t.tiles)
    throw Error(Err::OutOfRange,
                strprintf("hardware.chip.vmem.capacity = %s is too small for matmul '%s': its smallest tile (%lld x "
                          "%lld outputs, K in slices of %lld) needs %s of VMEM; choose at least that",
                          format_bytes(chip.vmem).c_str(), op.name.c_str(), static_cast<long long>(t.m_tile),
                          static_cast<long long>(t.n_tile), static_cast<long long>(t.k_tile),
                          format_bytes(t.footprint).c_str()));
  e.cores = used;
  GemmWork& w = e.gemm;
  w.batch = a.batch;
  w.m = a.m;
  w.k = a.k;
  w.n = a.n;
  w.split = split;
  w.m_tile = t.m_tile;
  w.n_tile = t.n_tile;
  const int64_t k_folds = ceil_div(k, shape.rows), n_folds = ceil_div(n, shape.cols);
  w.k_pad = k_folds * shape.rows;
  w.n_pad = n_folds * shape.cols;
  if (!shape.double_buffer) {
    // Reference mode: M streams whole through each weight fold.
    w.m_chunks = 1;
    w.rows_per_fold = m;
  } else {
    // TPU mode: a fold streams at most the accumulator capacity (and the VMEM tile); each chunk reloads the
    // weights. Rows enter the array as (8 x lanes) vectors, so a chunk is padded to a multiple of 8 rows.
    int64_t chunk = std::max<int64_t>(1, std::min(t.m_tile, chip.mxu.accumulator_rows));
    w.m_chunks = ceil_div(m, chunk);
    w.rows_per_fold = ceil_div(ceil_div(m, w.m_chunks), 8) * 8;
  }
  w.core_folds = batch * k_folds * n_folds * w.m_chunks;
  // Each output tile leaves the MXU once, after its last K fold: its rows (padded to whole vectors of sublanes rows)
  // by its padded columns, in vectors of sublanes x lanes.
  w.result_vectors = batch * w.m_chunks * ceil_div(w.rows_per_fold, chip.vpu.sublanes) *
                     ceil_div(w.n_pad, chip.vpu.lanes);
  // HBM: the tiler's operand traffic, the result unless the epilogue consumes it all, the epilogue's own traffic.
  double c_all = static_cast<double>(a.batch * a.m * a.n) * dtype_bytes(ic.dtype);  // logical bytes, as matmul_out_write counts them
  double c_core = t.hbm_write;  // this core's result bytes
  double out_fraction = c_all > 0 ? epi.matmul_out_write / c_all : 1.0;
  e.core_hbm_read = t.hbm_read + epi.read / used;
  e.core_hbm_write = c_core * out_fraction + epi.write / used;
  if (!t.fits && t.n_tiles > 1) {
    e.read_pattern = HbmPattern::Strided;  // B's tiles: runs of n_tile columns
    e.read_run = static_cast<double>(t.n_tile) * ti.b_elem;
  }
  if (epi.vector.elements > 0) {
    e.core_vector = epi.vector;
    e.core_vector.elements = epi.vector.elements / used;
  }
  int64_t folds_per_mxu = ceil_div(w.core_folds, chip.mxu.count);
  e.groups = clamp_groups(static_cast<double>(folds_per_mxu));
}

void lower_vector(const ChipConfig& chip, const MemberTraffic& mt, ExecOp& e) {
  const int64_t cores = chip.tensorcores;
  const double elements = mt.vector.elements;
  int used = elements >= static_cast<double>(cores * chip.vpu.lanes * chip.vpu.sublanes) ? static_cast<int>(cores) : 1;
  e.cores = used;
  if (elements > 0) {
    e.core_vector = mt.vector;
    e.core_vector.elements = elements / used;
  }
  e.core_hbm_read = mt.read / used;
  e.core_hbm_write = mt.write / used;
  e.read_pattern = mt.read_pattern;
  e.write_pattern = mt.write_pattern;
  e.read_run = mt.run;
  e.groups = clamp_groups(std::ceil((e.core_hbm_read + e.core_hbm_write) / kVpuGroupBytes));
}

// The kernels a program came with, in issue order; every other op alone. A kernel's kind follows its members: with
// a matmul an output fusion, with a reduction a reduction fusion, else a loop fusion.
std::vector<FusionGroup> given_kernels(const ModelGraph& g, const std::vector<OpId>& order,
                                       const std::vector<std::vector<OpId>>& kernels) {
  std::vector<int32_t> kernel_of(g.num_ops(), -1);
  for (size_t k = 0; k < kernels.size(); ++k)
    for (OpId id : kernels[k]) kernel_of[id] = static_cast<int32_t>(k);
  std::vector<FusionGroup> out;
  int32_t open = -1;
  for (OpId id : order) {
    const int32_t k = kernel_of[id];
    if (k < 0 || k != open) {
      out.emplace_back();
      open = k;
    }
    FusionGroup& fg = out.back();
    fg.members.push_back(id);
    if (fg.members.size() < 2) continue;
    bool mm = false, red = false;
    for (OpId m : fg.members) {
      const OpCost c = op_cost(g, g.op(m));
      mm = mm || c.unit == Unit::Mxu;
      red = red || c.reduction;
    }
    fg.kind = mm ? FusionKind::Output : red ? FusionKind::Reduction : FusionKind::Loop;
  }
  return out;
}

}  // namespace

ExecProgram lower(const ModelGraph& g, const std::vector<OpId>& order, const ChipConfig& chip_in,
                  const LowerOptions& opts) {
  ExecProgram ep;
  // One device per TensorCore: each op is lowered for one core, and every core runs it.
  const int64_t per_chip = std::max<int64_t>(1, opts.devices_per_chip);
  ChipConfig chip = chip_in;
  if (per_chip > 1) chip.tensorcores = 1;
  std::vector<int32_t> exec_of_op(g.num_ops(), -1);
  for (FusionGroup& fg : opts.kernels && !opts.kernels->empty() ? given_kernels(g, order, *opts.kernels)
                                                                 : fuse(g, order, opts.fusion)) {
    ExecOp e;
    const std::vector<OpId>& members = fg.members;
    const Op& first = g.op(members.front());
    e.members = members;
    e.fusion = fg.kind;
    e.kind = first.kind;
    e.phase = first.phase;
    e.name = members.size() == 1 ? first.name
                                 : "fusion(" + first.name + " .. " + g.op(members.back()).name + ")";
    for (OpId id : members) {
      OpCost c = op_cost(g, g.op(id));
      e.flops += c.flops;
      if (c.unit == Unit::Mxu) e.mxu_flops += c.flops;
      e.logical_bytes += c.bytes_read + c.bytes_written;
    }
    e.unit = op_cost(g, first).unit;
    // The matmul of an output fusion (after its operand converts, if any) decides the unit.
    const Op* mm = nullptr;
    for (OpId id : members)
      if (!mm && op_cost(g, g.op(id)).unit == Unit::Mxu) mm = &g.op(id);
    if (mm) {
      e.unit = Unit::Mxu;
      e.kind = mm->kind;
      lower_gemm(g, *mm, members, chip, member_traffic(g, members), e);
    } else if (e.unit == Unit::Vpu) {
      // Views alone (bitcasts) move nothing: no kernel runs.
      bool views = true;
      for (OpId id : members) views = views && op_cost(g, g.op(id)).view;
      lower_vector(chip, views ? MemberTraffic{} : member_traffic(g, members), e);
    }
    // Dependencies: the exec ops producing this op's inputs, and those it is ordered after (control edges: a
    // pipeline schedule).
    std::set<int32_t> deps;
    int32_t self = static_cast<int32_t>(ep.ops.size());
    for (OpId id : members)
      for (OpId p : g.predecessors(id))
        if (exec_of_op[p] >= 0 && exec_of_op[p] != self) deps.insert(exec_of_op[p]);
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
  if (per_chip > 1) {
    const double k = static_cast<double>(per_chip);
    for (ExecOp& e : ep.ops) {
      if (e.unit == Unit::Ici) continue;
      e.cores = static_cast<int>(std::min<int64_t>(per_chip, chip_in.tensorcores));
      e.flops *= k;
      e.mxu_flops *= k;
      e.logical_bytes *= k;
    }
    MemoryPlan& m = ep.memory;
    m.peak_bytes *= k;
    for (double* b : {&m.at_peak.weights, &m.at_peak.gradients, &m.at_peak.optimizer_state, &m.at_peak.activations,
                      &m.at_peak.temporaries, &m.at_peak.weight_copies})
      *b *= k;
    for (double& b : m.live_after_op) b *= k;
  }
  return ep;
}

}  // namespace podsim

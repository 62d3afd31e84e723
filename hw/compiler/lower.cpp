#include "hw/compiler/lower.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "hw/compiler/kernel_lowering.h"
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

// A member's part of its op's cost: all of it, or one pass of a two-pass op (whose cost counts both passes' reads).
OpCost member_cost(const ModelGraph& g, const FusionMember& m) {
  OpCost c = op_cost(g, g.op(m.op));
  if (m.pass == MemberPass::All) return c;
  const Op& op = g.op(m.op);
  c.bytes_read /= 2;
  c.bytes_written = 0;
  if (m.pass == MemberPass::Reduce) {
    c.vector = c.first_pass;
    for (size_t i = 1; i < op.outputs.size(); ++i) c.bytes_written += g.tensor(op.outputs[i]).stored_bytes();
  } else {
    c.vector.simple -= c.first_pass.simple;
    c.vector.transcendental -= c.first_pass.transcendental;
    c.vector.divide -= c.first_pass.divide;
    c.vector.reduce -= c.first_pass.reduce;
    c.bytes_written = g.tensor(op.outputs.front()).stored_bytes();
  }
  c.flops = c.vector.elements * (c.vector.simple + c.vector.transcendental + c.vector.divide + c.vector.reduce);
  return c;
}

std::vector<TensorId> made_by(const Op& op, MemberPass pass) {
  if (pass == MemberPass::All) return op.outputs;
  if (pass == MemberPass::Apply) return {op.outputs.front()};
  return std::vector<TensorId>(op.outputs.begin() + 1, op.outputs.end());
}

// HBM traffic and vector work of a fusion's members, seen from outside the fusion. `written` says which tensors the
// fusion materializes (those read by another exec op, or by nobody: step results).
struct MemberTraffic {
  double read = 0, write = 0;      // whole op, all cores
  double matmul_out_write = 0;     // bytes of the matmul's own result that leave the fusion (0: kept in VMEM)
  double operand_read[2] = {0, 0};  // an MXU operand made by a prologue: the bytes its prologue reads from HBM
  bool prologue[2] = {false, false};
  VectorWork vector;               // vector-unit work of the VPU members (prologue and epilogue)
  HbmPattern read_pattern = HbmPattern::Stream, write_pattern = HbmPattern::Stream;
  double run = 0;
  std::vector<TensorId> reads, writes;
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

MemberTraffic member_traffic(const ModelGraph& g, const FusionGroup& fg, const std::vector<bool>& materialized) {
  MemberTraffic m;
  std::set<TensorId> produced, read;
  // The MXU member, and which members before it make its operands (its prologue: their reads are the operand's).
  int mm = -1;
  for (size_t i = 0; i < fg.members.size() && mm < 0; ++i)
    if (op_cost(g, g.op(fg.members[i].op)).unit == Unit::Mxu) mm = static_cast<int>(i);
  std::vector<int> feeds(fg.members.size(), -1);  // -1: no operand; 0: A; 1: B
  if (mm >= 0) {
    const Op& mop = g.op(fg.members[mm].op);
    for (int operand = 1; operand >= 0; --operand) {
      std::set<TensorId> need = {mop.inputs[operand]};
      for (int i = mm - 1; i >= 0; --i) {
        const Op& op = g.op(fg.members[i].op);
        bool makes = false;
        for (TensorId t : made_by(op, fg.members[i].pass)) makes = makes || need.count(t);
        if (!makes) continue;
        feeds[i] = operand;
        need.insert(op.inputs.begin(), op.inputs.end());
      }
    }
  }
  double simple = 0, trans = 0, div = 0, red = 0;
  for (size_t i = 0; i < fg.members.size(); ++i) {
    const FusionMember& fm = fg.members[i];
    const Op& op = g.op(fm.op);
    OpCost c = member_cost(g, fm);
    if (c.unit == Unit::Mxu) {  // a kernel on the MXU with vector work of its own (fused attention's softmax)
      simple += c.vector.simple * c.vector.elements;
      trans += c.vector.transcendental * c.vector.elements;
      div += c.vector.divide * c.vector.elements;
      red += c.vector.reduce * c.vector.elements;
      m.vector.elements = std::max(m.vector.elements, c.vector.elements);
    }
    if (c.unit == Unit::Vpu) {
      // Reads: what the op's cost says it reads, less the inputs already on chip (made or read by a member).
      double skip = 0;
      for (TensorId t : op.inputs)
        if (produced.count(t) || read.count(t)) skip += g.tensor(t).stored_bytes();
      const double bytes = std::max(0.0, c.bytes_read - skip);
      if (feeds[i] >= 0) {
        m.operand_read[feeds[i]] += bytes;  // read by the MXU's tiling with its operand
        m.prologue[feeds[i]] = true;
      } else {
        m.read += bytes;
      }
      for (TensorId t : op.inputs)
        if (!produced.count(t) && !read.count(t)) m.reads.push_back(t);
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
    } else {
      for (TensorId t : op.inputs)
        if (!produced.count(t) && !read.count(t)) {
          m.reads.push_back(t);
          read.insert(t);
        }
    }
    // Writes: what the fusion materializes, in the proportion the op's cost writes its outputs (an op that keeps
    // an output on chip says so with bytes_written).
    const std::vector<TensorId> outs = made_by(op, fm.pass);
    double out_bytes = 0;
    for (TensorId t : outs) out_bytes += g.tensor(t).stored_bytes();
    const double written = out_bytes > 0 ? c.bytes_written / out_bytes : 0.0;
    for (TensorId t : outs) {
      produced.insert(t);
      if (fm.recomputed || !materialized[t]) continue;
      m.writes.push_back(t);
      if (c.unit == Unit::Mxu) m.matmul_out_write += g.tensor(t).stored_bytes();
      else m.write += g.tensor(t).stored_bytes() * written;
    }
  }
  if (m.vector.elements > 0) {
    m.vector.simple = simple / m.vector.elements;
    m.vector.transcendental = trans / m.vector.elements;
    m.vector.divide = div / m.vector.elements;
    m.vector.reduce = red / m.vector.elements;
  }
  return m;
}

// Products per MXU cell and cycle: the chip's int8 (fp8) rate when both operands of a matmul are int8 (fp8), else 1.
// A fold then holds that many times R rows of the contraction (docs/model.md, "Quantized serving").
int64_t narrow_pack(const ModelGraph& g, const Op& op, const ChipConfig& chip) {
  if (op.kind != OpKind::MatMul || op.inputs.size() < 2) return 1;
  const DType a = g.tensor(op.inputs[0]).dtype, b = g.tensor(op.inputs[1]).dtype;
  if (a != b) return 1;
  if (a == DType::I8) return std::max<int64_t>(1, chip.mxu.int8_rate);
  if (a == DType::F8) return std::max<int64_t>(1, chip.mxu.fp8_rate);
  return 1;
}

void lower_gemm(const ModelGraph& g, const Op& op, const ChipConfig& chip, const LowerOptions& opts,
                const MemberTraffic& epi, ExecOp& e) {
  GemmDims a = gemm_dims(g, op);
  // Each operand's HBM bytes: as stored, or what its prologue reads (a convert's fp32 source, a batch norm's raw
  // input and statistics); the tiling re-reads them as it would the operand.
  double a_bytes = a.a_bytes > 0 ? a.a_bytes : g.tensor(op.inputs[0]).stored_bytes();
  double b_bytes = a.b_bytes > 0 ? a.b_bytes : g.tensor(op.inputs[1]).stored_bytes();
  double c_bytes = a.c_bytes > 0 ? a.c_bytes : g.tensor(op.outputs[0]).stored_bytes();
  if (epi.prologue[0]) a_bytes = epi.operand_read[0];
  if (epi.prologue[1]) b_bytes = epi.operand_read[1];
  if (opts.conv_taps_per_tap) {
    if (a.fed_batch > 0) a.batch = a.fed_batch;
    if (a.fed_m > 0) a.m = a.fed_m;
    if (a.fed_k > 0) a.k = a.fed_k;
    if (a.fed_n > 0) a.n = a.fed_n;
    if (a.fed_swap) {
      std::swap(a_bytes, b_bytes);
      std::swap(a.a_shared, a.b_shared);
    }
  }
  const TensorInfo& ic = g.tensor(op.outputs[0]);
  MxuShape shape{chip.mxu.rows, chip.mxu.cols, chip.mxu.weight_double_buffer};
  const int64_t cores = chip.tensorcores;
  int64_t batch = a.batch, m = a.m, k = a.k, n = a.n;
  const int64_t n_blocks = ceil_div(a.n, shape.cols);
  TilingInput ti;
  // Bytes per element of the GEMM's matrices (of the whole op's: a split keeps the per-element figure).
  ti.a_elem = a_bytes / (static_cast<double>(a.m * a.k) * (a.a_shared ? 1 : static_cast<double>(a.batch)));
  ti.b_elem = b_bytes / (static_cast<double>(a.k * a.n) * (a.b_shared ? 1 : static_cast<double>(a.batch)));
  ti.c_elem = c_bytes / static_cast<double>(a.batch * a.m * a.n);
  ti.a_shared = a.a_shared;
  ti.b_shared = a.b_shared;
  ti.vmem = chip.vmem;
  ti.cmem = chip.cmem;
  ti.fold_rows = shape.double_buffer ? chip.mxu.accumulator_rows : 0;  // the MXU's folds, below
  ti.mxu_cols = shape.cols;
  // The op's work splits over the chip's TensorCores (run.core_split): with `traffic` along the dimension whose
  // shares move the fewest HBM bytes, each core reading what its share needs (ties go to the earlier below); with
  // `order` along the first of batch, N, M with a share for every core. Splitting N, every core reads all of A;
  // splitting M, all of B; splitting K (a weight gradient's contraction over the batch), each reads half of both
  // and the cores add their partial results. Per-core replicas on TPU v2/v3, each with half the batch, split an
  // image model's convolutions so: the rows of the forward and input-gradient ones, the contraction of the filter
  // gradients. The cores share the chip's CMEM: an operand every core reads whole (A splitting N, B splitting M, one
  // shared by the batch entries splitting the batch) is held there once for both (tiling.h).
  struct Split { const char* name; int64_t batch, m, k, n; bool a_common, b_common; };
  std::vector<Split> splits;
  if (cores > 1 && a.batch >= cores)
    splits.push_back({"batch", ceil_div(a.batch, cores), a.m, a.k, a.n, a.a_shared, a.b_shared});
  if (cores > 1 && n_blocks >= cores)
    splits.push_back({"n", a.batch, a.m, a.k, std::min(ceil_div(n_blocks, cores) * shape.cols, a.n), true, false});
  if (cores > 1 && a.m >= 8 * cores) splits.push_back({"m", a.batch, ceil_div(a.m, cores), a.k, a.n, false, true});
  const int64_t k_blocks = ceil_div(a.k, shape.rows);
  if (opts.core_split_traffic && cores > 1 && k_blocks >= cores)
    splits.push_back({"k", a.batch, a.m, std::min(ceil_div(k_blocks, cores) * shape.rows, a.k), a.n, false, false});
  const char* split = "none";
  int used = 1;
  GemmTiling t;
  double best = -1;
  auto consider = [&](const char* name, int64_t b, int64_t mm, int64_t kk, int64_t nn, int u, bool ac, bool bc) {
    TilingInput x = ti;
    x.cmem_cores = u;
    x.a_common = ac;
    x.b_common = bc;
    x.batch = b;
    x.m = mm;
    x.k = kk;
    x.n = nn;
    GemmTiling tt = tile_gemm(x);
    // Split along K, each core sums its part of the contraction into a partial result of the whole output; the
    // cores then add them, each reading the other's partial of its half of the output.
    if (kk < a.k) tt.hbm_read += tt.hbm_write / 2;
    const double traffic = u * (tt.hbm_read + tt.hbm_write);
    if (best >= 0 && !(tt.tiles && (!t.tiles || traffic < best))) return;
    best = traffic;
    t = tt;
    split = name;
    used = u;
    batch = b;
    m = mm;
    k = kk;
    n = nn;
  };
  if (splits.empty()) consider("none", a.batch, a.m, a.k, a.n, 1, false, false);
  for (const Split& sp : splits) {
    // A K split moves at least A + B + 3C (each operand read once, a whole partial written by every core and the
    // partials read back): not worth tiling when another split already moves no more.
    if (sp.k < a.k && best >= 0 && t.tiles && a_bytes + b_bytes + 3 * c_bytes >= best) continue;
    consider(sp.name, sp.batch, sp.m, sp.k, sp.n, static_cast<int>(cores), sp.a_common, sp.b_common);
    if (!opts.core_split_traffic) break;
  }
  ti.batch = batch;
  ti.m = m;
  ti.k = k;
  ti.n = n;
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
  const int64_t pack = narrow_pack(g, op, chip);
  const int64_t k_folds = ceil_div(k, shape.rows * pack), n_folds = ceil_div(n, shape.cols);
  w.k_pack = pack;
  w.k_pad = k_folds * shape.rows * pack;
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
  const bool sums = opts.conv_taps_per_tap && a.fed_sum;  // the batch entries add into one result
  w.result_vectors = (sums ? 1 : batch) * w.m_chunks * ceil_div(w.rows_per_fold, chip.vpu.sublanes) *
                     ceil_div(w.n_pad, chip.vpu.lanes);
  // HBM: the tiler's operand traffic, the result unless the epilogue consumes it all, the epilogue's own traffic.
  double c_all = ic.stored_bytes();  // as matmul_out_write counts them
  double c_core = t.hbm_write;  // this core's result bytes
  double out_fraction = c_all > 0 ? epi.matmul_out_write / c_all : 1.0;
  if (k < a.k) e.scratch = (used - 1) * c_core;  // a K split: the other cores' partials of the whole output
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
  e.vector_beside = opts.conv_overlap && (op.kind == OpKind::Conv2d || op.kind == OpKind::Conv2dInputGrad ||
                                          op.kind == OpKind::Conv2dFilterGrad);
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
    fg.members.push_back({id, MemberPass::All, false});
    if (fg.members.size() < 2) continue;
    bool mm = false, red = false;
    for (const FusionMember& m : fg.members) {
      const OpCost c = op_cost(g, g.op(m.op));
      mm = mm || c.unit == Unit::Mxu;
      red = red || c.reduction;
    }
    fg.kind = mm ? FusionKind::Output : red ? FusionKind::Reduction : FusionKind::Loop;
  }
  return out;
}

}  // namespace

LowerOptions lower_options(const RunConfig& run) {
  LowerOptions o;
  o.fusion.enabled = run.fusion != "none";
  o.fusion.multi_output = run.fusion_multi_output;
  o.fusion.duplicate = run.fusion_duplicate;
  o.fusion.vector_conv = run.fusion_vector_conv;
  o.conv_taps_per_tap = run.conv_taps == "per_tap";
  o.core_split_traffic = run.core_split == "traffic";
  o.conv_overlap = run.conv_overlap;
  return o;
}

ExecProgram lower(const ModelGraph& g, const std::vector<OpId>& order, const ChipConfig& chip_in,
                  const LowerOptions& opts) {
  ExecProgram ep;
  // One device per TensorCore: each op is lowered for one core, and every core runs it.
  const int64_t per_chip = std::max<int64_t>(1, opts.devices_per_chip);
  ChipConfig chip = chip_in;
  if (per_chip > 1) chip.tensorcores = 1;
  const std::vector<FusionGroup> groups = opts.kernels && !opts.kernels->empty()
                                              ? given_kernels(g, order, *opts.kernels)
                                              : fuse(g, order, opts.fusion);
  // Each op's home exec op (where it is not a recomputation), and the tensors some exec op reads from HBM: a
  // tensor is materialized by its home exec op when another exec op reads it without making it itself, or when
  // nobody reads it (a step result).
  std::vector<int32_t> home(g.num_ops(), -1);
  std::vector<std::vector<int32_t>> occurrences(g.num_ops());
  for (size_t i = 0; i < groups.size(); ++i)
    for (const FusionMember& m : groups[i].members) {
      occurrences[m.op].push_back(static_cast<int32_t>(i));
      if (!m.recomputed) home[m.op] = static_cast<int32_t>(i);
    }
  std::vector<bool> materialized(g.num_tensors(), false);
  for (size_t i = 0; i < groups.size(); ++i) {
    std::set<TensorId> made;
    for (const FusionMember& m : groups[i].members)
      for (TensorId t : made_by(g.op(m.op), m.pass)) made.insert(t);
    for (const FusionMember& m : groups[i].members)
      for (TensorId t : g.op(m.op).inputs)
        if (!made.count(t)) materialized[t] = true;
  }
  for (TensorId t = 0; t < static_cast<TensorId>(g.num_tensors()); ++t)
    if (g.consumers(t).empty() || g.tensor(t).result) materialized[t] = true;

  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const FusionGroup& fg = groups[gi];
    ExecOp e;
    const FusionMember* first = &fg.members.front();
    for (const FusionMember& m : fg.members)
      if (!m.recomputed) {
        first = &m;
        break;
      }
    const Op& f = g.op(first->op);
    for (const FusionMember& m : fg.members) {
      e.members.push_back(m.op);
      e.recomputed.push_back(m.recomputed);
    }
    e.fusion = fg.kind;
    e.kind = f.kind;
    e.phase = f.phase;
    e.name = fg.members.size() == 1 ? f.name : "fusion(" + f.name + " .. " + g.op(fg.members.back().op).name + ")";
    for (const FusionMember& m : fg.members) {
      OpCost c = member_cost(g, m);
      e.flops += c.flops;
      if (c.unit == Unit::Mxu) e.mxu_flops += c.flops;
      e.logical_bytes += c.bytes_read + c.bytes_written;
    }
    e.unit = op_cost(g, f).unit;
    // The matmul of an output fusion (after its prologue, if any) decides the unit.
    const Op* mm = nullptr;
    for (const FusionMember& m : fg.members)
      if (!mm && op_cost(g, g.op(m.op)).unit == Unit::Mxu) mm = &g.op(m.op);
    MemberTraffic mt = member_traffic(g, fg, materialized);
    if (mm) {
      e.unit = Unit::Mxu;
      e.kind = mm->kind;
      if (const std::vector<GemmPass> passes = kernel_gemms(g, *mm); !passes.empty())
        lower_kernel(g, *mm, passes, chip, e);
      else
        lower_gemm(g, *mm, chip, opts, mt, e);
    } else if (e.unit == Unit::Vpu) {
      // Views alone (bitcasts) move nothing: no kernel runs, and their buffer is their source's (memory_plan.cpp).
      bool views = true;
      for (const FusionMember& m : fg.members) views = views && op_cost(g, g.op(m.op)).view;
      if (views) mt = MemberTraffic{};
      lower_vector(chip, mt, e);
    } else if (e.unit == Unit::Host) {  // the host link reads (to_host) or writes (from_host) the tensor in HBM
      const double bytes = g.tensor(f.inputs.front()).stored_bytes();
      (f.kind == OpKind::ToHost ? e.core_hbm_read : e.core_hbm_write) = bytes;
    }
    e.hbm_reads = std::move(mt.reads);
    e.hbm_writes = std::move(mt.writes);
    // A host transfer's far side is the host's memory: the copy a to_host makes, and what a from_host reads, take no
    // HBM.
    if (f.kind == OpKind::ToHost) e.hbm_writes.clear();
    if (f.kind == OpKind::FromHost) e.hbm_reads.clear();
    // Dependencies: the exec ops that make what this one reads, and those it is ordered after (control edges: a
    // pipeline schedule). A predecessor that is recomputed here is made here; one recomputed everywhere it is read
    // orders this op after every exec op that recomputes it; one recomputed only in later kernels (a control edge's
    // source among them) is made nowhere before this op, which then waits for what that predecessor reads.
    std::set<int32_t> deps;
    const int32_t self = static_cast<int32_t>(gi);
    std::set<OpId> inside, seen;
    for (const FusionMember& m : fg.members) inside.insert(m.op);
    std::vector<OpId> preds;  // predecessors still to place
    for (const FusionMember& m : fg.members)
      for (OpId p : g.predecessors(m.op)) preds.push_back(p);
    while (!preds.empty()) {
      const OpId p = preds.back();
      preds.pop_back();
      if (inside.count(p) || !seen.insert(p).second) continue;
      if (home[p] >= 0) {
        if (home[p] != self) deps.insert(home[p]);
        continue;
      }
      bool earlier = false;
      for (int32_t o : occurrences[p])
        if (o < self) {
          deps.insert(o);
          earlier = true;
        }
      if (!earlier)
        for (OpId q : g.predecessors(p)) preds.push_back(q);
    }
    e.deps.assign(deps.begin(), deps.end());
    ep.ops.push_back(std::move(e));
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

#include "hw/compiler/kernel_lowering.h"

#include <algorithm>

#include "base/error.h"
#include "base/text.h"
#include "hw/timing/mxu_timing.h"

namespace podsim {

void lower_kernel(const ModelGraph& g, const Op& op, const std::vector<GemmPass>& passes, const ChipConfig& chip,
                  ExecOp& e) {
  const OpCost c = op_cost(g, op);
  const int64_t R = chip.mxu.rows, C = chip.mxu.cols;
  // The kernel's blocks in VMEM, double-buffered: each pass's operands in the inputs' type, its result and the
  // accumulators in fp32. The largest pass decides.
  const double elem = dtype_bytes(g.tensor(op.inputs[0]).dtype);
  double footprint = 0;
  for (const GemmPass& p : passes)
    footprint = std::max(footprint, 2.0 * static_cast<double>(p.m * p.k + p.k * p.n) * elem +
                                        2.0 * static_cast<double>(p.m * p.n) * 4.0);
  if (footprint > chip.vmem)
    throw Error(Err::OutOfRange,
                strprintf("hardware.chip.vmem.capacity = %s is too small for the blocks of '%s' (%s of VMEM); "
                          "choose smaller blocks (workload.flash.*) or more VMEM",
                          format_bytes(chip.vmem).c_str(), op.name.c_str(), format_bytes(footprint).c_str()));
  const int64_t cores = chip.tensorcores;
  const int used = cores > 1 && passes.front().count >= cores ? static_cast<int>(cores) : 1;
  e.cores = used;
  GemmWork& w = e.gemm;
  w.split = used > 1 ? "batch" : "none";
  int64_t folds = 0;
  for (const GemmPass& p : passes) {
    GemmPassWork pw;
    pw.count = p.count;
    pw.m = p.m;
    pw.k = p.k;
    pw.n = p.n;
    const int64_t per_core = ceil_div(p.count, used);
    int64_t chunks = 1;
    if (chip.mxu.weight_double_buffer) {
      chunks = ceil_div(p.m, chip.mxu.accumulator_rows);
      pw.rows_per_fold = ceil_div(ceil_div(p.m, chunks), 8) * 8;
    } else {
      pw.rows_per_fold = p.m;
    }
    const int64_t n_pad = ceil_div(p.n, C) * C;
    pw.core_folds = per_core * ceil_div(p.k, R) * ceil_div(p.n, C) * chunks;
    w.core_folds += pw.core_folds;
    w.result_vectors += per_core * chunks * ceil_div(pw.rows_per_fold, chip.vpu.sublanes) * ceil_div(n_pad, chip.vpu.lanes);
    folds += ceil_div(pw.core_folds, chip.mxu.count);
    w.passes.push_back(pw);
  }
  e.core_hbm_read = c.bytes_read / used;
  e.core_hbm_write = c.bytes_written / used;
  e.read_pattern = c.pattern;
  e.write_pattern = c.write_pattern;
  if (c.vector.elements > 0) {
    e.core_vector = c.vector;
    e.core_vector.elements = c.vector.elements / used;
  }
  e.groups = static_cast<int>(std::clamp<int64_t>(folds, 1, 16));
}

}  // namespace podsim

// Busy time within spans, from the intervals a chip's models logged (hw/chip/chip_log.h), for summary.json and
// hlo_op_stats.csv.
//
//   double t = union_length(spans);                        // sorts `spans`
//   const std::vector<double>& busy = result_op_busy(sim, chip, ops);
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace podsim {

struct Prepared;
struct Simulation;
class Chip;

// Length of the union of intervals (sorts them in place).
double union_length(std::vector<std::pair<double, double>>& v);

// Per op of the chip, the time some unit worked for it within its span: the union of its MXU and VPU intervals (a
// collective's reductions included), its HBM accesses and the link time of the messages it sent. The rest of the
// span it waited: for a peer's data, for links or HBM busy with others' work, for an acknowledgement.
std::vector<double> op_busy(const Chip& chip, size_t n_ops);

// op_busy() of the result chip, worked out once per simulation (summary.json's op table and hlo_op_stats.csv).
const std::vector<double>& result_op_busy(const Simulation& s, const Chip& chip, size_t n_ops);

// Re-materialization (workloads/remat.h): the MXU FLOPs of the recomputed ops on every chip, and their busy time
// (the union of their op spans) on the chip where it is longest.
std::pair<double, double> recompute_figures(const Prepared& p, const Simulation& s);

}  // namespace podsim

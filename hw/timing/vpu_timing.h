// Cycle model of the vector unit: a lanes x sublanes array of ALUs processes one vector (lanes * sublanes
// elements) per cycle per simple operation and ALU; transcendentals, divisions and cross-lane reductions cost
// their configured cycles per vector (hardware.chip.vpu.*_cost); a reduction along rows longer than the lanes combines
// a row's vectors elementwise first and crosses lanes once per row group (VectorWork::reduce_row).
#pragma once

#include <cstdint>

#include "base/params/experiment.h"
#include "workloads/op_def.h"

namespace podsim {

// Cycles one TensorCore's VPU needs for `w` (elements are those this core processes).
int64_t vpu_cycles(const VpuConfig& vpu, const VectorWork& w);

}  // namespace podsim

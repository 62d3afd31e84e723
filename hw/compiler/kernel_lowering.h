// Lowering of a kernel that runs GEMMs of several shapes and tiles itself (workloads/op_def.h kernel_gemms: a fused
// attention kernel, as a Pallas kernel is a custom call XLA neither fuses nor tiles): its products become the
// exec op's GEMM passes, its HBM traffic and vector work are the kernel's own (its cost's), and the chip's cores
// share its products (the kernel's parallel grid: batch and heads).
//
//   if (auto passes = kernel_gemms(g, op); !passes.empty()) lower_kernel(g, op, passes, chip, e);
#pragma once

#include <vector>

#include "hw/compiler/exec_program.h"
#include "base/params/experiment.h"

namespace podsim {

void lower_kernel(const ModelGraph& g, const Op& op, const std::vector<GemmPass>& passes, const ChipConfig& chip,
                  ExecOp& e);

}  // namespace podsim

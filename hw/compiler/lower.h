// Lowering: a role's Program (graph + issue order) -> an ExecProgram for one chip configuration.
//
//   ExecProgram ep = lower(program.graph, program.order, exp.hardware.chip);
//
// What the lowering assumes (docs/model.md says the same):
//  - Fusion: a chain of elementwise ops (OpCost::fusible), each consuming the previous one's output and adjacent
//    in issue order, becomes one VPU op that reads its external inputs from HBM once and writes only the outputs
//    someone outside the chain reads (or nobody reads: step results). Intermediates stay in VMEM.
//  - Reductions and normalisations (softmax, layer norm, bias gradients) read their input once and write once.
//  - GEMMs are tiled through VMEM (hw/compiler/tiling.h); operands that do not fit are re-read per tile.
//  - A chip is one device: each op is split across its TensorCores (megacore style): GEMMs along the batch, N
//    (columns) or M (rows), vector ops evenly. The MXUs of a core share a GEMM's folds.
//  - Communication ops run on the chip's DMA engines over ICI; their cost comes from the network model.
#pragma once

#include <vector>

#include "hw/compiler/exec_program.h"
#include "sim/config/experiment.h"

namespace podsim {

ExecProgram lower(const ModelGraph& g, const std::vector<OpId>& order, const ChipConfig& chip);

}  // namespace podsim

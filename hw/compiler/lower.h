// Lowering: a role's Program (graph + issue order) -> an ExecProgram for one chip configuration.
//
//   ExecProgram ep = lower(program.graph, program.order, exp.hardware.chip, lower_options(exp.run));
//
// What the lowering assumes (docs/model.md says the same):
//  - Fusion as XLA does it (hw/compiler/fusion.h): loop fusions of elementwise ops, matmul epilogues (output
//    fusion) and reductions with their elementwise neighbours. A fusion reads its external inputs from HBM once and
//    writes only the outputs read outside it; intermediates stay in VMEM.
//  - GEMMs are tiled through VMEM (hw/compiler/tiling.h); operands that do not fit are re-read per tile, as
//    strided runs. In TPU mode (weight double buffering) M streams in chunks of at most the accumulator capacity,
//    each reloading the weights; in the reference mode M streams whole through each weight fold.
//  - A chip is one device: each op is split across its TensorCores (megacore style): GEMMs along the batch, N
//    (columns) or M (rows), vector ops evenly. The MXUs of a core share a GEMM's folds.
//  - Communication ops run on the chip's DMA engines over ICI; their cost comes from the network model.
#pragma once

#include <vector>

#include "hw/compiler/exec_program.h"
#include "base/params/experiment.h"

namespace podsim {

struct LowerOptions {
  FusionOptions fusion;            // run.fusion, run.fusion_multi_output, run.fusion_duplicate, run.fusion_vector_conv
  bool conv_taps_per_tap = true;   // run.conv_taps: per_tap (true) | packed (false)
  bool core_split_traffic = true;  // run.core_split: traffic (true) | order (false)
  bool conv_overlap = true;        // run.conv_overlap: a convolution's fused vector work beside the MXU
  // Kernels the program came with (Program::kernels): kept as given, and nothing else fused.
  const std::vector<std::vector<OpId>>* kernels = nullptr;
  // Devices of the program per chip (Plan::devices_per_chip): with more than one, each TensorCore runs every op
  // whole on its own device's data (XLA on TPU v2/v3) instead of sharing it with the others, and the chip's HBM
  // holds each device's buffers.
  int64_t devices_per_chip = 1;
};
LowerOptions lower_options(const RunConfig& run);

ExecProgram lower(const ModelGraph& g, const std::vector<OpId>& order, const ChipConfig& chip,
                  const LowerOptions& opts = {});

}  // namespace podsim

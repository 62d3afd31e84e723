// Per-chip memory over a step: which tensors are live in HBM after each op, the peak, and what the peak is made
// of (weights, gradients, optimizer state, saved activations, temporaries, the KV cache).
//
// Liveness follows the issue order: parameters, optimizer state, an inference step's KV cache and the batch are
// live from the start; every
// other tensor from the op that produces it until the last op that reads it (or the end, for step results:
// losses and updated values, which are written in place of the tensors they update). An all-reduce and an
// addition write their result over an operand of the same size that they read last (in place). Tensors a fusion
// keeps on chip never occupy HBM. An op's scratch (a K split's partial results) is a temporary while it runs. A view
// (a bitcast) holds its source's buffer, or, when its source stays on chip in the fusion that writes the view, is
// that buffer.
#pragma once

#include "hw/compiler/exec_program.h"

namespace podsim {

MemoryPlan plan_memory(const ModelGraph& g, const ExecProgram& ep);

}  // namespace podsim

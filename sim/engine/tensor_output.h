// tensors/ of a numeric run: the result chip's step as NumPy files (the logical tensors assembled from the chips'
// shards) and, with run.dump_shards, each chip's own shards under tensors/chip<N>/. Which tensors: the step's
// inputs and state, the loss, updated values, parameter gradients and every value nothing else consumes; with
// run.dump_activations also every forward activation.
//
//   check_tensor_output(prepared);                       // before simulating: PODSIM-IO-005 above run.max_tensor_bytes
//   write_tensors(prepared, simulation, dir + "/tensors");
#pragma once

#include <string>

namespace podsim {

struct Prepared;
struct Simulation;

// Bytes of tensor data the run will write (4 per element: float32, or int32 for token ids and labels), known from
// the plan before anything is simulated.
double tensor_output_bytes(const Prepared& p);

// Throws Error(TensorOutputTooLarge) when tensor_output_bytes exceeds run.max_tensor_bytes.
void check_tensor_output(const Prepared& p);

void write_tensors(const Prepared& p, const Simulation& s, const std::string& dir);

}  // namespace podsim

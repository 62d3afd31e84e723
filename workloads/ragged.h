// Where the tokens of an inference iteration sit (OpAttrs::Ragged, workloads/op.h): sequence i adds fresh[i] tokens
// after the cached[i] its KV cache already holds, taking width[i] places in the activations (its fresh tokens, then
// the padding the engine adds: a prompt padded to its prefill bucket). Two layouts:
//   one row per sequence   activations [N, S, ...], sequence i in row i at places 0 .. width[i] - 1 (width = S)
//   packed                 activations [1, T, ...], the sequences one after another along row 0 (vLLM's ragged
//                          batch), T the sum of the widths
// A place p of sequence i is the token at position cached[i] + p of the sequence; places at or past fresh[i] are
// padding, computed like tokens but never written to the cache nor sampled.
//
//   RaggedToken t = ragged_token(op.attrs.ragged, row, place);   // t.seq < 0: none (past the last sequence)
#pragma once

#include <cstdint>

#include "workloads/op.h"

namespace podsim {

struct RaggedToken {
  int64_t seq = -1;    // the sequence, -1 for none
  int64_t place = 0;   // its place among the sequence's tokens of this iteration (0 for the first fresh one)
  int64_t pos = 0;     // its position in the sequence: cached + place
  bool padding = false;
};

int64_t ragged_sequences(const OpAttrs::Ragged& r);
int64_t ragged_width(const OpAttrs::Ragged& r, int64_t seq);  // fresh + padding
// Packed: where sequence `seq` starts along row 0; one row per sequence: 0.
int64_t ragged_start(const OpAttrs::Ragged& r, int64_t seq);
// The token at place `s` of row `row` (a global row: a device whose rows are split adds its first row's index).
RaggedToken ragged_token(const OpAttrs::Ragged& r, int64_t row, int64_t s);
// Keys a sequence's attention reads this iteration: what its cache held and what it adds.
inline int64_t ragged_context(const OpAttrs::Ragged& r, int64_t seq) {
  return r.cached.at(static_cast<size_t>(seq)) + r.fresh.at(static_cast<size_t>(seq));
}

}  // namespace podsim

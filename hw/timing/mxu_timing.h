// Cycle model of one weight-stationary R x C systolic array (MXU), used by the SystemC MXU unit (hw/chip).
//
// A GEMM M x K @ K x N maps K onto the rows and N onto the columns in folds of ceil(K/R) * ceil(N/C); each fold
// loads an R x C weight block and streams the M rows of the left operand through it. A partial fold costs a full
// fold. Per fold:
//   weight load R cycles, then the skewed stream: fill R-1, M rows, drain through C columns -> 2R + C + M - 2.
// Without weight double buffering folds never overlap, so a GEMM costs exactly folds * (2R + C + M - 2) cycles
// (the classic formula, e.g. SCALE-Sim's weight-stationary dataflow), so results compare with other simulators.
// With double buffering the next fold's weights load while the current fold streams, and its rows enter right
// behind the current fold's: after the first fold each fold adds max(M, R) cycles, and fill/drain is paid once:
//   R + M + (folds - 1) * max(M, R) + (R + C - 2).
// That lies between the ideal M*K*N/(R*C) (every MAC busy every cycle) and the no-overlap formula.
// When the weights reach the array through the same input port as the rows (weight_push = P > 0 cycles per fold),
// the push of each later fold's weights takes the port for P cycles before its rows can follow (the shift into the
// array still overlaps the previous fold's stream):
//   R + M + (folds - 1) * max(M + P, R) + (R + C - 2).
#pragma once

#include <cstdint>

namespace podsim {

struct MxuShape {
  int64_t rows = 128;  // R
  int64_t cols = 128;  // C
  bool double_buffer = true;
  int64_t weight_push = 0;  // cycles a fold's weight push holds the input port (shared with the rows); 0: own path
  int64_t weight_rows = 0;  // rows of weights a fold holds (K's share, <= R): their load takes as many cycles; 0: R
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Folds of one M x K @ K x N product (per batch entry).
inline int64_t gemm_folds(const MxuShape& s, int64_t k, int64_t n) { return ceil_div(k, s.rows) * ceil_div(n, s.cols); }

// Cycles for `folds` folds streaming `m` rows each on one MXU.
int64_t mxu_cycles(const MxuShape& s, int64_t folds, int64_t m);

// Cycles of a whole batch x (M x K @ K x N) on `mxus` MXUs that share the folds evenly: the busiest MXU decides.
int64_t gemm_cycles(const MxuShape& s, int64_t batch, int64_t m, int64_t k, int64_t n, int64_t mxus);

}  // namespace podsim

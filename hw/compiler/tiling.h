// How a GEMM is tiled through a TensorCore's vector memory (VMEM), and the HBM traffic that follows.
//
// The output is cut into m_tile x n_tile tiles; each tile accumulates in fp32 in VMEM while the K dimension
// streams through in double-buffered slices of the operands. A tile needs the m_tile rows of A and the n_tile
// columns of B, so A is read from HBM once per column of tiles and B once per row of tiles:
//     traffic = A * ceil(N / n_tile) + B * ceil(M / m_tile) + C
// The tiler picks the tile (multiples of 8 rows and of the MXU width) that fits VMEM with the least traffic; when
// everything fits, each operand moves once. A chip with common memory (CMEM, v4) holds an operand that fits there,
// so its re-reads come from CMEM instead of HBM: the tiler holds there the operands that save most HBM bytes. CMEM is
// the chip's, shared by its cores: when an op is split over them, an operand every core reads whole is held once,
// an operand each core reads a share of needs room for every share (each core reads its operands from HBM once).
// Equal traffic goes to the tile whose MXU weight folds stream the most rows (fewest chunks of M, each reloading the
// weights), then to the largest tile. When no tile with 512-deep K slices fits, the K slice shrinks
// (to 8 at least); when nothing fits at all, `tiles` is false and the compiler reports the VMEM as too small.
#pragma once

#include <cstdint>

namespace podsim {

struct GemmTiling {
  int64_t m_tile = 0, n_tile = 0, k_tile = 0;
  int64_t m_tiles = 1, n_tiles = 1;
  double hbm_read = 0;   // bytes
  double hbm_write = 0;  // bytes
  bool fits = true;      // the whole problem fits in VMEM (no operand is re-read)
  double footprint = 0;  // VMEM bytes the tile uses: double-buffered K slices of A and B, fp32 accumulator
  bool tiles = true;     // false: not even the smallest tile (8 rows x MXU width, K in slices of 8) fits VMEM
};

struct TilingInput {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  double a_elem = 2, b_elem = 2, c_elem = 2;  // bytes per element of A, B and the stored C
  bool a_shared = false, b_shared = false;    // operand shared by every batch entry (read once per tile pass)
  double vmem = 16 << 20;                     // bytes of VMEM available
  double cmem = 0;                            // bytes of CMEM available (0: none)
  int64_t cmem_cores = 1;                     // cores sharing the CMEM, each running this tiling on its share
  bool a_common = false, b_common = false;    // operand each of those cores reads whole: held once in CMEM
  int64_t fold_rows = 0;                      // most rows an MXU weight fold streams (0: no limit)
  int64_t mxu_cols = 128;
};

GemmTiling tile_gemm(const TilingInput& in);

}  // namespace podsim

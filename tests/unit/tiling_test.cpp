// GEMM tiling through VMEM, checked independently of the tiler's own arithmetic: the chosen tile's VMEM footprint
// is recomputed here from its shape, its HBM traffic is counted by walking the tile loop nest, hand-computed cases
// fix the numbers (CMEM placement, CMEM shared by two cores, tiles as long as the MXU's folds), and the smallest
// fallback tile is checked against VMEM (or reported as impossible).
#include <gtest/gtest.h>

#include "hw/compiler/tiling.h"

using namespace podsim;

namespace {

constexpr double kMiB = 1 << 20;

TilingInput gemm(int64_t m, int64_t k, int64_t n, double vmem_mib) {
  TilingInput t;
  t.m = m;
  t.k = k;
  t.n = n;
  t.vmem = vmem_mib * kMiB;
  return t;
}

// VMEM a tile needs: two K slices of its A rows and its B columns in flight (bf16) and its fp32 accumulator.
double vmem_of(const GemmTiling& t) {
  return 2.0 * (t.m_tile * t.k_tile * 2.0 + t.k_tile * t.n_tile * 2.0) + t.m_tile * t.n_tile * 4.0;
}

// HBM bytes read by the loop nest "for each output tile (i, j): stream A[i rows, all K] and B[all K, j cols]",
// tile by tile, partial edge tiles included.
double walk_reads(const TilingInput& in, const GemmTiling& t) {
  double bytes = 0;
  for (int64_t i = 0; i < in.m; i += t.m_tile)
    for (int64_t j = 0; j < in.n; j += t.n_tile) {
      int64_t rows = std::min(t.m_tile, in.m - i), cols = std::min(t.n_tile, in.n - j);
      bytes += static_cast<double>(rows * in.k) * in.a_elem + static_cast<double>(in.k * cols) * in.b_elem;
    }
  return bytes;
}

}  // namespace

TEST(TilingTest, FittingGemmMovesEachOperandOnce) {
  // 512^3 bf16: A and B 512 KiB each, the fp32 accumulator 1 MiB: 2 MiB of 16 MiB.
  GemmTiling t = tile_gemm(gemm(512, 512, 512, 16));
  EXPECT_TRUE(t.fits);
  EXPECT_EQ(t.m_tile, 512);
  EXPECT_EQ(t.n_tile, 512);
  EXPECT_DOUBLE_EQ(t.hbm_read, 1048576.0);  // 2 x 512 KiB
  EXPECT_DOUBLE_EQ(t.hbm_write, 524288.0);  // C in bf16
  EXPECT_DOUBLE_EQ(t.footprint, 2 * kMiB);
}

TEST(TilingTest, TiledGemmTrafficIsWhatTheLoopNestReads) {
  for (auto [m, k, n, vmem] : std::vector<std::tuple<int64_t, int64_t, int64_t, double>>{
           {8192, 8192, 8192, 16}, {3000, 1000, 5000, 4}, {100, 4096, 70000, 2}, {65536, 256, 1024, 1}}) {
    TilingInput in = gemm(m, k, n, vmem);
    GemmTiling t = tile_gemm(in);
    ASSERT_FALSE(t.fits) << m << "x" << k << "x" << n;
    ASSERT_TRUE(t.tiles);
    EXPECT_LE(vmem_of(t), in.vmem) << m << "x" << k << "x" << n;
    EXPECT_DOUBLE_EQ(t.footprint, vmem_of(t));
    EXPECT_DOUBLE_EQ(t.hbm_read, walk_reads(in, t)) << m << "x" << k << "x" << n;
    EXPECT_DOUBLE_EQ(t.hbm_write, static_cast<double>(m * n) * 2);
    EXPECT_EQ(t.m_tiles, (m + t.m_tile - 1) / t.m_tile);
    EXPECT_EQ(t.n_tiles, (n + t.n_tile - 1) / t.n_tile);
    EXPECT_EQ(t.n_tile % 128 == 0 || t.n_tile == n, true);
    EXPECT_EQ(t.m_tile % 8 == 0 || t.m_tile == m, true);
  }
}

TEST(TilingTest, HandCountedTileForASquareGemm) {
  // 8192^3 bf16 in 16 MiB, K slices of 512. A tile tm x tn needs 2 * 2 * 512 * (tm + tn) + 4 tm tn bytes:
  // 1024 x 1024 needs 8 MiB (fits), 2048 x 1024 needs 14 MiB (fits), 2048 x 2048 needs 24 MiB (does not).
  // Reads: A 128 MiB * N/tn + B 128 MiB * M/tm, least for 2048 x 1024 (or 1024 x 2048): 128 MiB * (8 + 4).
  GemmTiling t = tile_gemm(gemm(8192, 8192, 8192, 16));
  EXPECT_EQ(t.m_tile * t.n_tile, 2048 * 1024);
  EXPECT_DOUBLE_EQ(t.hbm_read, 128 * kMiB * 12);
  EXPECT_DOUBLE_EQ(t.footprint, 14 * kMiB);
}

TEST(TilingTest, CmemAbsorbsReReads) {
  TilingInput in = gemm(4096, 4096, 4096, 16);
  GemmTiling without = tile_gemm(in);
  in.cmem = 128.0 * kMiB;
  GemmTiling with = tile_gemm(in);
  EXPECT_DOUBLE_EQ(without.hbm_read, walk_reads(in, without));
  EXPECT_DOUBLE_EQ(with.hbm_read, 2.0 * 2 * 4096.0 * 4096);  // A and B (32 MiB each) fit in CMEM: each read once
}

TEST(TilingTest, TinyVmemShrinksTheKSliceAndStaysInside) {
  // 64 KiB: 8 x 128 with 512-deep slices needs 2 * 2 * 512 * 136 + 4096 = 282 KiB; with 64-deep ones 38.8 KiB.
  TilingInput in = gemm(1024, 1024, 1024, 64.0 / 1024);
  GemmTiling t = tile_gemm(in);
  ASSERT_TRUE(t.tiles);
  EXPECT_EQ(t.m_tile, 8);
  EXPECT_EQ(t.n_tile, 128);
  EXPECT_EQ(t.k_tile, 64);
  EXPECT_DOUBLE_EQ(vmem_of(t), 2.0 * 2 * 64 * 136 + 4096);
  EXPECT_LE(vmem_of(t), in.vmem);
  EXPECT_DOUBLE_EQ(t.hbm_read, walk_reads(in, t));
}

TEST(TilingTest, VmemBelowTheSmallestTileIsReported) {
  // 8 x 128 with 8-deep slices needs 2 * 2 * 8 * 136 + 4096 = 8448 bytes: 4 KiB cannot hold it.
  GemmTiling t = tile_gemm(gemm(1024, 1024, 1024, 4.0 / 1024));
  EXPECT_FALSE(t.tiles);
  EXPECT_DOUBLE_EQ(t.footprint, 8448);
}

TEST(TilingTest, CmemHoldsBWhenANeitherFitsNorIsReRead) {
  // 65536 x 1024 x 128 bf16: A 128 MiB, B 256 KiB, C 16 MiB; its fp32 result (32 MiB) exceeds 16 MiB of VMEM. The
  // one column of tiles (N = 128) reads A once; tiles of 4096 rows (2560 * 4096 + 256 KiB = 10.25 MiB) read B 16
  // times. A does not fit a 64 MiB CMEM, B does: held there, B is read from HBM once, so reads are A + B.
  TilingInput in = gemm(65536, 1024, 128, 16);
  GemmTiling without = tile_gemm(in);
  EXPECT_DOUBLE_EQ(without.hbm_read, 128 * kMiB + 16 * 0.25 * kMiB);
  in.cmem = 64 * kMiB;
  GemmTiling with = tile_gemm(in);
  EXPECT_EQ(with.n_tiles, 1);
  EXPECT_DOUBLE_EQ(with.hbm_read, 128 * kMiB + 0.25 * kMiB);
}

TEST(TilingTest, CoresSharingCmemHoldACommonOperandOnce) {
  // 8192^3 bf16 (A = B = 128 MiB) in 16 MiB of VMEM and 192 MiB of CMEM. One core: CMEM holds one operand, not
  // both: A held, B read M / 4096 = 2 times with 4096 x 256 tiles (8 + 18 KiB * 256 = 12.5 MiB of VMEM), 128 + 256
  // MiB (B held with 256 x 4096 tiles moves as much).
  TilingInput in = gemm(8192, 8192, 8192, 16);
  in.cmem = 192 * kMiB;
  EXPECT_DOUBLE_EQ(tile_gemm(in).hbm_read, 384 * kMiB);
  // Two cores, each with its own 8192^3 share (as if each had its own A and B): a share of either operand per core
  // needs 256 MiB of CMEM, so none is held and the reads are those without CMEM, 128 MiB * (8 + 4) (the square
  // case above).
  in.cmem_cores = 2;
  EXPECT_DOUBLE_EQ(tile_gemm(in).hbm_read, 128 * kMiB * 12);
  // Both cores read all of A (the op split along N): A is held once (128 MiB of the 192), each core reads it from
  // HBM once and B twice with 4096-row tiles, as one core alone: 128 + 256 MiB a core.
  in.a_common = true;
  GemmTiling t = tile_gemm(in);
  EXPECT_EQ(t.m_tile, 4096);
  EXPECT_DOUBLE_EQ(t.hbm_read, 384 * kMiB);
}

TEST(TilingTest, TilesKeepTheMxuFoldLength) {
  // 9216 x 8192 x 6144 bf16 (A 144 MiB, B 96 MiB), 16 MiB of VMEM, 128 MiB of CMEM: B fits CMEM, A does not.
  // Least bytes: B held and A read once, with the whole N in a tile: 2 * (1024 tm + 6 MiB) + 24576 tm bytes leave
  // tm = 128 rows, A + B = 240 MiB, and MXU folds of 128 rows (72 weight loads per fold over M).
  TilingInput in = gemm(9216, 8192, 6144, 16);
  in.cmem = 128 * kMiB;
  GemmTiling bytes_only = tile_gemm(in);
  EXPECT_EQ(bytes_only.m_tile, 128);
  EXPECT_EQ(bytes_only.n_tile, 6144);
  EXPECT_DOUBLE_EQ(bytes_only.hbm_read, 240 * kMiB);
  // Folds of up to 1024 rows: tiles of at least 1024 rows. 1024 rows leave 2 MiB + 6 KiB per column: 2048 columns,
  // A read 3 times, B held: 3 * 144 + 96 = 528 MiB (2048 rows: 1024 columns, 6 * 144 + 96 MiB; more rows, more).
  in.fold_rows = 1024;
  GemmTiling folds = tile_gemm(in);
  EXPECT_EQ(folds.m_tile, 1024);
  EXPECT_EQ(folds.n_tile, 2048);
  EXPECT_DOUBLE_EQ(folds.hbm_read, 528 * kMiB);
  // Without CMEM the least-bytes tile already keeps the fold length: the choice is the same with and without it.
  in.cmem = 0;
  GemmTiling plain = tile_gemm(in);
  in.fold_rows = 0;
  GemmTiling plain_bytes = tile_gemm(in);
  EXPECT_EQ(plain.m_tile, plain_bytes.m_tile);
  EXPECT_EQ(plain.n_tile, plain_bytes.n_tile);
  EXPECT_DOUBLE_EQ(plain.hbm_read, plain_bytes.hbm_read);
}

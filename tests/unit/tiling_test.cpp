// GEMM tiling through VMEM: traffic when everything fits, when operands are re-read per tile, and with CMEM.
#include <gtest/gtest.h>

#include "hw/compiler/tiling.h"

using namespace podsim;

namespace {

TilingInput gemm(int64_t m, int64_t k, int64_t n, double vmem_mib) {
  TilingInput t;
  t.m = m;
  t.k = k;
  t.n = n;
  t.vmem = vmem_mib * (1 << 20);
  return t;
}

}  // namespace

TEST(TilingTest, FittingGemmMovesEachOperandOnce) {
  GemmTiling t = tile_gemm(gemm(512, 512, 512, 16));
  EXPECT_TRUE(t.fits);
  EXPECT_DOUBLE_EQ(t.hbm_read, 2.0 * (512 * 512 + 512 * 512));
  EXPECT_DOUBLE_EQ(t.hbm_write, 2.0 * 512 * 512);
}

TEST(TilingTest, TooLargeGemmReReadsOperands) {
  TilingInput in = gemm(8192, 8192, 8192, 16);
  GemmTiling t = tile_gemm(in);
  EXPECT_FALSE(t.fits);
  double once = 2.0 * (8192.0 * 8192 * 2);
  EXPECT_GT(t.hbm_read, once);
  // Tiles respect VMEM: double-buffered K slices of A and B plus the fp32 accumulator.
  double footprint = 2.0 * (t.m_tile * t.k_tile * 2.0 + t.k_tile * t.n_tile * 2.0) + t.m_tile * t.n_tile * 4.0;
  EXPECT_LE(footprint, in.vmem);
  // Traffic formula: A once per column of tiles, B once per row of tiles.
  double A = 8192.0 * 8192 * 2, B = A;
  EXPECT_DOUBLE_EQ(t.hbm_read, A * t.n_tiles + B * t.m_tiles);
}

TEST(TilingTest, SameGemmMovesMoreWithLessVmem) {
  GemmTiling big = tile_gemm(gemm(2048, 2048, 2048, 128));
  GemmTiling small = tile_gemm(gemm(2048, 2048, 2048, 4));
  EXPECT_TRUE(big.fits);
  EXPECT_FALSE(small.fits);
  EXPECT_GT(small.hbm_read, big.hbm_read);
  EXPECT_DOUBLE_EQ(small.hbm_write, big.hbm_write);
}

TEST(TilingTest, CmemAbsorbsReReads) {
  TilingInput in = gemm(4096, 4096, 4096, 16);
  GemmTiling without = tile_gemm(in);
  in.cmem = 128.0 * (1 << 20);
  GemmTiling with = tile_gemm(in);
  EXPECT_LT(with.hbm_read, without.hbm_read);
  EXPECT_DOUBLE_EQ(with.hbm_read, 2.0 * 2 * 4096.0 * 4096);  // A and B fit in 128 MiB: each read once
}

TEST(TilingTest, TinyVmemStillTiles) {
  GemmTiling t = tile_gemm(gemm(1024, 1024, 1024, 0.001));
  EXPECT_GT(t.m_tiles, 1);
  EXPECT_GT(t.hbm_read, 0);
}

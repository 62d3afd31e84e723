#include "hw/compiler/tiling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace podsim {

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

GemmTiling tile_gemm(const TilingInput& in) {
  const double A = static_cast<double>(in.m * in.k) * in.a_elem * (in.a_shared ? 1 : in.batch);
  const double B = static_cast<double>(in.k * in.n) * in.b_elem * (in.b_shared ? 1 : in.batch);
  const double Cb = static_cast<double>(in.batch * in.m * in.n) * in.c_elem;
  const int64_t k_slice = std::min<int64_t>(in.k, 512);  // K streams in slices; two slices per operand in flight
  auto footprint = [&](int64_t tm, int64_t tn, int64_t tk) {
    return 2.0 * (static_cast<double>(tm * tk) * in.a_elem + static_cast<double>(tk * tn) * in.b_elem) +
           static_cast<double>(tm * tn) * 4.0;  // fp32 accumulator
  };
  GemmTiling best;
  double best_traffic = std::numeric_limits<double>::infinity();
  // Whole problem resident: one pass over each operand.
  // (One batch entry at a time: entries stream through VMEM one after the other.)
  double resident = static_cast<double>(in.m * in.k) * in.a_elem + static_cast<double>(in.k * in.n) * in.b_elem +
                    static_cast<double>(in.m * in.n) * 4.0;
  if (resident <= in.vmem) {
    best.m_tile = in.m;
    best.n_tile = in.n;
    best.k_tile = in.k;
    best.hbm_read = A + B;
    best.hbm_write = Cb;
    best.fits = true;
    best.footprint = resident;
    return best;
  }
  std::vector<int64_t> ms, ns;
  for (int64_t t = 8; t < in.m; t *= 2) ms.push_back(t);
  ms.push_back(in.m);
  int64_t step = std::max<int64_t>(in.mxu_cols, 1);
  for (int64_t t = step; t < in.n; t *= 2) ns.push_back(t);
  ns.push_back(in.n);
  for (int64_t tm : ms) {
    for (int64_t tn : ns) {
      if (footprint(tm, tn, k_slice) > in.vmem) continue;
      int64_t mt = cdiv(in.m, tm), nt = cdiv(in.n, tn);
      double a_reads = nt, b_reads = mt;
      // With CMEM, an operand that fits there is read from HBM once and re-read from CMEM.
      if (in.cmem > 0 && A <= in.cmem) a_reads = 1;
      if (in.cmem > 0 && B <= in.cmem && (a_reads > 1 || A + B <= in.cmem)) b_reads = 1;
      double traffic = A * a_reads + B * b_reads + Cb;
      if (traffic < best_traffic - 1e-9 ||
          (std::fabs(traffic - best_traffic) <= 1e-9 && tm * tn > best.m_tile * best.n_tile)) {
        best_traffic = traffic;
        best.m_tile = tm;
        best.n_tile = tn;
        best.k_tile = k_slice;
        best.m_tiles = mt;
        best.n_tiles = nt;
        best.hbm_read = A * a_reads + B * b_reads;
        best.hbm_write = Cb;
        best.fits = false;
        best.footprint = footprint(tm, tn, k_slice);
      }
    }
  }
  if (!std::isfinite(best_traffic)) {
    // Not even an 8 x MXU-width tile with full K slices fits (a tiny VMEM): the smallest tile with the deepest
    // K slice that fits, down to 8.
    int64_t tm = std::min<int64_t>(8, in.m), tn = std::min<int64_t>(step, in.n);
    int64_t tk = std::min<int64_t>(in.k, 256);
    while (tk > 8 && footprint(tm, tn, tk) > in.vmem) tk /= 2;
    tk = std::min(tk, in.k);
    best.m_tile = tm;
    best.n_tile = tn;
    best.k_tile = tk;
    best.footprint = footprint(tm, tn, tk);
    best.tiles = best.footprint <= in.vmem;
    best.m_tiles = cdiv(in.m, tm);
    best.n_tiles = cdiv(in.n, tn);
    best.hbm_read = A * static_cast<double>(best.n_tiles) + B * static_cast<double>(best.m_tiles);
    best.hbm_write = Cb;
    best.fits = false;
  }
  return best;
}

}  // namespace podsim

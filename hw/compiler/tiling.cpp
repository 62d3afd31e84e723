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
  // CMEM holds the operands whose re-reads it saves most, within its capacity: a held operand is read from HBM once
  // and re-read from CMEM. The cores sharing CMEM each run this tiling on their share of the op: an operand every
  // one of them reads whole (`a_common`, `b_common`) is held once for all, another needs room for every core's share.
  // Each core still reads its operands from HBM once: a second core's first read of a common operand is not taken
  // from CMEM (which core fills it, and whether the other waits, is not modelled), so the split chosen for an op is
  // the one it has without CMEM wherever CMEM only saves re-reads the split does not make.
  const double cores = static_cast<double>(std::max<int64_t>(in.cmem_cores, 1));
  const double a_room = in.a_common ? A : A * cores, b_room = in.b_common ? B : B * cores;
  // Rows a weight fold streams with a tile of tm rows: with folds capped at `fold_rows`, fewer chunks of M is fewer
  // weight pushes.
  auto m_chunks = [&](int64_t tm) { return in.fold_rows > 0 ? cdiv(in.m, std::min(tm, in.fold_rows)) : int64_t{1}; };
  // The tiles considered: first those whose folds are as long as the MXU's (at least min(M, fold_rows) rows, so a
  // tile does not make the MXU reload its weights more often than M needs), then, if none of those fits VMEM, all.
  auto search = [&](int64_t min_rows) {
    for (int64_t tm : ms) {
      if (tm < min_rows) continue;
      for (int64_t tn : ns) {
        if (footprint(tm, tn, k_slice) > in.vmem) continue;
        int64_t mt = cdiv(in.m, tm), nt = cdiv(in.n, tn);
        double reads = std::numeric_limits<double>::infinity();
        for (int hold = 0; hold < 4; ++hold) {  // bit 0: A in CMEM, bit 1: B in CMEM
          const bool ha = hold & 1, hb = hold & 2;
          if (hold > 0 && (in.cmem <= 0 || (ha ? a_room : 0) + (hb ? b_room : 0) > in.cmem)) continue;
          reads = std::min(reads, A * (ha ? 1.0 : static_cast<double>(nt)) + B * (hb ? 1.0 : static_cast<double>(mt)));
        }
        double traffic = reads + Cb;
        // Ties go to the tile whose folds are longest, then to the largest.
        bool better = traffic < best_traffic - 1e-9;
        if (!better && std::fabs(traffic - best_traffic) <= 1e-9) {
          const int64_t chunks = m_chunks(tm), best_chunks = m_chunks(best.m_tile);
          better = chunks < best_chunks || (chunks == best_chunks && tm * tn > best.m_tile * best.n_tile);
        }
        if (better) {
          best_traffic = traffic;
          best.m_tile = tm;
          best.n_tile = tn;
          best.k_tile = k_slice;
          best.m_tiles = mt;
          best.n_tiles = nt;
          best.hbm_read = reads;
          best.hbm_write = Cb;
          best.fits = false;
          best.footprint = footprint(tm, tn, k_slice);
        }
      }
    }
  };
  if (in.fold_rows > 0) search(std::min(in.m, in.fold_rows));
  if (!std::isfinite(best_traffic)) search(0);
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

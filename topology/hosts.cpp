#include "topology/hosts.h"

#include <algorithm>

namespace podsim {

std::vector<int64_t> host_block(const std::vector<int64_t>& dims, int64_t chips) {
  std::vector<int64_t> block(dims.size(), 1);
  if (dims.empty()) return block;
  std::vector<int64_t> primes;
  for (int64_t n = std::max<int64_t>(1, chips), p = 2; n > 1;) {
    if (n % p == 0) {
      primes.push_back(p);
      n /= p;
    } else {
      p = p * p > n ? n : p + 1;
    }
  }
  // x and y in turn, then z: a host's chips lie on a board, a plane of the torus.
  const int planar = std::min<int>(2, static_cast<int>(dims.size()));
  int next = 0;
  for (int64_t p : primes) {
    bool placed = false;
    for (int tries = 0; tries < static_cast<int>(dims.size()) && !placed; ++tries) {
      int d = tries < planar ? (next + tries) % planar : tries;
      if (dims[d] % (block[d] * p) != 0) continue;
      block[d] *= p;
      placed = true;
      if (d < planar) next = (d + 1) % planar;
    }
    if (!placed) break;  // the slice holds fewer chips than a host drives
  }
  return block;
}

HostMap::HostMap(const Torus& torus, std::vector<int64_t> block) : m_torus(&torus), m_block(std::move(block)) {
  m_block.resize(static_cast<size_t>(torus.ici_ndims()), 1);
  for (int d = 0; d < torus.ici_ndims(); ++d) {
    m_per_slice *= torus.dims()[d] / m_block[d];
    m_chips_per_host *= m_block[d];
  }
}

int64_t HostMap::host_of(int64_t chip) const {
  const int64_t per = m_torus->slice_chips();
  int64_t local = chip % per, h = 0, scale = 1;
  for (int d = 0; d < m_torus->ici_ndims(); ++d) {
    const int64_t n = m_torus->dims()[d];
    h += (local % n) / m_block[d] * scale;
    scale *= n / m_block[d];
    local /= n;
  }
  return m_torus->slice_of(chip) * m_per_slice + h;
}

int HostMap::index_in_host(int64_t chip) const {
  int64_t local = chip % m_torus->slice_chips(), i = 0, scale = 1;
  for (int d = 0; d < m_torus->ici_ndims(); ++d) {
    const int64_t n = m_torus->dims()[d];
    i += (local % n) % m_block[d] * scale;
    scale *= m_block[d];
    local /= n;
  }
  return static_cast<int>(i);
}

}  // namespace podsim

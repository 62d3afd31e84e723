// The physical torus (or open mesh) of a pod: chip ids <-> coordinates, links, dimension-order routing.
//
// Chip ids are row-major with dimension 0 fastest: chip = x + X * (y + Y * z). Each chip has one outgoing link
// per direction (+x, -x, +y, -y, +z, -z) when that dimension has more than one chip; at the edge of an open
// dimension (wrap false) the outward link does not exist. Routing is dimension-order (x, then y, then z), along
// the shorter way around each ring; when both ways are equally long (a ring of even size, half-way), chips with
// an even coordinate go the + way and odd ones the - way, so such traffic uses both directions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace podsim {

class Torus {
 public:
  Torus(std::vector<int64_t> dims, std::vector<bool> wrap);

  int ndims() const { return static_cast<int>(m_dims.size()); }
  int64_t chips() const { return m_chips; }
  const std::vector<int64_t>& dims() const { return m_dims; }
  const std::vector<bool>& wrap() const { return m_wrap; }

  std::vector<int64_t> coords(int64_t chip) const;
  int64_t chip(const std::vector<int64_t>& c) const;

  // Directions are numbered 2 * dim + (0 for +, 1 for -).
  static int direction(int dim, bool positive) { return 2 * dim + (positive ? 0 : 1); }
  static std::string direction_name(int dir);  // "+x", "-y", ...
  int directions() const { return 2 * ndims(); }

  // The chip a link in direction `dir` leads to, or -1 when there is no such link.
  int64_t neighbor(int64_t chip, int dir) const;
  // Direction of the next hop from `at` toward `dst` (-1 when at == dst).
  int next_hop(int64_t at, int64_t dst) const;
  int hops(int64_t src, int64_t dst) const;
  // The chip `delta` coordinates away along dimension `dim`, wrapping around the ring (a translation of the torus).
  int64_t shift(int64_t chip, int dim, int64_t delta) const;

  std::string chip_label(int64_t chip) const;  // "chip 5 (x=1,y=1)"

 private:
  std::vector<int64_t> m_dims;
  std::vector<bool> m_wrap;
  int64_t m_chips = 1;
};

}  // namespace podsim

// The physical torus (or open mesh) of a pod: chip ids <-> coordinates, links, dimension-order routing.
//
// Chip ids are row-major with dimension 0 fastest: chip = x + X * (y + Y * z). Each chip has one outgoing link
// per direction (+x, -x, +y, -y, +z, -z) when that dimension has more than one chip; at the edge of an open
// dimension (wrap false) the outward link does not exist. Routing is dimension-order (x, then y, then z), along
// the shorter way around each ring; when both ways are equally long (a ring of even size, half-way), chips with
// an even coordinate go the + way and odd ones the - way, so such traffic uses both directions.
//
// Several slices (hardware.slices): copies of the torus joined only by the data-center network (hw/dcn/). They are
// one more dimension, the outermost (slowest in chip ids: chip = in-slice id + chips per slice x slice), whose ring
// has no ICI link: directions() and neighbor() cover the ICI dimensions only, routes never leave a slice, and what
// goes to another slice takes the DCN. Coordinates, shifts and the mesh treat it as a dimension like the others.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace podsim {

class Torus {
 public:
  // `slices` > 1 adds the slice dimension after the ICI dimensions.
  Torus(std::vector<int64_t> dims, std::vector<bool> wrap, int64_t slices = 1);

  // Every dimension, the slice dimension included.
  int ndims() const { return static_cast<int>(m_dims.size()); }
  int64_t chips() const { return m_chips; }
  const std::vector<int64_t>& dims() const { return m_dims; }
  const std::vector<bool>& wrap() const { return m_wrap; }
  // The dimensions ICI links join (those of one slice), and the slices.
  int ici_ndims() const { return m_ici; }
  int64_t slices() const { return m_slices; }
  int64_t slice_chips() const { return m_chips / m_slices; }
  int64_t slice_of(int64_t chip) const { return chip / slice_chips(); }
  // The dimension that counts slices, or -1 with one slice.
  int slice_dim() const { return m_slices > 1 ? m_ici : -1; }
  // The name of dimension d: x, y, z, or "slice".
  std::string dim_name(int d) const;

  std::vector<int64_t> coords(int64_t chip) const;
  int64_t chip(const std::vector<int64_t>& c) const;

  // Directions are numbered 2 * dim + (0 for +, 1 for -).
  static int direction(int dim, bool positive) { return 2 * dim + (positive ? 0 : 1); }
  static std::string direction_name(int dir);  // "+x", "-y", ...
  int directions() const { return 2 * m_ici; }  // ICI directions only: the slices have no link

  // The chip a link in direction `dir` leads to, or -1 when there is no such link.
  int64_t neighbor(int64_t chip, int dir) const;
  // Direction of the next hop from `at` toward `dst` over ICI (-1 when at == dst). Both in one slice.
  int next_hop(int64_t at, int64_t dst) const;
  // ICI hops between two chips of one slice (between slices: between their positions in the slice).
  int hops(int64_t src, int64_t dst) const;
  // The chip `delta` coordinates away along dimension `dim`, wrapping around the ring (a translation of the torus).
  int64_t shift(int64_t chip, int dim, int64_t delta) const;

  std::string chip_label(int64_t chip) const;  // "chip 5 (x=1,y=1)", "chip 261 (x=1,y=0,slice=1)"

 private:
  std::vector<int64_t> m_dims;
  std::vector<bool> m_wrap;
  int64_t m_chips = 1;
  int m_ici = 0;
  int64_t m_slices = 1;
};

}  // namespace podsim

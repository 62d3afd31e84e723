// The logical device mesh of a plan: named axes with sizes, laid out on the physical torus (GSPMD's device
// assignment). An axis may span several torus dimensions (data over x and z of a 3-D torus) and a torus dimension
// may be split between axes (y = 32 as model 8 x data 4). Each axis is a list of factors, each a piece of one
// torus dimension: `size` coordinates `stride` apart. The factors on one torus dimension multiply to its size; the
// one with stride 1 is innermost (neighbouring chips).
//
//   Mesh m = Mesh::layout({"data", "model"}, {4, 16}, torus, {});  // default placement: the last axis innermost
//   int64_t i = m.coordinate(chip, m.axis_index("model"));
//   MeshGroup g = m.group(chip, {"data"});                          // the data-parallel group of `chip`
//
// Placement strings (one per axis, "" for automatic): torus dimensions the axis spans, fastest first, each
// optionally with the number of its coordinates the axis takes: "x", "x,z", "y:8". Within a torus dimension, the
// axes are stacked from the innermost (the last axis of the mesh) outwards.
//
// Several slices (topology/torus.h): the DCN axes (`dcn_axes`, MaxText's dcn_* parallelism) take the slice
// dimension, outermost first, each as many slices as its size and what is left allow; a DCN axis larger than its
// slices continues inside each slice (MaxText's hybrid mesh: data = dcn_data x ici_data), its slice factor the
// slowest. Every other axis lies inside the slices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/i_algorithm.h"
#include "topology/torus.h"

namespace podsim {

struct MeshFactor {
  int dim = 0;         // torus dimension
  int64_t size = 1;    // coordinates it spans
  int64_t stride = 1;  // torus coordinates between consecutive ones
};

struct MeshAxis {
  std::string name;
  int64_t size = 1;
  std::vector<MeshFactor> factors;  // fastest first; their sizes multiply to `size`
};

// The chips of one group (devices that differ only along some axes) as one member sees them: the group's shape for
// the collectives library and this chip's rank in it. Ranks follow shard order: the last axis named varies
// fastest, so rank r holds shard r of a dimension split over those axes.
struct MeshGroup {
  GroupShape shape;                  // one dimension per factor, fastest first; wrap: the factor closes a ring
  int64_t rank = 0;
  std::vector<MeshFactor> factors;   // the factor behind each group dimension
  std::vector<int64_t> coords;       // this chip's torus coordinates
  int64_t chip_of(int64_t rank, const Torus& torus) const;
  // The rank of `chip`, a member of this group.
  int64_t rank_of(int64_t chip, const Torus& torus) const;
  // "a ring of 8 on x", "a strided ring of 4 on y (every 8th chip)", "a line of 2 on y", joined by " x ".
  std::string describe() const;
};

class Mesh {
 public:
  Mesh() = default;
  // One axis per torus dimension, named x, y, z and listed z, y, x (outermost first): the torus itself, with group
  // ranks in chip-id order (x fastest).
  static Mesh torus_axes(const Torus& t);
  // Named axes (outermost first) with sizes whose product is the chip count, laid out on the torus. `placement`
  // is empty or has one string per axis ("" = automatic). Throws Error(BadMesh) saying what cannot be placed.
  // `contiguous` names axes whose consecutive indices should be neighbouring chips (a pipeline's stages): unless
  // placed explicitly, such an axis takes a run of neighbouring chips along the outermost torus dimension that
  // holds it whole, before the other axes are laid out; where none does, it is placed like the others.
  static Mesh layout(const std::vector<std::string>& names, const std::vector<int64_t>& sizes, const Torus& t,
                     const std::vector<std::string>& placement, const std::vector<std::string>& contiguous = {},
                     const std::vector<std::string>& dcn_axes = {});

  const std::vector<MeshAxis>& axes() const { return m_axes; }
  const MeshAxis& axis(int i) const { return m_axes.at(static_cast<size_t>(i)); }
  int64_t devices() const;
  int axis_index(const std::string& name) const;  // -1 when absent
  int64_t axis_size(const std::string& name) const;  // 1 when absent
  std::vector<std::string> names() const;

  // The chip's index along one axis, and along several (mixed radix, the last axis fastest).
  int64_t coordinate(int64_t chip, int axis) const;
  int64_t index(int64_t chip, const std::vector<std::string>& axes) const;
  int64_t size(const std::vector<std::string>& axes) const;  // product of the axes' sizes

  // The group of `chip` over `axes` (empty: every axis), and its chips in rank order.
  // `block` > 0: only the run of `block` consecutive ranks holding `chip` (a batch-norm group of replicas); it must
  // divide the group's size.
  MeshGroup group(int64_t chip, const std::vector<std::string>& axes, int64_t block = 0) const;
  std::vector<int64_t> members(int64_t chip, const std::vector<std::string>& axes, int64_t block = 0) const;

  // "data 4 (y:4/8) x model 16 (x, y:2)".
  std::string describe() const;

  // The dimension that counts slices (topology/torus.h), or -1 with one slice; whether an axis spans slices.
  int slice_dim() const { return static_cast<int>(m_dims.size()) > m_ici ? m_ici : -1; }
  bool spans_slices(int axis) const;
  int64_t slices() const { return slice_dim() < 0 ? 1 : m_dims[m_ici]; }

 private:
  std::vector<MeshAxis> m_axes;
  std::vector<int64_t> m_dims;  // every torus dimension, the slice dimension last
  std::vector<bool> m_wrap;
  int m_ici = 0;  // the ICI dimensions among them
  std::string dim_name(int d) const;
  Torus torus() const;  // the torus of m_dims (coordinates only)
};

}  // namespace podsim

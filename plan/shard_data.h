// Moving real values between logical tensors and the shards devices hold (plan/sharding.h), and the tensor
// reshapes collectives along a dimension need. Numeric mode only; nothing here is simulated time.
//
//   Tensor mine = shard_of(logical_value, spec, mesh, chip);        // a step input for one chip
//   place_shard(assembled, mine, spec, mesh, chip);                  // a step result back into the logical tensor
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "plan/mesh.h"
#include "plan/plan.h"
#include "plan/sharding.h"
#include "workloads/tensor.h"

namespace podsim {

// The shard of `logical` that `chip` holds under `spec` (padding positions are zero).
Tensor shard_of(const Tensor& logical, const ShardSpec& spec, const Mesh& mesh, int64_t chip);
// Writes `shard` (held by `chip` under `spec`) into `logical`, dropping padding.
void place_shard(Tensor& logical, const Tensor& shard, const ShardSpec& spec, const Mesh& mesh, int64_t chip);

// Part `i` of `n` equal parts of dimension `dim`.
Tensor block_of(const Tensor& x, size_t dim, int64_t i, int64_t n);
// The tensors joined along dimension `dim` (equal other dimensions).
Tensor concat(const std::vector<const Tensor*>& parts, size_t dim);

// Fills `store` (sized to the program of `chip`'s role) with the chip's step inputs: its shard of each logical value
// in `logical_values`; per-device inputs are drawn for the chip itself from `seed` (chip 0 draws exactly what the
// reference executor does).
void bind_inputs(const Plan& plan, const ModelGraph& logical, const TensorStore& logical_values, int64_t chip,
                 TensorStore& store, uint64_t seed);
// The step results: each bound logical tensor assembled from the shards of the chips that hold it (`store_of`
// returns a chip's store, or nullptr for an idle chip). Per-device results are the result chip's.
void assemble_results(const Plan& plan, const ModelGraph& logical,
                      const std::function<const TensorStore*(int64_t chip)>& store_of, TensorStore& out);

// Collectives along a tensor dimension run as the flat collectives of the library (collectives/i_algorithm.h,
// where block r of a buffer belongs to rank r) on a rearranged buffer: pack_collective turns a device's input
// into that buffer (the dimension's N parts outermost), unpack_collective turns the flat result into the local
// output tensor of shape `out_shape`. Identity for dimension 0 and for all-reduce.
std::vector<float> pack_collective(const Op& op, const Tensor& input, int64_t group);
Tensor unpack_collective(const Op& op, std::vector<float> flat, const std::vector<int64_t>& out_shape, int64_t group);
// The buffer of a combined collective (several tensors in one all-reduce or reduce-scatter, partition/combine.h)
// over a group of `group` ranks, for an algorithm that cuts each of the group's blocks into `pieces` pieces and adds
// all elements of a piece in one order (collectives/i_algorithm.h reduction_pieces; 0: the order is not known by
// block and piece). Each tensor's part of block b, piece q, as the algorithm would cut the tensor's own buffer, goes
// to block b, piece q of the combined buffer, padded with zeros to the tensor's largest piece: every element is
// added in the order it would be on its own, and rank r's block of a reduce-scatter holds its parts of every tensor.
struct CombinedLayout {
  int64_t group = 1, pieces = 1;
  int64_t piece = 0;  // elements of one piece of the combined buffer
  // Per tensor: its elements, the elements of each of its blocks, its pieces, and its offset within a piece.
  std::vector<int64_t> elements, block, parts, offset;
  int64_t block_elements() const { return pieces * piece; }
  int64_t total() const { return group * pieces * piece; }
};
CombinedLayout combined_layout(OpKind kind, const std::vector<int64_t>& elements, int64_t group, int64_t pieces);
// The combined buffer from each tensor's flat input (pack_collective's, for a reduce-scatter its parts outermost).
std::vector<float> pack_combined(const CombinedLayout& l, const std::vector<std::vector<float>>& inputs);
// Each tensor's flat result from the combined result: the whole buffer (all-reduce) or this rank's block
// (reduce-scatter, `scattered`).
std::vector<std::vector<float>> unpack_combined(const CombinedLayout& l, const std::vector<float>& flat, bool scattered);

// A device's index along mesh axes, for the kernels of a partitioned program (workloads/tensor.h).
class MeshDevice : public DeviceIndex {
 public:
  MeshDevice(const Mesh& mesh, int64_t chip) : m_mesh(mesh), m_chip(chip) {}
  int64_t index(const std::vector<std::string>& axes) const override { return m_mesh.index(m_chip, axes); }

 private:
  const Mesh& m_mesh;
  int64_t m_chip;
};

}  // namespace podsim

// The contraction a MatMul op performs, written as an einsum equation over single-letter dimension names:
//
//   "bsd,dhe->bshe"   activations [B, S, D] times per-head weights [D, H, E] -> [B, S, H, E]
//   "bshe,bthe->bhst" attention scores: batch letters b, h; contracting e; free s (left) and t (right)
//
// Letters in both operands and the output are batch dimensions, in both operands only contracting dimensions, in
// one operand and the output free dimensions (M from the left, N from the right). Every letter of an operand is in
// the other operand or the output, and every output letter in an operand. So an op is a batch of M x K @ K x N
// GEMMs, whatever the layouts; the sizes come from the tensors' shapes (partitioned ops keep the equation and get
// local shapes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace podsim {

struct Einsum {
  std::string lhs, rhs, out;                 // letters of each tensor, in dimension order
  std::string batch, contract, lfree, rfree;  // classification; batch and free in output order, contract in lhs order

  // Throws Error(Internal) naming what is wrong with the equation.
  static Einsum parse(const std::string& equation);
  std::string text() const { return lhs + "," + rhs + "->" + out; }
  // Size of each letter (index by letter - 'a'; 0 = unused) from the operand shapes; throws when they disagree.
  std::vector<int64_t> sizes(const std::vector<int64_t>& lhs_shape, const std::vector<int64_t>& rhs_shape) const;
  // Output shape for operand shapes.
  std::vector<int64_t> out_shape(const std::vector<int64_t>& lhs_shape, const std::vector<int64_t>& rhs_shape) const;
  // Product of the sizes of `letters`.
  static int64_t product(const std::vector<int64_t>& sizes, const std::string& letters);
};

}  // namespace podsim

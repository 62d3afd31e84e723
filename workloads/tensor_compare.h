// How far one tensor is from another (the reference): the relative norm error ||a - b|| / ||b|| and the max
// relative error max |a_i - b_i| / max |b_i| (each element's error against the tensor's largest magnitude, so
// elements near zero do not blow it up). Both are 0 for equal tensors; a zero reference compares absolutely.
#pragma once

#include <string>

#include "workloads/tensor.h"

namespace podsim {

struct TensorDiff {
  double rel_norm = 0;
  double max_rel = 0;
  bool shape_differs = false;
  bool finite = true;  // both tensors finite
};

TensorDiff compare_tensors(const Tensor& a, const Tensor& reference);

}  // namespace podsim

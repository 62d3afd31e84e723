// The numerics of data the DMA engines move (numeric mode): gathering a send's region of a buffer into a message
// payload, and landing a payload in a receive's region, overwriting or adding element by element in the order
// the region lists its blocks (the order the algorithm reduces in).
// The bf16 rule (docs/model.md): every value written to a bf16 buffer is rounded to bf16 (round to nearest even),
// so each partial sum a reduction writes into a bf16 buffer is rounded, as the hardware stores it.
#pragma once

#include <vector>

#include "collectives/i_algorithm.h"

namespace podsim {

// The elements of `region` of `buf`, block after block.
std::vector<float> gather_region(const std::vector<float>& buf, const Region& region);

// Writes `data` into `region` of `buf` (Overwrite) or adds it to what is there (Add; with `max`, keeps the larger
// of the two instead: a max all-reduce runs the sum's schedule); with `bf16`, every value written is rounded to bf16.
void land_region(std::vector<float>& buf, const Region& region, const std::vector<float>& data, Task::Combine combine,
                 bool bf16, bool max = false);

}  // namespace podsim

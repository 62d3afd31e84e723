// The hosts of a slice: each host drives a block of neighbouring chips (v5e: 8 chips as 4 x 2; v4 and v5p: 4 as
// 2 x 2 x 1) over their host links, and carries their data-center traffic through its NICs (hw/dcn/). Blocks tile
// each slice; host ids count blocks in row-major order with x fastest, slice after slice, like chip ids.
//
//   std::vector<int64_t> b = host_block({16, 16}, 8);   // {4, 2}
//   HostMap hosts(torus, b);
//   int64_t h = hosts.host_of(chip);   int index = hosts.index_in_host(chip);
#pragma once

#include <cstdint>
#include <vector>

#include "topology/torus.h"

namespace podsim {

// The block of `chips` chips a host drives on a slice of `dims` (ICI dimensions): the chip count's prime factors,
// smallest first, given in turn to x and y (and z once both are full), each where it divides what the slice has.
// A slice smaller than a host makes the block the part that fits (the host then drives fewer chips).
std::vector<int64_t> host_block(const std::vector<int64_t>& dims, int64_t chips);

class HostMap {
 public:
  HostMap(const Torus& torus, std::vector<int64_t> block);
  int64_t hosts() const { return m_per_slice * m_torus->slices(); }
  int64_t hosts_per_slice() const { return m_per_slice; }
  int64_t chips_per_host() const { return m_chips_per_host; }
  const std::vector<int64_t>& block() const { return m_block; }
  int64_t host_of(int64_t chip) const;
  // The chip's place among its host's chips (0 .. chips_per_host - 1), the same for every host.
  int index_in_host(int64_t chip) const;

 private:
  const Torus* m_torus;
  std::vector<int64_t> m_block;
  int64_t m_per_slice = 1, m_chips_per_host = 1;
};

}  // namespace podsim

// Building blocks shared by the ring and torus algorithms: a view of a buffer as a grid of blocks (one per rank
// of the group, split into pieces for concurrent parts), the block sets that rings exchange, chunking, and the
// reduce-scatter / all-gather phases of a ring along one axis.
//
// The buffer holds N canonical blocks of B elements (N = group size, block r belongs to rank r). Each block is cut
// into P pieces of B / P elements, one per concurrent part; piece (b, q) starts at b * B + q * (B / P). A part runs
// its own rings (own direction, own order of axes), so parts use different links at the same time.
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/i_algorithm.h"

namespace podsim::ring {

struct Layout {
  int64_t base = 0;
  int64_t B = 0;   // elements per canonical block
  int64_t P = 1;   // pieces per block (concurrent parts)
  std::vector<int64_t> dims;     // group axes
  std::vector<int64_t> strides;  // block-index stride of each axis
  Buffer buf = Buffer::Output;

  Layout(const GroupShape& g, int64_t base, int64_t B, int64_t P, Buffer buf);
  // Piece q of each block: [piece_offset(q), piece_offset(q) + piece_size(q)) within the block. Pieces differ in
  // size by at most one element when B is not a multiple of P.
  int64_t piece_offset(int64_t q) const { return (B * q) / P; }
  int64_t piece_size(int64_t q) const { return piece_offset(q + 1) - piece_offset(q); }
};

// The pieces of part q whose block coordinates equal `fixed` on every axis where fixed[a] >= 0.
Region block_set(const Layout& l, int64_t q, const std::vector<int64_t>& fixed);

// The chunk size for a transfer of `elements`: `chunk`, or elements / max_chunks (rounded up) when that is larger,
// so a transfer of more than max_chunks chunks' worth moves in about max_chunks chunks (0: no cap).
int64_t capped_chunk(int64_t elements, int64_t chunk, int64_t max_chunks);

// Splits a region into chunks of at most capped_chunk(r.elements(), chunk, max_chunks) elements along its block
// structure; equal shapes give equal chunkings, so a sender's and a receiver's chunks correspond one to one.
std::vector<Region> chunks(const Region& r, int64_t chunk, int64_t max_chunks = 0);

// Parts to use for blocks of B elements: `want`, or fewer when a block has fewer elements than that.
int64_t parts_for(int64_t B, int64_t want);

// Tag of chunk c of step s of phase `phase` of part q: identical on sender and receiver, unique per pair.
int64_t tag(int64_t q, int64_t phase, int64_t step, int64_t c);

// What a phase leaves behind for the next: the last receive of each chunk lane (a lane's receives land in order,
// so it follows all of them) and the span of elements that lane wrote that the next phase may read.
struct Entry {
  std::vector<int32_t> tasks;
  std::vector<std::pair<int64_t, int64_t>> spans;  // [begin, end) per task, in `buf`
  std::vector<uint8_t> writes;                      // 1: the lane wrote its span; 0: it only read it (sends)
  Buffer buf = Buffer::Output;
  void add(int32_t task, int64_t begin, int64_t end, bool wrote = true) {
    tasks.push_back(task);
    spans.push_back({begin, end});
    writes.push_back(wrote ? 1 : 0);
  }
};
struct PhaseResult {
  Entry written;  // lanes that wrote (what the next phase reads)
  Entry read;     // the lanes' sends and what they read (for a later phase that overwrites it)
};

// One ring phase: the ranks of a line exchange the block sets of `layout` whose coordinates are `fixed` (own
// coordinates; -1 = free) and whose coordinate on `set_axis` is the ring index. `position` is this rank's index
// on the ring of n, `to` and `from` its successor and predecessor (group ranks) in direction of travel.
// Reduce-scatter: after n-1 steps the rank holds set `position` summed over the ring.
// All-gather: the rank starts with set `position` and ends with all n.
// Sends of the first step wait for the entry lanes whose span overlaps what they read, later ones for the chunk
// they forward; receives of a chunk lane land in step order after the overlapping entry lanes, so every rank
// reduces in the algorithm's order whatever the timing. A reduce-scatter passes on only its final sets (partial
// sums were forwarded); an all-gather passes on everything it received.
struct RingSpec {
  const Layout* layout = nullptr;
  int64_t part = 0;
  int64_t phase = 0;
  int set_axis = 0;
  std::vector<int64_t> fixed;
  int64_t position = 0, n = 1;  // position counted in the direction of travel
  int dir = 1;                   // +1: set index = position; -1: set index = (n - position) mod n
  int64_t to = 0, from = 0;
  // When set, step 0 sends this region of this buffer instead (same shape as the set it stands for): an
  // all-gather can start from its input while the input's copy into the output is still under way.
  bool first_from = false;
  Buffer first_buf = Buffer::Input;
  Region first_region;
};
// Each step's block set moves in chunks(set, chunk, max_chunks).
PhaseResult reduce_scatter_phase(Schedule& s, const RingSpec& r, const Entry& entry, int64_t chunk,
                                 int64_t max_chunks = 0);
PhaseResult all_gather_phase(Schedule& s, const RingSpec& r, const Entry& entry, int64_t chunk,
                             int64_t max_chunks = 0);

// The spec of a ring along group axis `axis` in direction `dir` (+1/-1) for a layout over the same axes as the
// group, with the axes in `fixed_axes` fixed at this rank's coordinates.
RingSpec ring_on_axis(const Layout& l, const GroupShape& g, int64_t rank, int64_t part, int64_t phase, int axis,
                      int dir, const std::vector<int>& fixed_axes);

// Rank `steps` away along `axis`, always closing the ring (physical routing handles a missing wrap link).
int64_t ring_peer(const GroupShape& g, int64_t rank, int axis, int64_t steps);

}  // namespace podsim::ring

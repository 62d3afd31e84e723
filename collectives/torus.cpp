// "torus": the multi-dimensional torus scheme, the default for all-reduce, reduce-scatter and all-gather.
//
// The data is split into up to 2·A parts (A = axes of the group with more than one chip). Part q travels in
// direction + or - (q even / odd) and visits the axes in a rotated order starting at axis (q / 2) mod A, so all
// parts run at once on different links. All-reduce = reduce-scatter along the axes in the part's order, then
// all-gather back in reverse order; this is "reduce-scatter along one dimension, all-reduce along the others on
// the 1/n shard, all-gather back", with every link of every axis busy. Uncongested, AG = RS ≈ V / W and
// AR ≈ 2V / W, W being the bidirectional link bandwidth, divided by the number of axes.
//
// Layout: rank r ends a reduce-scatter holding block r of the buffer and starts an all-gather from it (blocks of
// n / size elements, rank = x + X·(y + Y·z) over the group's axes); the rotated orders keep that layout by
// exchanging strided block sets (collectives/ring_steps.h).
//
// A group that spans slices (GroupShape::dcn) runs hierarchically, as XLA does over the data-center network: every
// part reduce-scatters along the ICI axes first (rotated among themselves) and along the DCN axes last, so only the
// 1/n shard crosses the DCN; an all-reduce then gathers back over the DCN first and the ICI last (reduce-scatter
// inside each slice, all-reduce of the shards across slices, all-gather inside); an all-gather gathers over the DCN
// first, while the pieces are smallest. DCN phases move chunks of dcn_chunk_elements.
#include <algorithm>
#include <cmath>

#include "collectives/ring_steps.h"
#include "base/error.h"

namespace podsim {
namespace {

std::vector<int> active_axes(const GroupShape& g) {
  std::vector<int> a;
  for (size_t i = 0; i < g.dims.size(); ++i)
    if (g.dims[i] > 1) a.push_back(static_cast<int>(i));
  return a;
}

// Axes in part q's reduce-scatter order: the ICI axes rotated by q / 2 when `rotate` (else in group order), then
// the DCN axes. An all-gather on its own (gather_first) takes the DCN axes first.
std::vector<int> part_order(const GroupShape& g, const std::vector<int>& axes, int64_t q, bool rotate,
                            bool gather_first = false) {
  std::vector<int> o, dcn;
  for (int a : axes) (g.is_dcn(static_cast<size_t>(a)) ? dcn : o).push_back(a);
  if (rotate && !o.empty()) std::rotate(o.begin(), o.begin() + (q / 2) % static_cast<int64_t>(o.size()), o.end());
  if (gather_first) o.insert(o.begin(), dcn.begin(), dcn.end());
  else o.insert(o.end(), dcn.begin(), dcn.end());
  return o;
}

// The chunk of a phase along `axis`: the DCN's over the data-center network.
bool dcn_axis(const CollectiveRequest& req, int axis) {
  return req.group.is_dcn(static_cast<size_t>(axis)) && req.dcn_chunk_elements > 0;
}
int64_t axis_chunk(const CollectiveRequest& req, int axis) {
  return dcn_axis(req, axis) ? req.dcn_chunk_elements : req.chunk_elements;
}
// The cap on a phase's chunks per step (ICI phases only).
int64_t axis_max_chunks(const CollectiveRequest& req, int axis) { return dcn_axis(req, axis) ? 0 : req.max_chunks; }

// Reduce-scatter over every axis in `order`, then (when `gather`) all-gather back; returns the final receives.
ring::Entry reduce_then_gather(Schedule& s, const ring::Layout& l, const CollectiveRequest& req, int64_t rank,
                               int64_t q, const std::vector<int>& order, bool gather, ring::Entry entry) {
  const GroupShape& g = req.group;
  const int dir = q % 2 == 0 ? 1 : -1;
  std::vector<int> fixed;
  int64_t phase = 0;
  for (int axis : order) {
    ring::RingSpec spec = ring::ring_on_axis(l, g, rank, q, phase++, axis, dir, fixed);
    // Within one torus collective a write never races a read of the same data: a receive only brings data whose
    // making needed this rank's earlier sends. So only writes carry over.
    entry = ring::reduce_scatter_phase(s, spec, entry, axis_chunk(req, axis), axis_max_chunks(req, axis)).written;
    fixed.push_back(axis);
  }
  if (!gather) return entry;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    fixed.pop_back();
    ring::RingSpec spec = ring::ring_on_axis(l, g, rank, q, phase++, *it, dir, fixed);
    entry = ring::all_gather_phase(s, spec, entry, axis_chunk(req, *it), axis_max_chunks(req, *it)).written;
  }
  return entry;
}

// All-gather starting from the rank's own block: along the axes of `order`, each phase gathering one more axis.
ring::Entry gather_only(Schedule& s, const ring::Layout& l, const CollectiveRequest& req, int64_t rank, int64_t q,
                        const std::vector<int>& order, ring::Entry entry) {
  const GroupShape& g = req.group;
  const int dir = q % 2 == 0 ? 1 : -1;
  std::vector<int> fixed = order;  // every axis still fixed at the own coordinate
  int64_t phase = 0;
  for (int axis : order) {
    fixed.erase(std::find(fixed.begin(), fixed.end(), axis));
    ring::RingSpec spec = ring::ring_on_axis(l, g, rank, q, phase, axis, dir, fixed);
    if (phase == 0) {
      // The first send is the rank's own piece: take it from the input, not after the copy into the output.
      spec.first_from = true;
      spec.first_buf = Buffer::Input;
      spec.first_region = contiguous(l.piece_offset(q), l.piece_size(q));
    }
    ++phase;
    entry = ring::all_gather_phase(s, spec, entry, axis_chunk(req, axis), axis_max_chunks(req, axis)).written;
  }
  return entry;
}

}  // namespace

// Shared by "torus" (rotated orders) and "ring" (every part in group order): both registered below.
Schedule ring_family_schedule(const CollectiveRequest& req, int64_t rank, bool rotate) {
  const GroupShape& g = req.group;
  const int64_t N = g.size(), n = req.elements;
  const std::vector<int> axes = active_axes(g);
  const int64_t want = 2 * std::max<int64_t>(1, rotate ? static_cast<int64_t>(axes.size()) : 1);
  const int64_t chunk = req.chunk_elements;
  Schedule s;
  // Reserve what the rings will add (each phase: n - 1 steps of chunked sends and receives), so the task table is
  // allocated once: for a large pod these tables are most of the simulator's memory.
  {
    double per_part = 0, data = static_cast<double>(n) / static_cast<double>(std::max<int64_t>(1, want));
    for (int a : axes) {
      double d = static_cast<double>(g.dims[a]);
      double chunks = chunk > 0 ? std::ceil(data / d / static_cast<double>(chunk)) + 1 : 1;
      per_part += (d - 1) * chunks * 2;
      data /= d;
    }
    size_t estimate = static_cast<size_t>(per_part * 2 * static_cast<double>(want)) + 8;
    s.tasks.reserve(estimate);
    s.deps.reserve(estimate * 2);
  }
  switch (req.kind) {
    case CollectiveKind::AllReduce: {
      s.output_elements = n;
      if (N == 1) return s;
      if (n % N != 0)
        throw Error(Err::Internal, "all_reduce of " + std::to_string(n) + " elements over " + std::to_string(N) +
                                       " ranks: the element count must divide evenly");
      const int64_t B = n / N, P = ring::parts_for(B, want);
      ring::Layout l(g, 0, B, P, Buffer::Output);
      for (int64_t q = 0; q < P; ++q)
        reduce_then_gather(s, l, req, rank, q, part_order(g, axes, q, rotate), true, ring::Entry{});
      return s;
    }
    case CollectiveKind::ReduceScatter: {
      if (n % N != 0)
        throw Error(Err::Internal, "reduce_scatter of " + std::to_string(n) + " elements over " +
                                       std::to_string(N) + " ranks: the element count must divide evenly");
      const int64_t B = n / N, P = ring::parts_for(B, want);
      s.output_elements = B;
      if (N == 1) return s;
      ring::Layout l(g, 0, B, P, Buffer::Input);
      std::vector<int32_t> done;
      for (int64_t q = 0; q < P; ++q) {
        ring::Entry last = reduce_then_gather(s, l, req, rank, q, part_order(g, axes, q, rotate), false, ring::Entry{});
        done.insert(done.end(), last.tasks.begin(), last.tasks.end());
      }
      Task copy;
      copy.type = Task::Type::Copy;
      copy.src_buf = Buffer::Input;
      copy.src = contiguous(rank * B, B);
      copy.dst_buf = Buffer::Output;
      copy.dst = contiguous(0, B);
      s.add(copy, done);
      return s;
    }
    case CollectiveKind::AllGather: {
      s.output_elements = n * N;
      if (N == 1) return s;
      const int64_t P = ring::parts_for(n, want);
      ring::Layout l(g, 0, n, P, Buffer::Output);
      Task copy;
      copy.type = Task::Type::Copy;
      copy.src_buf = Buffer::Input;
      copy.src = contiguous(0, n);
      copy.dst_buf = Buffer::Output;
      copy.dst = contiguous(rank * n, n);
      ring::Entry start;
      start.buf = Buffer::Output;
      start.add(s.add(copy), copy.dst.offset, copy.dst.end(), true);
      for (int64_t q = 0; q < P; ++q) gather_only(s, l, req, rank, q, part_order(g, axes, q, rotate, true), start);
      return s;
    }
    default:
      throw Error(Err::Internal, std::string("the ring family does not implement ") + collective_name(req.kind));
  }
}

namespace {

class TorusAlgorithm : public ICollectiveAlgorithm {
 public:
  std::vector<CollectiveKind> supports() const override {
    return {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter, CollectiveKind::AllGather};
  }
  Schedule schedule(const CollectiveRequest& req, int64_t rank) const override {
    return ring_family_schedule(req, rank, true);
  }
  RankSymmetry symmetry(const CollectiveRequest&) const override { return RankSymmetry::Torus; }
  // Two parts (directions) per axis of the group with more than one chip (ring_family_schedule's `want`).
  int64_t reduction_pieces(const CollectiveRequest& req) const override {
    return 2 * std::max<int64_t>(1, static_cast<int64_t>(active_axes(req.group).size()));
  }
};

PODSIM_REGISTER_COLLECTIVE(TorusAlgorithm, "torus",
                           "Multi-dimensional torus scheme: parts in both directions and rotated axis orders, all "
                           "links busy");

}  // namespace
}  // namespace podsim

// "ring": bidirectional rings along one axis at a time, the simple baseline.
//  - all_reduce: a full all-reduce along axis x, then along y, ... on the whole buffer (half of it travelling
//    each way round each ring): 2V/W per axis, so slower than "torus" on several axes by about the axis count;
//  - reduce_scatter / all_gather: along the axes in group order, both directions;
//  - broadcast (the default): the root's buffer flows down pipelined chains in both directions along x from the
//    root, then along y from every chip of the root's x line, and so on.
#include <algorithm>

#include "collectives/ring_steps.h"
#include "base/error.h"

namespace podsim {

Schedule ring_family_schedule(const CollectiveRequest& req, int64_t rank, bool rotate);

namespace {

Schedule ring_all_reduce(const CollectiveRequest& req, int64_t rank) {
  const GroupShape& g = req.group;
  const int64_t n = req.elements;
  Schedule s;
  s.output_elements = n;
  ring::Entry entry;
  for (size_t axis = 0; axis < g.dims.size(); ++axis) {
    const int64_t d = g.dims[axis];
    if (d < 2) continue;
    if (n % d != 0)
      throw Error(Err::Internal, "ring all_reduce of " + std::to_string(n) + " elements along an axis of " +
                                     std::to_string(d) + " ranks: the element count must divide evenly");
    // The whole buffer as d blocks along this axis only.
    GroupShape line;
    line.dims = {d};
    const int64_t B = n / d, P = ring::parts_for(B, 2);
    ring::Layout l(line, 0, B, P, Buffer::Output);
    ring::Entry next;
    next.buf = Buffer::Output;
    for (int64_t q = 0; q < P; ++q) {
      int dir = q % 2 == 0 ? 1 : -1;
      ring::RingSpec spec = ring::ring_on_axis(l, g, rank, q, static_cast<int64_t>(2 * axis), static_cast<int>(axis),
                                               dir, {});
      // The layout has one axis: index sets by position 0, not by the group axis.
      spec.set_axis = 0;
      spec.fixed.assign(1, -1);
      ring::PhaseResult rs = ring::reduce_scatter_phase(s, spec, entry, req.chunk_elements, req.max_chunks);
      spec.phase = static_cast<int64_t>(2 * axis + 1);
      ring::PhaseResult ag = ring::all_gather_phase(s, spec, rs.written, req.chunk_elements, req.max_chunks);
      // The next axis overwrites data this axis still sends: it waits for those sends as well.
      for (const ring::Entry* e : {&ag.written, &rs.read, &ag.read})
        for (size_t i = 0; i < e->tasks.size(); ++i)
          next.add(e->tasks[i], e->spans[i].first, e->spans[i].second, e->writes[i] != 0);
    }
    entry = next;
  }
  return s;
}

Schedule ring_broadcast(const CollectiveRequest& req, int64_t rank) {
  const GroupShape& g = req.group;
  const int64_t n = req.elements;
  Schedule s;
  s.output_elements = n;
  std::vector<int64_t> c = g.coords(rank), root = g.coords(req.root);
  std::vector<Region> pieces = ring::chunks(contiguous(0, n), req.chunk_elements, req.max_chunks);
  std::vector<int32_t> have(pieces.size(), -1);  // task after which chunk k is in Output (-1: from the start)
  bool holds = rank == req.root;                  // Output already holds the data (the root's input)
  for (size_t axis = 0; axis < g.dims.size(); ++axis) {
    const int64_t d = g.dims[axis];
    // Along this axis, only lines through chips that already have the data take part: every later axis must
    // still be at the root's coordinate.
    bool on_line = true;
    for (size_t b = axis + 1; b < g.dims.size(); ++b) on_line = on_line && c[b] == root[b];
    if (d < 2 || !on_line) continue;
    const int64_t delta = ((c[axis] - root[axis]) % d + d) % d;
    const int64_t up = d / 2, down = d - 1 - up;  // chain lengths in + and - directions
    auto peer = [&](int64_t steps) { return ring::ring_peer(g, rank, static_cast<int>(axis), steps); };
    int64_t from = -1, to_plus = -1, to_minus = -1;
    if (delta == 0) {
      if (up > 0) to_plus = peer(1);
      if (down > 0) to_minus = peer(-1);
    } else if (delta <= up) {
      from = peer(-1);
      if (delta < up) to_plus = peer(1);
    } else {
      int64_t back = d - delta;
      from = peer(1);
      if (back < down) to_minus = peer(-1);
    }
    for (size_t k = 0; k < pieces.size(); ++k) {
      int64_t t = ring::tag(0, static_cast<int64_t>(axis), 0, static_cast<int64_t>(k));
      if (from >= 0) {
        Task r;
        r.type = Task::Type::Recv;
        r.peer = from;
        r.tag = t;
        r.dst = pieces[k];
        have[k] = s.add(r, k > 0 && have[k - 1] >= 0 ? std::vector<int32_t>{have[k - 1]} : std::vector<int32_t>{});
      }
      for (int64_t to : {to_plus, to_minus}) {
        if (to < 0) continue;
        Task snd;
        snd.type = Task::Type::Send;
        snd.peer = to;
        snd.tag = t;
        snd.src_buf = Buffer::Output;
        snd.src = pieces[k];
        s.add(snd, have[k] >= 0 ? std::vector<int32_t>{have[k]} : std::vector<int32_t>{});
      }
    }
    holds = true;
  }
  (void)holds;
  return s;
}

class RingAlgorithm : public ICollectiveAlgorithm {
 public:
  std::vector<CollectiveKind> supports() const override {
    return {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter, CollectiveKind::AllGather,
            CollectiveKind::Broadcast};
  }
  Schedule schedule(const CollectiveRequest& req, int64_t rank) const override {
    switch (req.kind) {
      case CollectiveKind::AllReduce: return ring_all_reduce(req, rank);
      case CollectiveKind::Broadcast: return ring_broadcast(req, rank);
      default: return ring_family_schedule(req, rank, false);
    }
  }
  // Rings are the same from every rank; a broadcast depends on where its root is.
  RankSymmetry symmetry(const CollectiveRequest& req) const override {
    return req.kind == CollectiveKind::Broadcast ? RankSymmetry::None : RankSymmetry::Torus;
  }
  // A reduce-scatter: two directions over the group's blocks. An all-reduce cuts the buffer by each axis in turn.
  int64_t reduction_pieces(const CollectiveRequest& req) const override {
    return req.kind == CollectiveKind::ReduceScatter ? 2 : 0;
  }
};

PODSIM_REGISTER_COLLECTIVE(RingAlgorithm, "ring", "Bidirectional rings along one axis at a time; broadcast chains");

}  // namespace
}  // namespace podsim

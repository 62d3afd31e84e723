// "direct": every transfer goes straight to its destination chip over the torus (routing finds the way).
//  - all_to_all (the default): rank r sends block j of its input to rank j, in the order r + 1, r + 2, ..., the
//    additions per group dimension with wrap-around (mixed radix without carry), so that at each moment every rank
//    sends along the same offset on the torus and the ranks target different chips; block r of its own input is a
//    local copy. Output block i holds what rank i sent. Chunk k of the block for rank r + j has tag
//    j * chunks_per_block + k (relative to the sender, so every rank's schedule is rank 0's with peers moved by its
//    rank: RankSymmetry::Torus).
//  - collective_permute (the default): rank r sends its whole input to rank r + shift round the group (the linear
//    rank, the first axis fastest: a ring along it when it is the only one) and receives from rank r - shift. With arbitrary pairs (req.targets), rank r sends to
//    targets[r] and receives from the rank that targets it; a rank no pair targets copies zeros (its scratch) into
//    its output, XLA's result for it; a rank that targets itself keeps its input. The peers are no translation of
//    rank 0's (RankSymmetry::None): every rank has its own schedule. A transfer between slices (its ranks differ
//    along an axis of GroupShape::dcn) moves chunks of dcn_chunk_elements, one inside a slice chunk_elements.
#include <tuple>

#include "collectives/ring_steps.h"
#include "base/error.h"

namespace podsim {
namespace {

Schedule all_to_all(const CollectiveRequest& req, int64_t rank) {
  const int64_t N = req.group.size(), n = req.elements;
  if (n % N != 0)
    throw Error(Err::Internal, "all_to_all of " + std::to_string(n) + " elements over " + std::to_string(N) +
                                   " ranks: the element count must divide evenly");
  const int64_t B = n / N;
  Schedule s;
  s.output_elements = n;
  Task own;
  own.type = Task::Type::Copy;
  own.src = contiguous(rank * B, B);
  own.dst = contiguous(rank * B, B);
  s.add(own);
  for (int64_t j = 1; j < N; ++j) {
    const int64_t to = symmetric_peer(RankSymmetry::Torus, req.group, j, rank);
    const int64_t from = symmetric_peer(RankSymmetry::Torus, req.group, symmetric_peer0(RankSymmetry::Torus, req.group, 0, j), rank);
    std::vector<Region> sc = ring::chunks(contiguous(to * B, B), req.chunk_elements, req.max_chunks);
    std::vector<Region> rc = ring::chunks(contiguous(from * B, B), req.chunk_elements, req.max_chunks);
    // Tags name the destination block and the chunk: a transfer's tag is unique among all of its sender's.
    const int64_t per_block = static_cast<int64_t>(sc.size());
    for (size_t k = 0; k < sc.size(); ++k) {
      Task t;
      t.type = Task::Type::Send;
      t.peer = to;
      t.tag = j * per_block + static_cast<int64_t>(k);
      t.src = sc[k];
      s.add(t);
    }
    for (size_t k = 0; k < rc.size(); ++k) {
      Task t;
      t.type = Task::Type::Recv;
      t.peer = from;
      t.tag = j * per_block + static_cast<int64_t>(k);
      t.dst = rc[k];
      s.add(t);
    }
  }
  return s;
}

// Rank `rank`'s peers under arbitrary pairs: the rank it sends to and the one it receives from (-1: none).
std::pair<int64_t, int64_t> pair_peers(const CollectiveRequest& req, int64_t rank) {
  const int64_t N = req.group.size();
  if (static_cast<int64_t>(req.targets.size()) != N)
    throw Error(Err::Internal, "collective_permute with " + std::to_string(req.targets.size()) +
                                   " targets for a group of " + std::to_string(N));
  int64_t from = -1;
  for (int64_t r = 0; r < N; ++r)
    if (req.targets[r] == rank) {
      if (from >= 0) throw Error(Err::Internal, "collective_permute: rank " + std::to_string(rank) + " is targeted twice");
      from = r;
    }
  const int64_t to = req.targets[rank];
  if (to < -1 || to >= N) throw Error(Err::Internal, "collective_permute target " + std::to_string(to) + " out of the group");
  return {to, from};
}

// Whether a transfer between two ranks crosses slices and so moves the DCN's chunks.
bool crosses_dcn(const CollectiveRequest& req, int64_t a, int64_t b) {
  if (req.dcn_chunk_elements <= 0 || !req.group.spans_dcn()) return false;
  const std::vector<int64_t> ca = req.group.coords(a), cb = req.group.coords(b);
  for (size_t i = 0; i < ca.size(); ++i)
    if (req.group.is_dcn(i) && ca[i] != cb[i]) return true;
  return false;
}

// The chunks of a transfer of n elements between two ranks: the DCN's when they differ along an axis between
// slices, else the ICI's (with its cap on their count).
std::vector<Region> chunks_between(const CollectiveRequest& req, int64_t n, int64_t a, int64_t b) {
  if (crosses_dcn(req, a, b)) return ring::chunks(contiguous(0, n), req.dcn_chunk_elements);
  return ring::chunks(contiguous(0, n), req.chunk_elements, req.max_chunks);
}

Schedule permute(const CollectiveRequest& req, int64_t rank) {
  const GroupShape& g = req.group;
  const int64_t n = req.elements;
  Schedule s;
  s.output_elements = n;
  if (g.dims.empty() || g.size() == 1) return s;
  int64_t to = -1, from = -1;
  if (!req.targets.empty()) {
    std::tie(to, from) = pair_peers(req, rank);
    if (to == rank) to = -1;  // its own value: the output starts as a copy of the input
    if (from == rank) from = -1;
    else if (from < 0) {      // no source: zeros (the scratch) over the output
      s.scratch_elements = n;
      Task z;
      z.type = Task::Type::Copy;
      z.src_buf = Buffer::Scratch;
      z.src = contiguous(0, n);
      z.dst = contiguous(0, n);
      s.add(z);
    }
  } else {
    const int64_t N = g.size();
    to = ((rank + req.shift) % N + N) % N, from = ((rank - req.shift) % N + N) % N;
    if (to == rank) return s;  // a shift by a whole ring moves nothing
  }
  const std::vector<Region> out = to >= 0 ? chunks_between(req, n, rank, to) : std::vector<Region>{};
  const std::vector<Region> in = from >= 0 ? chunks_between(req, n, from, rank) : std::vector<Region>{};
  for (size_t k = 0; k < out.size(); ++k) {
    Task t;
    t.type = Task::Type::Send;
    t.peer = to;
    t.tag = static_cast<int64_t>(k);
    t.src = out[k];
    s.add(t);
  }
  for (size_t k = 0; k < in.size(); ++k) {
    Task t;
    t.type = Task::Type::Recv;
    t.peer = from;
    t.tag = static_cast<int64_t>(k);
    t.dst = in[k];
    s.add(t);
  }
  return s;
}

class DirectAlgorithm : public ICollectiveAlgorithm {
 public:
  std::vector<CollectiveKind> supports() const override {
    return {CollectiveKind::AllToAll, CollectiveKind::CollectivePermute};
  }
  Schedule schedule(const CollectiveRequest& req, int64_t rank) const override {
    if (req.kind == CollectiveKind::AllToAll) return all_to_all(req, rank);
    if (req.kind == CollectiveKind::CollectivePermute) return permute(req, rank);
    throw Error(Err::Internal, std::string("direct does not implement ") + collective_name(req.kind));
  }
  RankSymmetry symmetry(const CollectiveRequest& req) const override {
    if (req.kind != CollectiveKind::CollectivePermute) return RankSymmetry::Torus;
    if (!req.targets.empty()) return RankSymmetry::None;
    // A shift round a ring is a translation of it; round a group of several dimensions it moves the linear rank
    // (Cyclic), unless some of its pairs cross slices and others do not (their chunks differ).
    int spanned = 0;
    for (int64_t d : req.group.dims) spanned += d > 1;
    if (spanned <= 1) return RankSymmetry::Torus;
    if (req.group.spans_dcn() && req.dcn_chunk_elements > 0 &&
        req.dcn_chunk_elements != ring::capped_chunk(req.elements, req.chunk_elements, req.max_chunks))
      return RankSymmetry::None;
    return RankSymmetry::Cyclic;
  }
};

PODSIM_REGISTER_COLLECTIVE(DirectAlgorithm, "direct",
                           "Point-to-point: all-to-all blocks straight to their chips; permute to a shifted chip");

}  // namespace
}  // namespace podsim

// Collective schedules shared by every chip that runs the same collective: one per (algorithm, request) when the
// algorithm's ranks are symmetric (collectives/i_algorithm.h, RankSymmetry), else one per (algorithm, request,
// rank). A pod of 4096 chips running one all-reduce holds one schedule, not 4096; the groups of a data x model
// step share one per group shape and size. Each entry carries what executing it needs besides the tasks: the
// dependents of each task (compressed rows) and, per receive, its index by (peer, tag) relative to the rank.
//
//   ScheduleCache cache;
//   std::shared_ptr<const SharedSchedule> s = cache.get("torus", req, rank, /*exact=*/numeric);
//   int64_t peer = s->peer(task, rank);   // this rank's peer for the task
//
// Numeric runs ask for `exact` schedules (their regions are this rank's own); timing runs share the timing view.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "collectives/i_algorithm.h"

namespace podsim {

struct SharedSchedule {
  Schedule sched;           // rank 0's when `symmetry` is not None, else the rank's own
  RankSymmetry symmetry = RankSymmetry::None;
  GroupShape group;
  std::vector<int32_t> dep_ptr, dep_list;  // dependents of task i: dep_list[dep_ptr[i], dep_ptr[i + 1])
  // The receive of each (rank 0's peer, tag), so an arrival finds its task with one lookup in a shared table.
  struct RecvKey {
    int64_t peer0, tag;
    bool operator==(const RecvKey& o) const { return peer0 == o.peer0 && tag == o.tag; }
  };
  struct RecvKeyHash {
    size_t operator()(const RecvKey& k) const {
      return static_cast<size_t>(static_cast<uint64_t>(k.tag) * 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(k.peer0));
    }
  };
  std::unordered_map<RecvKey, int32_t, RecvKeyHash> recv_index;

  int64_t peer(const Task& t, int64_t rank) const { return symmetric_peer(symmetry, group, t.peer, rank); }
  // Group rank `peer` as rank 0 sees it, from `rank`.
  int64_t peer0(int64_t peer, int64_t rank) const { return symmetric_peer0(symmetry, group, peer, rank); }
  // The receive task for a message with `tag` from the group rank that rank 0 sees as `src0` (peer0()); -1 when
  // there is none.
  int32_t recv_task0(int64_t src0, int64_t tag) const {
    auto it = recv_index.find(RecvKey{src0, tag});
    return it == recv_index.end() ? -1 : it->second;
  }
  size_t bytes() const;  // memory held, roughly
};

class ScheduleCache {
 public:
  // The schedule of `rank` for `req` under algorithm `algo`; throws Error(Internal) for an unknown algorithm.
  std::shared_ptr<const SharedSchedule> get(const std::string& algo, const CollectiveRequest& req, int64_t rank,
                                            bool exact);
  size_t shared_entries() const { return m_shared.size(); }
  size_t built() const { return m_built; }  // schedules computed so far

 private:
  std::map<std::string, std::shared_ptr<const SharedSchedule>> m_shared;  // kept: reused by later ops too
  std::map<std::string, std::weak_ptr<const SharedSchedule>> m_own;        // per rank, while a chip runs it
  std::map<std::string, std::unique_ptr<ICollectiveAlgorithm>> m_algos;
  size_t m_built = 0;
  size_t m_live_hint = 0;
};

}  // namespace podsim

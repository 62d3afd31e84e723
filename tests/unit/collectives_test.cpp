// Every collective algorithm on many group shapes, executed in memory without timing: the right result on every
// rank (fp32, tolerance 1e-5 relative to the sum of magnitudes), every send matched, dependencies backwards, the
// same bits whatever order ready tasks run in, and the bytes each rank sends equal to the algorithm's theory.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "collectives/reference.h"
#include "collectives/ring_steps.h"

using namespace podsim;

namespace {

const std::vector<std::vector<int64_t>> kShapes = {{2}, {3}, {4}, {8}, {2, 2}, {4, 4}, {3, 5}, {2, 2, 2}, {4, 2, 3}};

std::vector<std::vector<float>> random_inputs(int64_t ranks, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<std::vector<float>> in(static_cast<size_t>(ranks), std::vector<float>(static_cast<size_t>(n)));
  for (auto& v : in)
    for (float& x : v) x = u(rng);
  return in;
}

CollectiveRequest request(CollectiveKind k, const std::vector<int64_t>& dims, int64_t n, int64_t chunk) {
  CollectiveRequest r;
  r.kind = k;
  r.group.dims = dims;
  r.group.wrap.assign(dims.size(), true);
  r.elements = n;
  r.chunk_elements = chunk;
  r.root = 0;
  r.shift = 1;
  return r;
}

// Elements per rank that every kind accepts on this shape: a multiple of size * (parts) * 3.
int64_t elements_for(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (auto d : dims) n *= d;
  return n * 12;
}

void check(const std::string& algo_name, CollectiveKind kind, const std::vector<int64_t>& dims, int64_t chunk) {
  SCOPED_TRACE(algo_name + " " + collective_name(kind) + " chunk " + std::to_string(chunk) + " dims " +
               std::to_string(dims.size()));
  auto algo = CollectiveRegistry::instance().make(algo_name);
  int64_t n = elements_for(dims);
  CollectiveRequest req = request(kind, dims, n, chunk);
  if (kind == CollectiveKind::Broadcast) req.root = req.group.size() - 1;
  auto in = random_inputs(req.group.size(), n, 7);
  ExecutionResult fwd = execute_schedules(*algo, req, in, false);
  ASSERT_EQ(fwd.problem, "");
  ExecutionResult rev = execute_schedules(*algo, req, in, true);
  ASSERT_EQ(rev.problem, "");
  auto want = expected_result(req, in);
  double scale = static_cast<double>(req.group.size());
  for (size_t r = 0; r < want.size(); ++r) {
    ASSERT_EQ(fwd.outputs[r].size(), want[r].size()) << "rank " << r;
    for (size_t i = 0; i < want[r].size(); ++i)
      ASSERT_NEAR(fwd.outputs[r][i], want[r][i], 1e-5 * scale) << "rank " << r << " element " << i;
    EXPECT_EQ(fwd.outputs[r], rev.outputs[r]) << "rank " << r << ": result depends on task order";
  }
}

double bytes_per_rank(const std::string& algo_name, CollectiveKind kind, const std::vector<int64_t>& dims, int64_t n) {
  auto algo = CollectiveRegistry::instance().make(algo_name);
  CollectiveRequest req = request(kind, dims, n, 0);
  req.elem_bytes = 4;
  ExecutionResult r = execute_schedules(*algo, req, random_inputs(req.group.size(), n, 1));
  EXPECT_EQ(r.problem, "");
  return r.bytes / static_cast<double>(req.group.size());
}

}  // namespace

TEST(CollectivesTest, EveryAlgorithmEveryKindEveryShape) {
  int checked = 0;
  for (const auto* e : CollectiveRegistry::instance().entries()) {
    for (CollectiveKind k : e->make()->supports()) {
      for (const auto& dims : kShapes) {
        for (int64_t chunk : {0, 5}) {
          check(e->name, k, dims, chunk);
          ++checked;
        }
      }
    }
  }
  EXPECT_GE(checked, 9 * 2 * 9);
}

TEST(CollectivesTest, DefaultsAreRegisteredAndSupportTheirCollective) {
  for (CollectiveKind k : all_collectives()) {
    auto algo = CollectiveRegistry::instance().make(default_algorithm(k));
    ASSERT_NE(algo, nullptr) << collective_name(k);
    auto s = algo->supports();
    EXPECT_NE(std::find(s.begin(), s.end(), k), s.end()) << collective_name(k);
  }
}

TEST(CollectivesTest, RingAllReduceSendsTwiceTheBufferLessOneShare) {
  // Bidirectional ring on one axis of n: 2 (n - 1) / n of the buffer per rank.
  for (int64_t d : {2, 4, 8}) {
    int64_t n = 4096;
    EXPECT_DOUBLE_EQ(bytes_per_rank("ring", CollectiveKind::AllReduce, {d}, n), 2.0 * (d - 1) / d * n * 4) << d;
    EXPECT_DOUBLE_EQ(bytes_per_rank("torus", CollectiveKind::AllReduce, {d}, n), 2.0 * (d - 1) / d * n * 4) << d;
  }
}

TEST(CollectivesTest, TorusMovesTheOptimalVolumeOnSeveralAxes) {
  const int64_t n = 4 * 4 * 4 * 96;
  // Reduce-scatter then all-gather over the whole group: 2 (1 - 1/N) of the buffer per rank.
  EXPECT_DOUBLE_EQ(bytes_per_rank("torus", CollectiveKind::AllReduce, {4, 4}, n), 2.0 * (1 - 1.0 / 16) * n * 4);
  EXPECT_DOUBLE_EQ(bytes_per_rank("torus", CollectiveKind::ReduceScatter, {4, 4, 4}, n), (1 - 1.0 / 64) * n * 4);
  EXPECT_DOUBLE_EQ(bytes_per_rank("torus", CollectiveKind::AllGather, {4, 4}, n), 15.0 * n * 4);
  // The ring baseline all-reduces the whole buffer along each axis in turn.
  EXPECT_DOUBLE_EQ(bytes_per_rank("ring", CollectiveKind::AllReduce, {4, 4}, n), 2 * 2.0 * (3.0 / 4) * n * 4);
}

TEST(CollectivesTest, AllToAllSendsEveryOtherBlockOnce) {
  const int64_t n = 8 * 64;
  EXPECT_DOUBLE_EQ(bytes_per_rank("direct", CollectiveKind::AllToAll, {8}, n), 7.0 / 8 * n * 4);
}

TEST(CollectivesTest, ChunkedRingsPipelinePerChunk) {
  // With chunks, a ring step's send of chunk c waits only for chunk c of the previous step (its receive, and the
  // lane's previous send).
  auto algo = CollectiveRegistry::instance().make("torus");
  CollectiveRequest req = request(CollectiveKind::AllReduce, {4}, 4 * 2 * 40, 10);
  Schedule s = algo->schedule(req, 0);
  int lane_local_sends = 0, sends = 0;
  for (const Task& t : s.tasks) {
    if (t.type != Task::Type::Send) continue;
    ++sends;
    lane_local_sends += t.dep_count <= 2;
    EXPECT_LE(t.src.elements(), 10);
  }
  EXPECT_GT(sends, 0);
  EXPECT_GE(lane_local_sends, sends / 2);
}

TEST(CollectivesTest, ScheduleSizeGrowsWithStepsAndChunksNotGroupSquared) {
  auto algo = CollectiveRegistry::instance().make("torus");
  CollectiveRequest req = request(CollectiveKind::AllReduce, {32, 32}, int64_t{1} << 28, int64_t{1} << 18);
  Schedule s = algo->schedule(req, 123);
  // 4 parts x (RS + AG on x and y: 4 x 31 steps) x up to 64 chunks x (send + recv), far below 1024^2.
  EXPECT_LE(s.tasks.size(), 4u * 4 * 31 * 64 * 2);
  EXPECT_GT(s.tasks.size(), 4u * 4 * 31 * 2);
}

TEST(CollectivesTest, BlockSetsOfThreeAxesAreTwoLevelRegions) {
  GroupShape g;
  g.dims = {2, 3, 4};
  ring::Layout l(g, 0, 10, 2, Buffer::Output);
  // Fix y: runs of 2 blocks (x free) repeated over z; with 2 pieces per block, each run is strided itself.
  Region r = ring::block_set(l, 1, {-1, 1, -1});
  EXPECT_EQ(r.offset, 2 * 10 + 5);
  EXPECT_EQ(r.block, 5);
  EXPECT_EQ(r.stride, 10);
  EXPECT_EQ(r.count, 2);
  EXPECT_EQ(r.stride2, 6 * 10);
  EXPECT_EQ(r.count2, 4);
  EXPECT_EQ(r.elements(), 5 * 2 * 4);
}

TEST(CollectivesTest, ExecutorReportsUnmatchedTransfers) {
  // A hand-made schedule: rank 0 waits for a message rank 1 never sends.
  struct Lonely : ICollectiveAlgorithm {
    std::vector<CollectiveKind> supports() const override { return {CollectiveKind::AllReduce}; }
    Schedule schedule(const CollectiveRequest& req, int64_t rank) const override {
      Schedule s;
      s.output_elements = req.elements;
      if (rank == 0) {
        Task t;
        t.type = Task::Type::Recv;
        t.peer = 1;
        t.dst = contiguous(0, 1);
        s.add(t);
      }
      return s;
    }
  } lonely;
  CollectiveRequest req = request(CollectiveKind::AllReduce, {2}, 4, 0);
  ExecutionResult r = execute_schedules(lonely, req, random_inputs(2, 4, 1));
  EXPECT_NE(r.problem.find("a receive without its send"), std::string::npos) << r.problem;
}

// The timing view a pod shares (hw/chip/schedule_cache.h): rank 0's schedule with peers moved by the algorithm's
// RankSymmetry. Executed for every rank, it must pair every send with a receive of the same size and run to the
// end (no deadlock); its traffic must equal that of the ranks' own schedules.
TEST(CollectivesTest, SharedTimingViewsAreCompleteSchedules) {
  struct SharedView : ICollectiveAlgorithm {
    const ICollectiveAlgorithm* inner = nullptr;
    std::vector<CollectiveKind> supports() const override { return inner->supports(); }
    Schedule schedule(const CollectiveRequest& req, int64_t rank) const override {
      Schedule s = inner->schedule(req, 0);
      for (Task& t : s.tasks)
        if (t.type != Task::Type::Copy) t.peer = symmetric_peer(inner->symmetry(req), req.group, t.peer, rank);
      return s;
    }
  };
  int shared = 0;
  for (const std::string& name : CollectiveRegistry::instance().names()) {
    auto algo = CollectiveRegistry::instance().make(name);
    SharedView view;
    view.inner = algo.get();
    for (CollectiveKind kind : algo->supports())
      for (const auto& dims : kShapes)
        for (int64_t chunk : {int64_t{0}, int64_t{5}}) {
          CollectiveRequest req = request(kind, dims, elements_for(dims), chunk);
          if (algo->symmetry(req) == RankSymmetry::None) continue;
          ++shared;
          SCOPED_TRACE(name + " " + collective_name(kind) + " chunk " + std::to_string(chunk) + " dims " +
                       std::to_string(dims.size()) + " size " + std::to_string(req.group.size()));
          auto in = random_inputs(req.group.size(), req.elements, 3);
          ExecutionResult own = execute_schedules(*algo, req, in), mine = execute_schedules(view, req, in);
          EXPECT_EQ(mine.problem, "");
          EXPECT_EQ(mine.messages, own.messages);
          EXPECT_EQ(mine.bytes, own.bytes);
        }
  }
  EXPECT_GE(shared, 3 * 2 * static_cast<int>(kShapes.size()));  // torus and ring (3 kinds), direct (2)
}

TEST(CollectivesTest, SymmetricPeersMoveByTheRank) {
  GroupShape g;
  g.dims = {4, 3};
  g.wrap = {true, true};
  // Rank 5 = (1, 1); rank 0's peer (3, 0) = 3 moves to (0, 1) = 4 on the torus; cyclically to 8.
  EXPECT_EQ(symmetric_peer(RankSymmetry::Torus, g, 3, 5), 4);
  EXPECT_EQ(symmetric_peer(RankSymmetry::Cyclic, g, 3, 5), 8);
  EXPECT_EQ(symmetric_peer(RankSymmetry::Cyclic, g, 11, 5), 4);
  EXPECT_EQ(symmetric_peer(RankSymmetry::None, g, 3, 5), 3);
}

namespace {

// Elements rank `rank` sends to peers in other slices (its group coordinates differ along a DCN axis) and in its
// own, under `algo`'s schedule.
std::pair<double, double> dcn_and_ici_elements(const std::string& algo_name, const CollectiveRequest& req,
                                               int64_t rank) {
  auto algo = CollectiveRegistry::instance().make(algo_name);
  Schedule s = algo->schedule(req, rank);
  const std::vector<int64_t> me = req.group.coords(rank);
  double dcn = 0, ici = 0;
  for (const Task& t : s.tasks) {
    if (t.type != Task::Type::Send) continue;
    const std::vector<int64_t> peer = req.group.coords(t.peer);
    bool across = false;
    for (size_t a = 0; a < me.size(); ++a) across = across || (req.group.is_dcn(a) && peer[a] != me[a]);
    (across ? dcn : ici) += static_cast<double>(t.src.elements());
  }
  return {dcn, ici};
}

}  // namespace

// A group that spans slices (a DCN axis) still gives every rank the right result, for every kind the ring family
// runs and whichever axis is the DCN one.
TEST(CollectivesTest, HierarchicalGroupsGiveTheRightResult) {
  for (const char* algo_name : {"torus", "ring"}) {
    auto algo = CollectiveRegistry::instance().make(algo_name);
    for (CollectiveKind k : {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter, CollectiveKind::AllGather}) {
      for (const auto& [dims, dcn] : std::vector<std::pair<std::vector<int64_t>, std::vector<bool>>>{
               {{4, 3}, {false, true}}, {{2, 2, 2}, {false, false, true}}, {{3, 4}, {true, false}}}) {
        for (int64_t chunk : {0, 5}) {
          SCOPED_TRACE(std::string(algo_name) + " " + collective_name(k) + " chunk " + std::to_string(chunk));
          CollectiveRequest req = request(k, dims, elements_for(dims), chunk);
          req.group.dcn = dcn;
          req.dcn_chunk_elements = chunk > 0 ? 7 : 0;
          auto in = random_inputs(req.group.size(), req.elements, 11);
          ExecutionResult fwd = execute_schedules(*algo, req, in, false);
          ASSERT_EQ(fwd.problem, "");
          ExecutionResult rev = execute_schedules(*algo, req, in, true);
          ASSERT_EQ(rev.problem, "");
          auto want = expected_result(req, in);
          for (size_t r = 0; r < want.size(); ++r) {
            ASSERT_EQ(fwd.outputs[r].size(), want[r].size());
            for (size_t i = 0; i < want[r].size(); ++i)
              ASSERT_NEAR(fwd.outputs[r][i], want[r][i], 1e-5 * static_cast<double>(req.group.size()));
            EXPECT_EQ(fwd.outputs[r], rev.outputs[r]);
          }
        }
      }
    }
  }
}

// XLA's hierarchical collectives over slices: only the 1/n shard of the slice's n chips crosses the DCN. On a group of
// X = 4 chips per slice and S = 3 slices, n elements per rank: an all-reduce sends 2 (S - 1) / S x n / X over the DCN
// (reduce-scatter inside, all-reduce of the shards across, all-gather inside), a reduce-scatter (S - 1) / S x n / X,
// an all-gather (S - 1) x n (its own input, gathered across slices first); the ICI carries the rest as a torus
// collective inside the slice would. Flat (the DCN axis an ordinary one) the DCN would carry X times more.
TEST(CollectivesTest, HierarchicalCollectivesSendTheShardOverTheDcn) {
  const double X = 4, S = 3;
  const int64_t n = 4 * 3 * 8 * 5;
  for (int64_t rank : {0, 5, 11}) {
    CollectiveRequest ar = request(CollectiveKind::AllReduce, {4, 3}, n, 0);
    ar.group.dcn = {false, true};
    auto [dcn, ici] = dcn_and_ici_elements("torus", ar, rank);
    EXPECT_DOUBLE_EQ(dcn, 2 * (S - 1) / S * n / X) << rank;
    EXPECT_DOUBLE_EQ(ici, 2 * (X - 1) / X * n) << rank;
    CollectiveRequest rs = request(CollectiveKind::ReduceScatter, {4, 3}, n, 0);
    rs.group.dcn = {false, true};
    EXPECT_DOUBLE_EQ(dcn_and_ici_elements("torus", rs, rank).first, (S - 1) / S * n / X) << rank;
    CollectiveRequest ag = request(CollectiveKind::AllGather, {4, 3}, n, 0);
    ag.group.dcn = {false, true};
    auto [ag_dcn, ag_ici] = dcn_and_ici_elements("torus", ag, rank);
    EXPECT_DOUBLE_EQ(ag_dcn, (S - 1) * n) << rank;
    EXPECT_DOUBLE_EQ(ag_ici, (X - 1) * S * n) << rank;
  }
  // Without the DCN flag half the parts start on the slow axis (rotated orders): more than the shard crosses.
  CollectiveRequest flat = request(CollectiveKind::AllReduce, {4, 3}, n, 0);
  CollectiveRequest tagged = flat;
  tagged.group.dcn = {false, true};
  flat.group.dcn = {false, false};
  auto algo = CollectiveRegistry::instance().make("torus");
  Schedule s = algo->schedule(flat, 0);
  double along_slices = 0;
  for (const Task& t : s.tasks)
    if (t.type == Task::Type::Send && flat.group.coords(t.peer)[1] != 0) along_slices += t.src.elements();
  EXPECT_GT(along_slices, 1.5 * dcn_and_ici_elements("torus", tagged, 0).first);
}

// Over the DCN axis the phases move chunks of dcn_chunk_elements, inside the slice chunks of chunk_elements.
TEST(CollectivesTest, DcnPhasesUseTheirOwnChunk) {
  CollectiveRequest req = request(CollectiveKind::AllReduce, {4, 2}, 4 * 2 * 4 * 100, 10);
  req.group.dcn = {false, true};
  req.dcn_chunk_elements = 40;
  auto algo = CollectiveRegistry::instance().make("torus");
  Schedule s = algo->schedule(req, 0);
  int64_t biggest_dcn = 0, biggest_ici = 0;
  for (const Task& t : s.tasks) {
    if (t.type != Task::Type::Send) continue;
    int64_t& b = req.group.coords(t.peer)[1] != 0 ? biggest_dcn : biggest_ici;
    b = std::max(b, t.src.elements());
  }
  EXPECT_EQ(biggest_ici, 10);
  EXPECT_EQ(biggest_dcn, 40);
}

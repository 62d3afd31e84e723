// hardware.ici.max_chunks, the simulation granularity of large transfers (docs/model.md, "Simulation granularity"):
// the chunk size by hand, the chunks of a region and of a torus all-gather's schedule counted by hand, a small
// collective's schedule unchanged, and the parameter's validation.
#include <gtest/gtest.h>

#include "collectives/ring_steps.h"
#include "tests/unit/load_errors.h"

using namespace podsim;

namespace {

CollectiveRequest all_gather(int64_t n, int64_t chunk, int64_t max_chunks) {
  CollectiveRequest r;
  r.kind = CollectiveKind::AllGather;
  r.group.dims = {4, 8, 4};
  r.group.wrap = {true, true, false};
  r.elements = n;
  r.chunk_elements = chunk;
  r.max_chunks = max_chunks;
  return r;
}

int64_t sends(const Schedule& s) {
  int64_t k = 0;
  for (const Task& t : s.tasks) k += t.type == Task::Type::Send;
  return k;
}

}  // namespace

// Up to max_chunks chunks' worth the chunk stays; beyond, it is 1/max_chunks of the transfer, rounded up.
TEST(GranularityTest, ChunkSizeGrowsWithTheTransferBeyondMaxChunks) {
  EXPECT_EQ(ring::capped_chunk(800, 100, 8), 100);
  EXPECT_EQ(ring::capped_chunk(801, 100, 8), 101);
  EXPECT_EQ(ring::capped_chunk(3200, 100, 8), 400);
  EXPECT_EQ(ring::capped_chunk(3200, 100, 0), 100);  // 0: no cap
  EXPECT_EQ(ring::chunks(contiguous(0, 3200), 100, 8).size(), 8u);
  EXPECT_EQ(ring::chunks(contiguous(0, 3200), 100, 0).size(), 32u);
  // 32 strided blocks of 58 (a torus set of pieces under one chunk each): one chunk per block, or 8 chunks of 4
  // blocks when the chunk is 1856 / 8 = 232 elements.
  Region r{0, 58, 348, 32, 0, 1};
  r.stride2 = r.count * r.stride;
  EXPECT_EQ(ring::chunks(r, 100, 0).size(), 32u);
  const std::vector<Region> c = ring::chunks(r, 100, 8);
  ASSERT_EQ(c.size(), 8u);
  for (const Region& x : c) EXPECT_EQ(x.elements(), 4 * 58);
}

// A torus all-gather on 4 x 8 x 4 cuts each rank's shard into 6 pieces, one per part; a part's phases send 1, then
// n1, then n1 * n2 pieces per step over n - 1 steps of each axis in its order (x, y, z), (y, z, x), (z, x, y).
// Pieces of 58 elements with chunks of 100 travel one per chunk: 127 sends per part, 762 in all. With max_chunks 8
// a step of 32 pieces (1856 elements) or 16 (928) moves in 8 chunks; steps of up to 8 pieces (464 <= 800) keep
// theirs: (3 + 7*4 + 3*8) + (7 + 3*8 + 3*8) + (3 + 3*4 + 7*8) = 55 + 55 + 71 per direction, 362 in all.
TEST(GranularityTest, LargeAllGatherMovesTheHandCountedChunks) {
  std::unique_ptr<ICollectiveAlgorithm> torus = CollectiveRegistry::instance().make("torus");
  ASSERT_TRUE(torus);
  EXPECT_EQ(sends(torus->schedule(all_gather(6 * 58, 100, 0), 0)), 762);
  EXPECT_EQ(sends(torus->schedule(all_gather(6 * 58, 100, 8), 0)), 362);
}

// Pieces of 10: no step moves more than 32 * 10 = 320 <= 8 * 100 elements, so the schedule is the same task for task.
// Ten pieces share a chunk: (3 + 7 + 3*4) + (7 + 3 + 3*4) + (3 + 3 + 7*2) = 22 + 22 + 20 sends per direction.
TEST(GranularityTest, SmallAllGatherScheduleIsUnchanged) {
  std::unique_ptr<ICollectiveAlgorithm> algo = CollectiveRegistry::instance().make("torus");
  const Schedule a = algo->schedule(all_gather(60, 100, 0), 5), b = algo->schedule(all_gather(60, 100, 8), 5);
  ASSERT_EQ(a.tasks.size(), b.tasks.size());
  EXPECT_EQ(sends(a), 128);
  for (size_t i = 0; i < a.tasks.size(); ++i) {
    EXPECT_EQ(a.tasks[i].src.offset, b.tasks[i].src.offset);
    EXPECT_EQ(a.tasks[i].src.elements(), b.tasks[i].src.elements());
    EXPECT_EQ(a.tasks[i].dst.offset, b.tasks[i].dst.offset);
    EXPECT_EQ(a.tasks[i].dst.elements(), b.tasks[i].dst.elements());
    EXPECT_EQ(a.tasks[i].tag, b.tasks[i].tag);
  }
}

TEST(GranularityTest, NegativeMaxChunksIsRejectedWhereWritten) {
  const Error e = load_failure("hardware:\n  preset: tpu-v3\n  ici: {max_chunks: -1}\n"
                               "workload: {model: matmul, m: 1, k: 1, n: 1}\n");
  expect_at(e, Err::OutOfRange, 3, "hardware.ici.max_chunks = -1 is out of range");
}

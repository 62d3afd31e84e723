// Imported modules on several slices (docs/hlo.md): the module's device ids run over the chips of each slice, the
// slices outermost (device id = in-slice id + chips per slice x slice); collectives whose groups span slices take
// the data-center network, hierarchically; collective-permutes whose pairs cross slices run as point-to-point
// transfers over the DCN path (host link, the host's NICs shared by its chips, the network, the peer's NICs and host
// link). Checked by hand on TPU v5e (docs/model.md's formula for one chunk, the NICs shared by a host's four chips,
// 2 (S - 1) / S of an all-reduce's shard over the DCN), numeric mode's results, the direct algorithm's schedules,
// and the errors.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "base/npy.h"
#include "collectives/reference.h"
#include "tests/cli/cli_util.h"

using namespace podsim;
using namespace podsim::test;
using json = nlohmann::json;

namespace {

constexpr double kMiB = 1 << 20;
// TPU v5e (configs/hardware/tpu-v5e.yaml): host link 15 GB/s and 1 us per way, NICs 25 GB/s per host, the
// network's 10 us; HBM with the losses off (819 GB/s, 500 ns).
constexpr double kHost = 15e9, kHostLatency = 1e-6, kNic = 25e9, kDcnLatency = 10e-6;
constexpr double kHbm = 819e9, kHbmLatency = 500e-9, kClock = 1 / 1.5e9;

const char* kAdd =
    "%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
    "  ROOT %s = f32[] add(%a, %b)\n}\n";

// A module on 8 devices: `body` after the entry's parameter %x of `type`.
std::string module(const std::string& type, const std::string& body, const std::string& sharding = "") {
  return "HloModule m, num_partitions=8\n" + std::string(kAdd) + "ENTRY %e (x: " + type + ") -> " + type + " {\n" +
         "  %x = " + type + " parameter(0)" + sharding + "\n" + body + "}\n";
}

std::string permute(const std::string& pairs, const std::string& type = "f32[262144]") {
  return module(type, "  ROOT %y = " + type + " collective-permute(%x), channel_id=1, source_target_pairs=" + pairs + "\n");
}

const std::string kRing = "{{0,1},{1,2},{2,3},{3,4},{4,5},{5,6},{6,7},{7,0}}";
const std::string kReversed = "{{0,7},{7,0},{1,6},{6,1},{2,5},{5,2},{3,4},{4,3}}";  // no shift: a table of targets

// Two slices of 2 x 2 v5e chips (one host of four chips each).
const std::string kTwoSlices =
    "hardware:\n  preset: tpu-v5e\n  pod: {dims: [2, 2]}\n  slices: 2\n"
    "  chip: {hbm: {refresh_interval: 0s, cas: 0s, rcd: 0s, read_to_write: 0s, write_to_read: 0s}}\n";

CliResult run(const std::string& name, const std::string& text, const std::string& hardware = kTwoSlices,
              const std::string& extra = "") {
  write_file(name + ".hlo", text);
  const std::string exp =
      write_file(name + ".yaml", hardware + "workload:\n  model: hlo\n  module: " + name + ".hlo\n" + extra);
  return run_podsim({"run", exp, "--out", test_dir() + "/" + name, "--force"});
}

json summary(const std::string& name, const std::string& text, const std::string& hardware = kTwoSlices,
             const std::string& extra = "") {
  CliResult r = run(name, text, hardware, extra);
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(read_file(test_dir() + "/" + name + "/summary.json"));
}

std::vector<double> doubles(const json& j) { return j.get<std::vector<double>>(); }

}  // namespace

// A ring over the 8 devices of both slices: device 3 (chip 3, slice 0) sends to device 4 (chip 4, slice 1) and 7 to 0
// over the DCN; the other six pairs stay inside their slice, on the ICI (0 -> 1, 2 -> 3, 4 -> 5, 6 -> 7 one hop,
// 1 -> 2 and 5 -> 6 two, x then y: 8 MiB over the links). 1 MiB is one DCN chunk (16 MiB): it
// crosses the sender's host link, the NICs (no other chip of the host sends across), the network, the peer's NICs
// and host link, and is written to HBM:
//   B / host + latency_host + B / nic + latency_dcn + B / host + latency_host + B / HBM + latency_HBM = 195.5 us,
// the step (the ICI pairs take a few tens of us).
TEST(HloDcnTest, ARingOverTwoSlicesCrossesTheDcnWhereItLeavesASlice) {
  const json s = summary("ring", permute(kRing));
  const double B = kMiB;
  const double t = B / kHost + kHostLatency + B / kNic + kDcnLatency + B / kHost + kHostLatency + B / kHbm + kHbmLatency;
  EXPECT_NEAR(s["step_time_s"].get<double>(), t, 3 * kClock);
  EXPECT_EQ(doubles(s["dcn"]["per_chip_bytes"]), (std::vector<double>{0, 0, 0, B, 0, 0, 0, B}));
  EXPECT_EQ(doubles(s["dcn"]["per_host"]["bytes_out"]), (std::vector<double>{B, B}));
  EXPECT_EQ(doubles(s["dcn"]["per_host"]["bytes_in"]), (std::vector<double>{B, B}));
  EXPECT_DOUBLE_EQ(s["ici"]["bytes"].get<double>(), 8 * B);
  EXPECT_EQ(s["collectives"][0]["group"], "ring of 2 on x x ring of 2 on y x ring of 2 on slices");
  EXPECT_EQ(s["collectives"][0]["dcn"], true);
}

// Device d to device 7 - d: every pair crosses the slices, so the four chips of each host send 1 MiB at once and
// share its NICs. Their chunks reach host memory together (B / host + latency_host), the NICs pass them one after
// another (4 B / nic), and the last one then takes the network, the peer's host link and HBM:
//   B / host + latency_host + 4 B / nic + latency_dcn + B / host + latency_host + B / HBM + latency_HBM = 321.4 us.
TEST(HloDcnTest, PairsAcrossTheSlicesShareEachHostsNics) {
  const json s = summary("reversed", permute(kReversed));
  const double B = kMiB;
  const double t =
      B / kHost + kHostLatency + 4 * B / kNic + kDcnLatency + B / kHost + kHostLatency + B / kHbm + kHbmLatency;
  EXPECT_NEAR(s["step_time_s"].get<double>(), t, 3 * kClock);
  EXPECT_EQ(doubles(s["dcn"]["per_chip_bytes"]), std::vector<double>(8, B));
  EXPECT_EQ(doubles(s["dcn"]["per_host"]["bytes_out"]), (std::vector<double>{4 * B, 4 * B}));
  EXPECT_EQ(doubles(s["dcn"]["per_host"]["bytes_in"]), (std::vector<double>{4 * B, 4 * B}));
  EXPECT_DOUBLE_EQ(s["dcn"]["max_bytes_per_host"].get<double>(), 4 * B);
  EXPECT_DOUBLE_EQ(s["ici"]["bytes"].get<double>(), 0);
}

// An all-reduce of V = 4 MiB per device over all 8 devices runs hierarchically: reduce-scatter inside each slice
// (N = 4 chips), all-reduce of the V / N shard between the S = 2 slices, all-gather inside: each chip sends
// 2 (S - 1) / S x V / N = 1 MiB over the DCN, a host 4 MiB. Over the slices alone (groups {d, d + 4}) each chip
// sends 2 (S - 1) / S x V = 4 MiB.
TEST(HloDcnTest, AnAllReduceOverBothSlicesSendsItsShardOverTheDcn) {
  const double V = 4 * kMiB, S = 2, N = 4;
  auto all_reduce = [](const std::string& groups) {
    return module("f32[1048576]", "  ROOT %y = f32[1048576] all-reduce(%x), channel_id=1, replica_groups=" + groups +
                                      ", use_global_device_ids=true, to_apply=%add\n");
  };
  const json all = summary("all", all_reduce("{{0,1,2,3,4,5,6,7}}"));
  EXPECT_DOUBLE_EQ(all["dcn"]["max_bytes_per_chip"].get<double>(), 2 * (S - 1) / S * V / N);
  EXPECT_EQ(doubles(all["dcn"]["per_chip_bytes"]), std::vector<double>(8, 2 * (S - 1) / S * V / N));
  EXPECT_DOUBLE_EQ(all["dcn"]["max_bytes_per_host"].get<double>(), N * 2 * (S - 1) / S * V / N);
  EXPECT_EQ(all["collectives"][0]["group"], "ring of 2 on x x ring of 2 on y x ring of 2 on slices");
  const json across = summary("across", all_reduce("{{0,4},{1,5},{2,6},{3,7}}"));
  EXPECT_EQ(doubles(across["dcn"]["per_chip_bytes"]), std::vector<double>(8, 2 * (S - 1) / S * V));
  EXPECT_EQ(across["collectives"][0]["group"], "ring of 2 on slices");
  EXPECT_DOUBLE_EQ(across["ici"]["bytes"].get<double>(), 0);
}

// Numeric mode: x (f32[8, 8], a row per device) moves as the pairs say; chip 0 (device 0, the result chip) gets
// device 7's row from the other slice under the ring, and device 5's under the involution d <-> d xor 5. On 4
// slices of 2 chips, whose mesh has two axes across the slices (the groups {d, d + 2} and {d, d + 4}), and on one
// slice of 4 x 2, the ring still brings device 7's row.
TEST(HloDcnTest, NumericModeMovesTheRealRowsAcrossTheSlices) {
  const std::string type = "f32[1,8]", shard = ", sharding={devices=[8,1]0,1,2,3,4,5,6,7}";
  const std::string run_numeric = "run: {numeric: true, seed: 3}\n";
  auto row_at_chip0 = [&](const std::string& name, const std::string& text, const std::string& hw, int64_t row) {
    CliResult r = run(name, text, hw, run_numeric);
    ASSERT_EQ(r.code, 0) << r.err;
    std::vector<int64_t> shape;
    std::vector<float> x, y;
    read_npy(test_dir() + "/" + name + "/tensors/x.npy", shape, x);
    ASSERT_EQ(shape, (std::vector<int64_t>{8, 8}));
    read_npy(test_dir() + "/" + name + "/tensors/y.npy", shape, y);
    ASSERT_EQ(y.size(), 8u);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], x[row * 8 + i]) << name << " " << i;
  };
  const std::string ring = "  ROOT %y = " + type + " collective-permute(%x), channel_id=1, source_target_pairs=" + kRing + "\n";
  row_at_chip0("n_ring", module(type, ring, shard), kTwoSlices, 7);
  row_at_chip0("n_xor5",
               module(type, "  ROOT %y = " + type + " collective-permute(%x), channel_id=1, source_target_pairs="
                                "{{0,5},{5,0},{1,4},{4,1},{2,7},{7,2},{3,6},{6,3}}\n", shard),
               kTwoSlices, 5);
  const std::string groups =
      "  %a = " + type + " all-reduce(%x), channel_id=2, replica_groups={{0,2},{1,3},{4,6},{5,7}}, "
      "use_global_device_ids=true, to_apply=%add\n  %b = " + type + " all-reduce(%a), channel_id=3, "
      "replica_groups={{0,4},{1,5},{2,6},{3,7}}, use_global_device_ids=true, to_apply=%add\n";
  row_at_chip0("n_four", module(type, groups + ring, shard),
               "hardware: {preset: tpu-v5e, pod: {dims: [2, 1]}, slices: 4}\n", 7);
  // One slice whose mesh axis of 8 lies on x and y (4 x 2): the ring runs round all 8, not round x alone.
  row_at_chip0("n_one", module(type, ring, shard), "hardware: {preset: tpu-v4, pod: {dims: [4, 2, 1]}}\n", 7);
}

// The direct algorithm's collective-permute: a shift runs round the group's linear rank (over a group of two
// dimensions, rank 3 of 2 x 2 x 2 sends to rank 4 in the next slice), and a transfer between slices moves chunks
// of hardware.dcn.chunk while one inside a slice keeps the ICI's.
TEST(HloDcnTest, TheDirectPermuteShiftsTheLinearRankAndChunksEachTransferByItsPath) {
  std::unique_ptr<ICollectiveAlgorithm> direct = CollectiveRegistry::instance().make("direct");
  ASSERT_TRUE(direct);
  CollectiveRequest req;
  req.kind = CollectiveKind::CollectivePermute;
  req.group.dims = {2, 2, 2};
  req.group.wrap = {true, true, true};
  req.group.dcn = {false, false, true};
  req.elements = 8;
  req.chunk_elements = 2;      // inside a slice: four chunks
  req.dcn_chunk_elements = 8;  // between slices: one
  auto sends = [&](int64_t rank) {
    std::vector<std::pair<int64_t, int64_t>> out;  // (peer, elements)
    for (const Task& t : direct->schedule(req, rank).tasks)
      if (t.type == Task::Type::Send) out.push_back({t.peer, t.src.elements()});
    return out;
  };
  EXPECT_EQ(sends(0), (std::vector<std::pair<int64_t, int64_t>>(4, {1, 2})));
  EXPECT_EQ(sends(3), (std::vector<std::pair<int64_t, int64_t>>{{4, 8}}));
  EXPECT_EQ(direct->symmetry(req), RankSymmetry::None);  // ranks' chunks differ
  std::vector<std::vector<float>> in;
  for (int r = 0; r < 8; ++r) in.push_back(std::vector<float>(8, static_cast<float>(r + 1)));
  ExecutionResult res = execute_schedules(*direct, req, in);
  ASSERT_EQ(res.problem, "");
  for (int r = 0; r < 8; ++r) EXPECT_EQ(res.outputs[r], std::vector<float>(8, static_cast<float>((r + 7) % 8 + 1))) << r;
  EXPECT_EQ(res.messages, 6 * 4 + 2);  // six transfers inside the slices of four chunks, two between them of one
  const std::vector<std::vector<double>> want = expected_result(req, in);
  for (int r = 0; r < 8; ++r) EXPECT_DOUBLE_EQ(want[r][0], (r + 7) % 8 + 1) << r;
  req.group.dcn.clear();  // one slice: a shift of the linear rank is the same for every rank
  EXPECT_EQ(direct->symmetry(req), RankSymmetry::Cyclic);
}

// A module whose devices are not the pod's chips over every slice is refused at hardware.pod.dims with what would
// do, and the hint runs as written.
TEST(HloDcnTest, AModuleThatDoesNotFillTheSlicesIsRefusedWithAHintThatRuns) {
  const std::string four = "hardware:\n  preset: tpu-v5e\n  pod: {dims: [2, 2]}\n  slices: 4\n";
  CliResult r = run("four", permute(kRing), four);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("four.yaml:3:15: error PODSIM-HLO-006: the module runs on 8 devices (from its header and "
                       "collectives) but the pod has 16 chips (4 slices of 4); set hardware.pod.dims to 2 chips (one "
                       "slice's), or hardware.slices to 2"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(run("four_fixed", permute(kRing), "hardware:\n  preset: tpu-v5e\n  pod: {dims: [2, 2]}\n  slices: 2\n").code, 0);
  EXPECT_EQ(run("four_dims", permute(kRing), "hardware:\n  preset: tpu-v5e\n  pod: {dims: [2, 1]}\n  slices: 4\n").code, 0);
  const std::string wide = "hardware:\n  preset: tpu-v5e\n  pod: {dims: [2, 4]}\n  slices: 2\n";
  r = run("wide", permute(kRing), wide);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("but the pod has 16 chips (2 slices of 8); set hardware.pod.dims to 4 chips (one slice's)\n"),
            std::string::npos)
      << r.err;
}

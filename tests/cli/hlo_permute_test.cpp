// Collective-permutes with any source-target pairs (docs/hlo.md): pairs that are no shift along mesh axes run as
// point-to-point transfers between the devices they name, routed over the torus with contention on shared links;
// a device no pair targets gets zeros. Checked by hand: the pairs each device gets (HLO text and StableHLO), the
// `direct` algorithm's schedules executed in memory, and podsim runs of a ring of 4 chips and a line of 4 (bytes per
// chip's links and the step time from the link bandwidth), and numeric mode's results.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/npy.h"
#include "collectives/reference.h"
#include "hlo/import.h"
#include "hlo/parser.h"
#include "hlo/stablehlo_parser.h"
#include "tests/cli/cli_util.h"

using namespace podsim;
using namespace podsim::test;
using json = nlohmann::json;

namespace {

// One collective-permute of f32[n] on 4 devices with `pairs` (HLO's {{s,t},...}).
std::string module(const std::string& pairs, int64_t n = 262144) {
  const std::string t = "f32[" + std::to_string(n) + "]";
  return "HloModule m, num_partitions=4\nENTRY %e (x: " + t + ") -> " + t + " {\n  %x = " + t + " parameter(0)\n" +
         "  ROOT %y = " + t + " collective-permute(%x), channel_id=1, source_target_pairs=" + pairs + "\n}\n";
}

const Op& permute_of(const hlo::Imported& im) {
  for (const Op& op : im.graph.ops())
    if (op.kind == OpKind::CollectivePermute) return op;
  throw Error(Err::Internal, "no collective-permute");
}

std::vector<int64_t> targets_of(const std::string& text, bool mlir = false) {
  const hlo::Module m = mlir ? hlo::parse_stablehlo(text, "t.mlir") : hlo::parse_module(text, "t.hlo");
  return permute_of(hlo::import_module(m, {})).attrs.targets;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

json run_module(const std::string& name, const std::string& text, const std::string& pod,
                const std::string& extra = "") {
  write_file(name + ".hlo", text);
  const std::string exp = write_file(name + ".yaml", "hardware:\n  preset: tpu-v4\n  pod: " + pod +
                                                         "\nworkload:\n  model: hlo\n  module: " + name + ".hlo\n" +
                                                         extra);
  const std::string out = test_dir() + "/" + name;
  CliResult r = run_podsim({"run", exp, "--out", out, "--force"});
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(read_file(out + "/summary.json"));
}

std::vector<double> per_chip_ici(const json& s) { return s["per_chip"]["ici_bytes"].get<std::vector<double>>(); }

constexpr double kMiB = 1 << 20;

}  // namespace

TEST(HloPermuteTest, PairsThatAreNoMeshShiftImportAsEachDevicesTarget) {
  // A ring run backwards is a shift of -1 along the mesh axis: no table of targets.
  const hlo::Imported back = hlo::import_module(hlo::parse_module(module("{{1,0},{2,1},{3,2},{0,3}}"), "t.hlo"), {});
  EXPECT_EQ(permute_of(back).attrs.shift, -1);
  EXPECT_TRUE(permute_of(back).attrs.targets.empty());
  // One cycle 0 -> 2 -> 1 -> 3 -> 0 moving devices by different steps.
  EXPECT_EQ(targets_of(module("{{0,2},{2,1},{1,3},{3,0}}")), (std::vector<int64_t>{2, 3, 1, 0}));
  // An involution whose pairs ({0,3}, {1,2}) are rings of 2 that no mesh axis holds.
  EXPECT_EQ(targets_of(module("{{0,3},{3,0},{1,2},{2,1}}")), (std::vector<int64_t>{3, 2, 1, 0}));
  // A partial set: only device 0 sends, only device 1 receives; an open chain 0 -> 1 -> 2 -> 3 (0 gets zeros).
  EXPECT_EQ(targets_of(module("{{0,1},{1,2},{2,3}}")), (std::vector<int64_t>{1, 2, 3, -1}));
  const hlo::Imported one = hlo::import_module(hlo::parse_module(module("{{0,1}}"), "t.hlo"), {});
  EXPECT_EQ(permute_of(one).attrs.targets, (std::vector<int64_t>{1, -1, -1, -1}));
  EXPECT_EQ(permute_of(one).attrs.axes, std::vector<std::string>({"d0"}));  // every mesh axis: ranks are device ids
  // The same cycle in StableHLO's generic form.
  const std::string mlir =
      "module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {\n"
      "  func.func public @main(%arg0: tensor<1024xf32>) -> tensor<1024xf32> {\n"
      "    %0 = \"stablehlo.collective_permute\"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, "
      "type = 1>, source_target_pairs = dense<[[0, 2], [2, 1], [1, 3], [3, 0]]> : tensor<4x2xi64>}> : "
      "(tensor<1024xf32>) -> tensor<1024xf32>\n"
      "    return %0 : tensor<1024xf32>\n  }\n}\n";
  EXPECT_EQ(targets_of(mlir, true), (std::vector<int64_t>{2, 3, 1, 0}));
  // A pair naming a device the module does not have, and a device receiving twice.
  EXPECT_EQ(error_of([] { targets_of(module("{{0,1},{1,5}}")); }),
            "t.hlo:4:8: error PODSIM-HLO-002: instruction 'y' (collective-permute): its source_target_pairs name "
            "device 5, "
            "which a module of 4 devices does not have");
  EXPECT_NE(error_of([] { targets_of(module("{{0,1},{2,1}}")); }).find("a device sends or receives twice"),
            std::string::npos);
}

TEST(HloPermuteTest, TheDirectSchedulesDeliverEachSourcesDataAndZerosElsewhere) {
  std::unique_ptr<ICollectiveAlgorithm> direct = CollectiveRegistry::instance().make("direct");
  ASSERT_TRUE(direct);
  CollectiveRequest req;
  req.kind = CollectiveKind::CollectivePermute;
  req.group.dims = {4};
  req.group.wrap = {true};
  req.elements = 6;
  req.chunk_elements = 4;  // two chunks per transfer
  std::vector<std::vector<float>> in;
  for (int r = 0; r < 4; ++r) in.push_back(std::vector<float>(6, static_cast<float>(10 * (r + 1))));
  // 0 -> 2, 1 -> 2 is refused below; here 0 -> 2, 2 -> 0, 3 keeps its own, 1 sends nothing and gets nothing.
  req.targets = {2, -1, 0, 3};
  EXPECT_EQ(direct->symmetry(req), RankSymmetry::None);
  ExecutionResult res = execute_schedules(*direct, req, in);
  ASSERT_EQ(res.problem, "");
  EXPECT_EQ(res.outputs[0], std::vector<float>(6, 30.0f));  // from 2
  EXPECT_EQ(res.outputs[1], std::vector<float>(6, 0.0f));   // no source: zeros
  EXPECT_EQ(res.outputs[2], std::vector<float>(6, 10.0f));  // from 0
  EXPECT_EQ(res.outputs[3], std::vector<float>(6, 40.0f));  // its own
  EXPECT_EQ(res.messages, 4);                               // two transfers of two chunks
  EXPECT_DOUBLE_EQ(res.bytes, 2 * 6 * 4);
  // The reference agrees.
  const std::vector<std::vector<double>> want = expected_result(req, in);
  for (int r = 0; r < 4; ++r)
    for (int i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(res.outputs[r][i], want[r][i]) << r;
}

TEST(HloPermuteTest, ANonShiftPermutationOnARingTakesTheShiftsTimeAndBytes) {
  // 1 MiB on each of 4 chips in a ring (a v4 pod of 4 x 1 x 1, wrapping): the ring forwards, backwards, and the
  // involution 0 <-> 3, 1 <-> 2, which is no shift. Each of its four transfers is one hop (0 -> 3 and 3 -> 0 over
  // the wrap-around link), each on a directed link of its own (0's -x, 3's +x, 1's +x, 2's -x): 1 MiB on every
  // chip's links, no link shared, the forward ring's time.
  const json fwd = run_module("fwd", module("{{0,1},{1,2},{2,3},{3,0}}"), "{dims: [4, 1, 1]}");
  const json back = run_module("back", module("{{1,0},{2,1},{3,2},{0,3}}"), "{dims: [4, 1, 1]}");
  const json inv = run_module("inv", module("{{0,3},{3,0},{1,2},{2,1}}"), "{dims: [4, 1, 1]}");
  for (const json* s : {&fwd, &back, &inv}) {
    EXPECT_DOUBLE_EQ((*s)["ici"]["bytes"].get<double>(), 4 * kMiB);
    EXPECT_EQ(per_chip_ici(*s), std::vector<double>(4, kMiB));
  }
  EXPECT_DOUBLE_EQ(back["step_time_s"].get<double>(), fwd["step_time_s"].get<double>());
  EXPECT_DOUBLE_EQ(inv["step_time_s"].get<double>(), fwd["step_time_s"].get<double>());
}

TEST(HloPermuteTest, TwoTransfersSharingALinkTakeTwiceItsTime) {
  // A line of 4 chips (no wrap-around), 1 MiB each. 0 -> 2 alone crosses links 0->1 and 1->2; with 1 -> 3 beside it
  // (links 1->2 and 2->3) link 1->2 carries both: 2 MiB, so the step grows by one more MiB at the link's 45 GB/s
  // (23.3 us, within 5 %: the flows share it chunk by chunk, 1 -> 3 starting on it a hop earlier).
  const std::string line = "{dims: [4, 1, 1], wrap: [false, false, false]}";
  const json one = run_module("one", module("{{0,2}}"), line);
  const json two = run_module("two", module("{{0,2},{1,3}}"), line);
  EXPECT_EQ(per_chip_ici(one), (std::vector<double>{kMiB, kMiB, 0, 0}));
  EXPECT_EQ(per_chip_ici(two), (std::vector<double>{kMiB, 2 * kMiB, kMiB, 0}));
  EXPECT_DOUBLE_EQ(two["ici"]["bytes"].get<double>(), 4 * kMiB);
  const double link = kMiB / 45e9;
  EXPECT_NEAR(two["step_time_s"].get<double>() - one["step_time_s"].get<double>(), link, 0.05 * link);
}

TEST(HloPermuteTest, NumericModeDeliversTheSourcesTileAndZerosToDevicesNoPairTargets) {
  // x is split over the 4 devices (f32[4, 8] global, a row each); chip 0 (the result chip) receives device 2's row
  // when 2 -> 0 is a pair, and zeros when no pair targets it.
  auto numeric = [](const std::string& pairs) {
    return "HloModule m, num_partitions=4\nENTRY %e (x: f32[1,8]) -> f32[1,8] {\n"
           "  %x = f32[1,8] parameter(0), sharding={devices=[4,1]0,1,2,3}\n"
           "  ROOT %y = f32[1,8] collective-permute(%x), channel_id=1, source_target_pairs=" + pairs + "\n}\n";
  };
  const std::string pod = "{dims: [4, 1, 1]}", run = "run: {numeric: true, seed: 3}\n";
  run_module("n_from2", numeric("{{2,0},{0,1}}"), pod, run);
  std::vector<int64_t> shape;
  std::vector<float> x, y;
  read_npy(test_dir() + "/n_from2/tensors/x.npy", shape, x);
  ASSERT_EQ(shape, (std::vector<int64_t>{4, 8}));
  read_npy(test_dir() + "/n_from2/tensors/y.npy", shape, y);
  ASSERT_EQ(y.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], x[2 * 8 + i]) << i;
  run_module("n_none", numeric("{{0,1},{1,2}}"), pod, run);
  read_npy(test_dir() + "/n_none/tensors/y.npy", shape, y);
  EXPECT_EQ(y, std::vector<float>(8, 0.0f));
}

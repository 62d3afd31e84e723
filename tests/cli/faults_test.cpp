// hardware.faults (sim/config/faults.h): slow chips and slow or down links, checked against hand counts.
//  - One slow chip at clock factor f in a synchronous data-parallel step: its matmuls take 1 / f as long, the others
//    wait for it at the gradient all-reduce, and the step moves by its compute's (1 / f - 1).
//  - A cable down in an 8 x 8 torus all-reduce: each message that would cross it goes the other way round its x
//    ring, the numbers are those of the uniform pod bit for bit, the detoured links carry exactly twice their bytes
//    and the time lies within the bounds those bytes give.
//  - The box of chips (hw/pod/symmetry.h): the classes a fault leaves, counted by hand, and the same figures as
//    with every chip simulated.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"
#include "tests/cli/same_figures.h"

using namespace podsim::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json run(const std::string& name, const std::string& yaml, const std::vector<std::string>& sets = {}) {
  const std::string cfg = write_file(name + ".yaml", yaml);
  const std::string out = test_dir() + "/" + name;
  std::vector<std::string> args = {"run", cfg, "--out", out, "--set", "run.trace.format=off"};
  for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
  CliResult r = run_podsim(args);
  EXPECT_EQ(r.code, 0) << r.err;
  json s = json::parse(read_file(out + "/summary.json"));
  s["console"] = r.out;
  return s;
}

const json& op_named(const json& s, const std::string& prefix) {
  for (const json& o : s["ops"])
    if (o["name"].get<std::string>().rfind(prefix, 0) == 0) return o;
  ADD_FAILURE() << "no op " << prefix;
  static json none;
  return none;
}

// A data-parallel MLP step on 2 x 2 TPU v3 chips whose matmuls dominate (d = 4096, batch 1024 per chip), with its
// gradients in one all-reduce issued after the backward pass (run.combine_threshold 1 GiB).
const std::string kDataParallel =
    "hardware: {preset: tpu-v3, pod: {dims: [2, 2]}}\n"
    "workload: {model: mlp, batch: 4096, input: 4096, hidden: 4096, layers: 2, classes: 1024}\n"
    "strategy: {name: data_parallel}\n"
    "run: {combine_threshold: 1GiB}\n";

}  // namespace

TEST(FaultsTest, SlowChipInDataParallelStepMovesTheStepByItsCompute) {
  const json base = run("uniform", kDataParallel);
  const double clock = base["clock_hz"];
  const json& ar0 = op_named(base, "combined/all_reduce");
  // The matmuls before the all-reduce, as the model counts them (cycles at the preset's clock): the MXU's, and on
  // TPU v3 the vector unit's pops of the results and the epilogue, which follow them (hardware.chip.mxu.result_pop).
  double mxu_s = 0;
  for (const json& o : base["ops"])
    if (o["unit"] == "MXU" && o["end_ns"].get<double>() <= ar0["start_ns"].get<double>()) {
      const json& m = o["mxu"];
      const double vector = m.contains("result_pop_cycles")
                                ? m["result_pop_cycles"].get<double>() + m.value("epilogue_vpu_cycles", 0.0)
                                : 0.0;
      mxu_s += (o["cycles"].get<double>() + vector) / clock;
    }
  ASSERT_GT(mxu_s, 0.9 * ar0["start_ns"].get<double>() * 1e-9);  // matmuls are most of the time before it
  const double T0 = base["step_time_s"];
  for (double f : {0.8, 0.5}) {
    SCOPED_TRACE(f);
    const std::string fault = "hardware.faults=[\"chip 1: clock " + std::to_string(f) + "\"]";
    // The slow chip's own view (it is the result chip): its all-reduce starts (1 / f - 1) x its matmul time later.
    const json slow = run("slow0-" + std::to_string(f), kDataParallel,
                          {"hardware.faults=[\"chip 0: clock " + std::to_string(f) + "\"]"});
    const double extra = (1 / f - 1) * mxu_s;
    const double slow_start = op_named(slow, "combined/all_reduce")["start_ns"].get<double>() * 1e-9;
    const double start0 = ar0["start_ns"].get<double>() * 1e-9;
    EXPECT_NEAR(slow_start - start0, extra, 0.03 * extra);
    // A fast chip's view: it starts the all-reduce when it would have, and waits there for the slow chip.
    const json fast = run("slow1-" + std::to_string(f), kDataParallel, {fault});
    EXPECT_NEAR(op_named(fast, "combined/all_reduce")["start_ns"].get<double>(), ar0["start_ns"].get<double>(), 1e-3);
    const json& w = fast["faults"]["collectives"][0];
    EXPECT_EQ(w["name"].get<std::string>().rfind("combined/all_reduce", 0), 0u);
    EXPECT_EQ(w["slowest_member"], 1);
    EXPECT_NEAR(w["wait_s"].get<double>(), slow_start - start0, 1e-9);
    EXPECT_EQ(fast["faults"]["slowest_chip"]["chip"], 1);
    EXPECT_EQ(fast["faults"]["slowest_chip"]["clock_factor"], f);
    // The step: the uniform step plus the slow chip's extra matmul time (its updates are HBM-bound and do not
    // slow down; what the all-reduce adds from data staged while the slow chip computed is within 2 %).
    EXPECT_NEAR(fast["step_time_s"].get<double>(), T0 + extra, 0.02 * (T0 + extra));
    EXPECT_GT(fast["step_time_s"].get<double>(), T0 + extra);
    EXPECT_NE(fast["console"].get<std::string>().find("slowest chip  chip 1 (x=1,y=0)"), std::string::npos)
        << fast["console"];
  }
}

namespace {

// A 64 MiB all-reduce (torus algorithm: 4 parts of V / 4, each reduce-scattered and all-gathered along x and y)
// over 8 x 8 chips, with the cable between (3,3) and (4,3) down both ways.
const std::string kAllReduce8x8 =
    "hardware: {preset: tpu-v3, pod: {dims: [8, 8]}}\n"
    "workload: {model: collective, op: all_reduce, bytes: 64MiB}\n";
const std::string kCableDown = "hardware.faults=[\"link (3,3) +x: down\", \"link (4,3) -x: down\"]";

}  // namespace

TEST(FaultsTest, LinkDownDetoursAroundTheRingWithinTheHandCountedBound) {
  const json up = run("up", kAllReduce8x8);
  const json down = run("down", kAllReduce8x8, {kCableDown});
  const double V = 64.0 * 1024 * 1024, W = 100e9, hop = 1e-6;
  // Bytes per +x link, by hand: the part that starts on x moves 7 blocks of V/4/8 in its reduce-scatter and 7 in its
  // all-gather, the part that starts on y 7 of V/4/64 each way: 14 (V/32 + V/256) = 126/256 V.
  const double per_link = 126.0 / 256 * V;
  const json& slow = down["faults"]["slowest_link"];
  // Detoured, each link of row y = 3 also carries the traffic of the link that is down: twice as much.
  EXPECT_DOUBLE_EQ(slow["bytes"].get<double>(), 2 * per_link);
  EXPECT_EQ(slow["chip"].get<int64_t>() / 8, 3) << slow;
  // The heat-map's rows: a link of row 3 is busier than the same link of row 0, the down links idle.
  const json& util = down["faults"]["link_utilization"]["per_chip"];
  EXPECT_GT(util[8 * 3 + 0][0].get<double>(), 1.8 * util[0][0].get<double>());
  EXPECT_EQ(util[8 * 3 + 3][0].get<double>(), 0.0);  // (3,3) +x
  EXPECT_EQ(util[8 * 3 + 4][1].get<double>(), 0.0);  // (4,3) -x
  // Time: at least the busiest link's bytes at full bandwidth; at most the uniform all-reduce plus the detoured
  // bytes of one link and six more hops for each of the 28 ring steps.
  const double T = down["collectives"][0]["time_s"], T_up = up["collectives"][0]["time_s"];
  EXPECT_GE(down["step_time_s"].get<double>(), 2 * per_link / W);
  EXPECT_LE(T, T_up + per_link / W + 28 * 6 * hop);
  EXPECT_GT(T, T_up);
  EXPECT_NE(down["console"].get<std::string>().find("slowest link  chip 2"), std::string::npos) << down["console"];
}

TEST(FaultsTest, LinkDownLeavesTheNumbersUnchanged) {
  const std::vector<std::string> numeric = {"workload.bytes=1MiB", "run.numeric=true", "run.dump_shards=true"};
  std::vector<std::string> with = numeric;
  with.push_back(kCableDown);
  with.push_back("hardware.faults=[\"link (3,3) +x: down\", \"link (4,3) -x: down\", \"chip 9: clock 0.5, hbm 0.5\"]");
  run("numeric-up", kAllReduce8x8, numeric);
  const json down = run("numeric-down", kAllReduce8x8, with);
  EXPECT_EQ(down["faults"]["down_links"], 2);
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(test_dir() + "/numeric-up/tensors")) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), test_dir() + "/numeric-up").string();
    EXPECT_EQ(read_file(e.path().string()), read_file(test_dir() + "/numeric-down/" + rel)) << rel;
    ++files;
  }
  EXPECT_GT(files, 64u);  // every chip's shards
}

TEST(FaultsTest, NoRouteLeftNamesTheCollective) {
  const std::string cfg = write_file("noroute.yaml", kAllReduce8x8 + "run: {trace: {format: \"off\"}}\n");
  CliResult r = run_podsim({"run", cfg, "--out", test_dir() + "/noroute", "--set",
                            "hardware.faults=[\"link (3,3) +x: down\", \"link (5,3) -x: down\"]"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("PODSIM-POD-004"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("collective 'all_reduce' cannot complete"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("-x of chip 29 (x=5,y=3) down"), std::string::npos) << r.err;
}

TEST(FaultsTest, OneSlowChipInDataParallelRingsKeepsTheOtherRingsInOneBox) {
  // Rings of 8 along x on an 8 x 4 pod (an all-reduce over x: four independent data-parallel rings). One slow chip
  // touches its own ring only: its 8 chips are simulated, and the three other rings are one box of 2 chips (an even
  // ring: period 2): 10 classes.
  const std::string yaml =
      "hardware: {preset: tpu-v3, pod: {dims: [8, 4]}, faults: [\"chip (3,1): clock 0.5, hbm 0.5\"]}\n"
      "workload: {model: collective, op: all_reduce, bytes: 16MiB, axes: [x]}\n";
  const json box = run("ring-box", yaml), full = run("ring-full", yaml, {"run.symmetry=off"});
  EXPECT_EQ(box["simulated_chips"], 10);
  EXPECT_EQ(full["simulated_chips"], 32);
  EXPECT_NE(box["console"].get<std::string>().find("simulated 10 of 32 chips"), std::string::npos) << box["console"];
  expect_same_figures(box, full);
  // A slow link in the same ring: the same classes.
  const json lbox = run("link-box", yaml, {"hardware.faults=[\"link (3,1) +x: bandwidth 0.5\"]"});
  const json lfull = run("link-full", yaml, {"hardware.faults=[\"link (3,1) +x: bandwidth 0.5\"]", "run.symmetry=off"});
  EXPECT_EQ(lbox["simulated_chips"], 10);
  expect_same_figures(lbox, lfull);
  EXPECT_EQ(lbox["faults"]["slowest_link"]["label"], "chip 11 (x=3,y=1) +x");
}

TEST(FaultsTest, FaultsThatRepeatKeepAPeriodicBox) {
  // An all-reduce over the whole 8 x 4 pod couples every chip; slow chips at (3,0) and (3,2) repeat every 2 along y,
  // so the box grows to 8 x 2 (the ring along x has one slow chip): 16 classes. One of them alone leaves none.
  const std::string yaml =
      "hardware: {preset: tpu-v3, pod: {dims: [8, 4]}, faults: [\"chip (3,0): clock 0.5\", \"chip (3,2): clock "
      "0.5\"]}\n"
      "workload: {model: collective, op: all_reduce, bytes: 16MiB}\n";
  const json box = run("periodic-box", yaml), full = run("periodic-full", yaml, {"run.symmetry=off"});
  EXPECT_EQ(box["simulated_chips"], 16);
  expect_same_figures(box, full);
  const json one = run("single", yaml, {"hardware.faults=[\"chip (3,0): clock 0.5\"]"});
  EXPECT_EQ(one["simulated_chips"], 32);
  EXPECT_NE(one["console"].get<std::string>().find("simulated every chip (hardware.faults"), std::string::npos);
}

TEST(FaultsTest, RandomChipsFollowTheSeed) {
  const std::string yaml =
      "hardware: {preset: tpu-v3, pod: {dims: [4, 4]}, faults: [\"random 25%: clock 0.9\"]}\n"
      "workload: {model: collective, op: all_reduce, bytes: 1MiB}\n";
  const json a = run("random-a", yaml), b = run("random-b", yaml);
  const json c = run("random-c", yaml, {"run.seed=7"});
  EXPECT_EQ(a["faults"]["slow_chips"], 4);
  EXPECT_EQ(a["faults"]["chips"], b["faults"]["chips"]);
  EXPECT_NE(a["faults"]["chips"], c["faults"]["chips"]);
}

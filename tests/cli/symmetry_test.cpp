// Simulating one box of chips for a pod whose step repeats under translations (hw/pod/symmetry.h) must give the
// full pod's results: each case runs `podsim run` with run.symmetry: off (every chip simulated, the reference)
// and with the default (auto), and compares the step time, the utilizations, the byte counts and every per-chip
// figure exactly (the same events happen at the same simulated times), and the number of chips simulated with the
// box size counted by hand from the mesh layout. Cases where a translation would change what a chip does keep
// every chip.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "tests/cli/cli_util.h"
#include "tests/cli/same_figures.h"

using namespace podsim::test;
namespace fs = std::filesystem;

namespace {

nlohmann::json run(const std::string& name, const std::string& yaml, const std::string& symmetry) {
  const std::string cfg = write_file(name + ".yaml", yaml);
  const std::string out = test_dir() + "/" + name + "-" + symmetry;
  CliResult r = run_podsim({"run", cfg, "--out", out, "--set", "run.symmetry=" + symmetry});
  EXPECT_EQ(r.code, 0) << r.err;
  nlohmann::json s = nlohmann::json::parse(read_file(out + "/summary.json"));
  s["console"] = r.out;
  return s;
}

// Runs `yaml` both ways; the reduced run must simulate the box of `periods` (per torus dimension) and agree with the
// full one exactly. Chips act on one another only through links, and what reaches a chip at one instant is taken
// after its own actions, in the order of the links it came over (hw/chip/action_queue.h): so a chip and the one
// that stands for it in the box do the same things in the same order, wherever they sit in the simulation.
void expect_same_as_full(const std::string& name, const std::string& yaml, const std::vector<int64_t>& periods) {
  nlohmann::json full = run(name, yaml, "off"), reduced = run(name, yaml, "auto");
  const int64_t chips = full["chips"].get<int64_t>();
  int64_t box = 1;
  for (int64_t p : periods) box *= p;
  EXPECT_EQ(full["simulated_chips"].get<int64_t>(), chips);
  EXPECT_EQ(reduced["simulated_chips"].get<int64_t>(), box);
  EXPECT_EQ(reduced["chips"].get<int64_t>(), chips);
  if (box < chips) {
    EXPECT_NE(reduced["console"].get<std::string>().find("simulated " + std::to_string(box) + " of " +
                                                         std::to_string(chips) + " chips"),
              std::string::npos)
        << reduced["console"];
  }
  expect_same_figures(reduced, full);
}

std::string collective(const std::string& preset, const std::string& dims, const std::string& op,
                       const std::string& bytes, const std::string& extra = "") {
  return "hardware:\n  preset: " + preset + "\n  pod: {dims: " + dims + "}\nworkload:\n  model: collective\n  op: " + op +
         "\n  bytes: " + bytes + "\n" + extra + "run: {trace: {format: \"off\"}}\n";
}

const std::string kTransformer =
    "workload:\n  model: transformer\n  layers: 2\n  d_model: 256\n  d_ff: 1024\n  heads: 8\n  vocab: 1024\n"
    "  seq_len: 128\n  batch: 32\n";

}  // namespace

// A 2-D torus all-reduce over the whole 8 x 8 pod: every chip alike, and every message goes to a torus neighbour
// (rings along x, then y), never half-way round a ring: one chip stands for the pod.
TEST(SymmetryTest, AllReduceOverThePod) {
  expect_same_as_full("all_reduce", collective("tpu-v3", "[8, 8]", "all_reduce", "64MiB"), {1, 1});
}

// Links of zero latency: messages forwarded at the instant they arrive (the calendar's later rounds of arrivals)
// still leave the box and the full pod in step. The all-to-all sends to the chip 4 away along x and y, half-way
// round both rings, where routing breaks the tie by the parity of the coordinate: the periods stay even.
TEST(SymmetryTest, AllToAllOverLinksOfZeroLatency) {
  expect_same_as_full("zero_latency",
                      "hardware:\n  preset: tpu-v3\n  pod: {dims: [8, 8]}\n  ici: {hop_latency: 0s}\nworkload:\n"
                      "  model: collective\n  op: all_to_all\n  bytes: 1MiB\nrun: {trace: {format: \"off\"}}\n",
                      {2, 2});
}

// All-to-all over a 4 x 4 x 4 v4 pod: every chip sends along the same torus offset at each step, offsets of 2
// (half-way) among them; box 2 x 2 x 2.
TEST(SymmetryTest, AllToAllOverA3DPod) {
  expect_same_as_full("all_to_all", collective("tpu-v4", "[4, 4, 4]", "all_to_all", "4MiB"), {2, 2, 2});
}

// Groups along one torus dimension only: rings over x, every y alike, neighbours only; box 1 x 1.
TEST(SymmetryTest, ReduceScatterAlongOneAxis) {
  expect_same_as_full("reduce_scatter", collective("tpu-v3", "[8, 4]", "reduce_scatter", "16MiB", "  axes: [x]\n"), {1, 1});
}

// A collective-permute along the ring of 8 on x: a shift of 4 goes half-way round (period 2 along x), shifts of 1
// and 3 do not (period 1); nothing moves along y (period 1).
TEST(SymmetryTest, HalfWayShiftKeepsAnEvenPeriod) {
  auto permute = [](const std::string& shift) {
    return collective("tpu-v3", "[8, 4]", "collective_permute", "4MiB", "  axes: [x]\n  shift: " + shift + "\n");
  };
  expect_same_as_full("permute4", permute("4"), {2, 1});
  expect_same_as_full("permute1", permute("1"), {1, 1});
  expect_same_as_full("permute3", permute("3"), {1, 1});
}

// data 8 x model 4 on an 8 x 4 pod: model takes 4 neighbouring chips of x (a line: moving by 1 along x would
// carry a chip into the next model group), data the other 2 of x (stride 4) and all of y. Counted by hand: the
// smallest move along x that keeps every group is 4 (model's line moves whole, data's strided ring shifts by
// one; its two members are 4 apart, half-way round x, so the period there must be even anyway); along y 1 (data's
// ring of 4 sends to neighbours). The box is 4 x 1.
TEST(SymmetryTest, DataModelTransformerWithModelOnALine) {
  expect_same_as_full("data_model",
                      "hardware:\n  preset: tpu-v3\n  pod: {dims: [8, 4]}\n" + kTransformer +
                          "strategy: {name: [data_parallel, spmd]}\nmesh: {axes: [data, model], shape: [8, 4]}\n"
                          "run: {trace: {format: \"off\"}}\n",
                      {4, 1});
}

// pipe 4 (y) x data 4 (x): the stages differ along y, so y keeps all 4; data rings along x (neighbours) repeat
// every chip.
TEST(SymmetryTest, PipelineTimesData) {
  expect_same_as_full("pipeline_data",
                      "hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 4]}\n" + kTransformer +
                          "strategy: {name: [pipeline, data_parallel], micro_batches: 4}\n"
                          "mesh: {axes: [pipe, data], shape: [4, 4]}\nrun: {trace: {format: \"off\"}}\n",
                      {1, 4});
}

// The MoE example (experts over x, data over y) with its trace off: dispatch and combine all-to-alls, gating.
TEST(SymmetryTest, MixtureOfExperts) {
  std::string yaml = read_file(source_dir() + "/configs/examples/moe.yaml");
  yaml += "run: {trace: {format: \"off\"}}\n";
  expect_same_as_full("moe", yaml, {2, 2});
}

// What keeps every chip: a broadcast from rank 0 (each rank's schedule is its own), a trace of every chip or of one
// outside the box, numeric mode, injected stalls.
TEST(SymmetryTest, KeepsEveryChipWhenChipsDiffer) {
  nlohmann::json b = run("broadcast", collective("tpu-v3", "[4, 4]", "broadcast", "1MiB"), "auto");
  EXPECT_EQ(b["simulated_chips"].get<int64_t>(), 16);
  // An all-to-all on 4 x 4 (offsets of 2, half-way: a box of 2 x 2 when nothing else differs).
  const std::string traced = "hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 4]}\nworkload:\n  model: collective\n"
                             "  op: all_to_all\n  bytes: 1MiB\n";
  EXPECT_EQ(run("traced", traced, "auto")["simulated_chips"].get<int64_t>(), 16);
  EXPECT_EQ(run("numeric", traced + "run: {numeric: true, trace: {format: \"off\"}}\n", "auto")["simulated_chips"]
                .get<int64_t>(),
            16);
  EXPECT_EQ(run("plain", traced + "run: {trace: {format: \"off\"}}\n", "auto")["simulated_chips"].get<int64_t>(), 4);
  // Stalls are drawn per chip: chips that would stand for each other no longer do the same.
  EXPECT_EQ(run("stalls", traced + "run: {trace: {format: \"off\"}, stall: {probability: 0.01}}\n", "auto")
                ["simulated_chips"].get<int64_t>(),
            16);
  // Tracing chips of the box (chip 5 is x=1, y=1) keeps the box and writes their trace; one outside it (chip 10,
  // x=2, y=2) needs every chip simulated.
  EXPECT_EQ(run("inside", traced + "run: {trace: {chips: [5]}}\n", "auto")["simulated_chips"].get<int64_t>(), 4);
  EXPECT_GT(fs::file_size(test_dir() + "/inside-auto/trace.pftrace"), 0u);
  EXPECT_EQ(run("outside", traced + "run: {trace: {chips: [10]}}\n", "auto")["simulated_chips"].get<int64_t>(), 16);
  // The all-reduce's rings send to neighbours only: one chip stands for the pod, and a trace of chip 5 needs them all.
  const std::string ring = "hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 4]}\nworkload:\n  model: collective\n"
                           "  op: all_reduce\n  bytes: 1MiB\n";
  EXPECT_EQ(run("ring", ring + "run: {trace: {format: \"off\"}}\n", "auto")["simulated_chips"].get<int64_t>(), 1);
  EXPECT_EQ(run("ring_inside", ring + "run: {trace: {chips: [0]}}\n", "auto")["simulated_chips"].get<int64_t>(), 1);
  EXPECT_EQ(run("ring_outside", ring + "run: {trace: {chips: [5]}}\n", "auto")["simulated_chips"].get<int64_t>(), 16);
}

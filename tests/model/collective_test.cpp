// Collectives over the simulated torus: uncongested times against the closed forms (scaling book §6: AG = RS = V/W,
// AR = 2V/W, W the bidirectional link bandwidth, divided by the number of axes; we use the exact ring factor
// (N-1)/N), contention, and the numbers every chip ends with in numeric mode for every algorithm.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "collectives/reference.h"
#include "hw/chip/dma_numerics.h"
#include "hw/pod/pod.h"
#include "tests/model/sim_util.h"

using namespace podsim;
using podsim::test::in_child;
using podsim::test::simulate_in_child;

namespace {

std::string collective(const std::string& op, const std::string& dims, const std::string& bytes,
                       const std::string& extra = "", const std::string& preset = "tpu-v3", bool numeric = false) {
  return "hardware:\n  preset: " + preset + "\n  pod: {dims: " + dims + "}\nworkload:\n  model: collective\n  op: " + op +
         "\n  bytes: " + bytes + "\n" + extra + "run: {trace: {format: \"off\"}, numeric: " + (numeric ? "true" : "false") +
         "}\n";
}

// Step time over the closed form for a collective of `input` bytes per chip.
double ratio(const nlohmann::json& s, const std::string& op, double input) {
  double W = 2 * s["ici"]["link_bandwidth_Bps"].get<double>();
  double N = s["chips"].get<double>();
  int axes = 0;
  for (auto d : s["pod_dims"]) axes += d.get<int>() > 1;
  double V = op == "all_gather" ? input * N : input;
  double closed = (op == "all_reduce" ? 2 * V / W : V / W) / axes * (N - 1) / N;
  return s["step_time_s"].get<double>() / closed;
}

}  // namespace

TEST(CollectiveTest, BidirectionalRingMatchesClosedForms) {
  for (const char* op : {"all_gather", "reduce_scatter", "all_reduce"}) {
    double bytes = std::string(op) == "all_gather" ? 64.0 * (1 << 20) : 1024.0 * (1 << 20);
    auto s = simulate_in_child(collective(op, "[16, 1]", std::string(op) == "all_gather" ? "64MiB" : "1GiB"));
    ASSERT_FALSE(s.contains("error")) << s.dump();
    EXPECT_NEAR(ratio(s, op, bytes), 1.0, 0.10) << op;
    EXPECT_EQ(s["collectives"][0]["algorithm"], "torus") << op;  // the default that ran, named
  }
}

TEST(CollectiveTest, TwoDimensionalTorusMatchesClosedFormsDividedByAxes) {
  for (const char* op : {"all_gather", "reduce_scatter", "all_reduce"}) {
    bool ag = std::string(op) == "all_gather";
    // HBM without refresh and turnarounds: on v3 the 1 GiB all-reduce is otherwise bound by the HBM traffic of its
    // sends, receives and reductions, not by the links this test checks.
    auto s = simulate_in_child(collective(op, "[8, 8]", ag ? "16MiB" : "1GiB"), podsim::test::kIdealHbm);
    ASSERT_FALSE(s.contains("error")) << s.dump();
    EXPECT_NEAR(ratio(s, op, ag ? 16.0 * (1 << 20) : 1024.0 * (1 << 20)), 1.0, 0.10) << op;
  }
}

TEST(CollectiveTest, ThreeDimensionalTorusUsesAllAxes) {
  auto s = simulate_in_child(collective("all_reduce", "[4, 4, 4]", "256MiB", "", "tpu-v4"));
  ASSERT_FALSE(s.contains("error")) << s.dump();
  EXPECT_NEAR(ratio(s, "all_reduce", 256.0 * (1 << 20)), 1.0, 0.10);
}

TEST(CollectiveTest, ALineOfFourIsTheBottleneckOfAThreeDimensionalAllGather) {
  // The group of XLA's Llama 3.1 70B module's weight gathers: a ring of 4 on x, a ring of 8 on y and a line of 4 on
  // z (docs/performance.md, "Imported modules"), its embedding table's shard s = 15.66 MiB. The torus scheme's 6
  // parts of p = s/6 put, per direction, 3p + 96p + 12p = 111p on the x links and 28p + 7p + 112p = 147p on the y
  // links; on z 3*32p + 3*8p + 3p = 123p, and as much again on a line, whose ring-closing hop goes back over its 3
  // links: 246p = 41 s at 90 GB/s (7.479 ms); as a ring of 4, y's 147p = 24.5 s (4.469 ms) is the bottleneck.
  const double s = 16416768, W = 90e9;
  for (bool line : {true, false}) {
    auto r = simulate_in_child(collective("all_gather", std::string("[4, 8, 4], wrap: [true, true, ") +
                                                            (line ? "false" : "true") + "]",
                                          "16416768B", "  dtype: bf16\n", "tpu-v5p"));
    ASSERT_FALSE(r.contains("error")) << r.dump();
    EXPECT_NEAR(r["step_time_s"].get<double>() / ((line ? 41.0 : 24.5) * s / W), 1.0, 0.02) << line;
  }
}

TEST(CollectiveTest, RingBaselineIsSlowerOnTwoAxes) {
  auto torus = simulate_in_child(collective("all_reduce", "[8, 8]", "256MiB"));
  auto ring = simulate_in_child(collective("all_reduce", "[8, 8]", "256MiB", "  algorithm: ring\n"));
  ASSERT_FALSE(torus.contains("error") || ring.contains("error"));
  EXPECT_EQ(ring["collectives"][0]["algorithm"], "ring");
  // The ring all-reduces the whole buffer along each axis in turn, on half of the links at a time: 2 x 2V/W x 7/8
  // (W the bidirectional link bandwidth), against the torus scheme's 2V/(2W) x 63/64 (checked at 1 GiB above; at
  // 256 MiB its pipeline fill adds about 12 %).
  const double V = 256.0 * (1 << 20), W = 2 * 100e9;
  EXPECT_NEAR(ring["step_time_s"].get<double>() / (2 * 2 * V / W * 7 / 8), 1.0, 0.10);
  EXPECT_GT(ring["step_time_s"].get<double>(), 2.8 * torus["step_time_s"].get<double>());
}

TEST(CollectiveTest, OpenMeshIsSlowerThanTorus) {
  auto torus = simulate_in_child(collective("all_reduce", "[8, 1]", "256MiB"));
  auto mesh = simulate_in_child(collective("all_reduce", "[8, 1]", "256MiB"),
                                {"hardware.pod.wrap=[false, false]"});
  ASSERT_FALSE(torus.contains("error") || mesh.contains("error"));
  // Without the wrap link each ring's closing hop crosses the whole line, so every link carries two ring edges
  // (one of each direction's ring): twice the torus's closed form 2V/W x 7/8 (W bidirectional).
  const double V = 256.0 * (1 << 20), W = 2 * 100e9;
  EXPECT_NEAR(torus["step_time_s"].get<double>() / (2 * V / W * 7 / 8), 1.0, 0.10);
  EXPECT_NEAR(mesh["step_time_s"].get<double>() / (2 * 2 * V / W * 7 / 8), 1.0, 0.10);
}

TEST(CollectiveTest, GroupsAlongOneAxisRunConcurrently) {
  auto rows = simulate_in_child(collective("all_reduce", "[8, 8]", "64MiB", "  axes: [x]\n"));
  auto one_row = simulate_in_child(collective("all_reduce", "[8, 1]", "64MiB"));
  ASSERT_FALSE(rows.contains("error") || one_row.contains("error"));
  // Eight row groups use disjoint links: as fast as a single row.
  EXPECT_NEAR(rows["step_time_s"].get<double>() / one_row["step_time_s"].get<double>(), 1.0, 0.02);
}

// Uniform random traffic on an 8 x 8 torus (100 GB/s links, 1 us per hop, 4 KiB packets, a 50 us window).
// Hand counts: a ring of 8 has distances 0,1,2,3,4,3,2,1 (sum 16), so a chip's 63 destinations are on average
// 2 * 8 * 16 / 63 = 4.063 hops away: zero-load latency T0 = 4.063 us + 4 KiB / 100 GB/s. The bisection bound: cut
// the torus between x = 3|4 and x = 7|0; 2 x 8 links cross each way. Each of the 32 chips on one side sends 32/63
// of its load across, so lambda * 32 * 32/63 <= 16 links: lambda* = 63/64 of a link per chip. Accepted throughput
// counts what arrives within the window; what was injected in its last T0 arrives after it, so the expected
// accepted throughput is min(offered, lambda*) x (1 - T0 / window).
TEST(CollectiveTest, UniformTrafficMeetsZeroLoadLatencyAndTheBisectionBound) {
  auto traffic = [](const std::string& rate) {
    return simulate_in_child(
        "hardware:\n  preset: tpu-v3\n  pod: {dims: [8, 8]}\nworkload:\n  model: traffic\n  pattern: uniform\n"
        "  rate: " + rate + "\n  message: 4KiB\n  duration: 50us\nrun: {trace: {format: \"off\"}}\n");
  };
  auto light = traffic("0.05");
  auto heavy = traffic("1.5");
  ASSERT_FALSE(light.contains("error") || heavy.contains("error"));
  const double t0 = 2.0 * 8 * 16 / 63 * 1e-6 + 4096 / 100e9, window = 50e-6, bisection = 63.0 / 64;
  double l = light["traffic"]["average_latency_s"].get<double>();
  EXPECT_NEAR(l / t0, 1.0, 0.10);
  EXPECT_NEAR(light["traffic"]["accepted_throughput"].get<double>() / (0.05 * (1 - t0 / window)), 1.0, 0.10);
  EXPECT_NEAR(heavy["traffic"]["accepted_throughput"].get<double>() / (bisection * (1 - t0 / window)), 1.0, 0.10);
  // Beyond saturation packets queue: latency grows several times over.
  EXPECT_GT(heavy["traffic"]["average_latency_s"].get<double>(), 3 * l);
}

// ---- numerics -------------------------------------------------------------------------------------------------

namespace {

// Runs a numeric collective and compares every chip's output with collectives/reference.h's expected result.
nlohmann::json check_numerics(const std::string& yaml) {
  return in_child([&] {
    Experiment e = load_experiment_text(yaml, "test.yaml");
    std::unique_ptr<Prepared> p = prepare(e);
    Simulation s = simulate(*p);
    const ModelGraph& g = p->plan.programs[0].graph;
    const Op& op = g.op(0);
    auto& chips = s.pod->chips();
    CollectiveGroup grp0 = p->ctx->group(0, op.attrs.axes);
    double worst = 0;
    int64_t checked = 0;
    // Check every group: members in rank order.
    std::vector<bool> seen(chips.size(), false);
    for (size_t c = 0; c < chips.size(); ++c) {
      if (seen[c]) continue;
      CollectiveGroup grp = p->ctx->group(static_cast<int64_t>(c), op.attrs.axes);
      std::vector<int64_t> members;
      std::vector<std::vector<float>> in;
      for (int64_t r = 0; r < grp.shape.size(); ++r) {
        int64_t chip = grp.chip_of(r, p->ctx->torus);
        members.push_back(chip);
        seen[chip] = true;
        in.push_back(chips[chip]->store().get(op.inputs[0]).data);
      }
      CollectiveRequest req;
      req.kind = collective_of(op.kind);
      req.group = grp.shape;
      req.elements = g.tensor(op.inputs[0]).elements();
      req.shift = op.attrs.shift;
      req.root = op.attrs.root;
      auto want = expected_result(req, in);
      for (size_t r = 0; r < members.size(); ++r) {
        const auto& got = chips[members[r]]->store().get(op.outputs[0]).data;
        if (got.size() != want[r].size()) return nlohmann::json({{"error", "size"}, {"chip", members[r]}});
        for (size_t i = 0; i < got.size(); ++i) {
          worst = std::max(worst, std::fabs(got[i] - want[r][i]) / (1.0 + std::fabs(want[r][i])));
          ++checked;
        }
      }
    }
    (void)grp0;
    return nlohmann::json({{"worst", worst}, {"checked", checked}});
  });
}

}  // namespace

// fp32 tolerance: every element within 1e-5 relative of the exact (double) result; inputs are normal(0, 1).
constexpr double kTol = 1e-5;

TEST(CollectiveNumericsTest, AllReduceEqualsTheExactSumOnEveryChipForEveryAlgorithm) {
  for (const char* algo : {"torus", "ring"}) {
    for (const char* dims : {"[4, 2]", "[3, 1]", "[2, 2]"}) {
      auto r = check_numerics(collective("all_reduce", dims, "96KiB", std::string("  algorithm: ") + algo + "\n",
                                         "tpu-v3", true));
      ASSERT_FALSE(r.contains("error")) << r.dump();
      EXPECT_LT(r["worst"].get<double>(), kTol) << algo << " " << dims;
      EXPECT_GT(r["checked"].get<int64_t>(), 0);
    }
  }
  auto r3 = check_numerics(collective("all_reduce", "[2, 2, 2]", "96KiB", "", "tpu-v4", true));
  ASSERT_FALSE(r3.contains("error")) << r3.dump();
  EXPECT_LT(r3["worst"].get<double>(), kTol);
}

TEST(CollectiveNumericsTest, EveryCollectiveDeliversTheRightData) {
  for (const char* op : {"reduce_scatter", "all_gather", "all_to_all", "collective_permute", "broadcast"}) {
    for (const char* algo : {"", "ring"}) {
      if (std::string(algo) == "ring" && (std::string(op) == "all_to_all" || std::string(op) == "collective_permute"))
        continue;
      std::string extra = std::string(algo).empty() ? "" : std::string("  algorithm: ") + algo + "\n";
      if (std::string(op) == "broadcast") extra += "  root: 5\n";
      if (std::string(op) == "collective_permute") extra += "  shift: 3\n";
      auto r = check_numerics(collective(op, "[4, 2]", "64KiB", extra, "tpu-v3", true));
      ASSERT_FALSE(r.contains("error")) << op << " " << r.dump();
      EXPECT_LT(r["worst"].get<double>(), kTol) << op << " " << algo;
    }
  }
}

TEST(CollectiveNumericsTest, GroupsAlongOneAxisReduceOnlyTheirRow) {
  auto r = check_numerics(collective("all_reduce", "[4, 2]", "32KiB", "  axes: [x]\n", "tpu-v3", true));
  ASSERT_FALSE(r.contains("error")) << r.dump();
  EXPECT_LT(r["worst"].get<double>(), kTol);
}

TEST(CollectiveNumericsTest, AllToAllDeliversEveryChunkToTheRightChip) {
  // Each chip's input block j holds (chip * 1000 + j): after the all-to-all, chip r's block i must hold i * 1000 + r.
  auto r = in_child([] {
    Experiment e = load_experiment_text(collective("all_to_all", "[4, 2]", "8KiB", "", "tpu-v3", true), "t.yaml");
    std::unique_ptr<Prepared> p = prepare(e);
    // Replace the random inputs before the simulation starts: the chips initialise their inputs in their constructor.
    Simulation s;
    s.pod = std::make_unique<Pod>(*p->ctx);
    const ModelGraph& g = p->plan.programs[0].graph;
    const int64_t n = g.tensor(0).elements(), B = n / 8;
    for (auto& chip : s.pod->chips()) {
      auto& data = chip->store().get_mut(0).data;
      for (int64_t i = 0; i < n; ++i) data[i] = static_cast<float>(chip->id() * 1000 + i / B);
    }
    sc_core::sc_start();
    int64_t wrong = 0;
    for (auto& chip : s.pod->chips()) {
      const auto& out = chip->store().get(1).data;
      for (int64_t i = 0; i < n; ++i) wrong += out[i] != static_cast<float>((i / B) * 1000 + chip->id());
    }
    return nlohmann::json({{"wrong", wrong}, {"elements", n * 8}});
  });
  ASSERT_FALSE(r.contains("error")) << r.dump();
  EXPECT_EQ(r["wrong"].get<int64_t>(), 0);
  EXPECT_EQ(r["elements"].get<int64_t>(), 8 * 2048);
}

// ---- bf16: every value written to a bf16 buffer is rounded (docs/model.md) -----------------------------------

namespace {

// Runs a bf16 all-reduce with the inputs `fill(chip, i)`; returns every chip's output.
nlohmann::json bf16_all_reduce(const std::string& dims, int64_t elements,
                               const std::function<double(int64_t chip, int64_t i)>& fill) {
  return in_child([&] {
    std::string yaml = collective("all_reduce", dims, std::to_string(2 * elements) + "B", "  dtype: bf16\n",
                                  "tpu-v3", true);
    Experiment e = load_experiment_text(yaml, "t.yaml");
    std::unique_ptr<Prepared> p = prepare(e);
    Simulation s;
    s.pod = std::make_unique<Pod>(*p->ctx);
    for (auto& chip : s.pod->chips()) {
      auto& data = chip->store().get_mut(0).data;
      for (int64_t i = 0; i < elements; ++i) data[i] = static_cast<float>(fill(chip->id(), i));
    }
    sc_core::sc_start();
    nlohmann::json out = nlohmann::json::array();
    for (auto& chip : s.pod->chips()) out.push_back(chip->store().get(1).data);
    return nlohmann::json({{"outputs", out}});
  });
}

}  // namespace

// Two chips: 1 + 2^-8 is a tie between the bf16 neighbours 1 and 1 + 2^-7 and rounds to the even one, 1;
// 1 + 3 * 2^-8 is a tie between 1 + 2^-7 and 1 + 2^-6 and rounds to 1 + 2^-6. The exact (fp32) sums are
// 1.00390625 and 1.01171875; a bf16 all-reduce that kept fp32 partial sums would return those.
TEST(CollectiveNumericsTest, Bf16AllReduceRoundsTheSum) {
  auto r = bf16_all_reduce("[2, 1]", 64, [](int64_t chip, int64_t i) {
    return chip == 0 ? 1.0 : (i % 2 == 0 ? 1.0 / 256 : 3.0 / 256);
  });
  ASSERT_FALSE(r.contains("error")) << r.dump();
  for (const auto& out : r["outputs"]) {
    ASSERT_EQ(out.size(), 64u);
    for (size_t i = 0; i < 64; ++i) EXPECT_EQ(out[i].get<double>(), i % 2 == 0 ? 1.0 : 1.015625) << i;
  }
}

// Four chips, normal(0, 1)-like inputs: every value of the result is a bf16 value, all chips agree, each is within
// the rounding error of three bf16 partial sums of the exact sum (|error| <= 3 * 2^-8 * sum |x|), and some differ
// from the fp32 sum (the partial sums were rounded).
TEST(CollectiveNumericsTest, Bf16AllReduceRoundsEveryPartialSum) {
  auto value = [](int64_t chip, int64_t i) {
    double u = std::sin(static_cast<double>(chip * 7919 + i * 104729) * 0.001) * 3.0;
    return static_cast<double>(round_bf16(static_cast<float>(u)));
  };
  auto r = bf16_all_reduce("[4, 1]", 1024, value);
  ASSERT_FALSE(r.contains("error")) << r.dump();
  int64_t differ = 0;
  for (size_t i = 0; i < 1024; ++i) {
    double exact = 0, magnitude = 0;
    float fp32 = 0;
    for (int64_t c = 0; c < 4; ++c) {
      exact += value(c, static_cast<int64_t>(i));
      magnitude += std::fabs(value(c, static_cast<int64_t>(i)));
      fp32 += static_cast<float>(value(c, static_cast<int64_t>(i)));
    }
    double got = r["outputs"][0][i].get<double>();
    for (int c = 1; c < 4; ++c) EXPECT_EQ(r["outputs"][c][i].get<double>(), got) << i;
    EXPECT_EQ(static_cast<double>(round_bf16(static_cast<float>(got))), got) << i;
    EXPECT_LE(std::fabs(got - exact), 3 * magnitude / 256) << i;
    differ += static_cast<float>(got) != fp32;
  }
  EXPECT_GT(differ, 100);
}

// A max all-reduce (the vocabulary-parallel cross-entropy's row maxima) runs the sum's schedule; where a reduction
// lands an arrival it keeps the larger value instead of adding (bf16 buffers still round what they store).
TEST(CollectiveTest, MaxReductionKeepsTheLargerValue) {
  std::vector<float> buf = {1.0f, -2.0f, 3.0f, 0.5f};
  const Region r = contiguous(1, 3);  // elements 1..3
  land_region(buf, r, {-5.0f, 4.0f, 1.0f}, Task::Combine::Add, false, true);
  EXPECT_EQ(buf, (std::vector<float>{1.0f, -2.0f, 4.0f, 1.0f}));
  land_region(buf, r, {1.0f, 1.0f, 1.0f}, Task::Combine::Add, false, false);  // a sum still adds
  EXPECT_EQ(buf, (std::vector<float>{1.0f, -1.0f, 5.0f, 2.0f}));
  land_region(buf, contiguous(0, 1), {7.0f}, Task::Combine::Overwrite, false, true);  // a copy still overwrites
  EXPECT_EQ(buf[0], 7.0f);
}

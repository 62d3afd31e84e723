// Training over several slices joined by the data-center network (hardware.slices, mesh.dcn_axes), as a user runs
// it: every layout reproduces the single-device step (numeric mode, `podsim compare`); the bytes each chip and host
// sends over the DCN for data, fsdp and pipeline over the slices equal a count by hand; the DCN gradient reduction
// overlaps the backward pass unless run.dcn_overlap is off; axes whose traffic would cross the DCN in every layer are
// refused unless asked for; the box of chips gives the whole pod's figures. TPU v5e (its DCN bandwidth is
// published); slices of 4 x 1 chips share one host, 2 x 2 x 1 ... the presets' host blocks (topology/hosts.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

const std::string kTransformer =
    "workload:\n  model: transformer\n  layers: 3\n  d_model: 32\n  d_ff: 48\n  heads: 4\n  vocab: 50\n"
    "  seq_len: 8\n  batch: 8\n  dtype: fp32\n  optimizer: adam\n";
const std::string kMlp = "workload:\n  model: mlp\n  batch: 16\n  input: 24\n  hidden: 40\n  layers: 3\n  classes: 10\n"
                         "  dtype: fp32\n  optimizer: adam\n";

std::string hw(const std::string& dims, int slices) {
  return "hardware:\n  preset: tpu-v5e\n  pod: {dims: " + dims + "}\n  slices: " + std::to_string(slices) + "\n";
}

nlohmann::json summary(const std::string& dir) { return nlohmann::json::parse(read_file(dir + "/summary.json")); }

struct Case {
  std::string name, dims, rest;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name << " on 2 slices of " << c.dims; }
const Case kCases[] = {
    // MaxText's default: data over the DCN, fsdp inside each slice.
    {"DataOverSlicesFsdpInside", "[2, 1]",
     "strategy: {name: [data_parallel, fsdp]}\nmesh: {axes: [data, fsdp], shape: [2, 2], dcn_axes: [data]}\n"},
    // One data axis over both networks (MaxText's dcn_data x ici_data): its all-reduces run hierarchically.
    {"DataOverSlicesAndInside", "[2, 1]", "strategy: {name: data_parallel}\nmesh: {axes: [data], shape: [4]}\n"},
    {"FsdpOverSlices", "[2, 1]",
     "strategy: {name: [fsdp, data_parallel]}\nmesh: {axes: [fsdp, data], shape: [2, 2], dcn_axes: [fsdp]}\n"},
    {"PipelineOverSlices", "[2, 1]",
     "strategy: {name: [pipeline, data_parallel], micro_batches: 2}\n"
     "mesh: {axes: [pipe, data], shape: [2, 2], dcn_axes: [pipe]}\n"},
    {"ModelOverSlicesWhenAllowed", "[2, 1]",
     "strategy: {name: [data_parallel, spmd]}\n"
     "mesh: {axes: [model, data], shape: [2, 2], dcn_axes: [model], dcn_allow: [model]}\n"},
    {"DataOverSlicesWithoutOverlap", "[2, 1]",
     "strategy: {name: [data_parallel, fsdp]}\nmesh: {axes: [data, fsdp], shape: [2, 2]}\n"},
};

class MultisliceEquivalenceTest : public ::testing::TestWithParam<std::tuple<Case, bool>> {};

TEST_P(MultisliceEquivalenceTest, ReproducesTheSingleDeviceStep) {
  const auto& [c, transformer] = GetParam();
  const std::string& workload = transformer ? kTransformer : kMlp;
  const std::string overlap = c.name == "DataOverSlicesWithoutOverlap" ? ", dcn_overlap: false" : "";
  const std::string ref = write_file("ref.yaml", hw("[1, 1]", 1) + workload + "run: {numeric: true}\n");
  const std::string exp = write_file("exp.yaml", hw(c.dims, 2) + workload + c.rest + "run: {numeric: true" + overlap + "}\n");
  CliResult r = run_podsim({"run", ref, "--out", test_dir() + "/ref", "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_podsim({"run", exp, "--out", test_dir() + "/exp", "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  // The run crossed the DCN, and every tensor agrees with one chip's within its bound (docs/strategies.md).
  EXPECT_GT(summary(test_dir() + "/exp")["dcn"]["bytes"].get<double>(), 0);
  CliResult cmp = run_podsim({"compare", test_dir() + "/ref", test_dir() + "/exp"});
  EXPECT_EQ(cmp.code, 0) << cmp.out << cmp.err;
  const size_t at = cmp.out.find("  equal: ");
  ASSERT_NE(at, std::string::npos) << cmp.out;
  EXPECT_GE(std::stoi(cmp.out.substr(at + 9)), transformer ? 100 : 30) << cmp.out;
}

INSTANTIATE_TEST_SUITE_P(Multislice, MultisliceEquivalenceTest,
                         ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Bool()), [](const auto& info) {
                           return std::get<0>(info.param).name + (std::get<1>(info.param) ? "Transformer" : "Mlp");
                         });

// The MLP of the hand counts: 24 -> 40 -> 40 -> 40 -> 8, P = 24*40 + 40*40*2 + 40*8 weights + 3*40 + 8 biases =
// 4608 fp32 parameters. Two slices of 4 x 1 chips, one host each (the v5e host's 8 chips do not fit: 4 per host).
const std::string kHandMlp = "workload: {model: mlp, batch: 32, input: 24, hidden: 40, layers: 3, classes: 8, "
                             "dtype: fp32, optimizer: adam}\n";
constexpr double kP = 24 * 40 + 40 * 40 * 2 + 40 * 8 + 3 * 40 + 8;  // 4608

nlohmann::json run_hand(const std::string& rest) {
  const std::string f = write_file("hand.yaml", hw("[4, 1]", 2) + kHandMlp + rest);
  CliResult r = run_podsim({"run", f, "--out", test_dir() + "/hand", "-q"});
  EXPECT_EQ(r.code, 0) << r.err;
  return summary(test_dir() + "/hand");
}

void expect_every_chip_and_host(const nlohmann::json& s, double per_chip) {
  ASSERT_TRUE(s.contains("dcn")) << s.dump();
  const auto& d = s["dcn"];
  EXPECT_EQ(d["chips_per_host"], 4);
  for (const auto& b : d["per_chip_bytes"]) EXPECT_EQ(b.get<double>(), per_chip);
  for (const auto& b : d["per_host"]["bytes_out"]) EXPECT_EQ(b.get<double>(), 4 * per_chip);
  for (const auto& b : d["per_host"]["bytes_in"]) EXPECT_EQ(b.get<double>(), 4 * per_chip);
}

}  // namespace

// Data over the S = 2 slices, fsdp over the N = 4 chips of each: each gradient is reduce-scattered inside the slice
// and its shard (P x 4 / N bytes in all) all-reduced across the slices, a ring of 2 sending 2 (S - 1) / S of it; the
// loss's all-reduce over data x fsdp sends its hierarchical share, 2 (S - 1) elements (its one element padded to S N,
// N of them after the reduce-scatter inside). One collective per gradient (run.combine_threshold 0: no padding of a
// combined buffer).
TEST(MultisliceBytesTest, DataOverSlicesSendsEachChipsGradientShard) {
  auto s = run_hand("strategy: {name: [data_parallel, fsdp]}\nmesh: {axes: [data, fsdp], shape: [2, 4]}\n"
                    "run: {trace: {format: \"off\"}, combine_threshold: 0B}\n");
  const double S = 2, N = 4;
  expect_every_chip_and_host(s, 2 * (S - 1) / S * kP * 4 / N + 2 * (S - 1) * 4);
}

// fsdp over the 2 slices (each weight half in each slice), data over the 4 chips of each: every chip gathers each
// parameter across the slices before its forward use (sending its half, P x 4 / 2 bytes in all), again before the
// backward for the weights the backward reads (fc1, fc2 and out: the input gradient of fc0 is not needed), and
// reduce-scatters each gradient across the slices (half of P x 4 sent); the loss's all-reduce as above.
TEST(MultisliceBytesTest, FsdpOverSlicesGathersAndScattersAcrossThem) {
  auto s = run_hand("strategy: {name: [fsdp, data_parallel]}\nmesh: {axes: [fsdp, data], shape: [2, 4], "
                    "dcn_axes: [fsdp]}\nrun: {trace: {format: \"off\"}}\n");
  const double regathered = 40 * 40 * 2 + 40 * 8;
  expect_every_chip_and_host(s, kP * 4 / 2 + regathered * 4 / 2 + kP * 4 / 2 + 2 * 4);
}

// Two pipeline stages on the two slices, data over the 4 chips of each, 4 micro-batches of 32 / 4 examples: each
// chip of stage 0 sends every micro-batch's activation at the cut (32 / 4 / 4 examples x 40 features x 4 bytes) to
// its peer in slice 1, which sends its gradient back; nothing else crosses (acknowledgements carry no data).
TEST(MultisliceBytesTest, PipelineOverSlicesSendsActivationsAndTheirGradients) {
  auto s = run_hand("strategy: {name: [pipeline, data_parallel], micro_batches: 4}\n"
                    "mesh: {axes: [pipe, data], shape: [2, 4], dcn_axes: [pipe]}\nrun: {trace: {format: \"off\"}}\n");
  expect_every_chip_and_host(s, 4 * (32.0 / 4 / 4) * 40 * 4);
}

// run.dcn_overlap: on (the default), the gradient reductions across the slices start while the backward pass still
// runs; off, every one of them waits for its end (PaLM's transfer), and the step is no faster.
TEST(MultisliceOverlapTest, DcnReductionsOverlapTheBackwardPassUnlessTurnedOff) {
  const std::string base = hw("[4, 1]", 2) +
                           "workload: {model: transformer, layers: 4, d_model: 256, d_ff: 1024, heads: 4, vocab: 1000, "
                           "seq_len: 64, batch: 16}\nstrategy: {name: [data_parallel, fsdp]}\n"
                           "mesh: {axes: [data, fsdp], shape: [2, 4]}\n";
  auto measure = [&](bool overlap) {
    const std::string name = overlap ? "on" : "off";
    const std::string f = write_file(name + ".yaml", base + "run: {trace: {format: \"off\"}, combine_threshold: 0B, "
                                                     "dcn_overlap: " + (overlap ? "true" : "false") + "}\n");
    CliResult r = run_podsim({"run", f, "--out", test_dir() + "/" + name, "-q"});
    EXPECT_EQ(r.code, 0) << r.err;
    auto s = summary(test_dir() + "/" + name);
    double backward_end = 0, first_dcn = 1e9;
    for (const auto& op : s["ops"])
      if (op["phase"] == "backward") backward_end = std::max(backward_end, op["end_ns"].get<double>());
    for (const auto& op : s["ops"])
      for (const auto& c : s["collectives"])
        if (c["name"] == op["name"] && c.contains("dcn") && c["kind"] == "all_reduce" &&
            op["name"].get<std::string>().find(".grad/") != std::string::npos)
          first_dcn = std::min(first_dcn, op["start_ns"].get<double>());
    return std::make_tuple(backward_end, first_dcn, s["step_time_s"].get<double>(), s["dcn"]["exposed_s"].get<double>());
  };
  const auto [end_on, first_on, step_on, exposed_on] = measure(true);
  const auto [end_off, first_off, step_off, exposed_off] = measure(false);
  EXPECT_LT(first_on, end_on);    // overlapped
  EXPECT_GE(first_off, end_off);  // after the backward pass
  EXPECT_GE(step_off, step_on);
  EXPECT_GE(exposed_off, exposed_on);
}

// A model axis (or any axis but data, fsdp and pipe) over the slices is refused, with what to do instead, unless
// mesh.dcn_allow names it; a preset without a published DCN bandwidth needs one for several slices; the DCN axes must
// span every slice.
TEST(MultisliceErrorsTest, AxesThatWouldCrossTheDcnEveryLayerAreRefused) {
  const std::string f = write_file("m.yaml", hw("[2, 1]", 2) + kMlp + "strategy: {name: [data_parallel, spmd]}\n"
                                             "mesh: {axes: [model, data], shape: [2, 2], dcn_axes: [model]}\n");
  CliResult r = run_podsim({"validate", f});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("PODSIM-PLN-002"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mesh axis 'model' would span slices"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mesh.dcn_allow"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("m.yaml:"), std::string::npos) << r.err;  // where
}

TEST(MultisliceErrorsTest, SlicesWithoutAPublishedDcnBandwidthNeedOne) {
  const std::string f = write_file("v4.yaml", "hardware:\n  preset: tpu-v4\n  pod: {dims: [2, 2, 1]}\n  slices: 2\n" +
                                                  kMlp + "strategy: {name: data_parallel}\n");
  CliResult r = run_podsim({"validate", f});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("hardware.dcn.bandwidth"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("v4.yaml:4"), std::string::npos) << r.err;  // hardware.slices' line
  r = run_podsim({"validate", f, "--set", "hardware.dcn.bandwidth=6.6GB/s"});
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST(MultisliceErrorsTest, TheDcnAxesMustSpanEverySlice) {
  const std::string f = write_file("s.yaml", hw("[2, 1]", 4) + kMlp + "strategy: {name: [data_parallel, fsdp]}\n"
                                             "mesh: {axes: [data, fsdp], shape: [2, 4], dcn_axes: [data]}\n");
  CliResult r = run_podsim({"validate", f});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("4 slices but the axes over the data-center network (data) span only 2"), std::string::npos)
      << r.err;
}

// One box of whole hosts stands for every slice (hw/pod/symmetry.h): the same figures as every chip simulated.
TEST(MultisliceSymmetryTest, TheBoxGivesTheWholePodsFigures) {
  const std::string f = write_file("b.yaml", hw("[4, 2]", 4) +
                                                 "workload: {model: transformer, layers: 2, d_model: 128, d_ff: 256, "
                                                 "heads: 4, vocab: 512, seq_len: 32, batch: 64}\n"
                                                 "strategy: {name: [data_parallel, fsdp]}\n"
                                                 "mesh: {axes: [data, fsdp], shape: [4, 8]}\nrun: {trace: {format: \"off\"}}\n");
  CliResult a = run_podsim({"run", f, "--out", test_dir() + "/box", "-q"});
  ASSERT_EQ(a.code, 0) << a.err;
  CliResult b = run_podsim({"run", f, "--out", test_dir() + "/all", "-q", "--set", "run.symmetry=off"});
  ASSERT_EQ(b.code, 0) << b.err;
  auto sa = summary(test_dir() + "/box"), sb = summary(test_dir() + "/all");
  EXPECT_LT(sa["simulated_chips"].get<int64_t>(), 32);
  EXPECT_EQ(sb["simulated_chips"].get<int64_t>(), 32);
  for (auto* s : {&sa, &sb}) {
    s->erase("simulated_chips");
    s->erase("notes");
  }
  EXPECT_EQ(sa.dump(1), sb.dump(1));
}

// summary.json's dcn block against its definitions, recomputed from the run's own tables: communication_s is the
// union of the result chip's ops that cross the DCN (ops[] with dcn: true; a receive's span is its wait), exposed_s
// the part of the step during which nothing else runs (the union of every op's span less that of the others),
// bytes / max_bytes_per_chip / max_bytes_per_host the sum and maxima of the per-chip and per-host rows, and
// nic_busy_fraction the hosts' mean. Data over the 2 slices with the gradient all-reduces partly behind the
// backward pass and partly after it (one collective per gradient), so that both figures are neither 0 nor the step.
TEST(MultisliceFiguresTest, TheDcnBlockFollowsFromTheOpTables) {
  auto s = run_hand("strategy: {name: [data_parallel, fsdp]}\nmesh: {axes: [data, fsdp], shape: [2, 4]}\n"
                    "run: {trace: {format: \"off\"}, combine_threshold: 0B}\n");
  ASSERT_TRUE(s.contains("dcn")) << s.dump();
  const auto& d = s["dcn"];
  std::vector<std::pair<double, double>> across, other;
  for (const auto& op : s["ops"]) {
    if (op["kind"] == "recv") continue;
    const std::pair<double, double> span{op["start_ns"].get<double>() * 1e-9, op["end_ns"].get<double>() * 1e-9};
    (op.value("dcn", false) ? across : other).push_back(span);
  }
  ASSERT_FALSE(across.empty());
  std::vector<std::pair<double, double>> all = other;
  all.insert(all.end(), across.begin(), across.end());
  const double tol = 1e-11 * static_cast<double>(s["ops"].size());
  EXPECT_NEAR(d["communication_s"].get<double>(), union_s(across), tol);
  EXPECT_NEAR(d["exposed_s"].get<double>(), union_s(all) - union_s(other), tol);
  EXPECT_GT(d["exposed_s"].get<double>(), 0);
  EXPECT_LT(d["exposed_s"].get<double>(), d["communication_s"].get<double>());

  double bytes = 0, chip_max = 0, host_max = 0, busy = 0;
  for (const auto& b : d["per_chip_bytes"]) {
    bytes += b.get<double>();
    chip_max = std::max(chip_max, b.get<double>());
  }
  for (const auto& b : d["per_host"]["bytes_out"]) host_max = std::max(host_max, b.get<double>());
  for (const auto& b : d["per_host"]["nic_busy_fraction"]) busy += b.get<double>();
  const double hosts = static_cast<double>(d["per_host"]["nic_busy_fraction"].size());
  EXPECT_EQ(d["hosts"].get<double>(), hosts);
  EXPECT_DOUBLE_EQ(d["bytes"].get<double>(), bytes);
  EXPECT_DOUBLE_EQ(d["max_bytes_per_chip"].get<double>(), chip_max);
  EXPECT_DOUBLE_EQ(d["max_bytes_per_host"].get<double>(), host_max);
  EXPECT_NEAR(d["nic_busy_fraction"].get<double>(), busy / hosts, 1e-6);
  // A host's NICs are busy at least as long as its bytes take at the host's bandwidth.
  const double T = s["step_time_s"];
  for (size_t h = 0; h < d["per_host"]["bytes_out"].size(); ++h)
    EXPECT_GE(d["per_host"]["nic_busy_fraction"][h].get<double>() * T + 1e-6 * T,
              d["per_host"]["bytes_out"][h].get<double>() / d["bandwidth_per_host_Bps"].get<double>());
}

// `podsim compare REFERENCE CANDIDATE` with its default tolerances (docs/strategies.md, "Tolerances"): a correct
// partitioned step reads as equal to the single-device step in bf16 and in fp32, and a step that is wrong in one
// place does not: another learning rate, or one all-reduce left out (the test plugin's test_drop_all_reduce). The
// wrong runs also show *which* tensors are wrong: a learning rate only changes the updated parameters, a dropped
// gradient all-reduce only its parameter's gradient, Adam state and update. And every shipped example that has a
// single-device reference compares equal to it in numeric mode, in its own dtype.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "base/npy.h"
#include "tests/cli/shipped.h"
#include "tests/test_paths.h"

using namespace podsim::test;

namespace {

// The tensors `podsim compare` flags (lines ending in "ABOVE"), each with its line.
std::map<std::string, std::string> flagged(const std::string& out) {
  std::map<std::string, std::string> m;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line))
    if (line.size() > 5 && line.compare(line.size() - 5, 5, "ABOVE") == 0) {
      std::istringstream words(line);
      std::string name;
      words >> name;
      m[name] = line;
    }
  return m;
}

std::set<std::string> names(const std::map<std::string, std::string>& m) {
  std::set<std::string> s;
  for (const auto& [k, v] : m) s.insert(k);
  return s;
}

// A two-layer Transformer on 8 chips with Adam (lr 0.001), in numeric mode.
std::string transformer(const std::string& dtype) {
  return "hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 2]}\n"
         "workload:\n  model: transformer\n  layers: 2\n  d_model: 64\n  d_ff: 128\n  heads: 4\n  vocab: 128\n"
         "  seq_len: 16\n  batch: 8\n  dtype: " +
         dtype + "\n  optimizer: adam\n  learning_rate: 0.001\nrun: {numeric: true, trace: {format: \"off\"}}\n";
}

const std::string kDataModel = "strategy: {name: [data_parallel, spmd]}\nmesh: {axes: [data, model], shape: [2, 4]}\n";

// Runs `text` (plus `extra` arguments) into test_dir()/out.
void run(const std::string& out, const std::string& text, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"run", write_file(out + ".yaml", text), "--out", test_dir() + "/" + out, "-q"};
  args.insert(args.end(), extra.begin(), extra.end());
  CliResult r = run_podsim(args);
  ASSERT_EQ(r.code, 0) << out << ":\n" << r.err;
}

CliResult compare(const std::string& reference, const std::string& candidate) {
  return run_podsim({"compare", test_dir() + "/" + reference, test_dir() + "/" + candidate});
}

}  // namespace

// The first folder is the reference: the relative error divides by its norm. Two hand-made runs of one tensor,
// ones and twos: against the ones, the twos are 100 % off (||2 - 1|| / ||1||); against the twos, the ones 50 %.
TEST(CompareTest, TheReferenceComesFirst) {
  for (const char* run : {"ones", "twos"}) {
    std::filesystem::create_directories(test_dir() + "/" + run + "/tensors");
    podsim::write_npy(test_dir() + "/" + run + "/tensors/x.npy", {4},
                      std::vector<float>(4, std::string(run) == "ones" ? 1.0f : 2.0f));
  }
  CliResult c = compare("ones", "twos");
  EXPECT_EQ(c.code, 1) << c.out << c.err;
  EXPECT_NE(c.out.find("reference: " + test_dir() + "/ones\n  candidate: " + test_dir() + "/twos\n"),
            std::string::npos)
      << c.out;
  EXPECT_NE(flagged(c.out)["x"].find("1.000e+00"), std::string::npos) << c.out;
  // Without config.resolved.yaml the step cannot be rebuilt: every tensor gets fp32's bound, and the run says so.
  EXPECT_NE(c.out.find("has no config.resolved.yaml: every tensor judged at fp32's bound"), std::string::npos)
      << c.out;
  EXPECT_NE(flagged(c.out)["x"].find("1.000e-05"), std::string::npos) << c.out;
  c = compare("twos", "ones");
  EXPECT_NE(flagged(c.out)["x"].find("5.000e-01"), std::string::npos) << c.out;
}

// Per dtype: the learning rate the candidate uses wrongly. bf16 stores a parameter of about 0.06 with a unit of
// about lr / 2, so it resolves a step only to within about half of it (the bound on an Adam update is half a full
// step): twice the learning rate. fp32 resolves a tenth of it easily.
struct DtypeCase {
  std::string dtype;
  std::string wrong_lr;
};
void PrintTo(const DtypeCase& c, std::ostream* os) { *os << c.dtype; }

class PerturbedRunTest : public ::testing::TestWithParam<DtypeCase> {};

TEST_P(PerturbedRunTest, CorrectRunPassesWrongLearningRateFails) {
  const DtypeCase& p = GetParam();
  run("one", transformer(p.dtype), {"--single-device"});
  run("part", transformer(p.dtype) + kDataModel);
  CliResult c = compare("one", "part");
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("  equal: "), std::string::npos) << c.out;
  EXPECT_NE(c.out.find(" " + p.dtype + " "), std::string::npos) << "no tensor judged as " << p.dtype << ":\n" << c.out;

  run("lr", transformer(p.dtype) + kDataModel, {"--set", "workload.learning_rate=" + p.wrong_lr});
  c = compare("one", "lr");
  EXPECT_EQ(c.code, 1) << c.out << c.err;
  const auto bad = flagged(c.out);
  EXPECT_GE(bad.size(), 5u) << c.out;
  // The learning rate changes the updated parameters only: gradients, Adam's m and v and the loss stay equal.
  for (const auto& [name, line] : bad) {
    EXPECT_TRUE(name.size() > 4 && name.compare(name.size() - 4, 4, ".new") == 0 &&
                name.find(".m.new") == std::string::npos && name.find(".v.new") == std::string::npos)
        << line;
    EXPECT_NE(line.find("adam step"), std::string::npos) << line;
  }
}

TEST_P(PerturbedRunTest, DroppedAllReduceFails) {
  const DtypeCase& p = GetParam();
  run("one", transformer(p.dtype), {"--single-device"});
  run("dp", transformer(p.dtype) + "strategy: {name: data_parallel}\n");
  CliResult c = compare("one", "dp");
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  // The same plan without the all-reduce of one gradient: each chip updates layer1.ln1.beta with its own part.
  run("drop", transformer(p.dtype) + "strategy: {name: test_drop_all_reduce, drop: layer1.ln1.beta.grad}\n",
      {"--plugin", PODSIM_TEST_PLUGIN});
  c = compare("one", "drop");
  EXPECT_EQ(c.code, 1) << c.out << c.err;
  const std::set<std::string> want = {"layer1.ln1.beta.grad", "layer1.ln1.beta.m.new", "layer1.ln1.beta.v.new",
                                      "layer1.ln1.beta.new"};
  EXPECT_EQ(names(flagged(c.out)), want) << c.out;
}

INSTANTIATE_TEST_SUITE_P(CompareBf16AndFp32, PerturbedRunTest,
                         ::testing::Values(DtypeCase{"bf16", "0.002"}, DtypeCase{"fp32", "0.0011"}),
                         [](const auto& info) { return info.param.dtype; });

namespace {

// Examples whose workload communicates between chips by definition (a collective, synthetic traffic): they have no
// single-device step to compare with (`podsim run --single-device` refuses them with PODSIM-PLN-001).
const std::set<std::string> kNoSingleDeviceStep = {"configs/examples/allreduce_16x16.yaml",
                                                  "configs/examples/alltoall_8x8.yaml",
                                                  "configs/examples/link_down.yaml",
                                                  "configs/examples/traffic_uniform.yaml"};

std::vector<Shipped> examples() { return detail::yaml_files_under({"configs/examples"}); }

class ExampleTest : public ::testing::TestWithParam<Shipped> {};

}  // namespace

// The example in numeric mode (as shipped otherwise, trace off), against its --single-device run. Numeric runs cost
// more than timing runs: an example over the quick budget runs with its numeric_reduced_sizes() entry
// (tests/cli/shipped.h), or its reduced_sizes() entry, and fails without one.
TEST_P(ExampleTest, EqualToItsSingleDeviceRun) {
  const Shipped& f = GetParam();
  std::vector<std::string> args = {"run", source_dir() + "/" + f.path, "--set", "run.numeric=true",
                                   "--set", "run.trace.format=off", "-q"};
  if (kNoSingleDeviceStep.count(f.path)) {
    args.insert(args.end(), {"--single-device", "--out", test_dir() + "/one"});
    CliResult r = run_podsim(args);
    EXPECT_EQ(r.code, 2) << f.path;
    EXPECT_NE(r.err.find("PODSIM-PLN-001"), std::string::npos) << f.path << ":\n" << r.err;
    return;
  }
  const std::vector<std::string>* sets = nullptr;
  if (auto n = numeric_reduced_sizes().find(f.path); n != numeric_reduced_sizes().end())
    sets = &n->second;
  else if (auto r = reduced_sizes().find(f.path); r != reduced_sizes().end())
    sets = &r->second;
  if (sets)
    for (const std::string& s : *sets) args.insert(args.end(), {"--set", s});
  for (const char* out : {"one", "example"}) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--out", test_dir() + "/" + out});
    if (std::string(out) == "one") a.push_back("--single-device");
    CliResult r = run_podsim(a);
    ASSERT_EQ(r.code, 0) << f.path << " (" << out << "):\n" << r.err;
    auto s = nlohmann::json::parse(read_file(test_dir() + "/" + out + "/summary.json"));
    auto host = nlohmann::json::parse(read_file(test_dir() + "/" + out + "/host.json"));
    EXPECT_TRUE(s["numeric"].get<bool>());
    EXPECT_LE(s["flops"].get<double>(), QuickBudget::kNumericFlops)
        << f.path << " in numeric mode is too large for the quick tier: add overrides that shrink it to "
        << "numeric_reduced_sizes() in tests/cli/shipped.h";
    EXPECT_LE(host["activations"].get<double>(), QuickBudget::kActivations) << f.path;
  }
  CliResult c = compare("one", "example");
  EXPECT_EQ(c.code, 0) << f.path << "\n" << c.out << c.err;
  EXPECT_NE(c.out.find("  equal: "), std::string::npos) << c.out;
  EXPECT_EQ(c.out.find("note:"), std::string::npos) << c.out;  // the step was rebuilt: each tensor had its own rule
}

INSTANTIATE_TEST_SUITE_P(CompareExamples, ExampleTest, ::testing::ValuesIn(examples()),
                         [](const ::testing::TestParamInfo<Shipped>& i) { return i.param.name; });

// Every numeric entry names an example (a renamed file would otherwise run at full size).
TEST(CompareExamplesTable, NumericEntriesNameExamples) {
  const auto files = examples();
  for (const auto& [path, sets] : numeric_reduced_sizes())
    EXPECT_TRUE(std::any_of(files.begin(), files.end(), [&](const Shipped& s) { return s.path == path; })) << path;
  for (const std::string& path : kNoSingleDeviceStep)
    EXPECT_TRUE(std::any_of(files.begin(), files.end(), [&](const Shipped& s) { return s.path == path; })) << path;
}

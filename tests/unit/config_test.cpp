// Experiment loading: presets, precedence, the resolved file, and one test per error kind asserting the id, the
// file:line:column and the key path.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "base/text.h"
#include "sim/config/loader.h"
#include "tests/unit/load_errors.h"

using namespace podsim;

namespace {

const char* kBase = R"(hardware:
  preset: tpu-v3
workload:
  model: matmul
  m: 256
  k: 512
  n: 384
)";

Experiment load(const std::string& text, std::vector<std::string> sets = {}) {
  return load_experiment_text(text, "exp.yaml", {sets});
}

}  // namespace

TEST(ConfigTest, PresetValuesAndDefaults) {
  Experiment e = load(kBase);
  EXPECT_EQ(e.hardware.preset, "tpu-v3");
  EXPECT_DOUBLE_EQ(e.hardware.chip.clock, 940e6);
  EXPECT_EQ(e.hardware.chip.tensorcores, 2);
  EXPECT_EQ(e.hardware.chip.mxu.count, 2);
  EXPECT_EQ(e.hardware.chip.mxu.rows, 128);
  EXPECT_DOUBLE_EQ(e.hardware.chip.hbm.bandwidth, 900e9);
  EXPECT_DOUBLE_EQ(e.hardware.chip.hbm.capacity, 32.0 * (1ull << 30));
  EXPECT_TRUE(e.hardware.chip.mxu.weight_double_buffer);  // a default
  EXPECT_EQ(e.hardware.pod.dims, (std::vector<int64_t>{1, 1}));  // one chip by default
  EXPECT_EQ(e.hardware.pod.wrap, (std::vector<bool>{true, true}));
  EXPECT_NEAR(e.hardware.chip.peak_flops(), 123.2e12, 0.1e12);
  EXPECT_EQ(e.run.name, "exp");
  EXPECT_EQ(e.strategy, "single_device");  // auto resolves to the workload's default
  EXPECT_EQ(e.params.i("workload.m"), 256);
  EXPECT_EQ(e.params.where("hardware.chip.clock").file.find("tpu-v3.yaml") != std::string::npos, true);
  EXPECT_EQ(e.params.where("workload.k").line, 6);
}

TEST(ConfigTest, FileOverridesPresetAndSetOverridesFile) {
  std::string text = "hardware:\n  preset: tpu-v3\n  chip: {clock: 1GHz}\nworkload: {model: matmul, m: 1, k: 2, n: 3}\n";
  EXPECT_DOUBLE_EQ(load(text).hardware.chip.clock, 1e9);
  Experiment e = load(text, {"hardware.chip.clock=2GHz", "hardware.pod.dims=[4, 2]", "workload.m=7"});
  EXPECT_DOUBLE_EQ(e.hardware.chip.clock, 2e9);
  EXPECT_EQ(e.params.where("hardware.chip.clock").origin, "--set hardware.chip.clock=2GHz");
  EXPECT_EQ(e.hardware.pod.dims, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(e.params.i("workload.m"), 7);
}

TEST(ConfigTest, AllPresetsLoad) {
  auto presets = list_presets();
  std::vector<std::string> names;
  for (const auto& p : presets) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"tpu-v2", "tpu-v3", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu7x"}));
  // Published peaks (TFLOP/s, bf16) the presets must reproduce from MXU shape, count and clock. Each figure is
  // independent of the preset's clock: where a clock is not published and was derived from a peak, the check uses
  // another source's peak (docs/hardware.md lists the sources).
  struct Peak {
    double tflops, tolerance;
  };
  std::map<std::string, Peak> peak = {
      {"tpu-v2", {45, 0.025}},   // 180 TF per 4-chip board (IEEE Micro 2021); the clock is 700 MHz
      {"tpu-v3", {123, 0.01}},   // Cloud docs; clock 940 MHz
      {"tpu-v4", {275, 0.01}},   // Cloud docs; clock 1050 MHz
      {"tpu-v5e", {197, 0.01}},  // Cloud docs; clock 1.5 GHz (scaling book)
      {"tpu-v5p", {459, 0.01}},  // Cloud docs; clock 1750 MHz
      {"tpu-v6e", {920, 0.01}},  // the scaling book's 9.20e14; the clock is derived from the Cloud docs' 918 TF
      // The Cloud tpu7x doc's 2307 TF, which the clock was derived from (no other source gives a peak): the check
      // is of the arithmetic only; TpuV7xMatchesItsPublishedFigures checks the fp8 peak, which is independent.
      {"tpu7x", {2307, 0.001}},
  };
  for (const auto& p : presets) {
    std::string text = "hardware: {preset: " + p.name + "}\nworkload: {model: matmul, m: 1, k: 1, n: 1}\n";
    Experiment e = load(text);
    EXPECT_FALSE(p.description.empty()) << p.name;
    const Peak& want = peak.at(p.name);
    EXPECT_NEAR(e.hardware.chip.peak_flops() / 1e12, want.tflops, want.tolerance * want.tflops) << p.name;
    int dims = (p.name == "tpu-v4" || p.name == "tpu-v5p" || p.name == "tpu7x") ? 3 : 2;
    EXPECT_EQ(e.hardware.ici.dimensions, dims) << p.name;
    EXPECT_EQ(static_cast<int>(e.hardware.pod.dims.size()), dims) << p.name;
  }
}

// TPU7x (Ironwood) per the Cloud tpu7x doc: 2 TensorCores, 2307 TF bf16 and 4614 TF fp8 (the fp8 rate twice the
// bf16: fp8_rate 2), 192 GiB of HBM at 7.38 TB/s, 1.2 TB/s of ICI per chip (over 6 links, both ways: 100 GB/s per
// link and direction), 4 chips a host. No int8 figure is published: no int8 mode.
TEST(ConfigTest, TpuV7xMatchesItsPublishedFigures) {
  Experiment e = load("hardware: {preset: tpu7x}\nworkload: {model: matmul, m: 1, k: 1, n: 1}\n");
  EXPECT_EQ(e.hardware.chip.tensorcores, 2);
  EXPECT_NEAR(e.hardware.chip.peak_flops() * static_cast<double>(e.hardware.chip.mxu.fp8_rate) / 1e12, 4614, 1);
  EXPECT_EQ(e.hardware.chip.mxu.int8_rate, 0);
  EXPECT_DOUBLE_EQ(e.hardware.chip.hbm.capacity, 192.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(e.hardware.chip.hbm.bandwidth, 7.38e12);
  EXPECT_DOUBLE_EQ(e.hardware.ici.link_bandwidth * 6 * 2, 1.2e12);
  EXPECT_EQ(e.hardware.host.chips, 4);
}

// The int8 and fp8 rates the presets carry: each chip's published int8 (fp8) peak over its bf16 peak
// (../shared/reference/tpu-inference.md section 5; docs/hardware.md); 0 where the chip has no such mode.
TEST(ConfigTest, PresetsCarryTheirInt8AndFp8Rates) {
  const std::map<std::string, std::pair<int64_t, int64_t>> want = {
      {"tpu-v2", {0, 0}}, {"tpu-v3", {0, 0}}, {"tpu-v4", {1, 0}},  {"tpu-v5e", {2, 0}},
      {"tpu-v5p", {2, 1}}, {"tpu-v6e", {2, 1}}, {"tpu7x", {0, 2}}};
  for (const auto& [name, rates] : want) {
    Experiment e = load("hardware: {preset: " + name + "}\nworkload: {model: matmul, m: 1, k: 1, n: 1}\n");
    EXPECT_EQ(e.hardware.chip.mxu.int8_rate, rates.first) << name;
    EXPECT_EQ(e.hardware.chip.mxu.fp8_rate, rates.second) << name;
  }
}

// TPU v6e per Google's v6e page: one TensorCore with 2 MXUs of 256x256, HBM 1640 GB/s, ICI 3584 Gbps per chip
// (448 GB/s out of the chip over 4 links: 112 GB/s per link and direction); the clock is the one at which 2 arrays
// of one multiply-add per cell and cycle make the page's 918 TFLOP/s: 918e12 / (2 * 256 * 256 * 2) = 3.5 GHz.
TEST(ConfigTest, TpuV6eMatchesItsPublishedFigures) {
  Experiment e = load("hardware: {preset: tpu-v6e}\nworkload: {model: matmul, m: 1, k: 1, n: 1}\n");
  EXPECT_EQ(e.hardware.chip.tensorcores, 1);
  EXPECT_EQ(e.hardware.chip.mxu.count, 2);
  EXPECT_EQ(e.hardware.chip.mxu.rows, 256);
  EXPECT_EQ(e.hardware.chip.mxu.cols, 256);
  EXPECT_NEAR(e.hardware.chip.clock, 918e12 / (2.0 * 256 * 256 * 2), 0.01e9);
  EXPECT_DOUBLE_EQ(e.hardware.chip.hbm.bandwidth, 1640e9);
  EXPECT_DOUBLE_EQ(4 * e.hardware.ici.link_bandwidth * 8, 3584e9);
}

TEST(ConfigTest, ResolvedYamlRoundTrips) {
  Experiment e = load(kBase, {"hardware.pod.dims=[2,2]", "run.seed=9"});
  std::string text = resolved_yaml(e);
  EXPECT_NE(text.find("clock: 940MHz"), std::string::npos) << text;
  EXPECT_NE(text.find("# --set run.seed=9"), std::string::npos) << text;
  Experiment again = load_experiment_text(text, "exp.yaml");
  EXPECT_EQ(resolved_yaml(again, false), resolved_yaml(e, false));
}

TEST(ConfigTest, ResolvedYamlKeepsEveryDigit) {
  // 13+ significant digits and byte counts that are no round number of MiB read back as the same values.
  Experiment e = load(kBase, {"run.stall.probability=0.1234567890123", "hardware.chip.hbm.capacity=1234567890123B"});
  Experiment again = load_experiment_text(resolved_yaml(e), "exp.yaml");
  EXPECT_EQ(again.params.f("run.stall.probability"), 0.1234567890123);
  EXPECT_EQ(again.params.f("hardware.chip.hbm.capacity"), 1234567890123.0);
}

// ---- one test per error kind ---------------------------------------------------------------------------------

TEST(ConfigErrorTest, YamlSyntax) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\n workload: [\n");
  EXPECT_EQ(e.id(), "PODSIM-CFG-001");
  EXPECT_EQ(e.where().file, "exp.yaml");
  EXPECT_GT(e.where().line, 0);
}

// yaml-cpp stops after the common mistakes (at the next line's ':'); the error names the line of the mistake.
TEST(ConfigErrorTest, YamlSyntaxAtTheLineOfTheMistake) {
  const std::string hw = "hardware:\n  preset: tpu-v3\n";
  // A key without its colon, alone above its block (the parser stops at line 4) or before its value (line 5).
  expect_at(load_failure(hw + "workload\n  model: matmul\n"), Err::YamlSyntax, 3, 9,
            "line 3 ('workload') has no ':' after its key");
  expect_at(load_failure(hw + "workload:\n  model matmul\n  m: 1\n"), Err::YamlSyntax, 4, 15,
            "line 4 ('model matmul') has no ':' after its key");
  // Blank lines between do not move it; nor do Windows line ends.
  expect_at(load_failure(hw + "workload\n\n  model: matmul\n"), Err::YamlSyntax, 3, 9, "line 3 ('workload')");
  expect_at(load_failure("hardware:\r\n  preset: tpu-v3\r\nworkload\r\n  model: matmul\r\n"), Err::YamlSyntax, 3, 9,
            "line 3 ('workload')");
  // A comment after the key ends its text: the parser stops at the key's own line, and says the same.
  expect_at(load_failure(hw + "workload   # the model\n  model: matmul\n"), Err::YamlSyntax, 3, 9,
            "line 3 ('workload') has no ':' after its key");
  // A line indented under a key that already has a value.
  expect_at(load_failure(hw + "workload:\n  model: matmul\n    m: 1\n"), Err::YamlSyntax, 5, 5,
            "line 5 ('m: 1') is indented more than line 4 ('model: matmul'), which already has a value");
  // A line indented by a width no key above it has.
  expect_at(load_failure(hw + "workload:\n  model: matmul\n m: 1\n"), Err::YamlSyntax, 5, 2,
            "line 5 ('m: 1') is indented by 1 space, which lines up with no key above it (they are indented by 0, 2)");
  // A second ': ' on one line, at that colon.
  expect_at(load_failure(hw + "workload:\n  model: matmul: x\n"), Err::YamlSyntax, 4, 16,
            "a second ': ' on line 4 ('model: matmul: x'); quote a value that holds ': '");
}

TEST(ConfigErrorTest, YamlTabIndentNamesTheFirstTabbedLine) {
  const std::string hw = "hardware:\n  preset: tpu-v3\n";
  expect_at(load_failure(hw + "workload:\n\tmodel: matmul\n"), Err::YamlSyntax, 4, 1,
            "line 4 is indented with a tab; YAML indents with spaces");
  expect_at(load_failure(hw + "workload:\n  model: matmul\n \tm: 1\n"), Err::YamlSyntax, 5, 2,
            "line 5 is indented with a tab");
  expect_at(load_failure("hardware:\n\tpreset: tpu-v3\nworkload:\n\tmodel: matmul\n"), Err::YamlSyntax, 2, 1,
            "line 2 is indented with a tab");
  // A tab after the place the parser stopped did not cause this error: the mistake before it is reported.
  expect_at(load_failure(hw + "workload\n  model: matmul\n  m: 1\n\tk: 2\n"), Err::YamlSyntax, 3, 9,
            "line 3 ('workload') has no ':'");
  // A tab inside a value is no indentation.
  Experiment e = load(hw + "  description: \"a\tb\"\nworkload: {model: matmul, m: 1, k: 1, n: 1}\n");
  EXPECT_EQ(e.params.s("hardware.description"), "a\tb");
}

// A suggestion is at most max(1, len / 3) edits from the word typed (case ignored) and nearer than any other
// candidate; otherwise none.
TEST(SuggestionTest, OnlyAClearlyNearestCandidate) {
  const std::vector<std::string> strategies = {"auto", "data_parallel", "moe", "pipeline", "replicate",
                                               "single_device", "spmd"};
  EXPECT_EQ(suggestion_limit("foo"), 1u);
  EXPECT_EQ(suggestion_limit("ab"), 1u);
  EXPECT_EQ(suggestion_limit("piplin"), 2u);
  EXPECT_EQ(nearest("foo", strategies), "");        // 'moe' is 2 edits away
  EXPECT_EQ(nearest("pipline", strategies), "pipeline");  // 1 edit
  EXPECT_EQ(nearest("piplin", strategies), "pipeline");   // 2 edits, 6 letters
  EXPECT_EQ(nearest("pipln", strategies), "");            // 3 edits, 5 letters
  EXPECT_EQ(nearest("spdm", strategies), "spmd");         // a transposition is one edit
  EXPECT_EQ(nearest("mhz", {"Hz", "kHz", "MHz", "GHz"}), "MHz");  // case only
  EXPECT_EQ(nearest("fp16", {"fp32", "bf16"}), "");       // 2 edits from each
  EXPECT_EQ(nearest("tpu-v7", {"tpu-v2", "tpu-v3", "tpu-v4"}), "");  // 1 edit from each: no pick
  EXPECT_EQ(suggestion("foo", strategies), "valid: auto, data_parallel, moe, pipeline, replicate, single_device, spmd");
  EXPECT_EQ(suggestion("pipline", strategies), "did you mean 'pipeline'?");
}

TEST(ConfigErrorTest, UnknownKeyWithoutANearOneListsTheValidKeys) {
  Error e = load_failure(std::string(kBase) + "  foo: 3\n");
  expect_at(e, Err::UnknownKey, 8, 3, "unknown key 'workload.foo' (valid keys here: ");
  EXPECT_EQ(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
  try {
    load(kBase, {"hardware.chip.mxu.foo=3"});
    FAIL();
  } catch (const Error& o) {
    EXPECT_NE(std::string(o.what()).find("unknown key 'hardware.chip.mxu.foo' (valid keys in 'hardware.chip.mxu': "
                                         "accumulator_rows, cols, count, fp8_rate, int8_rate, load_rows_held, result_pop, rows, "
                                         "weight_double_buffer, "
                                         "weight_push)"),
              std::string::npos)
        << o.what();
  }
}

TEST(ConfigErrorTest, UnknownKeySuggestsNearest) {
  Error e = load_failure(std::string(kBase) + "  dtyp: bf16\n");
  expect_at(e, Err::UnknownKey, 8, 3, "unknown key 'workload.dtyp' (did you mean 'dtype'?)");
  EXPECT_EQ(e.key_path(), "workload.dtyp");
}

TEST(ConfigErrorTest, UnknownNestedKeyInHardware) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\n  chip:\n    mxu:\n      rowz: 64\n"
                         "workload: {model: matmul, m: 1, k: 1, n: 1}\n");
  expect_at(e, Err::UnknownKey, 5, 7, "did you mean 'rows'?");
}

TEST(ConfigErrorTest, MisplacedKeyNamesItsPlace) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\n  weight_double_buffer: false\n"
                         "workload: {model: matmul, m: 1, k: 1, n: 1}\n");
  expect_at(e, Err::UnknownKey, 3, 3, "belongs at 'hardware.chip.mxu.weight_double_buffer'");
}

TEST(ConfigErrorTest, UnknownSection) {
  Error e = load_failure(std::string(kBase) + "runn:\n  seed: 3\n");
  expect_at(e, Err::UnknownKey, 8, 1, "did you mean 'run'?");
}

TEST(ConfigErrorTest, MissingRequiredKey) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\nworkload:\n  model: matmul\n  m: 1\n  k: 2\n");
  expect_at(e, Err::MissingKey, 3, 1, "missing required key 'workload.n'");
}

TEST(ConfigErrorTest, MissingModel) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\nworkload:\n  m: 1\n");
  expect_at(e, Err::MissingKey, 3, 1, "workload.model");
}

TEST(ConfigErrorTest, MisspelledModelIsAnUnknownKeyAtItsLineNotAMissingOne) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\nworkload:\n  mdoel: transformer\n  layers: 2\n");
  expect_at(e, Err::UnknownKey, 4, 3, "unknown key 'workload.mdoel' (did you mean 'model'?)");
  // The misspelling explains the missing key: it is not reported again, and the workload's other keys (unknown
  // without a model) are not reported either.
  EXPECT_TRUE(e.also().empty()) << e.also().front().what();
}

TEST(ConfigErrorTest, MisspelledRequiredKeyIsNotAlsoMissing) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\nworkload:\n  model: matmul\n  m: 1\n  k: 2\n  nn: 3\n");
  expect_at(e, Err::UnknownKey, 7, 3, "did you mean 'n'?");
  EXPECT_TRUE(e.also().empty()) << e.also().front().what();
}

// Every error of a file in one pass, most specific first: unknown keys and bad values in file order, then the
// missing keys (which can only point at their section).
TEST(ConfigErrorTest, AllErrorsOfAFileInOnePass) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\n  chip:\n    mxu: {rowz: 64}\n    clock: 940MHZ\n"
                 "workload:\n  model: matmul\n  m: 1\n  k: -2\nrun:\n  numeric: maybe\n");
  auto all = e.all();
  ASSERT_EQ(all.size(), 5u) << e.what();
  expect_at(*all[0], Err::UnknownKey, 4, 11, "did you mean 'rows'?");
  expect_at(*all[1], Err::BadUnit, 5, 12, "did you mean 'MHz'?");
  expect_at(*all[2], Err::OutOfRange, 9, 6, "workload.k = -2");  // given, so not also missing
  expect_at(*all[3], Err::WrongType, 11, 12, "run.numeric expects true or false");
  expect_at(*all[4], Err::MissingKey, 6, 1, "missing required key 'workload.n'");
}

TEST(ConfigErrorTest, ErrorsInTheRestOfTheFileAreReportedWhenTheModelIsUnknown) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\n  chip: {clock: 1GHzz}\nworkload:\n  model: matmull\n  m: 1\n");
  auto all = e.all();
  ASSERT_EQ(all.size(), 2u) << e.what();
  expect_at(*all[0], Err::BadUnit, 3, 17, "hardware.chip.clock");
  expect_at(*all[1], Err::UnknownWorkload, 5, 10, "did you mean 'matmul'?");
}

TEST(ConfigErrorTest, WrongTypeWholeNumber) {
  Error e = load_failure(std::string(kBase).replace(std::string(kBase).find("m: 256"), 6, "m: 2.5"));
  expect_at(e, Err::WrongType, 5, 6, "expects a whole number, got '2.5' (a fraction is not allowed)");
}

TEST(ConfigErrorTest, WrongTypeListForScalar) {
  Error e = load_failure(std::string(kBase) + "run:\n  numeric: [1, 2]\n");
  expect_at(e, Err::WrongType, 9, 12, "run.numeric expects a boolean");
}

TEST(ConfigErrorTest, BadUnit) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\n  chip: {clock: 940MHZ}\n"
                         "workload: {model: matmul, m: 1, k: 1, n: 1}\n");
  expect_at(e, Err::BadUnit, 3, 17, "did you mean 'MHz'?");
}

TEST(ConfigErrorTest, MissingUnit) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\n  chip:\n    hbm:\n      bandwidth: 900\n"
                         "workload: {model: matmul, m: 1, k: 1, n: 1}\n");
  expect_at(e, Err::BadUnit, 5, 18, "has no unit");
}

TEST(ConfigErrorTest, OutOfRangeNegative) {
  Error e = load_failure(std::string(kBase).replace(std::string(kBase).find("k: 512"), 6, "k: -4"));
  expect_at(e, Err::OutOfRange, 6, 6, "workload.k = -4 is out of range: must be from 1 to");
}

TEST(ConfigErrorTest, OutOfRangeZeroClock) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\n  chip: {clock: 0Hz}\n"
                         "workload: {model: matmul, m: 1, k: 1, n: 1}\n");
  expect_at(e, Err::OutOfRange, 3, 17, "must be > 0Hz");
}

TEST(ConfigErrorTest, OutOfRangeAbsurd) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\n  chip: {clock: 5THz}\n"
                         "workload: {model: matmul, m: 1, k: 1, n: 1}\n");
  expect_at(e, Err::OutOfRange, 3, 17, "out of range");
}

TEST(ConfigErrorTest, NotFinite) {
  Error e = load_failure(std::string(kBase) + "run:\n  stall: {probability: .nan}\n");
  expect_at(e, Err::NotFinite, 9, 24, "not a finite number");
}

TEST(ConfigErrorTest, DuplicateKey) {
  Error e = load_failure(std::string(kBase) + "  m: 12\n");
  expect_at(e, Err::DuplicateKey, 8, 3, "duplicated key 'workload.m' (first given at line 5)");
}

TEST(ConfigErrorTest, BadChoice) {
  Error e = load_failure(std::string(kBase) + "  dtype: bf61\n");
  expect_at(e, Err::BadChoice, 8, 10, "did you mean 'bf16'?");
}

TEST(ConfigErrorTest, UnknownPreset) {
  Error e = load_failure("hardware:\n  preset: tpu-v33\nworkload: {model: matmul, m: 1, k: 1, n: 1}\n");
  expect_at(e, Err::UnknownPreset, 2, 11, "unknown hardware preset 'tpu-v33'");
}

TEST(ConfigErrorTest, UnknownWorkload) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\nworkload:\n  model: matmull\n");
  expect_at(e, Err::UnknownWorkload, 4, 10, "did you mean 'matmul'?");
}

TEST(ConfigErrorTest, UnknownStrategy) {
  Error e = load_failure(std::string(kBase) + "strategy:\n  name: single_devise\n");
  expect_at(e, Err::UnknownStrategy, 9, 9, "did you mean 'single_device'?");
}

TEST(ConfigErrorTest, BadOverride) {
  try {
    load(kBase, {"hardware.pod.dims"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.id(), "PODSIM-CFG-014");
    EXPECT_EQ(e.where().origin, "--set hardware.pod.dims");
  }
}

TEST(ConfigErrorTest, UnknownOverrideKey) {
  try {
    load(kBase, {"hardware.chip.mxu.rowz=3"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.id(), "PODSIM-CFG-002");
    EXPECT_EQ(e.where().origin, "--set hardware.chip.mxu.rowz=3");
    EXPECT_NE(std::string(e.what()).find("did you mean 'hardware.chip.mxu.rows'?"), std::string::npos) << e.what();
  }
}

TEST(ConfigErrorTest, WrapLengthMismatch) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 4], wrap: [true]}\n"
                         "workload: {model: matmul, m: 1, k: 1, n: 1}\n");
  expect_at(e, Err::LengthMismatch, 3, 29, "hardware.pod.wrap has 1 entries but hardware.pod.dims has 2");
}

TEST(ConfigErrorTest, SectionNotAMapping) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\nworkload: [matmul]\n");
  expect_at(e, Err::NotAMapping, 3, 11, "'workload' must be a mapping");
}

TEST(ConfigErrorTest, PodDimsCountMismatch) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 4, 4]}\n"
                         "workload: {model: matmul, m: 1, k: 1, n: 1}\n");
  expect_at(e, Err::PodShape, 3, 15, "torus has 2 dimensions");
}

TEST(ConfigErrorTest, PodZeroDimension) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 0]}\n"
                         "workload: {model: matmul, m: 1, k: 1, n: 1}\n");
  expect_at(e, Err::OutOfRange, 3, 19, "hardware.pod.dims = 0 is out of range");
}

TEST(ConfigErrorTest, PodTooLarge) {
  Error e = load_failure("hardware:\n  preset: tpu-v3\n  pod: {dims: [1024, 1024]}\n"
                         "workload: {model: matmul, m: 1, k: 1, n: 1}\n");
  expect_at(e, Err::PodTooLarge, 3, 15, "podsim simulates at most 262144");
}

TEST(ConfigErrorTest, EmptyFile) {
  Error e = load_failure("");
  EXPECT_EQ(e.id(), "PODSIM-CFG-003");
}

TEST(ConfigErrorTest, UnreadableFile) {
  try {
    load_experiment("/nonexistent/dir/exp.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.id(), "PODSIM-IO-001");
    EXPECT_EQ(e.where().file, "/nonexistent/dir/exp.yaml");
    EXPECT_NE(std::string(e.what()).find("no such file"), std::string::npos);
  }
}

TEST(ConfigErrorTest, PresetFileErrorsNameThePresetFile) {
  std::string dir = ::testing::TempDir() + "/presets";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/bad.yaml") << "chip:\n  clock: 1GHz\n  mxu: {count: 1, rows: 128, colz: 128}\n";
  try {
    load("hardware: {preset: " + dir + "/bad.yaml}\nworkload: {model: matmul, m: 1, k: 1, n: 1}\n");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.id(), "PODSIM-CFG-002");
    EXPECT_EQ(e.where().file, dir + "/bad.yaml");
    EXPECT_EQ(e.where().line, 3);
  }
}

// One test per entry of the error catalogue (base/error_ids.def): each provokes the error through the
// command line, as a user would, and asserts its id, its exit code and where it points. Those of sweeps, inference
// steps and serving runs are in errors_sweep_serving_test.cpp. The last test checks that every catalogue id has a
// test in one of the two files, so a new entry cannot land without one.
#include <gtest/gtest.h>
#include "tests/test_paths.h"

#include <filesystem>
#include <regex>

#include "base/error.h"
#include "tests/cli/cli_util.h"
#include "tests/cli/errors_util.h"

using namespace podsim;
using namespace podsim::test;

TEST(ErrorsTest, CFG001_YamlSyntax) {
  auto r = expect_error(kHw + "workload: {model: matmul\n", "PODSIM-CFG-001", 4, 0);
  EXPECT_EQ(r.code, exit_of("PODSIM-CFG-001"));
  // A key without its colon is named at its own line (3), not at the next one where the parser stops.
  auto c = expect_error(kHw + "workload\n  model: matmul\n", "PODSIM-CFG-001", 3, 9);
  EXPECT_NE(c.err.find("YAML syntax error: line 3 ('workload') has no ':' after its key"), std::string::npos) << c.err;
  // A tab in the indentation says so.
  auto t = expect_error(kHw + "workload:\n\tmodel: matmul\n", "PODSIM-CFG-001", 4, 1);
  EXPECT_NE(t.err.find("YAML syntax error: line 4 is indented with a tab; YAML indents with spaces\n"),
            std::string::npos)
      << t.err;
  // A second document is not silently ignored; the error points at it.
  auto m = expect_error(kHw + kMm + "---\nrun: {seed: 3}\n", "PODSIM-CFG-001", 9, 1);
  EXPECT_NE(m.err.find("2 YAML documents"), std::string::npos) << m.err;
  // Nesting deeper than the YAML parser takes is a syntax error, not a crash.
  auto d = expect_error("a: " + std::string(600, '[') + std::string(600, ']') + "\n", "PODSIM-CFG-001", 1, 0);
  EXPECT_NE(d.err.find("nesting too deep"), std::string::npos) << d.err;
}

TEST(ErrorsTest, CFG002_UnknownKey) {
  auto r = expect_error(kHw + kMm + "  dtpye: bf16\n", "PODSIM-CFG-002", 8, 3);
  EXPECT_NE(r.err.find("did you mean 'dtype'?"), std::string::npos);
  EXPECT_EQ(r.code, 2);
}

TEST(ErrorsTest, CFG003_MissingKey) {
  auto r = expect_error(kHw + "workload:\n  model: matmul\n  m: 64\n  k: 64\n", "PODSIM-CFG-003", 3, 1);
  EXPECT_NE(r.err.find("'workload.n'"), std::string::npos);
}

TEST(ErrorsTest, CFG004_WrongType) {
  auto r = expect_error(kHw + kMm + "run:\n  seed: lots\n", "PODSIM-CFG-004", 9, 9);
  EXPECT_NE(r.err.find("run.seed expects a whole number, got 'lots'"), std::string::npos);
}

TEST(ErrorsTest, CFG005_BadUnit) {
  auto r = expect_error("hardware:\n  preset: tpu-v3\n  ici:\n    hop_latency: 1 second\n" + kMm, "PODSIM-CFG-005", 4,
                        18);
  EXPECT_NE(r.err.find("Valid units: ps, ns, us, ms, s, min, h"), std::string::npos) << r.err;
}

TEST(ErrorsTest, CFG006_OutOfRange) {
  auto r = expect_error(kHw + "workload:\n  model: matmul\n  m: 0\n  k: 64\n  n: 64\n", "PODSIM-CFG-006", 5, 6);
  EXPECT_NE(r.err.find("must be from 1 to"), std::string::npos);
}

TEST(ErrorsTest, CFG007_NotFinite) {
  expect_error(kHw + kMm + "run:\n  stall:\n    probability: nan\n", "PODSIM-CFG-007", 10, 18);
}

TEST(ErrorsTest, CFG008_DuplicateKey) {
  auto r = expect_error(kHw + kMm + "  k: 128\n", "PODSIM-CFG-008", 8, 3);
  EXPECT_NE(r.err.find("first given at line 6"), std::string::npos);
}

TEST(ErrorsTest, CFG009_BadChoice) {
  auto r = expect_error(kHw + kMm + "  dtype: fp23\n", "PODSIM-CFG-009", 8, 10);
  EXPECT_NE(r.err.find("did you mean 'fp32'?"), std::string::npos) << r.err;
  // fp16 is two edits from both bf16 and fp32: no suggestion, the choices instead.
  r = expect_error(kHw + kMm + "  dtype: fp16\n", "PODSIM-CFG-009", 8, 10);
  EXPECT_NE(r.err.find("is not one of the choices; valid: bf16, fp32\n"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err;
}

TEST(ErrorsTest, CFG010_UnknownPreset) {
  auto r = expect_error("hardware:\n  preset: tpu-v7\n" + kMm, "PODSIM-CFG-010", 2, 11);
  EXPECT_NE(r.err.find("tpu-v"), std::string::npos);
  // A preset path that is a device or a folder is no preset (reading /dev/zero would never end).
  expect_error("hardware:\n  preset: /dev/zero\n" + kMm, "PODSIM-CFG-010", 2, 11);
  expect_error("hardware:\n  preset: /tmp/\n" + kMm, "PODSIM-CFG-010", 2, 11);
}

TEST(ErrorsTest, CFG011_UnknownWorkload) {
  expect_error(kHw + "workload:\n  model: alexnet\n", "PODSIM-CFG-011", 4, 10);
  // A model preset that does not exist: the nearest and every valid one.
  auto r = expect_error(kHw + "workload:\n  preset: llama3-8c\n  batch: 2\n", "PODSIM-CFG-011", 4, 11);
  EXPECT_NE(r.err.find("unknown model preset 'llama3-8c' (did you mean 'llama3-8b'? valid: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(", gpt3-175b, llama2-70b,"), std::string::npos) << r.err;  // every preset, sorted
}

TEST(ErrorsTest, CFG012_UnknownStrategy) {
  auto r = expect_error(kHw + kMm + "strategy:\n  name: zigzag\n", "PODSIM-CFG-012", 9, 9);
  EXPECT_NE(r.err.find("valid:"), std::string::npos) << r.err;
  // Nothing close (the nearest, 'moe', is two edits from 'foo'; three letters allow one): the valid names, no guess.
  r = expect_error(kHw + kMm + "strategy:\n  name: foo\n", "PODSIM-CFG-012", 9, 9);
  EXPECT_NE(r.err.find("unknown strategy 'foo' (valid: auto, data_parallel, fsdp, hlo, moe, "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err;
  r = expect_error(kHw + kMm + "strategy:\n  name: pipline\n", "PODSIM-CFG-012", 9, 9);
  EXPECT_NE(r.err.find("did you mean 'pipeline'?"), std::string::npos) << r.err;
}

TEST(ErrorsTest, CFG013_UnknownAlgorithm) {
  auto r = expect_error(kHw + "workload:\n  model: collective\n  op: all_reduce\n  bytes: 1MiB\n  algorithm: rign\n",
                        "PODSIM-CFG-013", 7, 14);
  EXPECT_NE(r.err.find("did you mean 'ring'?"), std::string::npos) << r.err;
}

TEST(ErrorsTest, CFG014_BadOverride) {
  std::string file = write_file("exp.yaml", kHw + kMm);
  auto r = run_podsim({"validate", file, "--set", "workload.m:5"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--set workload.m:5: error PODSIM-CFG-014"), std::string::npos) << r.err;
}

TEST(ErrorsTest, CFG015_LengthMismatch) {
  expect_error("hardware:\n  preset: tpu-v3\n  pod:\n    dims: [2, 2]\n    wrap: [true, false, true]\n" + kMm,
               "PODSIM-CFG-015", 5, 11);
}

TEST(ErrorsTest, CFG016_NotDivisible) {
  auto r = expect_error(kHw + "workload:\n  model: transformer\n  layers: 1\n  d_model: 100\n  d_ff: 64\n  heads: 3\n"
                              "  vocab: 32\n  seq_len: 8\n  batch: 2\n",
                        "PODSIM-CFG-016", 8, 10);
  EXPECT_NE(r.err.find("heads"), std::string::npos);
  // An all-reduce over 3 x 3 chips of 1 KiB (256 fp32 elements) cannot split into one block per chip.
  auto a = expect_error("hardware:\n  preset: tpu-v3\n  pod:\n    dims: [3, 3]\n"
                        "workload:\n  model: collective\n  op: all_reduce\n  bytes: 1KiB\n",
                        "PODSIM-CFG-016", 8, 10);
  EXPECT_NE(a.err.find("divisible by 36"), std::string::npos) << a.err;
}

TEST(ErrorsTest, CFG017_NotAMapping) {
  expect_error(kHw + "workload: matmul\n", "PODSIM-CFG-017", 3, 11);
}

TEST(ErrorsTest, CFG018_BadFault) {
  // Each entry is named at its own line of the list.
  const std::string ar = "workload:\n  model: collective\n  op: all_reduce\n  bytes: 1KiB\n";
  auto r = expect_error(kHw + "  pod: {dims: [4, 4]}\n  faults:\n    - \"chip 3: clock 0.8\"\n"
                        "    - \"chip (4,1): clock 0.8\"\n" + ar,
                        "PODSIM-CFG-018", 6, 7);
  EXPECT_NE(r.err.find("entry 2 'chip (4,1): clock 0.8': coordinate x=4 is outside the pod (0 to 3)"),
            std::string::npos) << r.err;
  r = expect_error(kHw + "  pod: {dims: [4, 4]}\n  faults:\n    - \"chip 3: clock 1.5\"\n" + ar, "PODSIM-CFG-018", 5, 7);
  EXPECT_NE(r.err.find("clock factor '1.5' must lie in (0, 1]"), std::string::npos) << r.err;
  r = expect_error(kHw + "  pod: {dims: [4, 4], wrap: [false, true]}\n  faults: [\"link (3,0) +x: down\"]\n" + ar,
                   "PODSIM-CFG-018", 4, 12);
  EXPECT_NE(r.err.find("chip 3 has no link in direction +x"), std::string::npos) << r.err;
  r = expect_error(kHw + "  pod: {dims: [4, 4]}\n  faults: [\"link 3 +x: clock 0.5\"]\n" + ar, "PODSIM-CFG-018", 4, 12);
  EXPECT_NE(r.err.find("a link takes 'bandwidth F' or 'down'"), std::string::npos) << r.err;
  r = expect_error(kHw + "  pod: {dims: [4, 4]}\n  faults: [\"node 3: clock 0.5\"]\n" + ar, "PODSIM-CFG-018", 4, 12);
  EXPECT_NE(r.err.find("expected \"chip ID: clock F, hbm F\""), std::string::npos) << r.err;
}

TEST(ErrorsTest, POD004_Unroutable) {
  // A ring of 4 with +x of chip 1 and -x of chip 0 down: chip 1's message to chip 2 detours -x and meets the second.
  auto r = expect_error(kHw + "  pod: {dims: [4, 1]}\n  faults: [\"link 1 +x: down\", \"link 0 -x: down\"]\n"
                        "workload:\n  model: collective\n  op: all_reduce\n  bytes: 1MiB\n",
                        "PODSIM-POD-004", 4, 11, {}, true);
  EXPECT_EQ(r.code, exit_of("PODSIM-POD-004"));
  EXPECT_NE(r.err.find("collective 'all_reduce' cannot complete"), std::string::npos) << r.err;
}

TEST(ErrorsTest, POD001_PodShape) {
  auto r = expect_error("hardware:\n  preset: tpu-v4\n  pod:\n    dims: [4, 4]\n" + kMm, "PODSIM-POD-001", 4, 11);
  EXPECT_NE(r.err.find("3 dimensions"), std::string::npos);
}

TEST(ErrorsTest, POD002_PodTooLarge) {
  expect_error("hardware:\n  preset: tpu-v4\n  pod:\n    dims: [128, 128, 128]\n" + kMm, "PODSIM-POD-002", 4, 11);
}

TEST(ErrorsTest, POD003_BadAxes) {
  auto r = expect_error("hardware:\n  preset: tpu-v3\n  pod: {dims: [2, 2]}\nworkload:\n  model: collective\n"
                        "  op: all_gather\n  bytes: 1KiB\n  axes: [x, z]\n",
                        "PODSIM-POD-003", 8, 9);
  EXPECT_NE(r.err.find("axis 'z'"), std::string::npos);
}

TEST(ErrorsTest, PLN001_StrategyMismatch) {
  auto r = expect_error("hardware:\n  preset: tpu-v3\n  pod: {dims: [2, 2]}\nworkload:\n  model: collective\n"
                        "  op: all_reduce\n  bytes: 1KiB\nstrategy: {name: single_device}\n",
                        "PODSIM-PLN-001", 5, 10, {}, true);
  EXPECT_NE(r.err.find("replicate"), std::string::npos);
}

TEST(ErrorsTest, PLN002_BadMesh) {
  const std::string pod = "hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 2]}\n";
  const std::string mlp = "workload: {model: mlp, batch: 8, input: 4, hidden: 8, layers: 1, classes: 2}\n";
  // The axes make 6 devices on 8 chips.
  auto r = expect_error(pod + mlp + "strategy: {name: [data_parallel, spmd]}\nmesh:\n  axes: [data, model]\n"
                        "  shape: [3, 2]\n", "PODSIM-PLN-002", 8, 10);
  EXPECT_NE(r.err.find("multiply to the chip count"), std::string::npos) << r.err;
  EXPECT_EQ(r.code, exit_of("PODSIM-PLN-002"));
  // A composition without a mesh section says what to add.
  auto c = expect_error(pod + mlp + "strategy: {name: [data_parallel, spmd]}\n", "PODSIM-PLN-002", 5, 18);
  EXPECT_NE(c.err.find("mesh.axes and mesh.shape"), std::string::npos) << c.err;
  // A placement that does not fit the torus.
  auto p = expect_error(pod + mlp + "strategy: {name: data_parallel}\nmesh: {axes: [data], shape: [8], "
                        "placement: [\"x:3\"]}\n", "PODSIM-PLN-002", 6, 0);
  EXPECT_NE(p.err.find("does not divide"), std::string::npos) << p.err;
  // single_device uses no mesh.
  expect_error(pod + mlp + "strategy: {name: single_device}\nmesh: {axes: [data], shape: [8]}\n", "PODSIM-PLN-002",
               6, 0);
}

TEST(ErrorsTest, PLN003_BadSharding) {
  const std::string pod = "hardware:\n  preset: tpu-v3\n  pod: {dims: [2, 2]}\n";
  const std::string mlp = "workload: {model: mlp, batch: 8, input: 4, hidden: 8, layers: 1, classes: 2}\n";
  // One entry for a rank-2 tensor, found when the step is built.
  auto r = expect_error(pod + mlp + "strategy:\n  name: spmd\n  scheme: none\n  shard: [\"fc0.w = [model]\"]\n",
                        "PODSIM-PLN-003", 8, 10, {}, true);
  EXPECT_NE(r.err.find("one entry per dimension"), std::string::npos) << r.err;
  EXPECT_EQ(r.code, exit_of("PODSIM-PLN-003"));
  EXPECT_FALSE(exists(test_dir() + "/out"));
  // Unreadable text is found by validate.
  auto t = expect_error(pod + mlp + "strategy:\n  name: spmd\n  shard: [\"fc0.w = [model\"]\n", "PODSIM-PLN-003", 7,
                        10);
  EXPECT_NE(t.err.find("expected ',' or ']'"), std::string::npos) << t.err;
  // A pattern matching nothing is an error, not a silent no-op.
  auto n = expect_error(pod + mlp + "strategy:\n  name: spmd\n  shard: [\"fc9.w = [-, model]\"]\n",
                        "PODSIM-PLN-003", 7, 10, {}, true);
  EXPECT_NE(n.err.find("matches no tensor"), std::string::npos) << n.err;
}

// A spatial split finer than a feature map names the layer and its height, at strategy.spatial: ResNet-18 at 64
// pixels has 4 rows in its last stage's input, 2 out of its first (stride-2) convolution.
TEST(ErrorsTest, PLN004_SpatialSplit) {
  const std::string head = "hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 1]}\n"
                           "workload: {model: resnet, depth: 18, image_size: 64, batch: 2, dtype: fp32}\n"
                           "strategy:\n  name: spmd\n  spmd_axes: [spatial]\n  spatial: true\n"
                           "mesh: {axes: [spatial], shape: [4]}\n";
  auto r = expect_error(head, "PODSIM-PLN-004", 8, 12, {}, true);
  EXPECT_NE(r.err.find("cannot split layer 'layer4.0.a.conv' (height 4) over the 4 devices of axis 'spatial'"),
            std::string::npos) << r.err;
  EXPECT_EQ(r.code, exit_of("PODSIM-PLN-004"));
  EXPECT_FALSE(exists(test_dir() + "/out"));
  // Image 96 over 4: heights the axis does not divide are split (padded shards), down to layer4's first
  // convolution, which takes 6 rows to 3.
  auto u = expect_error("hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 1]}\n"
                        "workload: {model: resnet, depth: 18, image_size: 96, batch: 2, dtype: fp32}\n"
                        "strategy:\n  name: spmd\n  spmd_axes: [spatial]\n  spatial: true\n"
                        "mesh: {axes: [spatial], shape: [4]}\n",
                        "PODSIM-PLN-004", 8, 12, {}, true);
  EXPECT_NE(u.err.find("'layer4.0.a.conv' (height 6)"), std::string::npos) << u.err;
  EXPECT_NE(u.err.find("(3 output rows) are fewer than the 4 devices"), std::string::npos) << u.err;
  // An axis over two torus dimensions (4 chips as 2 x 2) has no ring for the collective-permutes.
  auto t = expect_error("hardware:\n  preset: tpu-v3\n  pod: {dims: [2, 2]}\n"
                        "workload: {model: resnet, depth: 18, image_size: 128, batch: 2, dtype: fp32}\n"
                        "strategy:\n  name: spmd\n  spmd_axes: [spatial]\n  spatial: true\n"
                        "mesh: {axes: [spatial], shape: [4]}\n",
                        "PODSIM-PLN-004", 8, 12, {}, true);
  EXPECT_NE(t.err.find("lays over several torus dimensions"), std::string::npos) << t.err;
  // Batch-norm groups of one image while each device holds all 4 (no data axis): a row split's sums are all-reduced
  // over the axis, so a device's examples must be one group or part of one; reported at workload.bn_batch.
  auto b = expect_error("hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 1]}\n"
                        "workload: {model: resnet, depth: 18, image_size: 128, batch: 4, bn_batch: 1, dtype: fp32}\n"
                        "strategy:\n  name: spmd\n  spmd_axes: [spatial]\n  spatial: true\n"
                        "mesh: {axes: [spatial], shape: [4]}\n",
                        "PODSIM-PLN-004", 4, 75, {}, true);
  EXPECT_NE(b.err.find("each device's 4 examples must be one group or part of one, not 4 groups of 1; set "
                       "workload.bn_batch to at least 4"),
            std::string::npos)
      << b.err;
}

// An HLO module next to an experiment that runs it on `dims` (tpu-v4); `podsim validate` (or run) on it.
CliResult hlo_error(const std::string& module, const std::string& id, const std::string& where,
                    const std::string& dims = "[1, 1, 1]", const std::string& extra = "", bool run = false) {
  write_file("m.hlo", module);
  const std::string exp = write_file("exp.yaml", "hardware:\n  preset: tpu-v4\n  pod: {dims: " + dims +
                                                     "}\nworkload:\n  model: hlo\n  module: m.hlo\n" + extra);
  std::vector<std::string> args = {run ? "run" : "validate", exp};
  if (run) args.insert(args.end(), {"--out", test_dir() + "/out"});
  CliResult r = run_podsim(args);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(where + ": error " + id + ":"), std::string::npos) << "expected " << where << " " << id << " in "
                                                                          << r.err;
  return r;
}

// An error's hint as the experiment would hold it: the `workload: {KEY: VALUE}` between backticks, added to the
// experiment of hlo_error; `podsim run` on it must succeed (the hint works as written).
void run_hint(const CliResult& failed, const std::string& dims = "[1, 1, 1]") {
  const size_t b = failed.err.find('`'), e = failed.err.find('`', b + 1);
  ASSERT_NE(e, std::string::npos) << "no hint between backticks in " << failed.err;
  const std::string hint = failed.err.substr(b + 1, e - b - 1);
  const std::string head = "workload: {";
  ASSERT_EQ(hint.rfind(head, 0), 0u) << hint;
  ASSERT_EQ(hint.back(), '}') << hint;
  const std::string entry = hint.substr(head.size(), hint.size() - head.size() - 1);
  const std::string exp = write_file("hint.yaml", "hardware:\n  preset: tpu-v4\n  pod: {dims: " + dims +
                                                      "}\nworkload:\n  model: hlo\n  module: m.hlo\n  " + entry + "\n");
  const CliResult r = run_podsim({"run", exp, "--out", test_dir() + "/hint_out", "--force"});
  EXPECT_EQ(r.code, 0) << "the hint " << hint << " does not run: " << r.err;
}

const std::string kLoop = R"(HloModule m
%cond (p: (s32[], f32[8])) -> pred[] {
  %p = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] negate(%i)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}
%body (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %p = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[8] get-tuple-element(%p), index=1
  %y = f32[8] exponential(%x)
  ROOT %t = (s32[], f32[8]) tuple(%i, %y)
}
ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8] parameter(0)
  %zero = s32[] constant(0)
  %t = (s32[], f32[8]) tuple(%zero, %x)
  %w = (s32[], f32[8]) while(%t), condition=%cond, body=%body
  ROOT %r = f32[8] get-tuple-element(%w), index=1
}
)";

TEST(ErrorsTest, HLO001_HloSyntax) {
  auto r = hlo_error("ENTRY e {\n  a = f33[2] parameter(0)\n}\n", "PODSIM-HLO-001", test_dir() + "/m.hlo:2:7");
  EXPECT_NE(r.err.find("unknown element type 'f33' (valid: pred, s8, s32"), std::string::npos) << r.err;
  auto u = hlo_error("ENTRY e {\n  a = f32[2]{0} parameter(0), sharding={devices=[2]0,1\n", "PODSIM-HLO-001",
                     test_dir() + "/m.hlo:2:40");
  EXPECT_NE(u.err.find("a '{' that is never closed"), std::string::npos) << u.err;
}

TEST(ErrorsTest, HLO002_HloInvalid) {
  auto r = hlo_error("ENTRY e {\n  a = f32[2] parameter(0)\n  b = f32[2] negate(c)\n}\n", "PODSIM-HLO-002",
                     test_dir() + "/m.hlo:3:21");
  EXPECT_NE(r.err.find("instruction 'b' reads 'c', which computation 'e' does not define"), std::string::npos) << r.err;
  auto d = hlo_error("ENTRY e {\n  a = f32[2,3] parameter(0)\n  ROOT b = f32[2,2] dot(a, a), lhs_contracting_dims={1}, "
                     "rhs_contracting_dims={0}\n}\n",
                     "PODSIM-HLO-002", test_dir() + "/m.hlo:3:8");
  EXPECT_NE(d.err.find("contracting dimensions of different sizes"), std::string::npos) << d.err;
}

TEST(ErrorsTest, HLO003_HloUnsupported) {
  auto r = hlo_error("ENTRY e {\n  a = c64[8] parameter(0)\n  ROOT b = c64[8] fft(a), fft_type=FFT, fft_length={8}\n}\n",
                     "PODSIM-HLO-003", test_dir() + "/m.hlo:3:8");
  EXPECT_NE(r.err.find("podsim has no model for 'fft' (docs/hlo.md lists what it runs)"), std::string::npos) << r.err;
  // Groups that are not a mesh's axes.
  auto g = hlo_error("HloModule m, num_partitions=4\n%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
                     "  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(%a, %b)\n}\nENTRY e {\n  x = f32[8] parameter(0)\n"
                     "  ROOT y = f32[8] all-reduce(x), replica_groups={{0},{1,2},{3}}, to_apply=%add\n}\n",
                     "PODSIM-HLO-003", test_dir() + "/m.hlo:9:8", "[2, 2, 1]");
  EXPECT_NE(g.err.find("its groups are not the axes of a device mesh: its groups have different sizes (1 and 2)"),
            std::string::npos)
      << g.err;
}

TEST(ErrorsTest, HLO004_HloTripCount) {
  auto r = hlo_error(kLoop, "PODSIM-HLO-004", test_dir() + "/m.hlo:19:3");
  EXPECT_NE(r.err.find("give its count as `workload: {trip_counts: [\"w=1\"]}` with the real count for 1"),
            std::string::npos)
      << r.err;
  run_hint(r);
  // workload.trip_counts supplies it.
  write_file("m.hlo", kLoop);
  const std::string exp = write_file("ok.yaml", "hardware:\n  preset: tpu-v4\n  pod: {dims: [1, 1, 1]}\nworkload:\n"
                                                "  model: hlo\n  module: m.hlo\n  trip_counts: [w=3]\n");
  EXPECT_EQ(run_podsim({"validate", exp}).code, 0);
}

TEST(ErrorsTest, HLO005_HloCustomCall) {
  const std::string module = "ENTRY e {\n  a = f32[8] parameter(0)\n  ROOT b = f32[8] custom-call(a), "
                             "custom_call_target=\"my_kernel\"\n}\n";
  auto r = hlo_error(module, "PODSIM-HLO-005", test_dir() + "/m.hlo:3:8");
  // The entry as the parameter takes it, with the call's operand and result (32 bytes each).
  EXPECT_NE(r.err.find("give its cost as `workload: {custom_calls: [\"my_kernel=flops:0,bytes:64\"]}`"),
            std::string::npos)
      << r.err;
  run_hint(r);
  // A misspelt target: the nearest known one is named.
  auto t = hlo_error("ENTRY e {\n  a = s64[8] parameter(0)\n  ROOT b = u32[8] custom-call(a), "
                     "custom_call_target=\"X64SplitLo\"\n}\n",
                     "PODSIM-HLO-005", test_dir() + "/m.hlo:3:8");
  EXPECT_NE(t.err.find("the nearest it knows is 'X64SplitLow'"), std::string::npos) << t.err;
  run_hint(t);
  write_file("m.hlo", module);
  const std::string exp = write_file("ok.yaml", "hardware:\n  preset: tpu-v4\n  pod: {dims: [1, 1, 1]}\nworkload:\n"
                                                "  model: hlo\n  module: m.hlo\n"
                                                "  custom_calls: [\"my_kernel=flops:1e9,bytes:64\"]\n");
  EXPECT_EQ(run_podsim({"validate", exp}).code, 0);
}

TEST(ErrorsTest, HLO006_HloDevices) {
  // Four devices (from the header; the all-reduce says the module is partitioned) on a pod of two chips: the error
  // points at the pod and says what would do.
  auto r = hlo_error("HloModule m, num_partitions=4\n%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
                     "  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(%a, %b)\n}\nENTRY e {\n  a = f32[8] parameter(0)\n"
                     "  ROOT b = f32[8] all-reduce(a), replica_groups=[1,4]<=[4], to_apply=%add\n}\n",
                     "PODSIM-HLO-006",
                     test_dir() + "/exp.yaml:3:15", "[2, 1, 1]");
  EXPECT_NE(r.err.find("the module runs on 4 devices (from its header and collectives) but the pod has 2 chips; set "
                       "hardware.pod.dims to 4 chips"),
            std::string::npos)
      << r.err;
}

TEST(ErrorsTest, HLO007_HloNumeric) {
  auto r = hlo_error("ENTRY e {\n  a = f32[8,4] parameter(0)\n  i = s32[3,1] parameter(1)\n  ROOT g = f32[3,4] gather(a, "
                     "i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, "
                     "slice_sizes={1,4}\n}\n",
                     "PODSIM-HLO-007", test_dir() + "/m.hlo:4:8", "[1, 1, 1]", "run: {numeric: true}\n");
  EXPECT_NE(r.err.find("podsim has no numeric kernel for gather; run without run.numeric"), std::string::npos) << r.err;
}

TEST(ErrorsTest, MEM001_OutOfMemory) {
  auto r = expect_error(kHw + "workload:\n  model: matmul\n  m: 65536\n  k: 65536\n  n: 65536\n  dtype: fp32\n",
                        "PODSIM-MEM-001", 4, 10, {}, true);
  EXPECT_NE(r.err.find("more than the 32.00 GiB"), std::string::npos);
  EXPECT_NE(r.err.find("or set run.allow_oom: true to report and continue"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(test_dir() + "/out"));
  // With run.allow_oom set, the run goes on and its note reports the overflow without advising to set it.
  std::string file = write_file("allowed.yaml", kHw + "workload:\n  model: matmul\n  m: 65536\n  k: 65536\n  n: 65536\n"
                                                      "  dtype: fp32\nrun:\n  allow_oom: true\n");
  auto a = run_podsim({"run", file, "--out", "allowed"});
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_NE(a.out.find("note: out of memory (allowed by run.allow_oom): the step does not fit in HBM"),
            std::string::npos)
      << a.out;
  EXPECT_NE(a.out.find("16.00 GiB more than the 32.00 GiB"), std::string::npos) << a.out;  // 3 x 16 GiB - 32 GiB
  EXPECT_EQ(a.out.find("set run.allow_oom"), std::string::npos) << a.out;
}

TEST(ErrorsTest, MEM002_HostMemory) {
  auto r = expect_error(kHw + "workload:\n  model: matmul\n  m: 65536\n  k: 65536\n  n: 65536\nrun:\n  numeric: true\n",
                        "PODSIM-MEM-002", 9, 12, {}, true);
  EXPECT_NE(r.err.find("of this machine's memory"), std::string::npos);
}

TEST(ErrorsTest, IO001_FileUnreadable) {
  auto r = run_podsim({"validate", "no/such/file.yaml"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no/such/file.yaml: error PODSIM-IO-001"), std::string::npos) << r.err;
  auto p = run_podsim({"list", "workloads", "--plugin", "no/such/plugin.so"});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("no/such/plugin.so: error PODSIM-IO-001: cannot load plugin"), std::string::npos) << p.err;
  for (const char* not_a_file : {"/dev/zero", "/tmp"}) {
    auto d = run_podsim({"validate", not_a_file});
    EXPECT_EQ(d.code, 2) << not_a_file;
    EXPECT_NE(d.err.find("PODSIM-IO-001"), std::string::npos) << d.err;
  }
}

TEST(ErrorsTest, IO002_OutputExists) {
  std::string file = write_file("exp.yaml", kHw + kMm);
  ASSERT_EQ(run_podsim({"run", file, "--out", "o"}).code, 0);
  auto r = run_podsim({"run", file, "--out", "o"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("o: error PODSIM-IO-002"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--force"), std::string::npos);
}

TEST(ErrorsTest, IO003_OutputUnwritable) {
  std::string file = write_file("exp.yaml", kHw + kMm);
  write_file("blocker", "a file where a folder should be");
  auto r = run_podsim({"run", file, "--out", "blocker/out"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("blocker/out: error PODSIM-IO-003"), std::string::npos) << r.err;
}

TEST(ErrorsTest, IO004_NotARunDir) {
  auto r = run_podsim({"report", test_dir()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(test_dir() + ": error PODSIM-IO-004"), std::string::npos) << r.err;
}

TEST(ErrorsTest, IO005_TensorOutputTooLarge) {
  auto r = expect_error(kHw + kMm + "run:\n  numeric: true\n  max_tensor_bytes: 1KiB\n", "PODSIM-IO-005", 10, 21, {},
                        true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("more than run.max_tensor_bytes = 1.00 KiB"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(test_dir() + "/out"));
}

TEST(ErrorsTest, SIM001_Deadlock) {
  std::string plugin = PODSIM_TEST_PLUGIN;
  std::string file = write_file("exp.yaml", "hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 1]}\n" + kMm +
                                                "strategy:\n  name: test_recv_without_send\n");
  auto r = run_podsim({"run", "--plugin", plugin, file, "--out", "o"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(file + ":10:9: error PODSIM-SIM-001: deadlock at simulated time"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("chip 0 (x=0,y=0)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("waits for a message from chip 1 with tag 7"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(test_dir() + "/o"));
}

// A run stopped by run.max_wall = 300 ms: exit 1, the error saying when, no output folder, no partial folder left.
void expect_wall_limit(const CliResult& r, const std::string& when) {
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error PODSIM-SIM-002: the run exceeded run.max_wall = 300.000 ms of real time and was " + when),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(exists(test_dir() + "/o"));
  for (const auto& e : std::filesystem::directory_iterator(test_dir()))
    EXPECT_EQ(e.path().filename().string().find("partial"), std::string::npos) << e.path();
}

TEST(ErrorsTest, SIM002_WallLimit) {
  // The simulation: 16 x 16 chips of synthetic traffic for a simulated second, thousands of times what 300 ms of real
  // time can simulate on any machine.
  std::string file = write_file("exp.yaml", "hardware:\n  preset: tpu-v3\n  pod: {dims: [16, 16]}\nworkload:\n"
                                            "  model: traffic\n  pattern: uniform\n  rate: 0.5\n  message: 256B\n"
                                            "  duration: 1s\nrun:\n  max_wall: 300ms\n");
  expect_wall_limit(run_podsim({"run", file, "--out", "o"}), "stopped after ");
}

TEST(ErrorsTest, SIM002_WallLimitWhilePlanning) {
  // run.max_wall covers planning too: a step whose build never ends (it waits on a FIFO nobody writes).
  Hold never("never");
  std::string file = write_file("exp.yaml", kHw + "workload: {model: test_hold, hold: '" + never.path() +
                                                "'}\nrun:\n  max_wall: 300ms\n");
  expect_wall_limit(run_podsim({"run", "--plugin", PODSIM_TEST_PLUGIN, file, "--out", "o"}),
                    "stopped while the step was being planned");
}

TEST(ErrorsTest, SIM003_Internal) {
  // A plugin strategy that breaks the plan contract is caught and reported as an internal error (exit 1).
  std::string file = write_file("exp.yaml", kHw + kMm + "strategy:\n  name: test_broken_plan\n");
  auto r = run_podsim({"run", "--plugin", PODSIM_TEST_PLUGIN, file, "--out", "o"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error PODSIM-SIM-003: strategy 'test_broken_plan' returned an invalid plan"),
            std::string::npos)
      << r.err;
}

TEST(ErrorsTest, CLI001_Usage) {
  auto r = run_podsim({"run", "a.yaml", "--bogus"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error PODSIM-CLI-001"), std::string::npos) << r.err;
}

TEST(ErrorsTest, EveryCatalogueEntryHasATestHere) {
  const std::string self = read_file(source_dir() + "/tests/cli/errors_test.cpp") +
                           read_file(source_dir() + "/tests/cli/errors_sweep_serving_test.cpp");
  for (const auto& e : error_catalogue()) {
    std::string id(e.id);
    std::string name = std::regex_replace(id.substr(7), std::regex("-"), "");  // PODSIM-CFG-001 -> CFG001
    EXPECT_NE(self.find("TEST(ErrorsTest, " + name + "_"), std::string::npos) << "no test for " << id;
  }
}

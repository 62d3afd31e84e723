// The experiments the project ships, run as a user runs them: `podsim run FILE` with default settings (trace on),
// expecting exit 0, a summary.json and a trace. Used by shipped_test.cpp (quick tier) and shipped_slow_test.cpp
// (long tier).
//
// Which files: configs/quickstart.yaml and every *.yaml under configs/examples/, configs/papers/, configs/models/,
// configs/hlo/ and configs/serving/,
// found when the tests are listed, so a file dropped into those folders is tested without touching this code. In the
// quick tier a file runs as is if it fits the quick budget (below); one that does not fails and says so, and then
// needs an entry in reduced_sizes(): `--set` overrides that shrink it for the quick tier (the long tier runs it at
// full size), or, when nothing shrinks it without changing what it is, in planned_in_quick_tier(): the quick tier
// plans it as shipped (--memory-only) and the long tier runs it.
//
// configs/search/: every search runs in the quick tier with the overrides of search_reduced_sizes() (a narrow model,
// a small budget) and its best.yaml runs; the long tier runs each as shipped (`podsim search FILE`).
//
// configs/sweeps/: every sweep file plans in the quick tier (`podsim sweep plan`), and runs as shipped in the long
// tier (`podsim sweep FILE`).
//
// configs/examples/ in numeric mode: compare_test.cpp runs every example with run.numeric=true against its
// --single-device run; numeric_reduced_sizes() shrinks the ones whose numeric runs exceed the quick budget.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/cli/cli_util.h"

namespace podsim::test {

struct Shipped {
  std::string path;  // relative to the source tree, e.g. "configs/examples/mlp.yaml"
  std::string name;  // a test name: "examples_mlp"
};
inline void PrintTo(const Shipped& s, std::ostream* os) { *os << s.path; }

// The GShard family's quick-tier size (reduced_sizes() below).
inline std::vector<std::string> gshard_reduced() {
  return {"hardware.pod.dims=[4,4]", "workload.layers=2",   "workload.batch=32", "workload.seq_len=64",
          "workload.moe.groups=32",  "workload.d_model=128", "workload.d_ff=256", "workload.heads=4",
          "workload.vocab=1024"};
}

// A serving run's quick-tier size: the narrow 2-layer model of reduced_sizes() and 8 requests of 20 to 100 input
// and 10 to 30 output tokens (with `capped`, 4 in flight).
inline std::vector<std::string> serving_reduced(bool capped) {
  std::vector<std::string> v = {"workload.layers=2",        "workload.d_model=256",
                                "workload.d_ff=1024",       "workload.head_dim=32",
                                "workload.vocab=4096",      "serving.requests.count=8",
                                "serving.requests.input_tokens=[20,100]", "serving.requests.output_tokens=[10,30]"};
  if (capped) v.push_back("serving.requests.max_concurrency=4");
  return v;
}

// Overrides that bring a large experiment within the quick budget, by path. Keep the experiment's character (same
// pod shape or model family, numeric mode as shipped); shrink what only scales its cost.
inline const std::map<std::string, std::vector<std::string>>& reduced_sizes() {
  static const std::vector<std::string> kSmallPipelinedTransformer = {
      "workload.layers=8", "workload.d_model=256", "workload.d_ff=1024", "workload.heads=4", "workload.vocab=1024",
      "workload.seq_len=64", "strategy.micro_batches=8"};
  // configs/models/: each model on its pod with its strategies, mesh, batch, precision and re-materialization as
  // shipped; 2 layers of narrow width, a small vocabulary and 128-token sequences (the heads, key/value heads and FFN
  // kind stay the preset's).
  static const std::vector<std::string> kNarrowModel = {"workload.layers=2", "workload.d_model=256",
                                                        "workload.d_ff=1024", "workload.head_dim=32",
                                                        "workload.vocab=4096", "workload.seq_len=128"};
  static const std::vector<std::string> kSpatialReduced = {"hardware.pod.dims=[2,2]", "mesh.shape=[2,2]",
                                                           "workload.image_size=64", "workload.batch=2"};
  static const std::map<std::string, std::vector<std::string>> table = {
      {"configs/models/gpt3-175b.yaml", kNarrowModel},
      {"configs/models/llama2-7b.yaml", kNarrowModel},
      {"configs/models/llama2-70b.yaml", kNarrowModel},
      {"configs/models/llama3-8b.yaml", kNarrowModel},
      {"configs/models/llama3-70b.yaml", kNarrowModel},
      {"configs/models/llama3-405b.yaml", kNarrowModel},
      {"configs/models/palm-540b.yaml", kNarrowModel},
      {"configs/models/palm-540b-two-pods.yaml", kNarrowModel},
      {"configs/models/maxtext-16b-v5e.yaml", kNarrowModel},
      {"configs/models/maxtext-32b-v5e.yaml", kNarrowModel},
      {"configs/models/maxtext-64b-v5e.yaml", kNarrowModel},
      {"configs/models/maxtext-128b-v5e.yaml", kNarrowModel},
      {"configs/models/maxtext-52b-v4.yaml", kNarrowModel},
      {"configs/models/llama3.1-8b-v6e.yaml", kNarrowModel},
      {"configs/models/llama3.1-70b-v6e.yaml", kNarrowModel},
      // configs/serving/: PaLM 540B's decode and prefill on their 64 chips and Llama 3 70B's mixed iteration with
      // their layouts, batches, contexts, chunks and types as shipped; the narrow 2-layer model.
      {"configs/serving/llama3-70b-v6e-8_mixed.yaml", kNarrowModel},
      {"configs/serving/palm-540b-v4-64-int8_decode.yaml", kNarrowModel},
      {"configs/serving/palm-540b-v4-64_prefill.yaml", kNarrowModel},
      // The serving runs: their engines, policies, slices, layouts and types as shipped; the narrow model and a
      // stream of 8 short requests (4 in flight where the shipped run caps them).
      {"configs/serving/llama3-70b-v6e-8_continuous.yaml", serving_reduced(true)},
      {"configs/serving/llama2-7b-v5e-8_jetstream.yaml", serving_reduced(false)},
      {"configs/serving/llama2-7b-v5e-8-int8_jetstream.yaml", serving_reduced(false)},
      {"configs/serving/llama2-7b-v5e-8x2_disaggregated.yaml", serving_reduced(false)},
      // Static batching with the cache split over the 64 chips' batch: 64 requests of one length each way, so that
      // every iteration's batch stays 64.
      {"configs/serving/palm-540b-v4-64-int8_low_latency.yaml",
       {"workload.layers=2", "workload.d_model=256", "workload.d_ff=1024", "workload.head_dim=32",
        "workload.vocab=4096", "serving.requests.input_tokens=64", "serving.requests.output_tokens=8"}},
      // Per-phase layouts (serving.prefill): the narrow model, prompts of 64 tokens generating 8, as many requests as
      // shipped, so that every decode's batch stays a multiple of the 64 chips the cache is split over.
      {"configs/serving/palm-540b-v4-64_high_throughput.yaml",
       {"workload.layers=2", "workload.d_model=256", "workload.d_ff=1024", "workload.head_dim=32",
        "workload.vocab=4096", "serving.requests.input_tokens=64", "serving.requests.output_tokens=8"}},
      {"configs/serving/palm-540b-v4-64-int8_continuous.yaml",
       {"workload.layers=2", "workload.d_model=256", "workload.d_ff=1024", "workload.head_dim=32",
        "workload.vocab=4096", "serving.requests.input_tokens=64", "serving.requests.output_tokens=8"}},
      // 256 chips as shipped; 1/64 of the data (4 MiB per chip instead of 256 MiB).
      {"configs/examples/allreduce_16x16.yaml", {"workload.bytes=4MiB"}},
      // ResNet-18 split 2 ways spatially x 2 data on 2 x 2 chips instead of 4 x 2 (the numeric step at 128 pixels is
      // 14 GFLOP): 64 pixels, whose last stage's 2 rows are one per chip, and one image per replica.
      {"configs/examples/spatial.yaml", kSpatialReduced},
      // A straggler in a data x model step on 4 x 4 chips instead of 16 x 16 (every chip is simulated: the fault
      // breaks the symmetry); the slow chip (1,2) and the step as shipped, the trace on the slow chip (9 of 16) and
      // its ring neighbour.
      {"configs/examples/straggler.yaml", {"hardware.pod.dims=[4,4]", "mesh.shape=[4,4]", "run.trace.chips=[9,10]"}},
      // 16 chips in three mesh axes as shipped; 2 layers instead of 8 (one per pipeline stage).
      {"configs/examples/pipeline_data_model.yaml", {"workload.layers=2"}},
      // ResNet-50 on 1024 chips as shipped (batch 32768, distributed batch norm over pairs of replicas); 32 x 32
      // images instead of 224 x 224.
      {"configs/papers/resnet50/v3_1024.yaml", {"workload.image_size=32"}},
      // BERT-Large with LAMB on 1024 chips as shipped (the batch, sequence, masked positions, optimizer and
      // clipping); 12 of its 24 layers.
      {"configs/papers/bert/lamb_phase1_v3_1024.yaml", {"workload.layers=12"}},
      {"configs/papers/bert/lamb_phase2_v3_1024.yaml", {"workload.layers=12"}},
      // GShard Table 1 (64 to 1024 chips, 12 or 36 layers, M = 1024): the same expert counts and strategy on a 4 x 4
      // pod with 2 layers (one MoE layer) and narrow widths; the all-reduces over 64+ chips alone exceed the budget.
      {"configs/papers/gshard/moe_128e_12l.yaml", gshard_reduced()},
      {"configs/papers/gshard/moe_128e_36l.yaml", gshard_reduced()},
      {"configs/papers/gshard/moe_512e_12l.yaml", gshard_reduced()},
      {"configs/papers/gshard/moe_512e_36l.yaml", gshard_reduced()},
      {"configs/papers/gshard/moe_2048e_12l.yaml", gshard_reduced()},
      {"configs/papers/gshard/moe_2048e_36l.yaml", gshard_reduced()},
      // The encoder-decoder of row (6): the same reduction with 2 layers a stack (one MoE layer each).
      {"configs/papers/gshard/moe_128e_12l_encoder_decoder.yaml",
       {"hardware.pod.dims=[4,4]", "workload.encoder_layers=2", "workload.decoder_layers=2", "workload.batch=32",
        "workload.src_len=64", "workload.tgt_len=64", "workload.moe.groups=32", "workload.d_model=128",
        "workload.d_ff=256", "workload.heads=4", "workload.head_dim=32", "workload.vocab=1024",
        "workload.src_vocab=2048"}},
      // GPipe reproductions: the same 8-stage pipeline with re-materialization; a small Transformer, 8 micro-batches
      // (at full size each simulates a multi-billion-parameter step with up to 32 micro-batches).
      {"configs/papers/gpipe/transformer48.yaml", kSmallPipelinedTransformer},
      {"configs/papers/gpipe/transformer_l_memory.yaml", kSmallPipelinedTransformer},
      // The same 8 stages and re-materialization over a tiny AmoebaNet-D (3 normal cells: 9 units, 16 filters,
      // 32x32 images) and 8 micro-batches of 2 (at full size 128 images of 224x224 in 32 micro-batches).
      // MaxText's decoder module (configs/hlo/) on its pod as shipped, 2 iterations of each while loop instead of 8
      // (workload.trip_counts). XLA's Llama and Mixtral modules are planned only in the quick tier
      // (planned_in_quick_tier() below).
      {"configs/hlo/maxtext_decoder.yaml", {"workload.trip_counts=[while.569=2,while.1401=2]"}},
      // SSD's spatial partitioning (2-way rows x data, the small maps gathered) on 4 x 2 chips instead of 32 x 16
      // (the box of 16 x 2 chips it simulates holds 1.7M activations): 4 replicas of 8 images, the batch-norm groups
      // of 4 replicas.
      {"configs/papers/ssd/ssd_resnet34_v3-1024_spatial.yaml",
       {"hardware.pod.dims=[4,2]", "mesh.shape=[4,2]", "workload.batch=32", "workload.bn_batch=32"}},
      {"configs/papers/gpipe/amoebanet_d_18_256.yaml",
       {"workload.cells=3", "workload.filters=16", "workload.image_size=32", "workload.batch=16",
        "strategy.micro_batches=8"}},
  };
  return table;
}

// Shipped experiments the quick tier only plans (`podsim run FILE --memory-only`, as shipped: the step lowered and
// its memory planned, which must fit) because no override shrinks their run within the budget without changing what
// they are: XLA's benchmark modules of Llama 3.1 and Mixtral, each one step of tens of thousands of kernels (the
// unrolled 8B and Mixtral modules as a whole; the scanned 70B and 405B ones even with 2 iterations of each while
// loop) on pods of 8 to 512 chips. The long tier runs them as shipped.
inline const std::set<std::string>& planned_in_quick_tier() {
  static const std::set<std::string> paths = {"configs/hlo/llama31_8b.yaml", "configs/hlo/mixtral_8x7b.yaml",
                                              "configs/hlo/llama31_70b.yaml", "configs/hlo/llama31_405b.yaml"};
  return paths;
}

// Overrides for each search under configs/search/ in the quick tier: the pod, batch, precision and search section as
// shipped on a narrow 2-layer model (configs/models' kNarrowModel), compositions of at most 2 strategies and 2
// simulations.
inline const std::map<std::string, std::vector<std::string>>& search_reduced_sizes() {
  static const std::vector<std::string> kNarrowSearch = {
      "workload.layers=2",   "workload.d_model=256",   "workload.d_ff=1024",       "workload.head_dim=32",
      "workload.vocab=4096", "workload.seq_len=128",   "search.max_strategies=2",  "search.budget=2"};
  static const std::map<std::string, std::vector<std::string>> table = {
      {"configs/search/llama2-7b-v5e.yaml", kNarrowSearch},
      {"configs/search/llama2-70b-v5p.yaml", kNarrowSearch},
      {"configs/search/gpt3-175b-v4.yaml", kNarrowSearch},
      // The serving search: its layouts, replicas and formats as shipped, on the narrow model, 8 short requests and
      // 2 serving runs.
      {"configs/search/llama2-7b-v5e-8-serving.yaml",
       {"workload.layers=2", "workload.d_model=256", "workload.d_ff=1024", "workload.head_dim=32", "workload.vocab=4096",
        "serving.requests.count=8", "serving.requests.input_tokens=[20,100]", "serving.requests.output_tokens=[10,30]",
        "search.budget=2"}},
  };
  return table;
}

// Overrides that bring an example's numeric runs (compare_test.cpp: the example with run.numeric=true, and its
// --single-device reference) within the quick budget, by path; they replace the file's reduced_sizes() entry.
// Numeric kernels cost more than timing, so the Transformer examples shrink their widths, vocabulary and
// sequence while keeping their pod, strategies, mesh, layers, batch and dtype: what makes a partitioned step
// differ from one chip's.
inline const std::map<std::string, std::vector<std::string>>& numeric_reduced_sizes() {
  static const std::vector<std::string> kNarrowTransformer = {"workload.d_model=64", "workload.d_ff=256",
                                                              "workload.vocab=256", "workload.seq_len=32"};
  static const std::map<std::string, std::vector<std::string>> table = {
      {"configs/examples/data_model.yaml", kNarrowTransformer},
      {"configs/examples/fsdp.yaml", kNarrowTransformer},
      {"configs/examples/moe.yaml", kNarrowTransformer},
      {"configs/examples/pipeline.yaml", kNarrowTransformer},
      {"configs/examples/pipeline_data_model.yaml", kNarrowTransformer},
      {"configs/examples/spmd_megatron.yaml", kNarrowTransformer},
      {"configs/examples/straggler.yaml", {"hardware.pod.dims=[4,4]", "mesh.shape=[4,4]", "run.trace.chips=[9,10]",
                                           "workload.d_model=64",
                                           "workload.d_ff=256", "workload.vocab=256", "workload.seq_len=32",
                                           "workload.batch=16"}},
      // One chip: a smaller product (the shipped one is 69 GFLOP) and 1 MiB of data instead of 64 MiB.
      {"configs/examples/matmul.yaml", {"workload.m=256", "workload.k=1024", "workload.n=1024"}},
      {"configs/examples/memory.yaml", {"workload.bytes=1MiB"}},
      // As in reduced_sizes(): 2 x 2 spatial x data at 64 pixels (1.7 GFLOP; tests/unit/spatial_test.cpp checks a
      // 4-way split's numerics).
      {"configs/examples/spatial.yaml", {"hardware.pod.dims=[2,2]", "mesh.shape=[2,2]", "workload.image_size=64",
                                         "workload.batch=2"}},
  };
  return table;
}

// The quick tier's budget, counted deterministically from the run's own outputs (never from the wall clock):
// model activations and trace events (host.json), and in numeric mode the FLOPs the kernels compute
// (summary.json), since numeric kernels dominate those runs.
struct QuickBudget {
  static constexpr double kActivations = 400e3;
  static constexpr double kTraceEvents = 1e6;
  static constexpr double kNumericFlops = 2e9;
};

namespace detail {

inline std::vector<Shipped> yaml_files_under(const std::vector<std::string>& roots) {
  namespace fs = std::filesystem;
  std::vector<Shipped> out;
  for (const std::string& root : roots) {
    fs::path abs = fs::path(source_dir()) / root;
    std::vector<fs::path> files;
    if (fs::is_regular_file(abs)) files.push_back(abs);
    else if (fs::is_directory(abs))
      for (const auto& e : fs::recursive_directory_iterator(abs))
        if (e.is_regular_file() && (e.path().extension() == ".yaml" || e.path().extension() == ".yml"))
          files.push_back(e.path());
    for (const fs::path& f : files) {
      std::string rel = fs::relative(f, source_dir()).generic_string();
      std::string name = rel.substr(rel.find('/') + 1);  // drop "configs/"
      name = name.substr(0, name.rfind('.'));
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      out.push_back({rel, name});
    }
  }
  std::sort(out.begin(), out.end(), [](const Shipped& a, const Shipped& b) { return a.path < b.path; });
  return out;
}

}  // namespace detail

// Every shipped experiment (not the sweeps), sorted by path.
inline std::vector<Shipped> shipped_experiments() {
  return detail::yaml_files_under({"configs/quickstart.yaml", "configs/examples", "configs/papers", "configs/models",
                                   "configs/hlo", "configs/serving"});
}

// Every file under configs/search/, sorted.
inline std::vector<Shipped> shipped_searches() { return detail::yaml_files_under({"configs/search"}); }

// Every file under configs/sweeps/, sorted.
inline std::vector<Shipped> shipped_sweeps() { return detail::yaml_files_under({"configs/sweeps"}); }

// Runs `podsim run <path> --set ...` into `out` and checks exit 0, summary.json, the trace and the resolved
// config. With `check_budget`, also fails when the run exceeds QuickBudget, naming the file and what to do.
inline void run_shipped(const std::string& path, const std::vector<std::string>& sets, const std::string& out,
                        bool check_budget) {
  std::vector<std::string> args = {"run", source_dir() + "/" + path, "--out", out};
  for (const std::string& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  CliResult r = run_podsim(args);
  const bool too_slow = r.err.find("PODSIM-SIM-002") != std::string::npos;
  ASSERT_EQ(r.code, 0) << path << " (" << ::testing::PrintToString(sets) << ") failed:\n" << r.err
                       << (too_slow ? "It is too large for the quick tier: add overrides that shrink it to "
                                      "reduced_sizes() in tests/cli/shipped.h."
                                    : "");
  ASSERT_TRUE(exists(out + "/summary.json")) << path;
  auto s = nlohmann::json::parse(read_file(out + "/summary.json"));
  EXPECT_GT(s["step_time_s"].get<double>(), 0) << path;
  EXPECT_TRUE(exists(out + "/config.resolved.yaml")) << path;
  auto host = nlohmann::json::parse(read_file(out + "/host.json"));
  ASSERT_TRUE(host.contains("trace")) << path << ": no trace written with the default settings";
  const std::string trace = out + "/" + host["trace"]["file"].get<std::string>();
  ASSERT_TRUE(exists(trace)) << path;
  EXPECT_GT(std::filesystem::file_size(trace), 0u) << path;
  if (!check_budget) return;
  const double activations = host["activations"].get<double>();
  const double events = host["trace"]["events"].get<double>();
  const double flops = s["numeric"].get<bool>() ? s["flops"].get<double>() : 0.0;
  const bool over = activations > QuickBudget::kActivations || events > QuickBudget::kTraceEvents ||
                    flops > QuickBudget::kNumericFlops;
  EXPECT_FALSE(over) << path << " is too large for the quick tier: " << activations << " model activations (budget "
                     << QuickBudget::kActivations << "), " << events << " trace events (budget "
                     << QuickBudget::kTraceEvents << "), " << flops << " numeric FLOPs (budget "
                     << QuickBudget::kNumericFlops << "). Add overrides that shrink it to reduced_sizes() in "
                     << "tests/cli/shipped.h; the long tier (shipped_slow_test.cpp) then runs it at full size.";
}

}  // namespace podsim::test

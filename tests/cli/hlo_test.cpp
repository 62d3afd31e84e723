// workload.model: hlo end to end, as a user runs it: a hand-written data-parallel step counted by hand (FLOPs, ICI
// bytes, groups, peak memory, hlo_op_stats.csv), a module equal to podsim's own MLP step against that step's time,
// a JAX-style MLP in numeric mode against a reference computed here, and XLA's benchmark modules' memory.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/npy.h"
#include "tests/cli/cli_util.h"

using namespace podsim;
using namespace podsim::test;
using json = nlohmann::json;

namespace {

std::string data(const std::string& f) { return source_dir() + "/tests/data/hlo/" + f; }

json run_json(const std::vector<std::string>& args, const std::string& out) {
  std::vector<std::string> a = args;
  a.insert(a.end(), {"--out", out});
  CliResult r = run_podsim(a);
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(read_file(out + "/summary.json"));
}

std::vector<std::vector<std::string>> csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> row;
    std::string cell;
    std::istringstream ls(line);
    while (std::getline(ls, cell, ',')) row.push_back(cell);
    rows.push_back(row);
  }
  return rows;
}

std::vector<float> npy(const std::string& path, std::vector<int64_t>* shape = nullptr) {
  std::vector<int64_t> s;
  std::vector<float> d;
  read_npy(path, s, d);
  if (shape) *shape = s;
  return d;
}

}  // namespace

TEST(HloTest, ADataParallelStepCountedByHand) {
  const std::string exp = write_file("dp.yaml", "hardware:\n  preset: tpu-v4\n  pod: {dims: [2, 2, 1]}\n"
                                                "workload:\n  model: hlo\n  module: " + data("dp_step.hlo") + "\n");
  json s = run_json({"run", exp}, test_dir() + "/out");
  // Two dots of 2 * 256 * 1024 * 1024 FLOPs on each of the 4 devices.
  EXPECT_DOUBLE_EQ(s["model_flops"].get<double>(), 4 * 2 * 2.0 * 256 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(s["hardware_flops"].get<double>(), s["model_flops"].get<double>());
  // The gradient's all-reduce: a ring of 4 chips, each sending 2 * 3/4 of its 4 MiB.
  EXPECT_DOUBLE_EQ(s["ici"]["bytes"].get<double>(), 4 * 2 * 0.75 * 4 * (1 << 20));
  // x (1 MiB) and w (4 MiB), then the gradient (4 MiB, reduced in place) and the new weights (4 MiB).
  EXPECT_DOUBLE_EQ(s["peak_memory_bytes"].get<double>(), 13.0 * (1 << 20));
  bool ring4 = false;
  for (const auto& c : s["collectives"])
    ring4 = ring4 || (c["name"] == "gs" && c["group_size"] == 4 && c["bytes_per_chip"] == 4.0 * (1 << 20));
  EXPECT_TRUE(ring4) << s["collectives"].dump();
  // hlo_op_stats.csv: one row per instruction that ran, the profile's columns, the collective bound by ICI.
  auto rows = csv(read_file(test_dir() + "/out/hlo_op_stats.csv"));
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(rows[0][2], "HLO op category");
  EXPECT_EQ(rows[0][3], "HLO op name");
  EXPECT_EQ(rows[0][5], "#Occurrences");
  EXPECT_EQ(rows[0][8], "Total self time (us)");
  EXPECT_EQ(rows[0].back(), "Bound by");
  std::map<std::string, std::vector<std::string>> by_name;
  for (size_t i = 1; i < rows.size(); ++i) by_name[rows[i][3]] = rows[i];
  ASSERT_TRUE(by_name.count("gs"));
  EXPECT_EQ(by_name["gs"][2], "all-reduce");
  EXPECT_EQ(by_name["gs"][5], "1");
  EXPECT_EQ(by_name["gs"].back(), "ICI");
  ASSERT_TRUE(by_name.count("g"));
  EXPECT_EQ(by_name["g"][2], "convolution");
  EXPECT_EQ(rows[1][0], "1");  // ranked by self time: the all-reduce first
  EXPECT_EQ(rows[1][3], "gs");
  EXPECT_EQ(rows.back()[11], "100.000");  // the cumulative share ends at all of it
}

// hlo_category_stats.csv and summary.json's hlo_categories: the instructions of hlo_op_stats.csv grouped by their
// category, as a TPU profile's breakdown by HLO op category, and the console's line of the largest.
TEST(HloTest, CategoriesAsAProfileGroupsThem) {
  const std::string exp = write_file("cat.yaml", "hardware:\n  preset: tpu-v4\n  pod: {dims: [2, 2, 1]}\n"
                                                 "workload:\n  model: hlo\n  module: " + data("dp_step.hlo") + "\n");
  CliResult r = run_podsim({"run", exp, "--out", test_dir() + "/cat"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json s = json::parse(read_file(test_dir() + "/cat/summary.json"));
  auto ops = csv(read_file(test_dir() + "/cat/hlo_op_stats.csv"));
  auto cats = csv(read_file(test_dir() + "/cat/hlo_category_stats.csv"));
  ASSERT_GE(cats.size(), 2u);
  EXPECT_EQ(cats[0][2], "HLO op category");
  EXPECT_EQ(cats[0][3], "#Instructions");
  EXPECT_EQ(cats[0][6], "Total self time (us)");
  EXPECT_EQ(cats[0].back(), "Bound by");
  // Summed here from the per-instruction table.
  std::map<std::string, std::pair<int, double>> by_cat;  // instructions, self time (us)
  for (size_t i = 1; i < ops.size(); ++i) {
    by_cat[ops[i][2]].first += 1;
    by_cat[ops[i][2]].second += std::stod(ops[i][8]);
  }
  ASSERT_EQ(cats.size() - 1, by_cat.size());
  ASSERT_EQ(s["hlo_categories"].size(), by_cat.size());
  double previous = 1e30;
  for (size_t i = 1; i < cats.size(); ++i) {
    const std::string& name = cats[i][2];
    ASSERT_TRUE(by_cat.count(name)) << name;
    EXPECT_EQ(std::stoi(cats[i][3]), by_cat[name].first) << name;
    EXPECT_NEAR(std::stod(cats[i][6]), by_cat[name].second, 0.001 * by_cat[name].first + 1e-9) << name;
    EXPECT_LE(std::stod(cats[i][6]), previous);  // ranked by self time
    previous = std::stod(cats[i][6]);
    const json& c = s["hlo_categories"][i - 1];
    EXPECT_EQ(c["category"], name);
    EXPECT_NEAR(c["self_s"].get<double>() * 1e6, std::stod(cats[i][6]), 0.001);
  }
  EXPECT_EQ(cats.back()[8], "100.000");
  // By hand: the gradient's all-reduce alone, bound by the ICI; the two dots, g and h; every FLOP of the step
  // once: two dots of 2 * 256 * 1024 * 1024, the multiply and subtract of 1024 x 1024, the ReLU of 256 x 1024 and
  // the two scalar constants.
  EXPECT_EQ(by_cat["all-reduce"].first, 1);
  EXPECT_EQ(by_cat["convolution"].first, 2);
  double flops = 0, self = 0, busy = 0;
  for (const json& c : s["hlo_categories"]) {
    flops += c["flops"].get<double>();
    self += c["self_s"].get<double>();
    if (c["category"] == "all-reduce") {
      EXPECT_EQ(c["bound_by"], "ICI");
    }
  }
  EXPECT_DOUBLE_EQ(flops, 2 * 2.0 * 256 * 1024 * 1024 + 2.0 * 1024 * 1024 + 256.0 * 1024 + 2);
  for (const json& o : s["ops"]) busy += o["busy_s"].get<double>();
  EXPECT_NEAR(self, busy, 1e-9 * busy);  // the result chip's busy time, shared out, none lost
  const std::string first = s["hlo_categories"][0]["category"];
  EXPECT_NE(r.out.find("by category   " + first + " "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(hlo_category_stats.csv)"), std::string::npos) << r.out;
  // podsim report lists every category under its heading, the largest first.
  CliResult rep = run_podsim({"report", test_dir() + "/cat"});
  ASSERT_EQ(rep.code, 0) << rep.err;
  const size_t head = rep.out.find("HLO op categories");
  ASSERT_NE(head, std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("  " + first + " ", head), std::string::npos) << rep.out;
  for (const json& c : s["hlo_categories"])
    EXPECT_NE(rep.out.find("  " + c["category"].get<std::string>() + " ", head), std::string::npos) << rep.out;
}

TEST(HloTest, AModuleEqualToPodsimsMlpTakesItsTime) {
  // tools/hlo/mlp_module.py --fused: podsim's MLP step (batch 512, 1024 -> 2048 -> 2048 -> 1024, fp32, SGD) after
  // XLA's optimizations, its fusions the kernels podsim makes of the built-in step: each dense kernel writes its ReLU
  // output alone, which the ReLU's gradient reads for its mask as podsim's does. (jax.nn.relu's gradient reads the
  // pre-activation instead, so JAX's dense kernels also write it: 4 MiB more per hidden layer, about 5 % of this
  // step; that is a difference of the two steps, not of the importer, and not what this test compares.)
  const std::string hw = "hardware:\n  preset: tpu-v4\n  pod: {dims: [1, 1, 1]}\nrun: {trace: {format: \"off\"}}\n";
  const std::string mlp = write_file("mlp.yaml", hw + "workload:\n  model: mlp\n  batch: 512\n  input: 1024\n"
                                                      "  hidden: 2048\n  layers: 2\n  classes: 1024\n  optimizer: sgd\n"
                                                      "  dtype: fp32\n  weight_dtype: fp32\n");
  const std::string hlo = write_file("hlo.yaml", hw + "workload:\n  model: hlo\n  module: " + data("mlp_fused.hlo") + "\n");
  json a = run_json({"run", mlp}, test_dir() + "/mlp");
  json b = run_json({"run", hlo}, test_dir() + "/hlo");
  EXPECT_DOUBLE_EQ(b["model_flops"].get<double>(), a["model_flops"].get<double>());
  const double ta = a["step_time_s"].get<double>(), tb = b["step_time_s"].get<double>();
  EXPECT_NEAR(tb / ta, 1.0, 0.02) << "podsim's MLP " << ta << " s, its HLO module " << tb << " s";
}

TEST(HloTest, NumericMlpMatchesAReference) {
  // tools/hlo/mlp_module.py --devices 2 --batch 8 --input 6 --hidden 5 --layers 1 --classes 4: a data-parallel MLP
  // step as JAX lowers it, on 2 chips in numeric mode. The reference here: the same step on the whole batch.
  const std::string exp = write_file(
      "n.yaml", "hardware:\n  preset: tpu-v4\n  pod: {dims: [2, 1, 1]}\nworkload:\n  model: hlo\n  module: " +
                    data("mlp_dp2_numeric.hlo") + "\nrun: {numeric: true, seed: 7}\n");
  run_json({"run", exp}, test_dir() + "/out");
  const std::string t = test_dir() + "/out/tensors/";
  const int B = 8, I = 6, H = 5, C = 4;
  std::vector<int64_t> shape;
  const std::vector<float> x = npy(t + "x.npy", &shape);
  ASSERT_EQ(shape, (std::vector<int64_t>{B, I}));  // the global batch, each device's tile assembled
  const std::vector<float> labels = npy(t + "labels.npy"), w0 = npy(t + "w0.npy"), b0 = npy(t + "b0.npy"),
                           wo = npy(t + "wo.npy"), bo = npy(t + "bo.npy");
  // Forward, softmax cross-entropy averaged over the batch, backward, SGD with learning rate 0.01 (in double).
  std::vector<double> z(B * H), a(B * H), logits(B * C), dlogits(B * C);
  double loss = 0;
  for (int r = 0; r < B; ++r) {
    for (int j = 0; j < H; ++j) {
      double v = b0[j];
      for (int k = 0; k < I; ++k) v += static_cast<double>(x[r * I + k]) * w0[k * H + j];
      z[r * H + j] = v;
      a[r * H + j] = std::max(v, 0.0);
    }
    double m = -1e300;
    for (int c = 0; c < C; ++c) {
      double v = bo[c];
      for (int j = 0; j < H; ++j) v += a[r * H + j] * wo[j * C + c];
      logits[r * C + c] = v;
      m = std::max(m, v);
    }
    double sum = 0;
    for (int c = 0; c < C; ++c) sum += std::exp(logits[r * C + c] - m);
    const int label = static_cast<int>(labels[r]);
    loss += (std::log(sum) + m - logits[r * C + label]) / B;
    for (int c = 0; c < C; ++c) dlogits[r * C + c] = (std::exp(logits[r * C + c] - m) / sum - (c == label)) / B;
  }
  std::vector<double> gwo(H * C, 0), gbo(C, 0), gw0(I * H, 0), gb0(H, 0);
  for (int r = 0; r < B; ++r) {
    std::vector<double> da(H, 0);
    for (int c = 0; c < C; ++c) {
      gbo[c] += dlogits[r * C + c];
      for (int j = 0; j < H; ++j) {
        gwo[j * C + c] += a[r * H + j] * dlogits[r * C + c];
        da[j] += dlogits[r * C + c] * wo[j * C + c];
      }
    }
    for (int j = 0; j < H; ++j) {
      const double dz = z[r * H + j] > 0 ? da[j] : 0;
      gb0[j] += dz;
      for (int k = 0; k < I; ++k) gw0[k * H + j] += x[r * I + k] * dz;
    }
  }
  auto check = [&](const std::string& name, const std::vector<float>& before, const std::vector<double>& grad) {
    const std::vector<float> after = npy(t + name + ".new.npy");
    ASSERT_EQ(after.size(), before.size()) << name;
    for (size_t i = 0; i < after.size(); ++i)
      EXPECT_NEAR(after[i], before[i] - 0.01 * grad[i], 1e-6) << name << "[" << i << "]";
  };
  check("w0", w0, gw0);
  check("b0", b0, gb0);
  check("wo", wo, gwo);
  check("bo", bo, gbo);
  EXPECT_NEAR(npy(t + "loss.npy").at(0), loss, 1e-5 * std::fabs(loss));
}

TEST(HloTest, XlasBenchmarkModulesFitAsShipped) {
  // The shipped experiments' memory, as --memory-only plans it (the long tier simulates them as shipped): each
  // module on its pod of TPU v5p chips fits in HBM.
  for (const char* f : {"llama31_8b", "mixtral_8x7b", "llama31_70b", "llama31_405b", "maxtext_decoder"}) {
    const std::string out = test_dir() + "/" + f;
    CliResult r = run_podsim({"run", source_dir() + "/configs/hlo/" + f + ".yaml", "--memory-only", "--out", out});
    ASSERT_EQ(r.code, 0) << f << "\n" << r.err;
    json s = json::parse(read_file(out + "/summary.json"));
    EXPECT_TRUE(s["memory"]["fits"].get<bool>()) << f << ": " << s["memory"].dump();
  }
}

TEST(HloTest, GpuDumpsRunEachModuleOfTheirFiles) {
  // XLA's GPU modules (tests/data/hlo/modules, provenance in LICENSE-NOTICE.md there) on TPU v5p chips: cuBLAS
  // GEMMs, a cuDNN convolution, Triton GEMM fusions, and MaxText's Llama 3 8B step with Transformer Engine attention
  // and activation offloading (its trace off: a trace of every op of its 8 chips is millions of events);
  // kernel_reuse.hlo holds five modules, each run by workload.module_index.
  struct Case {
    std::string file, dims;
    int modules;
  };
  for (const Case& c : {Case{"gpu_scheduled_cublas_gemm_kernel_reuse.hlo", "[1, 1, 1]", 5},
                        Case{"gpu_optimized_cudnn_conv_triton_gemm.hlo", "[1, 1, 1]", 1},
                        Case{"llama3_8b_train_step_te_attn_offload_8gpu.hlo.gz", "[2, 2, 2]", 1}}) {
    for (int k = 0; k < c.modules; ++k) {
      const std::string exp = write_file("gpu.yaml", "hardware:\n  preset: tpu-v5p\n  pod: {dims: " + c.dims +
                                                         "}\nworkload:\n  model: hlo\n  module: " +
                                                         data("modules/" + c.file) + "\n  module_index: " +
                                                         std::to_string(k) + "\nrun: {trace: {format: \"off\"}}\n");
      const std::string out = test_dir() + "/gpu_" + std::to_string(k);
      CliResult r = run_podsim({"run", exp, "--out", out, "--force"});
      ASSERT_EQ(r.code, 0) << c.file << " module " << k << "\n" << r.err;
      json s = json::parse(read_file(out + "/summary.json"));
      EXPECT_GT(s["step_time_s"].get<double>(), 0) << c.file << " module " << k;
      EXPECT_TRUE(s["memory"]["fits"].get<bool>()) << c.file << " module " << k;
    }
  }
  // A sixth module of kernel_reuse.hlo is not there.
  const std::string exp = write_file("gpu.yaml", "hardware:\n  preset: tpu-v5p\n  pod: {dims: [1, 1, 1]}\nworkload:\n"
                                                 "  model: hlo\n  module: " +
                                                     data("modules/gpu_scheduled_cublas_gemm_kernel_reuse.hlo") +
                                                     "\n  module_index: 5\n");
  CliResult r = run_podsim({"validate", exp});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("holds 5 modules; pick one from 0 to 4"), std::string::npos) << r.err;
}

TEST(HloTest, CollectivePermutesRunBackwardsAndByTwoStepsCountedByHand) {
  // 1 MiB on each of 4 chips in a ring (a v4 pod of 4 x 1 x 1 with wrap-around): forwards, backwards, and two steps
  // round (0 and 2, 1 and 3 swap).
  auto module = [](const std::string& pairs) {
    return "HloModule m, num_partitions=4\nENTRY %e (x: f32[262144]) -> f32[262144] {\n"
           "  %x = f32[262144] parameter(0)\n"
           "  ROOT %y = f32[262144] collective-permute(%x), channel_id=1, source_target_pairs=" + pairs + "\n}\n";
  };
  auto run = [&](const std::string& name, const std::string& pairs) {
    write_file(name + ".hlo", module(pairs));
    const std::string exp = write_file(name + ".yaml", "hardware:\n  preset: tpu-v4\n  pod: {dims: [4, 1, 1]}\n"
                                                       "workload:\n  model: hlo\n  module: " + name + ".hlo\n");
    return run_json({"run", exp}, test_dir() + "/" + name);
  };
  json fwd = run("forward", "{{0,1},{1,2},{2,3},{3,0}}");
  json back = run("backward", "{{1,0},{2,1},{3,2},{0,3}}");
  json two = run("two", "{{0,2},{2,0},{1,3},{3,1}}");
  const double mib = 1 << 20;
  // Each chip sends its 1 MiB once to its neighbour: 4 MiB over the ICI either way round.
  EXPECT_DOUBLE_EQ(fwd["ici"]["bytes"].get<double>(), 4 * mib);
  EXPECT_DOUBLE_EQ(back["ici"]["bytes"].get<double>(), 4 * mib);
  // The ring run backwards uses the links of the other direction: the same time.
  EXPECT_DOUBLE_EQ(back["step_time_s"].get<double>(), fwd["step_time_s"].get<double>());
  // Two steps round: each chip's 1 MiB crosses two links (8 MiB of link traffic; 0 and 2 are two links apart
  // either way round). The four flows' routes take the eight directed links one each, so no link carries two and
  // the transfer takes the one-step transfer's time and one more hop's latency (hardware.ici.hop_latency, 1 us).
  EXPECT_DOUBLE_EQ(two["ici"]["bytes"].get<double>(), 8 * mib);
  EXPECT_NEAR(two["step_time_s"].get<double>() - fwd["step_time_s"].get<double>(), 1e-6, 1e-12);
}

TEST(HloTest, ATpuModulesInfeedAndOutfeedCrossTheHostLinkCountedByHand) {
  // x (4 MiB) and ids (8 KiB) arrive by infeed, y = x w leaves by outfeed; tiled f32 [1024, 1024] pads nothing.
  write_file("tpu.hlo", R"(HloModule tpu_step
ENTRY %main (w: f32[1024,1024]) -> f32[1024,1024] {
  %w = f32[1024,1024]{1,0:T(8,128)} parameter(0)
  %tok = token[] after-all()
  %in = ((f32[1024,1024]{1,0:T(8,128)}, s64[1024]{0}), token[]) infeed(%tok)
  %data = (f32[1024,1024]{1,0:T(8,128)}, s64[1024]{0}) get-tuple-element(%in), index=0
  %x = f32[1024,1024]{1,0:T(8,128)} get-tuple-element(%data), index=0
  %ids = s64[1024]{0} get-tuple-element(%data), index=1
  %y = f32[1024,1024]{1,0:T(8,128)} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %lo = u32[1024]{0} custom-call(%ids), custom_call_target="X64SplitLow"
  %done = token[] outfeed(%y, %tok), outfeed_shape=f32[1024,1024]{1,0}
  ROOT %r = f32[1024,1024]{1,0} copy(%y)
}
)");
  const std::string exp = write_file("tpu.yaml", "hardware:\n  preset: tpu-v4\n  pod: {dims: [1, 1, 1]}\n"
                                                 "workload:\n  model: hlo\n  module: tpu.hlo\n");
  json s = run_json({"run", exp}, test_dir() + "/tpu");
  const double mib = 1 << 20;
  // Over the host link: 4 MiB + 8 KiB in, 4 MiB out.
  EXPECT_DOUBLE_EQ(s["host_link"]["bytes_from_host"].get<double>(), 4 * mib + 8192);
  EXPECT_DOUBLE_EQ(s["host_link"]["bytes_to_host"].get<double>(), 4 * mib);
  // HBM holds w, x, y (4 MiB each), ids (8 KiB) and its low words (4 KiB): the infeed's host side takes none.
  EXPECT_DOUBLE_EQ(s["peak_memory_bytes"].get<double>(), 12 * mib + 8192 + 4096);
  // The outfeed alone on the link: 4 MiB at the v4 host link's 16 GB/s is 262.144 us.
  auto rows = csv(read_file(test_dir() + "/tpu/hlo_op_stats.csv"));
  std::map<std::string, std::vector<std::string>> by_name;
  for (size_t i = 1; i < rows.size(); ++i) by_name[rows[i][3]] = rows[i];
  ASSERT_TRUE(by_name.count("done") && by_name.count("in"));
  EXPECT_EQ(by_name["done"][2], "outfeed");
  EXPECT_EQ(by_name["in"][2], "infeed");
  EXPECT_NEAR(std::stod(by_name["done"][8]), 4 * mib / 16e9 * 1e6, 1e-3);
}

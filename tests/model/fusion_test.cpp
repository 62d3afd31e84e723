// Fusion (hw/compiler/fusion.h): with run.fusion: xla a Transformer step moves fewer HBM bytes than with none, has
// loop, output and reduction fusions, and computes bit-identical tensors; the members of an output fusion move
// exactly the bytes counted by hand.
#include <gtest/gtest.h>

#include <cstring>

#include "hw/pod/pod.h"
#include "tests/model/sim_util.h"

using namespace podsim;
using podsim::test::in_child;
using podsim::test::simulate_in_child;

namespace {

const char* kTransformer = "hardware: {preset: tpu-v4}\nworkload: {model: transformer, layers: 2, d_model: 64, d_ff: 128, "
                           "heads: 4, vocab: 100, seq_len: 16, batch: 2}\nrun: {numeric: true, trace: {format: \"off\"}}\n";

// Runs `yaml` numerically; every tensor's bytes (as a hash per tensor name) and the summary's fusion figures.
nlohmann::json tensors_and_figures(const std::string& yaml, const std::vector<std::string>& sets) {
  return in_child([&] {
    Experiment e = load_experiment_text(yaml, "t.yaml", {sets});
    std::unique_ptr<Prepared> p = prepare(e);
    Simulation s = simulate(*p);
    nlohmann::json summary = nlohmann::json::parse(summary_json(*p, s));
    const ModelGraph& g = p->plan.programs[0].graph;
    TensorStore& store = s.pod->chips()[0]->store();
    nlohmann::json hashes = nlohmann::json::object();
    for (size_t i = 0; i < g.num_tensors(); ++i) {
      TensorId id = static_cast<TensorId>(i);
      if (!store.has(id)) continue;
      const auto& d = store.get(id).data;
      uint64_t h = 1469598103934665603ull;  // FNV-1a over the float bytes
      const unsigned char* b = reinterpret_cast<const unsigned char*>(d.data());
      for (size_t k = 0; k < d.size() * sizeof(float); ++k) h = (h ^ b[k]) * 1099511628211ull;
      hashes[g.tensor(id).name] = std::to_string(h) + ":" + std::to_string(d.size());
    }
    return nlohmann::json({{"tensors", hashes}, {"hbm_bytes", summary["hbm"]["bytes"]}, {"fusion", summary["fusion"]}});
  });
}

}  // namespace

TEST(FusionTest, FusedStepMovesFewerBytesAndComputesTheSameTensors) {
  auto xla = tensors_and_figures(kTransformer, {});
  auto none = tensors_and_figures(kTransformer, {"run.fusion=none"});
  ASSERT_FALSE(xla.contains("error") || none.contains("error")) << xla.dump() << none.dump();
  EXPECT_GT(xla["tensors"].size(), 100u);
  EXPECT_EQ(xla["tensors"], none["tensors"]);  // every tensor, byte for byte
  EXPECT_LT(xla["hbm_bytes"].get<double>(), none["hbm_bytes"].get<double>());
  const auto& f = xla["fusion"];
  EXPECT_EQ(f["mode"], "xla");
  EXPECT_GT(f["by_kind"]["output"].get<int64_t>(), 0);
  EXPECT_GT(f["by_kind"]["reduction"].get<int64_t>(), 0);
  EXPECT_EQ(none["fusion"]["fusions"].get<int64_t>(), 0);
  EXPECT_EQ(f["exec_ops"].get<int64_t>() + f["fused_ops"].get<int64_t>() - f["fusions"].get<int64_t>(),
            none["fusion"]["exec_ops"].get<int64_t>());  // every graph op runs exactly once either way
}

TEST(FusionTest, OutputFusionWritesOnlyWhatLeavesIt) {
  // One MLP layer on one core, bf16: fc0 = x[512, 256] @ w[256, 1024], + bias[1024], GELU. Fused, it reads x
  // (256 KiB), w (512 KiB) and the bias (2 KiB) and writes the pre-activation (kept for GELU's gradient, 1 MiB) and
  // the GELU output (1 MiB); the matmul's own result stays in VMEM. Unfused, the matmul writes its result (1 MiB),
  // the bias add reads it and the bias and writes the pre-activation, GELU reads that and writes its output.
  std::string mlp = "hardware: {preset: tpu-v3}\nworkload: {model: mlp, batch: 512, input: 256, hidden: 1024, "
                    "layers: 1, classes: 16, activation: gelu, dtype: bf16}\nrun: {trace: {format: \"off\"}}\n";
  auto xla = simulate_in_child(mlp, {"hardware.chip.tensorcores=1"});
  auto none = simulate_in_child(mlp, {"hardware.chip.tensorcores=1", "run.fusion=none"});
  ASSERT_FALSE(xla.contains("error") || none.contains("error")) << xla.dump() << none.dump();
  const double KiB = 1024;
  const nlohmann::json* fused = nullptr;
  for (const auto& o : xla["ops"])
    if (o.contains("fused") && o["fused"][0] == "fc0") fused = &o;
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ((*fused)["fused"], nlohmann::json({"fc0", "fc0.bias", "fc0.gelu"}));
  EXPECT_DOUBLE_EQ((*fused)["hbm_read"].get<double>(), 256 * KiB + 512 * KiB + 2 * KiB);
  EXPECT_DOUBLE_EQ((*fused)["hbm_write"].get<double>(), 2048 * KiB);
  double unfused_read = 0, unfused_write = 0;
  for (const auto& o : none["ops"])
    if (o["name"] == "fc0" || o["name"] == "fc0.bias" || o["name"] == "fc0.gelu") {
      unfused_read += o["hbm_read"].get<double>();
      unfused_write += o["hbm_write"].get<double>();
    }
  EXPECT_DOUBLE_EQ(unfused_read, 256 * KiB + 512 * KiB + (1024 + 2) * KiB + 1024 * KiB);
  EXPECT_DOUBLE_EQ(unfused_write, 3072 * KiB);
}

TEST(FusionTest, OperandConvertAndEpilogueFuseIntoTheMatmul) {
  // The calibration rows' fusions (tools/calibrate): C = A[512, 256] @ convert(B_fp32[256, 1024]) + E0 + E1, bf16.
  // Fused, the convert is the matmul's prologue: B is read once in fp32 (1 MiB), A once (256 KiB), each epilogue
  // input once (1 MiB each), and only C is written (1 MiB). The VPU converts 256 Ki elements (256 vectors of 1024)
  // and adds 2 x 512 Ki (1024 vectors): 1280 cycles with one ALU. Unfused, the convert writes bf16 B (512 KiB) that
  // the matmul reads again, and each add reads and writes a whole result.
  std::string mm = "hardware: {preset: tpu-v3}\nworkload: {model: matmul, m: 512, k: 256, n: 1024, dtype: bf16, "
                   "b_dtype: fp32, epilogue_inputs: 2}\nrun: {trace: {format: \"off\"}}\n";
  auto xla = simulate_in_child(mm, {"hardware.chip.tensorcores=1"});
  auto none = simulate_in_child(mm, {"hardware.chip.tensorcores=1", "run.fusion=none"});
  ASSERT_FALSE(xla.contains("error") || none.contains("error")) << xla.dump() << none.dump();
  const double KiB = 1024;
  ASSERT_EQ(xla["ops"].size(), 1u);
  const auto& f = xla["ops"][0];
  EXPECT_EQ(f["fused"], nlohmann::json({"convert_b", "matmul", "epilogue_add0", "epilogue_add1"}));
  EXPECT_EQ(f["fusion"], "output");
  EXPECT_EQ(f["unit"], "MXU");
  EXPECT_DOUBLE_EQ(f["hbm_read"].get<double>(), 256 * KiB + 1024 * KiB + 2 * 1024 * KiB);
  EXPECT_DOUBLE_EQ(f["hbm_write"].get<double>(), 1024 * KiB);
  EXPECT_EQ(f["mxu"]["epilogue_vpu_cycles"].get<int64_t>(), 256 + 1024);
  ASSERT_EQ(none["ops"].size(), 4u);
  double read = 0, write = 0;
  for (const auto& o : none["ops"]) {
    read += o["hbm_read"].get<double>();
    write += o["hbm_write"].get<double>();
  }
  EXPECT_DOUBLE_EQ(read, 1024 * KiB + (256 + 512) * KiB + 2 * (1024 + 1024) * KiB);
  EXPECT_DOUBLE_EQ(write, 512 * KiB + 3 * 1024 * KiB);
  // Numerics: the fused and unfused programs compute the same tensors, byte for byte.
  std::string numeric = "hardware: {preset: tpu-v3}\nworkload: {model: matmul, m: 48, k: 40, n: 136, dtype: bf16, "
                        "b_dtype: fp32, epilogue_inputs: 2}\nrun: {numeric: true, trace: {format: \"off\"}}\n";
  auto nx = tensors_and_figures(numeric, {});
  auto nn = tensors_and_figures(numeric, {"run.fusion=none"});
  ASSERT_FALSE(nx.contains("error") || nn.contains("error")) << nx.dump() << nn.dump();
  EXPECT_EQ(nx["tensors"].size(), 8u);  // a, b_fp32, b, ab, e0, ab0, e1, c
  EXPECT_EQ(nx["tensors"], nn["tensors"]);
}

// Configurations known to have trained on real TPU slices fit in HBM with the re-materialization they used, and do
// not without it (`podsim run --memory-only`: the whole plan and its memory, no simulation); every model example
// under configs/models/ fits at full size as shipped.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

using namespace podsim::test;
using nlohmann::json;

namespace {

struct Fit {
  int code = 0;
  std::string err;
  double peak = 0, capacity = 0;
};

Fit memory_only(const std::string& name, const std::string& yaml, const std::string& remat) {
  const std::string exp = write_file(name + ".yaml", yaml);
  auto r = run_podsim({"run", exp, "--out", name, "--memory-only", "-q", "--set", "workload.remat=" + remat});
  Fit f{r.code, r.err};
  if (r.code == 0) {
    const json s = json::parse(read_file(test_dir() + "/" + name + "/summary.json"));
    f.peak = s["memory"]["peak_bytes"].get<double>();
    f.capacity = s["memory"]["capacity_bytes"].get<double>();
  }
  return f;
}

// A 32B-class model (32 layers, d_model 8192, 64 heads of 128, SwiGLU d_ff 28672, vocabulary 32000, 2048-token
// sequences, fp32 master weights, bf16 compute) on 64 TPU v5p chips (4 x 4 x 4) with fsdp 16 x model 4 and 6
// sequences per chip (384), keeping the matmul outputs (remat: dots); the model axis splits the residual stream
// along the sequence (sequence parallelism), as the JAX trainers that ran it shard activations over it.
const char* k32b =
    "hardware: {preset: tpu-v5p, pod: {dims: [4, 4, 4]}}\n"
    "workload: {model: transformer, layers: 32, d_model: 8192, heads: 64, head_dim: 128, d_ff: 28672, ffn: swiglu,\n"
    "           norm: rmsnorm, rope: true, vocab: 32000, seq_len: 2048, batch: 384, dtype: bf16, weight_dtype: fp32}\n"
    "strategy: {name: [fsdp, spmd], sequence_parallel: true}\n"
    "mesh: {axes: [fsdp, model], shape: [16, 4]}\n";

// A 16B-class model (32 layers, d_model 4096, 64 heads of 128, SwiGLU d_ff 28672) on 256 TPU v5e chips with fsdp
// 256 and 6 sequences per chip (1536), every layer re-materialized (remat: full).
const char* k16b =
    "hardware: {preset: tpu-v5e, pod: {dims: [16, 16]}}\n"
    "workload: {model: transformer, layers: 32, d_model: 4096, heads: 64, head_dim: 128, d_ff: 28672, ffn: swiglu,\n"
    "           norm: rmsnorm, rope: true, vocab: 32000, seq_len: 2048, batch: 1536, dtype: bf16, weight_dtype: fp32}\n"
    "strategy: {name: fsdp}\n"
    "mesh: {axes: [fsdp], shape: [256]}\n";

void expect_fits_only_with(const std::string& name, const std::string& yaml, const std::string& remat) {
  const Fit with = memory_only(name + "_" + remat, yaml, remat);
  ASSERT_EQ(with.code, 0) << with.err;
  EXPECT_LE(with.peak, with.capacity);
  // Most of the chip is used: the example is the size that was trained, not a small one.
  EXPECT_GT(with.peak, 0.8 * with.capacity);
  const Fit without = memory_only(name + "_none", yaml, "none");
  EXPECT_NE(without.code, 0);
  EXPECT_NE(without.err.find("PODSIM-MEM-001"), std::string::npos) << without.err;
}

}  // namespace

TEST(ModelMemoryTest, A32BModelFitsOn64V5pChipsWithDotsRematOnly) { expect_fits_only_with("m32b", k32b, "dots"); }

TEST(ModelMemoryTest, A16BModelFitsOn256V5eChipsWithFullRematOnly) { expect_fits_only_with("m16b", k16b, "full"); }

// Every configs/models/ example plans and fits at full size as shipped (the shipped tests run them reduced).
TEST(ModelMemoryTest, EveryModelExampleFitsAsShipped) {
  namespace fs = std::filesystem;
  int n = 0;
  for (const auto& e : fs::directory_iterator(source_dir() + "/configs/models")) {
    if (e.path().extension() != ".yaml") continue;
    ++n;
    const std::string name = e.path().stem().string();
    auto r = run_podsim({"run", e.path().string(), "--out", name, "--memory-only", "-q"});
    EXPECT_EQ(r.code, 0) << name << ": " << r.err;
  }
  EXPECT_GE(n, 7);
}

namespace {

// `podsim run FILE --memory-only` with overrides: the peak, and the tensors live at it.
json memory_of(const std::string& name, const std::string& file, std::vector<std::string> sets) {
  std::vector<std::string> args = {"run", source_dir() + "/" + file, "--out", name, "--memory-only", "-q"};
  for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
  auto r = run_podsim(args);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? json::parse(read_file(test_dir() + "/" + name + "/summary.json"))["memory"] : json();
}

}  // namespace

// Two configurations that trained on TPU v4 with a fused attention kernel fit with it (configs/models, as shipped
// or with the batch PaLM trained at): a 52B-class model on 192 chips, fsdp 192, 7 sequences of 2048 per chip,
// every layer re-materialized; and PaLM 540B on one 3072-chip pod (fsdp 256 x model 12, Megatron with sequence
// parallelism) at 1024 sequences per pod, its batch from step 50k (Chowdhery et al. 2022, section 5; 2048 over two
// pods). With the einsum path the 52B step's peak holds one layer's recomputed probabilities besides, 7 sequences
// x 32 heads x 2048^2 in bf16 = 1.75 GiB, the largest tensor at its peak: the kernel holds its row statistics
// there instead (7 x 32 x 2048 in fp32, 1.75 MiB).
TEST(ModelMemoryTest, TrainedV4ConfigurationsFitWithTheFusedKernel) {
  const json flash = memory_of("m52b", "configs/models/maxtext-52b-v4.yaml", {});
  ASSERT_FALSE(flash.is_null());
  EXPECT_TRUE(flash["fits"].get<bool>());
  EXPECT_GT(flash["peak_bytes"].get<double>(), 0.7 * flash["capacity_bytes"].get<double>());
  const json einsum = memory_of("m52b_einsum", "configs/models/maxtext-52b-v4.yaml", {"workload.attention=einsum"});
  ASSERT_FALSE(einsum.is_null());
  // One layer's recomputed probabilities (the peak is in the backward of one of the last layers).
  const std::string largest = einsum["largest_at_peak"][0]["name"].get<std::string>();
  EXPECT_TRUE(largest.rfind("layer6", 0) == 0 && largest.find(".attn.softmax/remat") != std::string::npos) << largest;
  const double probabilities = 7.0 * 32 * 2048 * 2048 * 2;
  EXPECT_EQ(einsum["largest_at_peak"][0]["bytes"].get<double>(), probabilities);
  const double statistics = 7.0 * 32 * 2048 * 4;
  EXPECT_EQ(einsum["peak_bytes"].get<double>() - flash["peak_bytes"].get<double>(), probabilities - statistics);

  const json palm = memory_of("palm1024", "configs/models/palm-540b.yaml", {"workload.batch=1024"});
  ASSERT_FALSE(palm.is_null());
  EXPECT_TRUE(palm["fits"].get<bool>());
}

// MaxText's 128B model on a TPU v5e-256 slice (configs/models/maxtext-128b-v5e.yaml: fsdp 16 x model 16, 256
// sequences of 2048) fits with the host-offload policies where the on-device policies keeping the same values do
// not: save_qkv_proj holds every layer's queries, keys and values (16 sequences x 2048 x 8 heads of 128 in bf16,
// 64 MiB each, 192 MiB a layer) until its backward, minimal its projections' and FFN matmuls' outputs; offloaded,
// they wait in host memory. As figured, full re-materialization fits too (11.65 GiB of 14.90), and offloading the
// queries, keys and values holds no more than it: what it saves is their recomputation, not memory.
TEST(ModelMemoryTest, The128BModelOnV5eFitsWithHostOffload) {
  const std::string file = "configs/models/maxtext-128b-v5e.yaml";
  const json offloaded = memory_of("m128_qkv_off", file, {});  // as shipped: qkv_proj_offloaded, as MaxText ran it
  ASSERT_FALSE(offloaded.is_null());
  EXPECT_TRUE(offloaded["fits"].get<bool>());
  const json minimal_off = memory_of("m128_min_off", file, {"workload.remat=minimal_offloaded"});
  ASSERT_FALSE(minimal_off.is_null());
  EXPECT_TRUE(minimal_off["fits"].get<bool>());
  const json full = memory_of("m128_full", file, {"workload.remat=full"});
  ASSERT_FALSE(full.is_null());
  EXPECT_TRUE(full["fits"].get<bool>());
  EXPECT_LE(offloaded["peak_bytes"].get<double>(), full["peak_bytes"].get<double>());
  const std::string src = source_dir() + "/" + file;
  for (const char* on_device : {"save_qkv_proj", "minimal"}) {
    auto r = run_podsim({"run", src, "--out", std::string("m128_") + on_device, "--memory-only", "-q", "--set",
                         std::string("workload.remat=") + on_device});
    EXPECT_NE(r.code, 0) << on_device;
    EXPECT_NE(r.err.find("PODSIM-MEM-001"), std::string::npos) << on_device << ": " << r.err;
  }
}

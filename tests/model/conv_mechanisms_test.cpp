// The convolution mechanisms a user can switch off (docs/model.md, "Convolutions on the MXU"), each against what it
// should be worth by hand: the window fed tap by tap or packed into K (run.conv_taps), and a convolution fusion's
// vector work beside its MXU passes (run.conv_overlap). One TensorCore of a v3 chip, a 3 x 3 convolution of
// 16 images of 32 x 32 from 64 to 128 features, with its batch-norm statistics and one fused prologue input.
#include <gtest/gtest.h>

#include "tests/model/sim_util.h"

using podsim::test::simulate_in_child;

namespace {

const char* kConv =
    "hardware: {preset: tpu-v3, chip: {tensorcores: 1}}\n"
    "workload: {model: conv, batch: 16, height: 32, width: 32, in_features: 64, out_features: 128, kernel: [3, 3],\n"
    "           stride: 1, padding: same, direction: forward, dtype: bf16, statistics: true, prologue_inputs: 1}\n"
    "run: {trace: {format: \"off\"}}\n";

nlohmann::json conv_op(const std::vector<std::string>& sets) {
  auto s = simulate_in_child(kConv, sets);
  EXPECT_FALSE(s.contains("error")) << s.dump();
  EXPECT_EQ(s["ops"].size(), 1u);  // the convolution, its statistics and its prologue in one kernel
  nlohmann::json op = s["ops"][0];
  op["clock_hz"] = s["clock_hz"];
  return op;
}

}  // namespace

// Per tap (XLA's emitter): each of the 9 taps contracts its 64 features on a 128-row weight fold of its own,
// K = 9 x 128; packed (im2col), the 9 x 64 = 576 window values fill 5 folds of 128. The same 16 x 32 x 32 rows
// stream through each fold, so the MXU's cycles go as the folds, 9 : 5, less the fill and drain they share.
TEST(ConvMechanismsTest, TapsFedOneByOneOrPackedIntoTheContraction) {
  const auto per_tap = conv_op({});
  const auto packed = conv_op({"run.conv_taps=packed"});
  EXPECT_EQ(per_tap["mxu"]["k_pad"].get<int64_t>(), 9 * 128);
  EXPECT_EQ(per_tap["mxu"]["folds"].get<int64_t>(), 9);
  EXPECT_EQ(packed["mxu"]["k_pad"].get<int64_t>(), 5 * 128);
  EXPECT_EQ(packed["mxu"]["folds"].get<int64_t>(), 5);
  const double ratio = per_tap["cycles"].get<double>() / packed["cycles"].get<double>();
  EXPECT_NEAR(ratio, 9.0 / 5.0, 0.02);
  // Both do the convolution's own multiply-adds (and the fused vector work's few FLOPs).
  const double conv = 2.0 * 16 * 32 * 32 * 9 * 64 * 128;
  EXPECT_GE(per_tap["flops"].get<double>(), conv);
  EXPECT_LT(per_tap["flops"].get<double>(), 1.01 * conv);
  EXPECT_DOUBLE_EQ(packed["flops"].get<double>(), per_tap["flops"].get<double>());
}

// The fusion's vector work (the prologue's add, the statistics' sums) takes the vector unit's slots the MXU's
// feed leaves free: with run.conv_overlap the kernel is as long as its MXU passes and result pops (which stay
// serial: they use the vector registers); without it the vector work follows them. The difference is the vector
// work, less what the MXU's own fill and drain leave uncovered at the kernel's ends.
TEST(ConvMechanismsTest, VectorWorkRunsBesideTheMxuPasses) {
  const auto on = conv_op({});
  const auto off = conv_op({"run.conv_overlap=false"});
  const double clock = on["clock_hz"].get<double>();
  const double vpu = on["mxu"]["epilogue_vpu_cycles"].get<double>() / clock;
  const double pops = on["mxu"]["result_pop_cycles"].get<double>() / clock;
  const double mxu = on["cycles"].get<double>() / clock;
  ASSERT_GT(vpu, 0.1 * mxu);  // a case where the mechanism is worth something
  const double saved = off["busy_s"].get<double>() - on["busy_s"].get<double>();
  EXPECT_GT(saved, 0.9 * vpu);
  EXPECT_LE(saved, vpu * 1.001);
  EXPECT_GE(on["busy_s"].get<double>(), mxu + pops);
  EXPECT_EQ(on["cycles"], off["cycles"]);  // the MXU's own work is the same
}

namespace {

// A 1 x 1 convolution of 16 images of 32 x 32 from 128 to 256 features on both TensorCores of a v3 chip.
nlohmann::json two_core_conv(const std::string& direction, const std::string& split) {
  const std::string yaml =
      "hardware: {preset: tpu-v3}\n"
      "workload: {model: conv, batch: 16, height: 32, width: 32, in_features: 128, out_features: 256,\n"
      "           kernel: [1, 1], stride: 1, padding: same, direction: " + direction + ", dtype: bf16}\n"
      "run: {trace: {format: \"off\"}, core_split: " + split + "}\n";
  auto s = simulate_in_child(yaml);
  EXPECT_FALSE(s.contains("error")) << s.dump();
  EXPECT_EQ(s["ops"].size(), 1u);
  nlohmann::json op = s["ops"][0];
  op["temporaries_at_peak"] = s["memory"]["at_peak"]["temporaries"];
  return op;
}

constexpr double kX = 16.0 * 32 * 32 * 128 * 2;   // the input, bf16
constexpr double kY = 16.0 * 32 * 32 * 256 * 2;   // the result (or its gradient)
constexpr double kW = 128.0 * 256 * 2;            // the filter

}  // namespace

// run.core_split: the forward's rows (the batch) split over the two cores, each reads half the input and the whole
// filter; split by output columns (the first that fills both cores), each reads the whole input.
TEST(ConvMechanismsTest, TwoCoresSplitTheRowsOfAForwardConvolution) {
  const auto traffic = two_core_conv("forward", "traffic");
  const auto order = two_core_conv("forward", "order");
  EXPECT_EQ(traffic["mxu"]["split"], "m");
  EXPECT_EQ(order["mxu"]["split"], "n");
  EXPECT_DOUBLE_EQ(traffic["hbm_read"].get<double>(), kX + 2 * kW);
  EXPECT_DOUBLE_EQ(order["hbm_read"].get<double>(), 2 * kX + kW);
  EXPECT_DOUBLE_EQ(traffic["hbm_write"].get<double>(), kY);
  EXPECT_DOUBLE_EQ(order["hbm_write"].get<double>(), kY);
  EXPECT_LT(traffic["busy_s"].get<double>(), order["busy_s"].get<double>());  // HBM-bound: the bytes decide
}

// The filter gradient contracts over the batch: each core sums half of it (half of x and of dy) into a partial
// gradient of the whole filter, writes it, and the cores add them (each reads the other's half).
TEST(ConvMechanismsTest, TwoCoresSplitTheContractionOfAFilterGradient) {
  const auto traffic = two_core_conv("filter_grad", "traffic");
  const auto order = two_core_conv("filter_grad", "order");
  EXPECT_EQ(traffic["mxu"]["split"], "k");
  EXPECT_EQ(order["mxu"]["split"], "n");
  EXPECT_DOUBLE_EQ(traffic["hbm_read"].get<double>(), kX + kY + kW);
  EXPECT_DOUBLE_EQ(traffic["hbm_write"].get<double>(), 2 * kW);
  EXPECT_DOUBLE_EQ(order["hbm_read"].get<double>(), 2 * kX + kY);
  EXPECT_DOUBLE_EQ(order["hbm_write"].get<double>(), kW);
  // Half the contraction per core: the same folds per MXU as splitting the columns.
  EXPECT_EQ(traffic["mxu"]["folds_per_mxu"], order["mxu"]["folds_per_mxu"]);
  // While it runs, the second core's partial gradient of the whole filter is held in HBM as a temporary.
  EXPECT_DOUBLE_EQ(traffic["temporaries_at_peak"].get<double>(), kW);
  EXPECT_DOUBLE_EQ(order["temporaries_at_peak"].get<double>(), 0.0);
}

// A 1 x 1 convolution of stride 2 reads only the positions its windows touch: every other row and column, a quarter
// of the input, as each position of the TPU's image layout is stored as tiles of its own (the SSD profile's strided
// 1 x 1 convolutions run faster than the whole input could be read). Its input gradient still writes every
// position of dx (zeros between the strided ones).
TEST(ConvMechanismsTest, AStridedOneByOneConvolutionReadsTheRowsAndColumnsItUses) {
  auto op = [](const std::string& direction) {
    const std::string yaml =
        "hardware: {preset: tpu-v3, chip: {tensorcores: 1}}\n"
        "workload: {model: conv, batch: 16, height: 32, width: 32, in_features: 128, out_features: 256,\n"
        "           kernel: [1, 1], stride: 2, padding: valid, direction: " + direction + ", dtype: bf16}\n"
        "run: {trace: {format: \"off\"}}\n";
    auto s = simulate_in_child(yaml);
    EXPECT_FALSE(s.contains("error")) << s.dump();
    return s["ops"][0];
  };
  const double dy = 16.0 * 16 * 16 * 256 * 2;  // the 16 x 16 result (or its gradient)
  EXPECT_DOUBLE_EQ(op("forward")["hbm_read"].get<double>(), kX / 4 + kW);
  EXPECT_DOUBLE_EQ(op("filter_grad")["hbm_read"].get<double>(), kX / 4 + dy);
  const auto dx = op("input_grad");
  EXPECT_DOUBLE_EQ(dx["hbm_read"].get<double>(), dy + kW);
  EXPECT_DOUBLE_EQ(dx["hbm_write"].get<double>(), kX);
}

// The filter gradient of a convolution over a batch-minor input (the network's image, its batch on the lanes), on
// one TensorCore of a v3 chip: 16 images of 32 x 32 x 3, a 7 x 7 stride-2 window, 64 output features, so
// 16 x 16 output positions. As the forward does, each position holds its window (the batch on the array's K = 16
// rows, the 7 x 7 taps' 4-sublane channels on N = 196 columns: 2 folds of 128) and streams the output gradient's
// 64 features (M = 64), the positions' sums adding in the accumulators: 256 x 2 = 512 folds, 256 on each MXU.
// A fold holding 16 weight rows pushes 64 x 16 / 128 = 8 cycles and loads in 16 (hardware.chip.mxu.load_rows_held):
// each fold after the first takes max(64 + 8, 16) = 72 cycles; with every load taking R, max(72, 128) = 128.
TEST(ConvMechanismsTest, ABatchMinorFilterGradientHoldsTheWindowAndLoadsOnlyItsRows) {
  const char* stem =
      "hardware: {preset: tpu-v3, chip: {tensorcores: 1}}\n"
      "workload: {model: conv, batch: 16, height: 32, width: 32, in_features: 3, out_features: 64, kernel: [7, 7],\n"
      "           stride: 2, padding: same, direction: filter_grad, dtype: bf16, input_layout: batch_minor}\n"
      "run: {trace: {format: \"off\"}}\n";
  auto held = simulate_in_child(stem, {});
  auto full = simulate_in_child(stem, {"hardware.chip.mxu.load_rows_held=false"});
  ASSERT_FALSE(held.contains("error")) << held.dump();
  ASSERT_FALSE(full.contains("error")) << full.dump();
  const auto& m = held["ops"][0]["mxu"];
  EXPECT_EQ(m["batch"].get<int64_t>(), 16 * 16);
  EXPECT_EQ(m["m"].get<int64_t>(), 64);
  EXPECT_EQ(m["k"].get<int64_t>(), 16);
  EXPECT_EQ(m["n"].get<int64_t>(), 7 * 7 * 4);
  EXPECT_EQ(m["n_pad"].get<int64_t>(), 256);
  EXPECT_EQ(m["folds_per_mxu"].get<int64_t>(), 256);
  const int64_t R = 128, fill = R + 64, drain = R + 128 - 2;
  EXPECT_EQ(held["ops"][0]["cycles"].get<int64_t>(), fill + 255 * 72 + drain);
  EXPECT_EQ(full["ops"][0]["cycles"].get<int64_t>(), fill + 255 * 128 + drain);
}

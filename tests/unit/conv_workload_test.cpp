// workload.model: conv, the op-level convolution that tools/calibrate poses measured convolution fusions with: the
// op of each direction on the tensors of its shape, TensorFlow's SAME padding, and the posed fused work.
#include <gtest/gtest.h>

#include "base/error.h"
#include "sim/config/loader.h"
#include "workloads/i_workload.h"

using namespace podsim;

namespace {

ModelGraph build(const std::string& workload_yaml) {
  Experiment e = load_experiment_text("hardware: {preset: tpu-v3}\nworkload: {model: conv, " + workload_yaml + "}",
                                      "c.yaml");
  return WorkloadRegistry::instance().make(e.workload)->build(e.params);
}

const Op& only(const ModelGraph& g, OpKind kind) {
  const Op* found = nullptr;
  for (const Op& op : g.ops())
    if (op.kind == kind) {
      EXPECT_EQ(found, nullptr) << "two ops of the kind";
      found = &op;
    }
  EXPECT_NE(found, nullptr);
  return *found;
}

std::vector<int64_t> shape(const ModelGraph& g, TensorId t) { return g.tensor(t).shape; }

}  // namespace

// SAME padding as TensorFlow splits it: a 3x3/2 window on 75 rows gives ceil(75 / 2) = 38 rows and needs
// (38 - 1) * 2 + 3 - 75 = 2 rows of padding, one before and one after; on 38 rows it needs 1, after.
TEST(ConvWorkloadTest, ForwardOnTheShapesAndSamePaddingOfTensorFlow) {
  ModelGraph g = build("batch: 16, height: 75, width: 38, in_features: 64, out_features: 128, kernel: 3, stride: 2");
  const Op& op = only(g, OpKind::Conv2d);
  EXPECT_EQ(shape(g, op.inputs[0]), (std::vector<int64_t>{16, 75, 38, 64}));
  EXPECT_EQ(shape(g, op.inputs[1]), (std::vector<int64_t>{3, 3, 64, 128}));
  EXPECT_EQ(shape(g, op.outputs[0]), (std::vector<int64_t>{16, 38, 19, 128}));
  EXPECT_EQ(op.attrs.window.pt, 1);
  EXPECT_EQ(op.attrs.window.pb, 1);
  EXPECT_EQ(op.attrs.window.pl, 0);
  EXPECT_EQ(op.attrs.window.pr, 1);
  EXPECT_EQ(g.num_ops(), 1u);
}

TEST(ConvWorkloadTest, ValidPaddingAndRectangularKernel) {
  ModelGraph g = build("batch: 2, height: 10, width: 9, in_features: 8, out_features: 4, kernel: [3, 1], "
                       "padding: valid");
  const Op& op = only(g, OpKind::Conv2d);
  EXPECT_EQ(shape(g, op.outputs[0]), (std::vector<int64_t>{2, 8, 9, 4}));
  EXPECT_EQ(op.attrs.window.pt + op.attrs.window.pb + op.attrs.window.pl + op.attrs.window.pr, 0);
}

TEST(ConvWorkloadTest, GradientDirectionsReadAndWriteTheirTensors) {
  ModelGraph in = build("batch: 4, height: 8, width: 8, in_features: 32, out_features: 64, direction: input_grad");
  const Op& dx = only(in, OpKind::Conv2dInputGrad);
  EXPECT_EQ(shape(in, dx.inputs[0]), (std::vector<int64_t>{4, 8, 8, 64}));  // dy
  EXPECT_EQ(shape(in, dx.inputs[1]), (std::vector<int64_t>{3, 3, 32, 64}));
  EXPECT_EQ(shape(in, dx.outputs[0]), (std::vector<int64_t>{4, 8, 8, 32}));
  ModelGraph fi = build("batch: 4, height: 8, width: 8, in_features: 32, out_features: 64, direction: filter_grad");
  const Op& dw = only(fi, OpKind::Conv2dFilterGrad);
  EXPECT_EQ(shape(fi, dw.inputs[0]), (std::vector<int64_t>{4, 8, 8, 32}));  // x
  EXPECT_EQ(shape(fi, dw.inputs[1]), (std::vector<int64_t>{4, 8, 8, 64}));  // dy
  EXPECT_EQ(shape(fi, dw.outputs[0]), (std::vector<int64_t>{3, 3, 32, 64}));
}

// The posed fusion: an fp32 filter converted, two prologue adds on dy, statistics of the result, an fp32 result.
TEST(ConvWorkloadTest, PosedFusedWork) {
  ModelGraph g = build("batch: 4, height: 8, width: 8, in_features: 32, out_features: 64, direction: input_grad, "
                       "filter_dtype: fp32, out_dtype: fp32, prologue_inputs: 2, statistics: true");
  const Op& dx = only(g, OpKind::Conv2dInputGrad);
  const Op& cv = only(g, OpKind::Scale);
  EXPECT_EQ(g.tensor(cv.inputs[0]).dtype, DType::F32);
  EXPECT_EQ(g.tensor(cv.outputs[0]).dtype, DType::BF16);
  EXPECT_EQ(dx.inputs[1], cv.outputs[0]);
  EXPECT_EQ(g.tensor(dx.outputs[0]).dtype, DType::F32);
  int adds = 0;
  for (const Op& op : g.ops())
    if (op.kind == OpKind::Add) {
      ++adds;
      EXPECT_EQ(shape(g, op.outputs[0]), (std::vector<int64_t>{4, 8, 8, 64}));
    }
  EXPECT_EQ(adds, 2);
  EXPECT_EQ(g.producer(dx.inputs[0]) >= 0 ? g.op(g.producer(dx.inputs[0])).kind : OpKind::Scale, OpKind::Add);
  const Op& st = only(g, OpKind::BatchNormStats);
  EXPECT_EQ(st.inputs[0], dx.outputs[0]);
  EXPECT_EQ(shape(g, st.outputs[0]), (std::vector<int64_t>{4, 32}));
}

TEST(ConvWorkloadTest, BadShapesAreErrors) {
  const auto code = [](const std::string& yaml) {
    try {
      build(yaml);
    } catch (const Error& e) {
      return std::string(e.id());
    }
    return std::string("none");
  };
  EXPECT_EQ(code("batch: 1, height: 8, width: 8, in_features: 1, out_features: 1, kernel: [1, 2, 3]"),
            "PODSIM-CFG-006");
  EXPECT_EQ(code("batch: 1, height: 2, width: 8, in_features: 1, out_features: 1, kernel: 3, padding: valid"),
            "PODSIM-CFG-006");
  EXPECT_EQ(code("batch: 1, height: 8, width: 8, in_features: 1, out_features: 1, direction: filter_grad, "
                 "statistics: true"),
            "PODSIM-CFG-009");
}

#include "workloads/layout.h"

#include "base/error.h"
#include "workloads/op_def.h"

namespace podsim {
namespace {

bool image_op(OpKind k) {
  switch (k) {
    case OpKind::Conv2d: case OpKind::Conv2dInputGrad: case OpKind::Conv2dFilterGrad: case OpKind::MaxPool:
    case OpKind::MaxPoolGrad: case OpKind::AvgPool: case OpKind::AvgPoolGrad: case OpKind::BatchNormStats:
    case OpKind::BatchNormApply: case OpKind::BatchNormGrad: case OpKind::BatchNormMoving: case OpKind::BatchNormSums:
    case OpKind::BatchNormFinish: case OpKind::BatchNormGradSums: case OpKind::BatchNormGradFinish:
    case OpKind::HaloRows: case OpKind::HaloWindow: case OpKind::HaloFold: case OpKind::HaloAdd:
    case OpKind::DepthwiseConv2d: case OpKind::DepthwiseConv2dInputGrad: case OpKind::DepthwiseConv2dFilterGrad:
    case OpKind::ChannelScale: case OpKind::ChannelScaleGrad:
      return true;
    default: return false;
  }
}

// The filter of a convolution op (its second input, or the filter gradient's output).
TensorId filter_of(const Op& op) {
  if (op.kind == OpKind::Conv2dFilterGrad) return op.outputs[0];
  return op.inputs.size() > 1 ? op.inputs[1] : -1;
}

}  // namespace

ImageLayouts image_layouts_from(const std::string& run_layout) {
  if (run_layout == "xla") return ImageLayouts::Xla;
  if (run_layout == "xla_features_minor") return ImageLayouts::XlaFeaturesMinor;
  if (run_layout == "row_major") return ImageLayouts::RowMajor;
  throw Error(Err::Internal, "run.layout '" + run_layout + "'");
}

void assign_image_layouts(ModelGraph& g, ImageLayouts mode) {
  const size_t n = g.num_tensors();
  std::vector<Layout> l(n, Layout::Logical);
  std::vector<bool> set(n, false);
  auto give = [&](TensorId t, Layout x) {
    if (t < 0 || set[t]) return false;
    l[t] = x;
    set[t] = true;
    return true;
  };
  // An activation's minor dimension: with Xla whichever of its features and its batch pads less, decided on each
  // device's shape (TensorInfo::batch_minor); with XlaFeaturesMinor always its features.
  const Layout image = mode == ImageLayouts::Xla ? Layout::ImageLeastPadded : Layout::Image;
  // Seeds: the step's input images (batch-minor), then what convolutions, pools and batch norms read and write.
  // Filters before images, so that a 4-D filter is never taken for an image.
  for (TensorId t = 0; t < static_cast<TensorId>(n); ++t)
    if (g.tensor(t).role == TensorRole::Input && g.tensor(t).shape.size() == 4) give(t, Layout::ImageBatchMinor);
  for (const Op& op : g.ops()) {
    if (op.kind == OpKind::Conv2d || op.kind == OpKind::Conv2dInputGrad || op.kind == OpKind::Conv2dFilterGrad)
      give(filter_of(op), Layout::Tiled);
  }
  for (const Op& op : g.ops()) {
    if (!image_op(op.kind)) continue;
    for (const auto* list : {&op.inputs, &op.outputs})
      for (TensorId t : *list) give(t, g.tensor(t).shape.size() == 4 ? image : Layout::Tiled);
  }
  // Elementwise ops, layout changes and collectives keep the layout of the tensors of the same shape they read and
  // write (XLA propagates layouts through them), in both directions, until nothing changes.
  for (bool changed = true; changed;) {
    changed = false;
    for (const Op& op : g.ops()) {
      if (image_op(op.kind) || op.kind == OpKind::MatMul) continue;
      std::vector<TensorId> all = op.inputs;
      all.insert(all.end(), op.outputs.begin(), op.outputs.end());
      for (TensorId a : all) {
        if (!set[a]) continue;
        for (TensorId b : all)
          if (!set[b] && g.tensor(b).shape == g.tensor(a).shape)
            changed = give(b, l[a]) || changed;
      }
    }
  }
  for (TensorId t = 0; t < static_cast<TensorId>(n); ++t) {
    Layout x = l[t];
    if (mode == ImageLayouts::RowMajor && image_layout(x)) x = Layout::Tiled;
    g.tensor(t).layout = x;
  }
}

}  // namespace podsim

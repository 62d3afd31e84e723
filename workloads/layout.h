// Layout assignment for image models, as XLA's TPU backend lays their tensors out (docs/model.md, "Layouts"):
// which tensors are image activations stored features-minor, which inputs batch-minor, which tiled row-major
// (filters, per-channel statistics); TensorInfo::stored_bytes() follows.
//
//   assign_image_layouts(graph, ImageLayouts::Xla);   // at the end of a CNN workload's build()
#pragma once

#include "workloads/graph.h"

namespace podsim {

// run.layout: `Xla` stores each image activation [N, H, W, C] as H, W, N, C (features on the 128 lanes, the batch on
// the sublanes) or as H, W, C, N (the batch on the lanes), whichever pads its shape on a device less, and the
// network's input images batch-minor; `XlaFeaturesMinor` keeps every activation features-minor; `RowMajor` tiles the
// two minor dimensions of every shape as written ([..., W, C]), the layout XLA's would be without layout assignment.
enum class ImageLayouts : uint8_t { Xla, XlaFeaturesMinor, RowMajor };
ImageLayouts image_layouts_from(const std::string& run_layout);  // "xla" | "xla_features_minor" | "row_major"

// Gives every tensor of an image model its layout: the 4-D operands and results of convolutions, pools and batch
// norms and the tensors elementwise ops and collectives make of them are images (their gradients too); filters and
// per-channel tensors are tiled; 4-D step inputs are input images (batch-minor with Xla).
// Tensors it leaves alone keep the logical layout.
void assign_image_layouts(ModelGraph& g, ImageLayouts mode);

}  // namespace podsim

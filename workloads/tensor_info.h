// Logical tensors of a training step: name, shape, element type and the role that decides how memory is accounted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace podsim {

using TensorId = int32_t;
using OpId = int32_t;

// The element types of built-in workloads (F32, BF16, I32) and the others an imported HLO module may hold (hlo/):
// predicates, narrower and wider integers and floats. Numeric mode stores every value as fp32 (tensor.h).
enum class DType : uint8_t { F32, BF16, I32, Pred, I8, I16, I64, F16, F64, F8 };
const char* dtype_name(DType t);  // "fp32", "bf16", "int32", "pred", "int8", "int16", "int64", "fp16", "fp64", "fp8"
int dtype_bytes(DType t);
bool dtype_is_integer(DType t);   // integers and predicates

enum class TensorRole : uint8_t {
  Parameter,       // weights; live for the whole step
  Input,           // the batch (token ids, features)
  Label,           // targets
  Activation,      // forward values (saved for backward while a consumer needs them)
  Gradient,        // d(loss)/d(something)
  OptimizerState,  // Adam m and v; live for the whole step
  Loss,            // the scalar loss
  Updated,         // a new parameter or optimizer state value (written in place of the old one)
  Temporary,       // scratch that dies with its op (and communication buffers)
  WeightCopy,      // a parameter cast to the compute type (mixed precision): live from its cast to its last use
  KvCache,         // an inference step's key/value cache (and its scales): resident for the whole step, updated in
                   // place (memory category kv_cache)
};
const char* role_name(TensorRole r);

// What a parameter is to the model. LARS (workloads/ops/optimizer.cpp) takes biases and normalization scales and
// offsets out of its trust ratio and weight decay, as the MLPerf implementations do. The builder's bias_add,
// layer_norm and rms_norm mark the parameters they take (GraphBuilder::set_param_kind).
enum class ParamKind : uint8_t { Weight, Bias, Norm };

// How a tensor is stored in HBM, as XLA's TPU layout assignment lays it out (docs/model.md, "Layouts"). Memory is
// tiled: the minor dimension of the physical order fills the 128 lanes of a vector, the second-minor its sublanes
// (the smallest of 1, 2, 4, 8 that holds it, else a multiple of 8), and a dimension that does not fill its tile is
// padded, in HBM as in VMEM.
//   Logical          the layout wastes nothing worth counting (XLA picks the physical order of a dot's operands
//                    and of the elementwise ops around them freely): the logical bytes
//   Tiled            row-major, the two minor dimensions of the shape tiled: filters [KH, KW, Ci, Co], statistics
//   Image            an image activation [N, H, W, C] stored H, W, N, C (XLA's {3,0,2,1}): features on the lanes,
//                    the batch on the sublanes; 64 features take 128 lanes
//   ImageBatchMinor  an input image [N, H, W, C] stored H, W, C, N: the batch on the lanes, a few features on the
//                    sublanes (3 channels in a tile of 4)
//   ImageLeastPadded an image activation stored as whichever of the two pads its (local) shape less: batch-minor
//                    when the batch fills the lanes better than the features do (64 features, 128 images a core),
//                    else features-minor (XLA's TPU layout assignment, docs/model.md "Layouts")
enum class Layout : uint8_t { Logical, Tiled, Image, ImageBatchMinor, ImageLeastPadded };
const char* layout_name(Layout l);  // "logical", "tiled", "image", "image_batch_minor", "image_least_padded"
// One of the image activation layouts (each position's features and batch tiled on their own: a 4-D [N, H, W, C]).
inline bool image_layout(Layout l) {
  return l == Layout::Image || l == Layout::ImageBatchMinor || l == Layout::ImageLeastPadded;
}

// The file stem a tensor named `name` is written under in a run's tensors/ (<stem>.npy): the name with characters
// other than letters, digits, '.', '_' and '-' replaced by '_'.
std::string tensor_file_stem(const std::string& name);

struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  TensorRole role = TensorRole::Activation;
  // For Updated tensors: the tensor whose storage they replace (the parameter or state); -1 otherwise.
  TensorId updates = -1;
  // No gradient flows into this value (a one-hot dispatch mask, routing decisions): reverse-mode rules emit none
  // for it, as a stop-gradient does.
  bool stop_gradient = false;
  ParamKind param_kind = ParamKind::Weight;  // for parameters
  // The name a re-materialization policy keeps the value by (workloads/remat.h), as MaxText tags its decoder
  // layers' values with jax's checkpoint_name: "query_proj", "key_proj", "value_proj", "context", "out_proj",
  // "mlpwi_0", "mlpwi_1" (a gated FFN's gate and up projections; "mlpwi" ungated), "mlpwo". Empty: none.
  std::string checkpoint{};
  Layout layout = Layout::Logical;
  // A result of the step beside the loss and the updated state (an op-level microbenchmark's output): written to
  // HBM even when the ops that read it are fused with the op that makes it.
  bool result = false;
  // An imported module's own tiled layout (XLA's TPU shapes, f32[3,200]{1,0:T(8,128)}): the dimensions' physical
  // order, major to minor, and the tiles applied in turn to the minor dimensions, each padding the dimensions it
  // tiles to its multiples. Set, it decides stored_bytes() instead of `layout`.
  std::vector<int64_t> tile_order{};
  std::vector<std::vector<int64_t>> tiles{};

  int64_t elements() const;
  double bytes() const { return static_cast<double>(elements()) * dtype_bytes(dtype); }
  // The bytes it takes in HBM in its layout, padding included: what moving it costs and what it occupies.
  double stored_bytes() const;
  // Whether it is stored with the batch on the lanes: an input image, or a least-padded activation whose batch pads
  // less than its features.
  bool batch_minor() const;
  std::string shape_text() const;  // "[1024, 512]"
};

}  // namespace podsim

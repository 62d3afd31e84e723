// What each op kind costs and computes. One entry per kind, defined next to its kernel in workloads/ops/.
//
//   OpCost c = op_cost(graph, op);     // FLOPs, logical bytes, vector-unit work, unit
//   run_op(graph, op, store);          // the numeric kernel (Eigen), reading and writing `store`
#pragma once

#include <string>
#include <vector>

#include "workloads/graph.h"
#include "workloads/tensor.h"

namespace podsim {

// Host: the chip's host link (DMA between HBM and host memory, hw/chip/host_link.h).
enum class Unit : uint8_t { Mxu, Vpu, Ici, Host };
const char* unit_name(Unit u);  // "MXU", "VPU", "ICI", "host"
// Units that move data rather than compute (ICI and the host link): their ops' time is communication.
inline bool is_transfer_unit(Unit u) { return u == Unit::Ici || u == Unit::Host; }

// Vector-unit work of an op, per element of its largest operand.
struct VectorWork {
  double elements = 0;        // elements processed
  double simple = 0;          // adds, multiplies, compares, selects per element
  double transcendental = 0;  // exp, log, tanh, rsqrt per element
  double divide = 0;          // divisions per element
  double reduce = 0;          // cross-lane reduction steps per element
  // Elements per reduced row (0: unknown, a cross-lane step per vector). A row longer than a vector's lanes is
  // combined across its vectors elementwise and reduced across lanes once per row group (hw/timing/vpu_timing.h).
  double reduce_row = 0;
};

// How an op's HBM traffic is laid out; hw/timing/hbm_timing.h turns it into achieved bandwidth.
enum class HbmPattern : uint8_t {
  Stream,           // long sequential runs: operands and results read or written whole
  Strided,          // runs of read_run bytes at a stride (tiles of a larger matrix): one row activation per run
  Gather,           // independent runs of read_run bytes at random places (embedding rows, scatter-adds)
  ReadModifyWrite,  // reads and writes the same tensors in step (optimizer updates): streams, the bus turns around
};
const char* hbm_pattern_name(HbmPattern p);  // "stream", "strided", "gather", "read_modify_write"

struct OpCost {
  Unit unit = Unit::Vpu;
  double flops = 0;          // floating-point operations, a multiply-add counting 2
  double bytes_read = 0;     // every input once, at its dtype (before tiling and fusion)
  double bytes_written = 0;  // every output once
  double read_run = 0;       // contiguous run length of the reads in bytes (0: one long stream); gathers are short
  HbmPattern pattern = HbmPattern::Stream;        // layout of the op's HBM reads (Strided/Gather use read_run)
  HbmPattern write_pattern = HbmPattern::Stream;  // layout of its writes (a scatter-add is Gather, runs of read_run)
  VectorWork vector;         // Vpu ops
  // How the compiler may fuse the op (hw/compiler/fusion.h); a new kind declares it in its cost function.
  // Elementwise: output element i depends only on element i of each input (broadcast bias allowed). Such ops form
  // loop fusions, and join a producing matmul as its epilogue (output fusion).
  bool fusible = false;
  // A row reduction or normalisation (softmax, layer norm, cross-entropy, bias gradient): elementwise producers and
  // consumers adjacent to it fuse with it, one reduction per fusion. Leave both false for an op that never fuses
  // (gathers, scatters, layout changes, communication).
  bool reduction = false;
  // A reduction over the whole tensor rather than rows that fit on chip (batch-norm statistics): an elementwise
  // consumer that reads the reduced tensor again cannot join its fusion (it needs a second pass).
  bool whole_tensor = false;
  // Model FLOPs (MFU) of the op, where they differ from what its unit executes (`flops`, HFU): a fused attention
  // kernel's backward recomputes the scores, and its causal blocks compute past the mask's diagonal. -1: `flops`.
  double model_flops = -1;
  // The part of the model FLOPs over a causal mask's (query, key) square, which the PaLM convention counts whole and
  // MaxText's half (workloads/graph.h, FlopsConvention).
  double causal_flops = 0;
  // A view (a bitcast): the output is its input's buffer under another shape. It moves nothing and costs nothing
  // alone; inside a fusion it passes its input through (bytes_read says what the fusion reads for it); the memory
  // plan counts the buffer once, live until the view's last use.
  bool view = false;
  // Writes its result over its first input when that input dies with it (XLA's in-place dynamic-update-slice and
  // scatter; the memory plan's in_place rule).
  bool in_place = false;
  // A whole-tensor reduction followed by an elementwise pass over the same inputs that needs its result (a batch-norm
  // gradient: the sums of dy and dy * xhat, then dx). `first_pass` is the reduction's share of `vector`; its outputs
  // after the first are the reduction's (small) results, the first the elementwise pass's. Multi-output fusion runs
  // the reduction in the kernel that makes its input and the elementwise pass in the kernels that read its result.
  bool two_pass = false;
  VectorWork first_pass;
  // A window op (pooling: XLA's reduce-window) that takes elementwise producers of its input into its kernel.
  bool input_fusion = false;
  // A convolution the vector unit runs (a depthwise convolution, XLA's convolution with feature_group_count equal to
  // its features): it fuses as a convolution does (run.fusion_vector_conv), taking elementwise producers of its
  // operands, elementwise consumers of its result and whole-tensor reductions of it into its kernel.
  bool vector_conv = false;
};

OpCost op_cost(const ModelGraph& g, const Op& op);

// The GEMM a MatMul (or convolution) op performs, derived from its tensors: `batch` independent products of M x K @ K x N. An
// operand that every batch entry shares (a weight) is flagged; the compiler and the MXU model read only this.
struct GemmDims {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  bool a_shared = false, b_shared = false;
  // HBM bytes of A, B and C as stored, when an operand is not the GEMM's matrix at its element size (a convolution
  // reads its input once, not once per filter tap, in its layout); 0: the matrix at the tensor's type.
  double a_bytes = 0, b_bytes = 0, c_bytes = 0;
  // How the MXU is fed a convolution tap by tap (run.conv_taps: per_tap; docs/model.md, "Convolutions on the MXU"):
  // the GEMM it then runs, padding included (0: as batch, m, k, n); `fed_swap`: its A is the op's second operand
  // (a batch-minor input's window held as the array's weights, the filter streamed).
  // `fed_sum`: the fed batch entries add into one result (a filter gradient summed over output positions), which
  // leaves the MXU once.
  int64_t fed_batch = 0, fed_m = 0, fed_k = 0, fed_n = 0;
  bool fed_swap = false, fed_sum = false;
};
GemmDims gemm_dims(const ModelGraph& g, const Op& op);  // throws Error(Internal) for other kinds

// A kernel that runs GEMMs of several shapes and does its own tiling through on-chip memory (a fused attention
// kernel: per block pair, the scores and the weighted values): its products, `count` of each M x K @ K x N, run one
// shape after another on the MXU. Its HBM traffic is its cost's bytes_read and bytes_written (what the kernel's
// blocks load and store), and its vector work the cost's. Empty for every other kind (gemm_dims describes those).
struct GemmPass {
  int64_t count = 0, m = 0, k = 0, n = 0;
};
std::vector<GemmPass> kernel_gemms(const ModelGraph& g, const Op& op);
inline double op_flops(const ModelGraph& g, const Op& op) { return op_cost(g, op).flops; }

// Executes one compute op on real tensors: reads its inputs from `store` and puts its outputs there.
// MatMul rounds bf16 operands to bf16 and accumulates in fp32, as the MXU does. Communication ops are not
// kernels: throws Error(Internal) for them.
void run_op(const ModelGraph& g, const Op& op, TensorStore& store);

}  // namespace podsim

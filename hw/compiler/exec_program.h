// A program lowered for one chip configuration: which unit runs each (possibly fused) op, the work each
// TensorCore does, and the HBM traffic that follows from tiling the op through on-chip memory.
// Produced by lower() (hw/compiler/lower.h) once per role; executed by the SystemC chip model (hw/chip) on every
// chip of that role.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hw/compiler/fusion.h"
#include "workloads/op_def.h"

namespace podsim {

// One GEMM shape of a kernel with several (workloads/op_def.h GemmPass), as one core runs it.
struct GemmPassWork {
  int64_t count = 0, m = 0, k = 0, n = 0;  // the whole op's products of this shape
  int64_t core_folds = 0;     // weight folds one core performs
  int64_t rows_per_fold = 0;  // rows each fold streams (padded to 8 in TPU mode)
};

// How a GEMM runs on each TensorCore's MXUs after tiling.
struct GemmWork {
  int64_t batch = 0, m = 0, k = 0, n = 0;  // the whole op
  int64_t core_folds = 0;     // weight folds one core performs (all its M chunks)
  int64_t rows_per_fold = 0;  // rows streamed per fold (the core's M, or its M chunk, padded to 8 rows in TPU mode)
  int64_t m_chunks = 1;       // M chunks per core, each reloading every weight fold (accumulator capacity, VMEM tile)
  int64_t result_vectors = 0;  // (sublanes x lanes) vectors of results one core pops from its MXUs (padded tiles)
  int64_t k_pad = 0, n_pad = 0;    // K and N padded to whole folds (multiples of k_pack R and C)
  int64_t k_pack = 1;  // contraction elements per MXU row: int8 (fp8) operands at the chip's int8 (fp8) rate
  int64_t m_tile = 0, n_tile = 0;  // chosen VMEM tile (rows, cols) of the output
  const char* split = "none";      // how the op is split across cores: "n", "m", "batch" or "none"
  // A kernel of several GEMM shapes (a fused attention kernel): each shape's folds stream one after another, and
  // core_folds and result_vectors are their sums; the fields of the one GEMM above are unused. Empty otherwise.
  std::vector<GemmPassWork> passes;
};

struct ExecOp {
  std::string name;
  OpKind kind = OpKind::Add;
  Unit unit = Unit::Vpu;
  Phase phase = Phase::Forward;
  std::vector<OpId> members;  // graph ops executed by this op, in order (several for a fusion)
  // Per member: a recomputation of an elementwise producer (fusion.h) whose output this op does not write; its
  // kernel runs here too in numeric mode. An op is the home member of at most one exec op.
  std::vector<bool> recomputed;
  FusionKind fusion = FusionKind::None;
  // Tensors this op reads from HBM and those it writes there (what the memory plan allocates and frees).
  std::vector<TensorId> hbm_reads, hbm_writes;
  std::vector<int32_t> deps;  // indices of exec ops that must finish first

  double flops = 0;        // all members, whole chip
  double mxu_flops = 0;    // flops of the members that run on the MXU (summary.json hardware_flops)
  double logical_bytes = 0;  // bytes the members read and write before tiling and fusion

  int cores = 1;  // TensorCores that share the op
  GemmWork gemm;             // Mxu
  VectorWork core_vector;    // Vpu: the work of one core; Mxu: its epilogue's (output fusion)
  double core_hbm_read = 0;  // per core
  double core_hbm_write = 0;
  HbmPattern read_pattern = HbmPattern::Stream;
  HbmPattern write_pattern = HbmPattern::Stream;
  double read_run = 0;       // run length of strided or gathered traffic
  // HBM bytes the op holds only while it runs, beyond its outputs: the partial results of the cores that do not
  // own the output when it is split along its contraction (run.core_split), until the cores have added them.
  double scratch = 0;
  int groups = 1;            // tile groups the op is pipelined in (load g+1 while computing g)
  // Mxu: the fused vector work runs beside the MXU, not between its streams (a convolution's emitter interleaves its
  // batch-norm and ReLU work with the pushes: run.conv_overlap); the result pops stay serial.
  bool vector_beside = false;
};

// Bytes live on a chip, by category, at one point of the step.
struct MemoryBreakdown {
  double weights = 0, gradients = 0, optimizer_state = 0, activations = 0, temporaries = 0;
  double weight_copies = 0;  // parameters cast to the compute type (mixed precision), from the cast to the last use
  double kv_cache = 0;       // an inference step's key/value cache (and its quantization scales)
  double total() const {
    return weights + gradients + optimizer_state + activations + temporaries + weight_copies + kv_cache;
  }
};

struct LiveTensor {
  std::string name;
  std::string role;
  double bytes = 0;
};

struct MemoryPlan {
  double peak_bytes = 0;
  int32_t peak_op = -1;  // exec op at whose start the peak occurs
  MemoryBreakdown at_peak;
  std::vector<LiveTensor> largest_at_peak;  // the biggest live tensors at the peak, largest first
  std::vector<double> live_after_op;        // bytes live after each exec op (for the memory timeline)
};

struct ExecProgram {
  std::vector<ExecOp> ops;  // issue order
  MemoryPlan memory;
};

}  // namespace podsim

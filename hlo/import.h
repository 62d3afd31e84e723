// An XLA HLO module (hlo/module.h) as podsim work: the per-device program every device runs, as a ModelGraph of
// podsim ops in the module's order, with the device mesh its collectives span. docs/hlo.md says what each
// instruction becomes; in short:
//  - dot and convolution run on the MXU; elementwise ops, reductions and data movement on the VPU with their HBM
//    traffic (workloads/ops/array.cpp); reshapes, transposes and copies that the layouts make free are views;
//  - calls and fusions are inlined (a fusion's instructions run as one kernel: `fusions`), while loops unrolled
//    their trip count times, a conditional's chosen branch inlined; tuples only route values;
//  - collectives (and their async start/done pairs) become podsim collectives over the mesh axes their groups span;
//  - custom calls that are known kernels map to podsim's (fused attention, GEMM libraries, TopK, sharding markers),
//    others to the cost the user gives, else an error naming them.
//
//   hlo::Imported im = hlo::import_module(module, options);
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hlo/module.h"
#include "workloads/graph.h"

namespace podsim::hlo {

struct CustomCallCost {
  double flops = 0, bytes = 0;
  bool mxu = false;  // runs on the MXU (a GEMM of that many FLOPs), else on the vector unit
};

struct ImportOptions {
  std::map<std::string, int64_t> trip_counts;           // while instruction name -> iterations
  std::map<std::string, int64_t> branches;              // conditional name -> branch index
  std::map<std::string, CustomCallCost> custom_calls;   // custom_call_target -> cost
  bool numeric = false;        // refuse instructions without a kernel (PODSIM-HLO-007)
  int64_t devices = 0;         // the devices the module runs on (0: from its header and groups)
  int64_t devices_per_chip = 1;  // TPU v2/v3: two; the mesh then has a cut at stride 2 (a chip's devices)
  int64_t module_index = 0;      // of a file of several modules (`// -----`): the one read (hlo/workload.cpp)
};

// A sharded entry parameter: the local tensor is a tile of a global array, split along each dimension over the
// mesh axes named (outermost first).
struct ShardedInput {
  TensorId local = -1;
  std::vector<int64_t> global_shape;
  std::vector<std::vector<int>> axes;  // per dimension: mesh axes (indices into Imported::mesh_sizes)
  bool replicated = false;             // the same value on every device
};

struct Imported {
  ModelGraph graph{"hlo"};
  std::vector<OpId> order;                  // issue order (the module's)
  std::vector<int64_t> mesh_sizes;          // device mesh, outermost axis first (product = devices)
  std::vector<std::string> mesh_names;      // "d0", "d1", ... as the graph's communication ops name them
  int64_t devices = 1;
  std::vector<ShardedInput> inputs;         // entry parameters with their sharding
  std::vector<TensorId> results;            // the entry's results
  std::vector<std::vector<OpId>> fusions;   // kernels the module fused itself (after optimizations)
  // Per op of the graph: the HLO instruction it comes from ("while.3/dot.12" for an unrolled body's dot), its
  // opcode and the profile's category.
  struct Origin {
    std::string name, opcode, category;
  };
  std::vector<int32_t> origin_of_op;  // index into origins
  std::vector<Origin> origins;
  bool scheduled = false;
  std::vector<std::string> notes;
};

Imported import_module(const Module& m, const ImportOptions& opts);

// The custom-call targets podsim knows, what each becomes and where it comes from (docs/hlo.md lists them).
struct KnownCustomCall {
  std::string target, becomes, source;
};
const std::vector<KnownCustomCall>& known_custom_calls();

// The DType an HLO element type is held in (sizes kept; unsigned as signed, fp8/fp4 as fp8).
DType dtype_of(Type t);

}  // namespace podsim::hlo

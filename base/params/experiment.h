// The typed, validated experiment: what `podsim run` simulates. Built by load_experiment() (sim/config/loader.h)
// from an experiment file, a hardware preset and --set overrides; models and planners read these plain structs and
// never YAML.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/params/param.h"

namespace podsim {

struct MxuConfig {
  int64_t count = 1;  // per TensorCore
  int64_t rows = 128;
  int64_t cols = 128;
  bool weight_double_buffer = true;
  // Rows of fp32 accumulators per MXU a fold can stream into before its results must leave (docs/model.md, MXU).
  int64_t accumulator_rows = 2048;
  // Cycles each fold's weight push occupies the array's input port, when weights and left-operand rows enter through
  // one port (docs/model.md, MXU): double buffering hides the weight shift, not the push. 0: a separate weight path.
  int64_t weight_push = 0;
  // A fold holding fewer weight rows than R (K's share below R) loads only those rows, one per cycle, so its load
  // hides behind a stream of that many rows rather than R (docs/model.md, MXU). false: every load takes R cycles.
  bool load_rows_held = true;
  // Cycles the vector unit spends on each (sublanes x lanes) vector of results it pops from an MXU's result buffer
  // and stores to VMEM (docs/model.md, MXU). > 0: the results leave through the vector unit that also feeds the MXU,
  // so an output tile's pops and its epilogue run between the MXU's streams, not beside them. 0: a path of their
  // own, and the epilogue overlaps the next tile group.
  int64_t result_pop = 0;
  // Products per cell and cycle with int8 or fp8 operands, against bf16's one: the chip's int8 (fp8) peak over its
  // bf16 peak; 0: no such mode (docs/model.md, "Quantized serving").
  int64_t int8_rate = 1;
  int64_t fp8_rate = 0;
};

struct VpuConfig {
  int64_t lanes = 128;
  int64_t sublanes = 8;
  int64_t alus = 1;                 // ALUs per lane x sublane
  double transcendental_cost = 4;   // cycles per vector for exp, tanh, log, rsqrt
  double divide_cost = 4;           // cycles per vector for a division
  double reduce_cost = 2;           // cycles per vector for a cross-lane reduction step
  double elements_per_cycle() const { return static_cast<double>(lanes * sublanes * alus); }
};

// HBM timing (hw/timing/hbm_timing.h). The device timings default to JEDEC HBM2-class values at 2 Gb/s per pin
// (docs/model.md, "HBM"); capacity and bandwidth come from the hardware preset.
struct HbmConfig {
  double capacity = 0;             // bytes
  double bandwidth = 0;            // bytes/s, peak, all channels
  int64_t channels = 32;           // independent channels (pseudo-channels in pseudo-channel mode)
  double latency = 500e-9;         // seconds: controller and on-chip path, on top of the DRAM's own timings
  double burst = 64;               // bytes, access granularity
  double row = 1024;               // bytes per row (page) of a channel; also the interleaving granularity
  double activate_interval = 5e-9;  // seconds, tRRD: minimum time between two activates in one channel
  double faw = 30e-9;              // seconds, tFAW: at most four activates per window in one channel
  int64_t banks = 16;              // banks per channel
  double row_cycle = 47e-9;        // seconds, tRC: a bank's activate-to-activate time
  double rcd = 14e-9;              // seconds, tRCD: activate to read
  double cas = 14e-9;              // seconds, tCL: read command to first data
  double read_to_write = 13e-9;    // seconds, bus turnaround from reads to writes
  double write_to_read = 13e-9;    // seconds, bus turnaround from writes to reads (tCWL + BL/2 + tWTR)
  int64_t write_batch = 8;         // writes the controller drains per turnaround when reads and writes mix
  double refresh_interval = 3.9e-6;  // seconds, tREFI
  double refresh_time = 350e-9;    // seconds, tRFC: the channel serves nothing during a refresh
};

// The chip's host link (hw/chip/host_link.h): the PCIe-class DMA path between its HBM and its host's memory, one
// channel each way. Every transfer of the chip to or from its host shares it: host offload and the data-center
// network's chip-to-host hop.
struct HostLinkConfig {
  double bandwidth = 0;          // bytes/s per direction
  double latency = 1e-6;         // seconds from a chunk leaving one side to its arrival on the other
  double chunk = 16.0 * 1024 * 1024;  // bytes: transfers are split into chunks of at most this size
};

struct ChipConfig {
  double clock = 0;  // Hz
  int64_t tensorcores = 1;
  MxuConfig mxu;
  VpuConfig vpu;
  HbmConfig hbm;
  double vmem = 0;   // bytes per TensorCore
  double cmem = 0;   // bytes shared by the chip's cores (0 when the chip has none)
  // Cycles each kernel (a fused op, on each core that runs a share of it) takes its unit before its first load:
  // issue, pipeline fill and drain, the synchronization with the kernel before it (docs/model.md, "A chip").
  int64_t kernel_overhead = 0;
  // Loads of tile groups each compute unit keeps in flight (hardware.chip.load_depth); 1: double buffering.
  int64_t load_depth = 1;
  HostLinkConfig host_link;

  int64_t mxus() const { return tensorcores * mxu.count; }
  double peak_flops() const;  // 2 * rows * cols * MXUs * clock
};

struct IciConfig {
  int64_t dimensions = 2;     // torus dimensionality this chip generation supports
  double link_bandwidth = 0;  // bytes/s per link per direction
  double hop_latency = 0;     // seconds per hop
  double chunk = 0;           // bytes: transfers are split into chunks of at most this size
  int64_t max_chunks = 0;     // a larger transfer moves in about this many chunks (hardware.ici.max_chunks); 0: no cap
};

struct PodConfig {
  std::vector<int64_t> dims;  // chips per torus dimension (one slice)
  std::vector<bool> wrap;     // wrap-around links per dimension
  int64_t slices = 1;         // hardware.slices: copies of the torus joined by the data-center network
  int64_t chips() const;      // every slice's chips
  int64_t slice_chips() const;
};

// The hosts of a slice: each drives `chips` chips (over their host links) and its NICs (hw/dcn/).
struct HostConfig {
  int64_t chips = 1;
  std::vector<int64_t> block;  // the chips of one host on the torus, per dimension (topology/hosts.h)
};

// The data-center network between slices (hw/dcn/): the NICs of each host and the network between hosts.
struct DcnConfig {
  double bandwidth = 0;         // bytes/s per host and direction (all its NICs)
  double latency = 10e-6;       // seconds from a NIC to the peer host's NIC
  double oversubscription = 1;  // the network carries (sum of a slice's NICs) / this out of and into each slice
  double chunk = 16.0 * 1024 * 1024;  // bytes: collectives cut what crosses the DCN into chunks of at most this
};

// hardware.faults (sim/config/faults.h): chips that run slower and links that are slower or down. Each chip and
// link appears at most once; factors of entries naming the same one multiply.
struct ChipFault {
  int64_t chip = 0;
  double clock = 1;  // factor on hardware.chip.clock
  double hbm = 1;    // factor on hardware.chip.hbm.bandwidth
};

struct LinkFault {
  int64_t chip = 0;  // the link leaves this chip
  int dir = 0;       // in this direction (topology/torus.h: 2 * dim + (0 for +, 1 for -))
  double bandwidth = 1;  // factor on hardware.ici.link_bandwidth
  bool down = false;
};

struct FaultConfig {
  std::vector<ChipFault> chips;  // sorted by chip
  std::vector<LinkFault> links;  // sorted by (chip, dir)
  bool any() const { return !chips.empty() || !links.empty(); }
  const ChipFault* chip(int64_t c) const;
  const LinkFault* link(int64_t c, int dir) const;
};

struct HardwareConfig {
  std::string preset;
  std::string description;
  ChipConfig chip;
  IciConfig ici;
  PodConfig pod;
  HostConfig host;
  DcnConfig dcn;
  FaultConfig faults;
};

struct TraceOptions {
  std::string format = "pftrace";  // pftrace | json | off
  bool compress = false;           // gzip the trace
  std::string detail = "links";    // ops | units | links
  std::vector<int64_t> chips;      // empty: all chips (up to max_chips)
  double from = 0;                 // seconds of simulated time
  double to = -1;                  // < 0: to the end
  int64_t max_chips = 256;
  int64_t warn_events = 4000000;
};

struct StallOptions {
  double probability = 0;  // per HBM request / ICI chunk
  double max = 0;          // seconds; the extra latency is uniform in [0, max]
};

struct RunConfig {
  std::string name;
  bool numeric = false;
  uint64_t seed = 1;
  bool allow_oom = false;
  double max_wall = 0;  // seconds
  TraceOptions trace;
  StallOptions stall;
  std::string fusion = "xla";  // xla | none (hw/compiler/fusion.h)
  bool fusion_multi_output = true;  // whole-tensor reductions join the MXU op whose result they read
  bool fusion_duplicate = true;     // elementwise producers recomputed in the kernels that read them
  bool fusion_vector_conv = true;   // a depthwise convolution fuses as a convolution (its producers, statistics)
  std::string conv_taps = "per_tap";  // per_tap | packed: how a convolution's taps feed the MXU
  std::string core_split = "traffic";  // traffic | order: which dimension of an MXU op a chip's cores split
  bool conv_overlap = true;  // a convolution's fused vector work runs beside the MXU
  // program | latency_hiding: the order in which a unit takes the ready ops (hw/pod/issue_order.h)
  std::string scheduler = "program";
  std::string symmetry = "auto";  // auto | off (hw/pod/symmetry.h)
  // Gradient reductions are combined into collectives of up to this many bytes (partition/combine.h); 0: never.
  double combine_threshold = 30.0 * 1024 * 1024;
  // Gradient reductions over the data-center network start as their gradients are ready, overlapping the rest of
  // the backward pass (XLA's data-parallel all-reduce optimisation); false: only after the backward pass (PaLM).
  bool dcn_overlap = true;
};

struct Experiment {
  std::string source_file;  // the experiment file ("" when built in code)
  HardwareConfig hardware;
  std::string workload;     // workload.model
  std::string strategy;     // strategy.name after resolving "auto"; a composition as "data_parallel+spmd"
  std::vector<std::string> strategies;  // the strategies, resolved, in the order listed
  RunConfig run;
  ParamSet params;          // every parameter, with where it came from
  std::vector<ParamSpec> specs;  // the declarations behind `params`, in declaration order
  // A serving run's prefill layout (serving.prefill, docs/serving.md "Per-phase layouts"): the experiment with its
  // strategy and mesh replaced by serving.prefill's, resolved as YAML (without origins); "" when the prefill
  // iterations use the experiment's own layout.
  std::string prefill_phase;
};

}  // namespace podsim

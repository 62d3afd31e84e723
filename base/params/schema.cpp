#include "base/params/schema.h"

#include <algorithm>
#include <set>

namespace podsim {

std::vector<ParamSpec> hardware_param_specs() {
  using P = ParamSpec;
  using Q = Quantity;
  return {
      P::text("hardware.preset",
              "Hardware preset: a name from `podsim list hardware` (configs/hardware/NAME.yaml) or a path to a preset "
              "file. Sibling keys override the preset's values."),
      P::text("hardware.description", "One-line description of the hardware (set by presets).").def("\"\""),
      // chip
      P::quantity("hardware.chip.clock", Q::Frequency, "TensorCore clock; MXU, VPU and sequencer run on it.")
          .positive(1e11),
      P::integer("hardware.chip.tensorcores", "TensorCores per chip. A chip is one device: each op is split across "
                                              "its cores (megacore style).")
          .range(1, 8),
      P::integer("hardware.chip.kernel_overhead",
                 "Cycles each kernel (one fused op, on every core that runs a share of it) holds its unit before its "
                 "first load is issued: a fixed cost of issue, pipeline fill and drain and synchronization with the "
                 "kernel before it, beyond what podsim already charges every op (the first load's and the last "
                 "write's HBM latency, the MXU's fill and drain). Not paid by the adds of a collective's reduction "
                 "(they run inside the collective's kernel). 0 in every preset: the smallest fusions of a measured "
                 "TPU v3 profile take 0.61-0.66 us in all, below what podsim gives them without it "
                 "(docs/model.md, \"A chip\").")
          .range(0, 1 << 24)
          .def("0"),
      P::integer("hardware.chip.load_depth",
                 "Loads of tile groups each compute unit (a core's MXUs, its VPU) keeps in flight: while it computes "
                 "group g it has issued the loads of groups g+1..g+d (d + 1 VMEM buffers per operand, d loads at the "
                 "kernel's start), so a load-bound op pays HBM's latency once per d groups instead of once per group "
                 "(a DMA engine's queue, a Pallas pipeline with pl.Buffered(d + 1)). Default 1: the double buffering "
                 "podsim has always modelled; the depth TPU's compiled kernels use is not published (docs/model.md, "
                 "\"A chip\").")
          .range(1, 16)
          .def("1"),
      P::integer("hardware.chip.mxu.count", "MXUs (systolic arrays) per TensorCore.").range(1, 64),
      P::integer("hardware.chip.mxu.rows", "Rows R of each systolic array; a GEMM's contracting dimension K maps onto "
                                           "them.")
          .range(1, 4096),
      P::integer("hardware.chip.mxu.cols", "Columns C of each systolic array; a GEMM's output dimension N maps onto "
                                           "them.")
          .range(1, 4096),
      P::boolean("hardware.chip.mxu.weight_double_buffer",
                 "Load the next fold's weights while the current fold streams (TPU-like). false: folds do not "
                 "overlap, M streams whole through each weight fold, and a GEMM costs exactly folds x (2R + C + M - 2) "
                 "cycles (the reference weight-stationary formula).")
          .def("true"),
      P::integer("hardware.chip.mxu.accumulator_rows",
                 "Rows of fp32 accumulators (each C wide) a weight fold streams into before its results leave; with "
                 "weight double buffering, a longer M streams in chunks of this many rows, each reloading the "
                 "weights. Default 2048: one of the two 2048-row halves of TPU v1's 4096-row accumulators (Jouppi "
                 "et al., ISCA 2017); later generations do not publish theirs, and the TPU presets take 1024, which "
                 "the measured v3 matmuls of tools/calibrate show (docs/model.md, MXU).")
          .range(8, 1 << 20)
          .def("2048"),
      P::integer("hardware.chip.mxu.weight_push",
                 "Cycles each weight fold's push occupies the MXU's input port when weights and left-operand rows "
                 "enter through one port from the vector registers (TPU presets: R / 2, two bf16 weight rows per "
                 "cycle, fitted on tools/calibrate's v3 tables; a fold holding fewer rows, K < R, pushes push x rows "
                 "/ R); weight double buffering hides the shift inside the array but not the push, so every fold "
                 "after the first takes max(M + push, load) cycles instead of max(M, load), the load being R cycles "
                 "or the rows held (hardware.chip.mxu.load_rows_held). 0: weights arrive on a path of their own.")
          .range(0, 1 << 20)
          .def("0"),
      P::boolean("hardware.chip.mxu.load_rows_held",
                 "With weight double buffering, a fold holding fewer weight rows than R (K below R, the image's batch "
                 "of a batch-minor filter gradient) loads only those rows, one per cycle, so a fold takes "
                 "max(M + push, rows held) cycles. false: every load takes R cycles, max(M + push, R).")
          .def("true"),
      P::integer("hardware.chip.mxu.result_pop",
                 "Cycles the vector unit spends on each vector (sublanes x lanes) of MXU results it pops from the "
                 "result buffer, converts and stores to VMEM. > 0: results leave through the vector unit that also "
                 "pushes the MXU's operands, so each output tile's pops and its fused epilogue run between the MXU's "
                 "streams (serially) instead of beside them (TPU presets: 2, fitted on tools/calibrate's v3 table). 0: "
                 "results leave on a path of their own and the epilogue overlaps the next tile group.")
          .range(0, 1 << 20)
          .def("0"),
      P::integer("hardware.chip.mxu.int8_rate",
                 "Products per cell and cycle of an MXU whose operands are both int8, against bf16's one (the "
                 "chip's int8 peak over its bf16 peak: 2 on TPU v5e, v5p, v6e; 1 on v4, whose int8 gains nothing): "
                 "an int8 fold holds int8_rate x R rows of the contraction (docs/model.md, \"Quantized serving\"). "
                 "0: no int8 mode (weights-and-activations int8 is refused; int8 weights dequantized to bf16 still "
                 "run).")
          .range(0, 16)
          .def("1"),
      P::integer("hardware.chip.mxu.fp8_rate",
                 "Products per cell and cycle of an MXU whose operands are both fp8, against bf16's one (TPU7x: 2; "
                 "v5p and v6e take fp8 at the bf16 rate: 1). 0: no fp8 (any fp8 weight, activation or cache is "
                 "refused).")
          .range(0, 16)
          .def("0"),
      P::integer("hardware.chip.vpu.lanes", "Vector unit lanes.").range(1, 65536).def("128"),
      P::integer("hardware.chip.vpu.sublanes", "Vector unit sublanes.").range(1, 1024).def("8"),
      P::integer("hardware.chip.vpu.alus", "ALUs per lane x sublane: elementwise operations per element slot and "
                                           "cycle.")
          .range(1, 16)
          .def("1"),
      P::real("hardware.chip.vpu.transcendental_cost",
              "Cycles per vector for a transcendental (exp, log, tanh, rsqrt); adds and multiplies cost 1.")
          .range(1, 1000)
          .def("4"),
      P::real("hardware.chip.vpu.divide_cost", "Cycles per vector for a division.").range(1, 1000).def("4"),
      P::real("hardware.chip.vpu.reduce_cost", "Cycles per vector for a cross-lane reduction (sum, max).")
          .range(1, 1000)
          .def("2"),
      P::quantity("hardware.chip.hbm.capacity", Q::Size, "HBM capacity per chip.").positive(1e15),
      P::quantity("hardware.chip.hbm.bandwidth", Q::Bandwidth, "Peak HBM bandwidth per chip, all channels together.")
          .positive(1e15),
      P::integer("hardware.chip.hbm.channels", "Independent HBM channels (pseudo-channels); requests are striped "
                                               "across them and queue per channel.")
          .range(1, 1024)
          .def("32"),
      P::quantity("hardware.chip.hbm.latency", Q::Time, "Latency of the memory controller and the on-chip path, on "
                                                    "top of the DRAM's own (tCL, tRCD).")
          .range(0, 1e-3)
          .def("500ns"),
      P::quantity("hardware.chip.hbm.burst", Q::Size, "Access granularity: an access moves at least this much.")
          .range(1, 1 << 20)
          .def("64B"),
      P::quantity("hardware.chip.hbm.row", Q::Size, "Row (page) size of a channel; a contiguous run pays one row "
                                                    "activation per row it touches, and streams interleave across "
                                                    "channels row by row.")
          .range(1, 1 << 24)
          .def("1KiB"),
      P::quantity("hardware.chip.hbm.activate_interval", Q::Time,
                  "Minimum time between two row activations in one channel (tRRD); with tFAW and tRC it bounds the "
                  "bandwidth of small scattered accesses.")
          .range(0, 1e-5)
          .def("5ns"),
      P::quantity("hardware.chip.hbm.faw", Q::Time, "Four-activate window tFAW: at most four row activations per "
                                                    "window in one channel.")
          .range(0, 1e-5)
          .def("30ns"),
      P::integer("hardware.chip.hbm.banks", "Banks per channel; a bank activates again only after tRC.")
          .range(1, 1024)
          .def("16"),
      P::quantity("hardware.chip.hbm.row_cycle", Q::Time, "Row cycle tRC of a bank (activate to activate).")
          .range(0, 1e-5)
          .def("47ns"),
      P::quantity("hardware.chip.hbm.rcd", Q::Time, "tRCD: activate to read; paid by accesses that open a row.")
          .range(0, 1e-5)
          .def("14ns"),
      P::quantity("hardware.chip.hbm.cas", Q::Time, "tCL: read command to first data.").range(0, 1e-5).def("14ns"),
      P::quantity("hardware.chip.hbm.read_to_write", Q::Time, "Bus turnaround from reads to writes.")
          .range(0, 1e-5)
          .def("13ns"),
      P::quantity("hardware.chip.hbm.write_to_read", Q::Time, "Bus turnaround from writes to reads "
                                                              "(tCWL + BL/2 + tWTR).")
          .range(0, 1e-5)
          .def("13ns"),
      P::integer("hardware.chip.hbm.write_batch", "Writes the controller drains per bus turnaround when reads and "
                                                  "writes interleave; 0 disables turnarounds.")
          .range(0, 1 << 20)
          .def("8"),
      P::quantity("hardware.chip.hbm.refresh_interval", Q::Time, "Refresh interval tREFI; 0s disables refresh.")
          .range(0, 1)
          .def("3.9us"),
      P::quantity("hardware.chip.hbm.refresh_time", Q::Time, "Refresh cycle time tRFC: a channel serves nothing for "
                                                             "this long every tREFI.")
          .range(0, 1e-4)
          .def("350ns"),
      P::quantity("hardware.chip.vmem.capacity", Q::Size, "Vector memory (VMEM) per TensorCore: the on-chip buffer "
                                                          "ops are tiled through.")
          .positive(1e12),
      P::quantity("hardware.chip.cmem.capacity", Q::Size, "Common memory (CMEM) shared by the chip's cores (v4, "
                                                          "v5p); 0B when the chip has none.")
          .range(0, 1e12)
          .def("0B"),
      P::quantity("hardware.chip.host_link.bandwidth", Q::Bandwidth,
                  "The chip's host link (PCIe-class DMA between its HBM and its host's memory), per direction: "
                  "host offload and the data-center network's chip-to-host hop share it (docs/hardware.md).")
          .positive(1e14),
      P::quantity("hardware.chip.host_link.latency", Q::Time,
                  "Latency of the host link: from a chunk leaving one side to its arrival on the other. Not "
                  "published for any TPU; podsim assumes 1us (docs/hardware.md).")
          .range(0, 1e-2)
          .def("1us"),
      P::quantity("hardware.chip.host_link.chunk", Q::Size,
                  "Host transfers are split into DMA chunks of at most this size, which take turns on the link "
                  "(XLA's xla_tpu_iova_dma_chunk_size_bytes, 16 MiB in MaxText's configurations).")
          .range(4096, 1e12)
          .def("16MiB"),
      // ici
      P::integer("hardware.ici.dimensions", "Torus dimensions this chip generation wires (2 or 3); "
                                            "hardware.pod.dims must have as many entries.")
          .range(2, 3),
      P::quantity("hardware.ici.link_bandwidth", Q::Bandwidth, "Bandwidth of one ICI link in one direction.")
          .positive(1e14),
      P::quantity("hardware.ici.hop_latency", Q::Time, "Latency a message pays per hop.").range(0, 1e-2).def("1us"),
      P::quantity("hardware.ici.chunk", Q::Size, "Transfers are split into chunks of at most this size; smaller "
                                                 "chunks pipeline better and cost more events.")
          .range(256, 1e10)
          .def("1MiB"),
      P::integer("hardware.ici.max_chunks",
                 "Simulation granularity: a transfer of more than this many chunks' worth (a ring step's block set, "
                 "an all-to-all block, a send) moves in chunks of 1/max_chunks of it instead, so large collectives "
                 "cost fewer events; smaller transfers are cut as before. 0 (the default): no cap, every chunk "
                 "as hardware.ici.chunk cuts it. The error it brings is measured in docs/model.md (\"Simulation "
                 "granularity\").")
          .range(0, 1 << 20)
          .def("0"),
      // pod
      P::int_list("hardware.pod.dims", "Chips per torus dimension, e.g. [16, 16]; [] is one chip.")
          .range(1, 1 << 18)
          .length(0, 3)
          .def("[]"),
      P::bool_list("hardware.pod.wrap", "Wrap-around links per dimension (true: torus, false: open mesh); [] wraps "
                                        "every dimension.")
          .length(0, 3)
          .def("[]"),
      // slices, hosts and the data-center network
      P::integer("hardware.slices",
                 "Slices: copies of hardware.pod joined only by the data-center network (DCN) through their hosts "
                 "(Cloud TPU Multislice; PaLM's two pods). mesh.dcn_axes says which mesh axes span them.")
          .range(1, 4096)
          .def("1"),
      P::integer("hardware.host.chips",
                 "Chips per host: each host drives this many neighbouring chips over their host links and sends "
                 "their data-center traffic through its NICs (v4, v5p: 4; v5e, v6e: 8).")
          .range(1, 64),
      P::quantity("hardware.dcn.bandwidth", Q::Bandwidth,
                  "Data-center network bandwidth per host and direction, all its NICs together (v5e: 2 x 100 Gb/s); "
                  "the host's chips share it. 0B/s where no figure is published (v2, v3, v4): a run with several "
                  "slices must then set it (docs/hardware.md).")
          .range(0, 1e14)
          .def("0B/s"),
      P::quantity("hardware.dcn.latency", Q::Time,
                  "Latency from a host's NIC to the peer host's NIC. Published for no generation; podsim assumes 10us "
                  "(docs/hardware.md).")
          .range(0, 1)
          .def("10us"),
      P::real("hardware.dcn.oversubscription",
              "The network between hosts: 1 is non-blocking (only the NICs limit); f > 1 carries at most the sum of a "
              "slice's NICs / f out of each slice and into each slice (nothing is published beyond the NICs).")
          .range(1, 1000)
          .def("1"),
      P::quantity("hardware.dcn.chunk", Q::Size,
                  "Collectives and transfers cut what crosses the DCN into chunks of at most this size (Megascale's "
                  "megascale_max_reduction_shard_size, 16 MiB in Google's MLPerf configurations).")
          .range(4096, 1e12)
          .def("16MiB"),
      P::text_list("hardware.faults",
                   "Chips and links that are not as the preset says, one \"TARGET: EFFECT, ...\" each: "
                   "\"chip 5: clock 0.8\" or \"chip (3,4): clock 0.8, hbm 0.5\" (clock and HBM bandwidth factors), "
                   "\"random 4: clock 0.9\" or \"random 25%: ...\" (chips drawn with run.seed), \"link 12 +x: "
                   "bandwidth 0.5\" or \"link (0,0) -y: down\" (one direction of a link). Factors in (0, 1]. A down "
                   "link is detoured round the other way of its ring (topology/torus.h); docs/hardware.md, Faults.")
          .length(0, 100000)
          .def("[]"),
  };
}

std::vector<ParamSpec> mesh_param_specs() {
  using P = ParamSpec;
  return {
      P::text_list("mesh.axes", "Names of the logical device mesh's axes, outermost first (e.g. [data, model]); each "
                                "strategy owns some (docs/strategies.md). [] lets a single strategy take every chip "
                                "on its axis.")
          .length(0, 8)
          .def("[]"),
      P::int_list("mesh.shape", "Size of each mesh axis; the sizes multiply to the chip count.")
          .range(1, 1 << 18)
          .length(0, 8)
          .def("[]"),
      P::text_list("mesh.dcn_axes",
                   "With several slices (hardware.slices): the mesh axes that span them over the data-center network, "
                   "outermost first (MaxText's dcn_* parallelism); their sizes multiply to a multiple of the slice "
                   "count (an axis larger than its slices continues inside each, as MaxText's dcn_data x ici_data). "
                   "[] takes [data] when the mesh has it. data, fsdp and pipe may span slices; others only when "
                   "mesh.dcn_allow names them.")
          .length(0, 8)
          .def("[]"),
      P::text_list("mesh.dcn_allow",
                   "Mesh axes other than data, fsdp and pipe that may span slices anyway: their collectives (a "
                   "model axis's all-reduces, an expert axis's all-to-alls) then cross the DCN in every layer, which "
                   "MaxText calls never recommended.")
          .length(0, 8)
          .def("[]"),
      P::text_list("mesh.placement",
                   "Where each axis lies on the torus, one entry per axis (\"\" = automatic): the torus dimensions it "
                   "spans, fastest first, each with the number of its coordinates it takes: \"x\", \"x,z\", \"y:8\". "
                   "[] places every axis automatically (the last axis innermost, filling x, then y, then z).")
          .length(0, 8)
          .def("[]"),
  };
}

std::vector<ParamSpec> serving_param_specs() {
  using P = ParamSpec;
  return {
      P::integer("serving.requests.count",
                 "Requests of a synthetic stream (benchmark_serving's --num-prompts); setting it (or "
                 "serving.requests.trace) makes `podsim run` a serving run.")
          .range(1, 1 << 24)
          .optional(),
      P::int_list("serving.requests.input_tokens",
                  "Prompt tokens of each synthetic request: N (all alike) or [LO, HI] (uniform in LO..HI, drawn "
                  "with serving.requests.seed).")
          .range(1, 1LL << 30)
          .length(1, 2)
          .one_or_more()
          .optional(),
      P::int_list("serving.requests.output_tokens",
                  "Output tokens of each synthetic request, the first sampled by its prefill (benchmark_serving "
                  "with --ignore-eos): N or [LO, HI] as input_tokens.")
          .range(1, 1LL << 30)
          .length(1, 2)
          .one_or_more()
          .optional(),
      P::choice("serving.requests.arrival", {"all_at_once", "constant", "poisson"},
                "When synthetic requests arrive: all at time 0 (benchmark_serving's default, infinite rate), "
                "one every 1/rate seconds, or as a Poisson process of serving.requests.rate (exponential gaps "
                "drawn with serving.requests.seed).")
          .def("all_at_once"),
      P::real("serving.requests.rate", "Requests per second of constant or poisson arrivals.")
          .positive(1e9)
          .optional(),
      P::integer("serving.requests.seed", "Seed of the arrival gaps and of the lengths drawn from ranges.")
          .range(0, 1LL << 62)
          .def("1"),
      P::integer("serving.requests.max_concurrency",
                 "At most this many requests in flight (benchmark_serving's --max-concurrency): a closed loop in "
                 "which a request is sent when it has arrived and one of the earlier ones has finished; its "
                 "latencies count from then. Unset: every request is sent when it arrives.")
          .range(1, 1 << 24)
          .optional(),
      P::text("serving.requests.trace",
              "A CSV file of requests (relative to the experiment file): a header line, then arrival_s,"
              "input_tokens,output_tokens per request, arrivals in order. Replaces the synthetic stream.")
          .optional(),
      P::text("serving.engine.policy",
              "The engine's batching policy: static (Pope et al.: a batch of up to slots requests prefilled "
              "together, then decoded to its end before the next), continuous (JetStream: a waiting request is "
              "prefilled alone and inserted into a free slot; otherwise one generate step for every occupied "
              "slot), chunked (vLLM: every iteration takes the running sequences' decodes, then chunks of prompts "
              "up to max_batched_tokens tokens in all).")
          .def("continuous"),
      P::integer("serving.engine.slots",
                 "Sequences in flight at most: JetStream's decode slots (max batch), vLLM's max-num-seqs, a static "
                 "batch's size.")
          .range(1, 1 << 16)
          .def("64"),
      P::integer("serving.engine.max_batched_tokens",
                 "chunked: the tokens one iteration processes at most (vLLM's max-num-batched-tokens), decodes "
                 "and prefill chunks together.")
          .range(1, 1 << 24)
          .def("512"),
      P::choice("serving.engine.batch_padding", {"engine", "none"},
                "How an iteration's batch is shaped (docs/serving.md, \"Batch padding\"): engine (as the policy's "
                "engine compiles it: continuous, JetStream's generate step over every decode slot; chunked, vLLM "
                "TPU's tokens and requests padded to its buckets; static, the batch's finished sequences kept to "
                "its end), the padding computed but left out of model FLOPs and tokens; none (only the work: the "
                "occupied slots, the scheduled tokens).")
          .def("engine"),
      P::choice("serving.engine.kv", {"contiguous", "paged"},
                "The KV cache: contiguous (each slot owns slot_tokens places, JetStream) or paged (pages of "
                "page_tokens places handed out as sequences grow, vLLM; a request is admitted while pages last and "
                "the latest admitted is preempted, to be recomputed, when a running sequence needs a page and none "
                "is free).")
          .def("contiguous"),
      P::integer("serving.engine.page_tokens", "paged: places of one page (vLLM's block size).")
          .range(1, 1 << 20)
          .def("128"),
      P::integer("serving.engine.slot_tokens",
                 "Places of KV cache per sequence (JetStream's cache length): every request's input and output must "
                 "fit. Default: workload.max_context, else the longest request's.")
          .range(1, 1LL << 30)
          .optional(),
      P::integer("serving.engine.pages",
                 "paged: the pages of the cache. Default: what the slots hold at slot_tokens each.")
          .range(1, 1LL << 40)
          .optional(),
      P::int_list("serving.disaggregated.prefill_pod",
                  "Disaggregated serving (docs/serving.md, \"Disaggregated serving\"): chips per torus dimension "
                  "of a slice that only prefills, as hardware.pod.dims; hardware.pod becomes the slice that only "
                  "decodes. Each prefill's KV cache crosses serving.disaggregated.link before its request joins "
                  "the decode slice. Unset: one slice does both.")
          .range(1, 1 << 18)
          .length(2, 3)
          .optional(),
      P::integer("serving.disaggregated.prefill_batch",
                 "Prompts the prefill slice prefills together (JetStream's prefill engine: 1; vLLM's prefill "
                 "instance batches).")
          .range(1, 1 << 16)
          .def("1"),
      P::choice("serving.disaggregated.link", {"dcn", "ici"},
                "What carries the KV caches from the prefill slice to the decode slice: dcn (separate slices: "
                "every host of the smaller slice sends or receives at hardware.dcn.bandwidth) or ici (both slices "
                "in one torus, side by side along its first dimension: the links across the face they share, "
                "each at hardware.ici.link_bandwidth).")
          .def("dcn"),
      P::boolean("serving.exact",
                 "Simulate every distinct iteration the stream produces (each batch composition of exact lengths) "
                 "instead of interpolating between simulated iterations on a grid of batch sizes and context "
                 "lengths (docs/serving.md, \"Iteration times\").")
          .def("false"),
      P::integer("serving.context_bucket",
                 "Tokens between the grid's context lengths (and prompt lengths above it) that iteration times are "
                 "interpolated between; below it the grid has two points an octave, as for batch sizes.")
          .range(1, 1 << 20)
          .def("256"),
      P::integer("serving.jobs", "Iterations simulated at once, each in a process of its own.")
          .range(1, 256)
          .def("2"),
  };
}

std::vector<ParamSpec> run_param_specs() {
  using P = ParamSpec;
  using Q = Quantity;
  return {
      P::text("run.name", "Name of the run; the default output folder is results/<name>. Default: the experiment "
                          "file's name without .yaml.")
          .optional(),
      P::boolean("run.numeric", "Execute every op on real tensors as it is simulated and write tensors/*.npy.")
          .def("false"),
      P::boolean("run.dump_activations", "Numeric mode: also write every forward activation to tensors/.")
          .def("false"),
      P::boolean("run.dump_shards", "Numeric mode: also write each chip's own shards to tensors/chip<id>/.")
          .def("false"),
      P::quantity("run.max_tensor_bytes", Q::Size,
                  "Numeric mode: the most tensor data tensors/ may receive (shards and activations included). A run "
                  "that would write more stops before simulating with PODSIM-IO-005, saying how much it would write.")
          .range(0, 1e15)
          .def("256MiB"),
      P::integer("run.seed", "Seed for parameter initialisation, inputs and stall injection.")
          .range(0, 9.2e18)
          .def("1"),
      P::boolean("run.allow_oom", "Report a step that does not fit in HBM instead of failing.").def("false"),
      P::quantity("run.max_wall", Q::Time, "Real (wall-clock) time, planning and simulation together, after which the run is stopped with an error.")
          .positive(1e7)
          .def("1h"),
      P::choice("run.trace.format", {"pftrace", "json", "off"},
                "Trace format: Perfetto protobuf (trace.pftrace), Chrome JSON (trace.json), or none.")
          .def("pftrace"),
      P::boolean("run.trace.compress", "gzip the trace (trace.pftrace.gz / trace.json.gz).").def("false"),
      P::choice("run.trace.detail", {"ops", "units", "links"},
                "ops: steps and ops; units: also MXU/VPU/HBM/collectives; links: also ICI links and flows.")
          .def("links"),
      P::int_list("run.trace.chips", "Chips to trace; [] traces all chips when the pod has at most "
                                     "run.trace.max_chips.")
          .range(0, 1 << 18)
          .def("[]"),
      P::quantity("run.trace.from", Q::Time, "Start of the traced window of simulated time.").range(0, 1e6).def("0s"),
      P::quantity("run.trace.to", Q::Time, "End of the traced window; unset traces to the end.")
          .range(0, 1e6)
          .optional(),
      P::integer("run.trace.max_chips", "Pods with more chips than this write no trace unless run.trace.chips picks "
                                        "a subset (a 16 x 16 pod is traced; a 32 x 32 one is not).")
          .range(1, 1 << 18)
          .def("256"),
      P::integer("run.trace.warn_events", "Warn before writing a trace with more events than this.")
          .range(1, 1e12)
          .def("4000000"),
      P::choice("run.fusion", {"xla", "none"},
                "Operator fusion: xla fuses elementwise chains, matmul epilogues and reductions as XLA does; none "
                "runs every op as its own kernel (hw/compiler/fusion.h).")
          .def("xla"),
      P::choice("run.flops_convention", {"palm", "maxtext"},
                "How model FLOPs (summary.json model_flops, MFU) count causal attention's (query, key) square: palm "
                "whole, as PaLM's Appendix B (12 L H Q T per token); maxtext half, as MaxText's "
                "calculate_tflops_training_per_device (the mask's triangle). summary.json gives both "
                "(model_flops_by_convention; docs/outputs.md).")
          .def("palm"),
      P::boolean("run.fusion_multi_output",
                 "Multi-output fusion (with run.fusion: xla): a whole-tensor reduction of a matmul's or "
                 "convolution's result (batch-norm statistics, the first pass of a batch-norm gradient) runs in "
                 "that op's kernel and comes out beside its result, as XLA fuses it (docs/model.md, \"Fusion\").")
          .def("true"),
      P::boolean("run.fusion_duplicate",
                 "Producer duplication (with run.fusion: xla): elementwise producers are recomputed inside the "
                 "kernels that read them instead of being written to HBM, as XLA's instruction fusion does "
                 "(batch-norm normalization and ReLU inside the next convolutions; docs/model.md, \"Fusion\").")
          .def("true"),
      P::boolean("run.fusion_vector_conv",
                 "Depthwise convolutions fuse as convolutions (with run.fusion: xla): the vector unit's depthwise "
                 "convolution and its gradients take their operands' elementwise producers (batch norm, swish), "
                 "their result's elementwise consumers and its batch-norm statistics into their kernel, as XLA's "
                 "convolution fusion does; false: each runs alone (docs/model.md, \"Depthwise convolutions\").")
          .def("true"),
      P::choice("run.conv_taps", {"per_tap", "packed"},
                "How a convolution's filter taps feed the MXU (docs/model.md, \"Convolutions on the MXU\"): "
                "per_tap as XLA's TPU convolutions do, each tap's features filling whole vectors of the lanes they "
                "are laid out on (64 features use half of a 128-row fold); packed: the taps' features packed "
                "together along the contraction.")
          .def("per_tap"),
      P::choice("run.core_split", {"traffic", "order"},
                "How an MXU op's work is split over a chip's TensorCores (docs/model.md, \"A chip\"): traffic "
                "along the dimension whose shares move the fewest HBM bytes (the batch of an image model's "
                "convolutions, the contraction of a weight gradient, as per-core replicas split them); order: the "
                "first of the batch, the output columns (N) and the rows (M) with a share for every core.")
          .def("traffic"),
      P::boolean("run.conv_overlap",
                 "A convolution fusion's vector work (the batch norm, ReLU and their gradients fused into it) runs "
                 "beside the MXU, as TPU profiles show (docs/model.md, \"Convolutions on the MXU\"); false: between "
                 "its streams like a matmul's epilogue. The result pops stay serial either way.")
          .def("true"),
      P::choice("run.scheduler", {"program", "latency_hiding"},
                "The order in which each chip's MXUs and vector units take the ops that are ready: program (the "
                "step's order) or latency_hiding (the op with the longest estimated path to the step's end first, as "
                "XLA's latency-hiding scheduler starts collectives early and fills their time with independent work: "
                "a layer's input gradient before its weight gradients). docs/model.md, \"Issue order\".")
          .def("program"),
      P::choice("run.layout", {"xla", "xla_features_minor", "row_major"},
                "How image models' tensors are laid out in HBM (docs/model.md, \"Layouts\"): xla as XLA's TPU "
                "layout assignment does (each activation with its features or its batch on the 128 lanes, whichever "
                "pads it less on a device; input images batch-minor); xla_features_minor keeps every activation's "
                "features on the lanes (the batch on the sublanes); row_major tiles the two minor dimensions of "
                "every shape as written.")
          .def("xla"),
      P::choice("run.symmetry", {"auto", "off"},
                "auto simulates one chip per class of chips the step treats alike (translations of the torus that "
                "map every chip's program, groups and peers onto another's; timing mode, no stalls, traced chips "
                "only inside the simulated box) and gives every chip its representative's figures; off simulates "
                "every chip (docs/performance.md).")
          .def("auto"),
      P::quantity("run.combine_threshold", Q::Size,
                  "Gradient bucketing: the all-reduces and reduce-scatters of parameter gradients over the same mesh "
                  "axes and algorithm are combined into collectives of up to this many bytes, each issued when its "
                  "last gradient is ready, as XLA's AllReduceCombiner and ReduceScatterCombiner do; the default is "
                  "theirs (XLA's debug options xla_gpu_all_reduce_combine_threshold_bytes and "
                  "xla_gpu_reduce_scatter_combine_threshold_bytes: 30MiB). 0 turns combining off (one collective "
                  "per gradient). partition/combine.h; docs/strategies.md.")
          .range(0, 1e15)
          .def("30MiB"),
      P::boolean("run.dcn_overlap",
                 "Gradient reductions over the data-center network start as soon as their gradients are ready and "
                 "overlap the rest of the backward pass (XLA's xla_tpu_enable_data_parallel_all_reduce_opt); false "
                 "starts them only when the backward pass is done, as PaLM's two-pod transfer did.")
          .def("true"),
      P::real("run.stall.probability", "Probability that an HBM request or ICI chunk gets a random extra delay "
                                       "(testing for hidden timing assumptions).")
          .range(0, 1)
          .def("0"),
      P::quantity("run.stall.max", Q::Time, "Largest injected delay; delays are uniform in [0, max].")
          .range(0, 1)
          .def("1us"),
  };
}

void Schema::add(ParamSpec spec) {
  m_index[spec.path] = m_specs.size();
  m_specs.push_back(std::move(spec));
}

void Schema::add_all(std::vector<ParamSpec> specs) {
  for (auto& s : specs) add(std::move(s));
}

const ParamSpec* Schema::find(const std::string& path) const {
  auto it = m_index.find(path);
  return it == m_index.end() ? nullptr : &m_specs[it->second];
}

void Schema::set_default(const std::string& path, std::string yaml_text) {
  auto it = m_index.find(path);
  if (it != m_index.end()) m_specs[it->second].default_text = std::move(yaml_text);
}

bool Schema::is_group(const std::string& prefix) const {
  std::string p = prefix + ".";
  for (const auto& s : m_specs)
    if (s.path.compare(0, p.size(), p) == 0) return true;
  return false;
}

std::vector<std::string> Schema::children(const std::string& prefix) const {
  std::set<std::string> out;
  std::string p = prefix.empty() ? "" : prefix + ".";
  for (const auto& s : m_specs) {
    if (s.path.compare(0, p.size(), p) != 0) continue;
    std::string rest = s.path.substr(p.size());
    out.insert(rest.substr(0, rest.find('.')));
  }
  return {out.begin(), out.end()};
}

std::vector<std::string> Schema::paths() const {
  std::vector<std::string> out;
  for (const auto& s : m_specs) out.push_back(s.path);
  return out;
}

}  // namespace podsim

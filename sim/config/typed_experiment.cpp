// The typed experiment (loader_impl.h): checks across parameters, and the Experiment's structs filled from them.
#include <unistd.h>

#include "base/text.h"
#include "plan/mesh.h"
#include "sim/config/faults.h"
#include "sim/config/loader_impl.h"
#include "topology/hosts.h"

namespace podsim::loader_detail {

namespace {
constexpr int64_t kMaxChips = 262144;
}  // namespace

void validate_hardware(Experiment& e, ParamReader& L) {
  ParamSet& p = L.values;
  int64_t ndim = p.i("hardware.ici.dimensions");
  const ParamValue& dims_v = p.at("hardware.pod.dims");
  std::vector<int64_t> dims = p.ints("hardware.pod.dims");
  if (dims.empty()) dims.assign(ndim, 1);
  if (static_cast<int64_t>(dims.size()) != ndim)
    throw Error(Err::PodShape, dims_v.where,
                "hardware.pod.dims has " + std::to_string(dims.size()) + " entries but the " +
                    p.s("hardware.preset") + " torus has " + std::to_string(ndim) + " dimensions; give " +
                    std::to_string(ndim) + " sizes, e.g. " + (ndim == 2 ? "[4, 4]" : "[4, 4, 4]"),
                "hardware.pod.dims");
  double chips = 1;
  for (auto d : dims) chips *= static_cast<double>(d);
  const int64_t slices = p.i("hardware.slices");
  chips *= static_cast<double>(slices);
  if (chips > kMaxChips)
    throw Error(Err::PodTooLarge, dims_v.where,
                strprintf("hardware.pod.dims describes %.0f chips%s; podsim simulates at most %lld", chips,
                          slices > 1 ? strprintf(" over %lld slices", static_cast<long long>(slices)).c_str() : "",
                          static_cast<long long>(kMaxChips)),
                "hardware.pod.dims");
  // About 64 KiB per chip of model state, plus links; refuse what this machine cannot hold.
  double need = chips * 64.0 * 1024;
  double have = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (have > 0 && need > 0.8 * have)
    throw Error(Err::PodTooLarge, dims_v.where,
                "a pod of " + strprintf("%.0f", chips) + " chips needs about " + format_bytes(need) +
                    " of memory to simulate; this machine has " + format_bytes(have),
                "hardware.pod.dims");
  std::vector<bool> wrap = p.bools("hardware.pod.wrap");
  const ParamValue& wrap_v = p.at("hardware.pod.wrap");
  if (wrap.empty()) wrap.assign(dims.size(), true);
  if (wrap.size() != dims.size())
    throw Error(Err::LengthMismatch, wrap_v.where,
                "hardware.pod.wrap has " + std::to_string(wrap.size()) + " entries but hardware.pod.dims has " +
                    std::to_string(dims.size()),
                "hardware.pod.wrap");
  // Record the resolved lists so config.resolved.yaml shows them.
  ParamValue dv = dims_v;
  dv.data = dims;
  p.put(dv);
  ParamValue wv = wrap_v;
  wv.data = wrap;
  p.put(wv);
  e.hardware.pod.dims = dims;
  e.hardware.pod.wrap = wrap;
  e.hardware.pod.slices = slices;
  // The hosts tile each slice; several slices need the DCN's bandwidth, which some generations do not publish.
  e.hardware.host.chips = p.i("hardware.host.chips");
  e.hardware.host.block = host_block(dims, e.hardware.host.chips);
  if (slices > 1 && !(p.f("hardware.dcn.bandwidth") > 0))
    throw Error(Err::MissingKey, p.where("hardware.slices"),
                "hardware.slices is " + std::to_string(slices) + " but the " + p.s("hardware.preset") +
                    " preset has no data-center network bandwidth (none is published for it); set "
                    "hardware.dcn.bandwidth, the bandwidth of each host's NICs per direction (docs/hardware.md)",
                "hardware.dcn.bandwidth");
}

void build_typed(Experiment& e, const ParamSet& p) {
  HardwareConfig& h = e.hardware;
  h.preset = p.s("hardware.preset");
  h.description = p.s("hardware.description");
  ChipConfig& c = h.chip;
  c.clock = p.f("hardware.chip.clock");
  c.tensorcores = p.i("hardware.chip.tensorcores");
  c.mxu.count = p.i("hardware.chip.mxu.count");
  c.mxu.rows = p.i("hardware.chip.mxu.rows");
  c.mxu.cols = p.i("hardware.chip.mxu.cols");
  c.mxu.weight_double_buffer = p.b("hardware.chip.mxu.weight_double_buffer");
  c.vpu.lanes = p.i("hardware.chip.vpu.lanes");
  c.vpu.sublanes = p.i("hardware.chip.vpu.sublanes");
  c.vpu.alus = p.i("hardware.chip.vpu.alus");
  c.vpu.transcendental_cost = p.f("hardware.chip.vpu.transcendental_cost");
  c.vpu.divide_cost = p.f("hardware.chip.vpu.divide_cost");
  c.vpu.reduce_cost = p.f("hardware.chip.vpu.reduce_cost");
  c.hbm.capacity = p.f("hardware.chip.hbm.capacity");
  c.hbm.bandwidth = p.f("hardware.chip.hbm.bandwidth");
  c.hbm.channels = p.i("hardware.chip.hbm.channels");
  c.hbm.latency = p.f("hardware.chip.hbm.latency");
  c.hbm.burst = p.f("hardware.chip.hbm.burst");
  c.hbm.row = p.f("hardware.chip.hbm.row");
  c.hbm.activate_interval = p.f("hardware.chip.hbm.activate_interval");
  c.vmem = p.f("hardware.chip.vmem.capacity");
  c.cmem = p.f("hardware.chip.cmem.capacity");
  c.host_link.bandwidth = p.f("hardware.chip.host_link.bandwidth");
  c.host_link.latency = p.f("hardware.chip.host_link.latency");
  c.host_link.chunk = p.f("hardware.chip.host_link.chunk");
  h.dcn.bandwidth = p.f("hardware.dcn.bandwidth");
  h.dcn.latency = p.f("hardware.dcn.latency");
  h.dcn.oversubscription = p.f("hardware.dcn.oversubscription");
  h.dcn.chunk = p.f("hardware.dcn.chunk");
  h.ici.dimensions = p.i("hardware.ici.dimensions");
  h.ici.link_bandwidth = p.f("hardware.ici.link_bandwidth");
  h.ici.hop_latency = p.f("hardware.ici.hop_latency");
  h.ici.chunk = p.f("hardware.ici.chunk");
  h.ici.max_chunks = p.i("hardware.ici.max_chunks");

  RunConfig& r = e.run;
  r.name = p.has("run.name") ? p.s("run.name") : "";
  r.numeric = p.b("run.numeric");
  r.seed = static_cast<uint64_t>(p.i("run.seed"));
  r.allow_oom = p.b("run.allow_oom");
  r.max_wall = p.f("run.max_wall");
  r.trace.format = p.s("run.trace.format");
  r.trace.compress = p.b("run.trace.compress");
  r.trace.detail = p.s("run.trace.detail");
  r.trace.chips = p.ints("run.trace.chips");
  r.trace.from = p.f("run.trace.from");
  r.trace.to = p.has("run.trace.to") ? p.f("run.trace.to") : -1;
  r.trace.max_chips = p.i("run.trace.max_chips");
  r.trace.warn_events = p.i("run.trace.warn_events");
  r.combine_threshold = p.f("run.combine_threshold");
  r.dcn_overlap = p.b("run.dcn_overlap");
  r.stall.probability = p.f("run.stall.probability");
  r.stall.max = p.f("run.stall.max");
  h.faults = read_faults(p, h.pod, r.seed);
}

// workload.bn_batch 0 (its default) under data parallelism: each replica's examples are one group, as TensorFlow's and
// Flax's batch norm normalize under data parallelism unless told otherwise (a pipeline keeps its micro-batches).
bool resolve_bn_default(Experiment& e, const Mesh& mesh) {
  const auto& values = e.params.values();
  const auto it = values.find("workload.bn_batch");
  if (it == values.end() || e.params.i("workload.bn_batch") != 0) return false;
  if (std::find(e.strategies.begin(), e.strategies.end(), "pipeline") != e.strategies.end()) return false;
  const int64_t data = mesh.axis_index("data") < 0 ? 1 : mesh.axis_size("data");
  const int64_t batch = e.params.i("workload.batch");
  if (data <= 1 || batch % data != 0) return false;  // one replica, or the strategy's own error names the batch
  ParamValue v = it->second;
  v.data = batch / data;
  if (v.where.origin == "default") v.where.origin = "default (per replica: workload.batch / the data axis)";
  e.params.put(v);
  return true;
}

bool resolve_bn_group(Experiment& e, const Mesh& mesh) {
  const auto& values = e.params.values();
  const auto it = values.find("workload.bn_group");
  if (it == values.end() || !it->second.set || e.params.i("workload.bn_group") == 0) return resolve_bn_default(e, mesh);
  const int64_t group = e.params.i("workload.bn_group"), data = mesh.axis_size("data");
  const SourceLocation& where = it->second.where;
  if (e.params.where("workload.bn_batch").origin != "default")
    throw Error(Err::StrategyMismatch, where,
                "workload.bn_group and workload.bn_batch both size the batch-norm groups (replicas, examples); "
                "set one of them",
                "workload.bn_group");
  if (mesh.axis_index("data") < 0)
    throw Error(Err::StrategyMismatch, where,
                "workload.bn_group counts data-parallel replicas, but the mesh has no `data` axis (axes: " +
                    join(mesh.names(), ", ") + "); use workload.bn_batch (examples per group) instead",
                "workload.bn_group");
  if (data % group != 0)
    throw Error(Err::NotDivisible, where,
                "workload.bn_group = " + std::to_string(group) + " replicas does not divide the data axis of " +
                    std::to_string(data) + "; choose a divisor of " + std::to_string(data),
                "workload.bn_group");
  const int64_t batch = e.params.i("workload.batch");
  if (batch % data != 0) return false;  // the strategy's own error names the batch
  ParamValue v = e.params.at("workload.bn_batch");
  v.data = group * (batch / data);
  v.where = where;
  e.params.put(v);
  return true;
}

}  // namespace podsim::loader_detail

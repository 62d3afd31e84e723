// summary.json: the run's figures. Deterministic (no wall times, no paths that depend on where it ran): the same
// experiment and seed give the same bytes. docs/outputs.md documents every field.
#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/text.h"
#include "hw/pod/pod.h"
#include "hw/timing/mxu_timing.h"
#include "hw/timing/vpu_timing.h"
#include "sim/engine/busy_time.h"
#include "sim/engine/dcn_report.h"
#include "sim/engine/engine.h"
#include "sim/engine/fault_report.h"
#include "sim/engine/hlo_stats.h"
#include "sim/engine/inference_report.h"
#include "sim/engine/memory_summary.h"
#include "sim/engine/moe_report.h"
#include "sim/engine/pipeline_units.h"
#include "sim/engine/timeline.h"

namespace podsim {
namespace {

using J = nlohmann::ordered_json;

// An integer parameter of the workload (its batch, its sequence length), when it declares one.
std::optional<double> count_param(const ParamSet& ps, const std::string& path) {
  if (!ps.has(path)) return std::nullopt;
  const auto* v = std::get_if<int64_t>(&ps.at(path).data);
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

double r6(double x) { return std::isfinite(x) ? std::round(x * 1e6) / 1e6 : 0; }
double ns(double s) { return std::round(s * 1e12) / 1e3; }  // seconds -> ns with ps precision
double ps(double s) { return std::round(s * 1e12) / 1e12; }  // seconds, to the picosecond

J op_table(const Prepared& p, const Simulation& s, const Chip& chip) {
  J ops = J::array();
  if (chip.role() < 0) return ops;
  const ExecProgram& ep = p.ctx->programs[chip.role()];
  const std::vector<double>& busy = result_op_busy(s, chip, ep.ops.size());
  const ModelGraph& g = p.plan.programs[chip.role()].graph;
  const ChipConfig& cfg = p.exp.hardware.chip;
  for (size_t i = 0; i < ep.ops.size(); ++i) {
    const ExecOp& e = ep.ops[i];
    const OpRecord& r = chip.log().ops[i];
    J o;
    o["name"] = e.name;
    o["kind"] = op_kind_name(e.kind);
    o["unit"] = unit_name(e.unit);
    o["phase"] = phase_name(e.phase);
    o["cycles"] = r.busy_cycles;
    o["start_ns"] = ns(r.start);
    o["end_ns"] = ns(r.end);
    o["busy_s"] = ps(busy[i]);
    o["wait_s"] = ps(std::max(0.0, (r.end - r.start) - busy[i]));
    o["flops"] = e.flops;
    o["bytes"] = r.hbm_read + r.hbm_write;
    o["hbm_read"] = r.hbm_read;
    o["hbm_write"] = r.hbm_write;
    o["logical_bytes"] = e.logical_bytes;
    o["cores"] = e.cores;
    if (e.unit == Unit::Ici && over_dcn(p, chip.id(), g.op(e.members.front()))) o["dcn"] = true;
    if (e.members.size() > 1) {
      J m = J::array(), again = J::array();
      for (size_t k = 0; k < e.members.size(); ++k) (e.recomputed[k] ? again : m).push_back(g.op(e.members[k]).name);
      o["fused"] = m;
      if (!again.empty()) o["recomputed"] = again;
      o["fusion"] = fusion_kind_name(e.fusion);
    }
    if (e.unit != Unit::Ici) {
      o["hbm_pattern"] = hbm_pattern_name(e.read_pattern);
      if (e.write_pattern != e.read_pattern) o["hbm_write_pattern"] = hbm_pattern_name(e.write_pattern);
    }
    if (e.unit == Unit::Mxu) {
      o["mxu"] = {{"m", e.gemm.m}, {"k", e.gemm.k}, {"n", e.gemm.n}, {"batch", e.gemm.batch},
                  {"folds", e.gemm.batch * gemm_folds({cfg.mxu.rows, cfg.mxu.cols, true},
                                                      ceil_div(e.gemm.k, e.gemm.k_pack), e.gemm.n)},
                  {"core_folds", e.gemm.core_folds},
                  {"folds_per_mxu", ceil_div(e.gemm.core_folds, cfg.mxu.count)},
                  {"rows_per_fold", e.gemm.rows_per_fold}, {"m_chunks", e.gemm.m_chunks},
                  {"k_pad", e.gemm.k_pad}, {"n_pad", e.gemm.n_pad},
                  {"mxus", static_cast<int64_t>(e.cores) * cfg.mxu.count},
                  {"split", e.gemm.split}, {"m_tile", e.gemm.m_tile}, {"n_tile", e.gemm.n_tile}};
      if (e.gemm.k_pack > 1) o["mxu"]["k_pack"] = e.gemm.k_pack;  // int8 or fp8 at the chip's faster rate
      if (!e.gemm.passes.empty()) {  // a kernel of several GEMM shapes: each shape's products and folds
        J passes = J::array();
        for (const GemmPassWork& p : e.gemm.passes)
          passes.push_back({{"count", p.count}, {"m", p.m}, {"k", p.k}, {"n", p.n}, {"core_folds", p.core_folds},
                            {"rows_per_fold", p.rows_per_fold}});
        o["mxu"] = {{"passes", passes}, {"core_folds", e.gemm.core_folds},
                    {"mxus", static_cast<int64_t>(e.cores) * cfg.mxu.count}, {"split", e.gemm.split}};
      }
      if (e.core_vector.elements > 0) o["mxu"]["epilogue_vpu_cycles"] = vpu_cycles(cfg.vpu, e.core_vector);
      if (cfg.mxu.result_pop > 0) {
        o["mxu"]["result_vectors"] = e.gemm.result_vectors;
        o["mxu"]["result_pop_cycles"] = e.gemm.result_vectors * cfg.mxu.result_pop;
      }
    }
    ops.push_back(o);
  }
  return ops;
}

// How one chip spent the step: the union of its compute intervals, of its communication intervals, and of both.
// A receive's time is waiting for its peer (the sender's time covers the transfer): it counts as idle.
struct TimeSplit {
  double compute = 0, communication = 0, busy = 0;
};

TimeSplit time_split(const ExecProgram& ep, const Chip& chip) {
  std::vector<std::pair<double, double>> comp, comm, all;
  for (size_t i = 0; i < ep.ops.size(); ++i) {
    const OpRecord& r = chip.log().ops[i];
    if (r.start < 0 || ep.ops[i].kind == OpKind::Recv) continue;
    (is_transfer_unit(ep.ops[i].unit) ? comm : comp).push_back({r.start, r.end});
    all.push_back({r.start, r.end});
  }
  return {union_length(comp), union_length(comm), union_length(all)};
}

// Per role (one program, e.g. a pipeline stage): its chips, where the time of its first chip went, its peak
// memory. Then the step's exposed communication (communication while no compute runs, averaged over the active
// chips) and, for pipelines, the measured bubble: the stages' idle time (neither computing nor sending) as a
// fraction of the forward and backward passes, averaged over the stages, beside GPipe's (K - 1) / (M + K - 1) for balanced stages and
// free communication.
void roles_and_pipeline(const Prepared& p, const Simulation& s, J& j) {
  const auto& chips = s.pod->chips();
  const double T = s.step_time;
  const int64_t roles = static_cast<int64_t>(p.plan.programs.size());
  std::vector<int64_t> first(static_cast<size_t>(roles), -1), count(static_cast<size_t>(roles), 0);
  for (size_t c = 0; c < p.plan.role_of_chip.size(); ++c) {
    const int32_t r = p.plan.role_of_chip[c];
    if (r < 0) continue;
    if (first[r] < 0) first[r] = static_cast<int64_t>(c);
    ++count[r];
  }
  J jr = J::array();
  double exposed_weighted = 0;
  int64_t active = 0, stages = 0;
  for (int64_t r = 0; r < roles; ++r) {
    if (first[r] < 0) continue;
    const ExecProgram& ep = p.ctx->programs[r];
    const TimeSplit t = time_split(ep, *chips[first[r]]);
    const double exposed = std::max(0.0, t.busy - t.compute), idle = std::max(0.0, T - t.busy);
    exposed_weighted += exposed * static_cast<double>(count[r]);
    active += count[r];
    (void)idle;
    ++stages;
    const J mem = role_memory(p, static_cast<size_t>(r));
    jr.push_back({{"role", p.plan.programs[r].role},
                  {"chips", count[r]},
                  {"compute_s", t.compute},
                  {"communication_s", t.communication},
                  {"exposed_communication_s", exposed},
                  {"idle_s", idle},
                  {"peak_memory_bytes", mem["peak_memory_bytes"]},
                  {"memory_at_peak", mem["memory_at_peak"]},
                  {"mxu_busy_fraction", T > 0 ? r6(chips[first[r]]->log().mxu_busy /
                                                   (T * static_cast<double>(p.exp.hardware.chip.tensorcores)))
                                              : 0.0},
                  {"fits", mem["fits"]}});
  }
  j["roles"] = jr;
  const double exposed_s = active ? exposed_weighted / static_cast<double>(active) : 0;
  j["communication"] = {{"exposed_s", exposed_s}, {"exposed_fraction", T > 0 ? r6(exposed_s / T) : 0.0}};
  const PlanPipeline& pp = p.plan.pipeline;
  if (pp.stages > 0) {
    // The bubble of the forward and backward passes: until the last of them ends on any stage (the optimizer
    // step that follows runs once per mini-batch and is not part of the schedule), the share of each stage's time
    // with neither compute nor a send running, averaged over the stages.
    double t_fb = 0;
    for (int64_t r = 0; r < roles; ++r) {
      if (first[r] < 0) continue;
      const ExecProgram& ep = p.ctx->programs[r];
      for (size_t i = 0; i < ep.ops.size(); ++i) {
        const OpRecord& rec = chips[first[r]]->log().ops[i];
        if (rec.start >= 0 && ep.ops[i].phase != Phase::Optimizer) t_fb = std::max(t_fb, rec.end);
      }
    }
    double idle_sum = 0;
    for (int64_t r = 0; r < roles; ++r) {
      if (first[r] < 0) continue;
      const ExecProgram& ep = p.ctx->programs[r];
      std::vector<std::pair<double, double>> busy;
      for (size_t i = 0; i < ep.ops.size(); ++i) {
        const OpRecord& rec = chips[first[r]]->log().ops[i];
        if (rec.start < 0 || ep.ops[i].kind == OpKind::Recv || ep.ops[i].phase == Phase::Optimizer) continue;
        if (rec.start < t_fb) busy.push_back({rec.start, std::min(rec.end, t_fb)});
      }
      idle_sum += t_fb - union_length(busy);
    }
    // The planned figures, then what the run measured; the ideal bubble last, as before.
    J pl = pipeline_plan(p);
    const J ideal = pl["ideal_bubble_fraction"];
    pl.erase("ideal_bubble_fraction");
    pl["bubble_fraction"] = t_fb > 0 && stages ? r6(idle_sum / static_cast<double>(stages) / t_fb) : 0.0;
    pl["forward_backward_s"] = t_fb;
    pl["ideal_bubble_fraction"] = ideal;
    pl["stage_units"] = pipeline_stage_units(p, s);
    j["pipeline"] = pl;
  }
}

}  // namespace

std::string summary_json(const Prepared& p, const Simulation& s) {
  const Experiment& e = p.exp;
  const ChipConfig& cfg = e.hardware.chip;
  const auto& chips = s.pod->chips();
  const double T = s.step_time;
  J j;
  summary_head(p, true, j);
  j["simulated_chips"] = static_cast<int64_t>(s.pod->simulated().size());
  const int64_t active = j["active_chips"];
  j["step_time_s"] = T;
  j["cycles"] = static_cast<int64_t>(std::llround(T * cfg.clock));
  j["clock_hz"] = cfg.clock;

  // Model FLOPs: the logical step's matmuls, forward and backward, each once (PaLM's MFU): the same whatever the
  // strategy, mesh or recomputation. Hardware FLOPs: what every chip's MXUs executed, replicated work, padding and
  // recomputation included (HFU).
  double flops = 0, hardware_flops = 0;
  for (const auto& chip : chips) {
    if (chip->role() < 0) continue;
    for (const ExecOp& op : p.ctx->programs[chip->role()].ops) {
      flops += op.flops;
      hardware_flops += op.mxu_flops;
    }
  }
  // The convention decides how causal attention counts (workloads/graph.h FlopsConvention; run.flops_convention).
  const FlopsConvention convention = flops_convention(e.params.s("run.flops_convention"));
  const double model_flops = step_model_flops(p, convention) * static_cast<double>(p.plan.logical_copies);
  const double peak = cfg.peak_flops();
  const double pod_peak = peak * static_cast<double>(chips.size());
  j["flops"] = flops;
  j["model_flops"] = model_flops;
  j["flops_convention"] = flops_convention_name(convention);
  const double copies = static_cast<double>(p.plan.logical_copies);
  j["model_flops_by_convention"] = {{"palm", step_model_flops(p, FlopsConvention::Palm) * copies},
                                    {"maxtext", step_model_flops(p, FlopsConvention::MaxText) * copies}};
  j["hardware_flops"] = hardware_flops;
  j["peak_flops_per_chip"] = peak;
  j["mfu"] = T > 0 ? r6(model_flops / (pod_peak * T)) : 0.0;
  j["hfu"] = T > 0 ? r6(hardware_flops / (pod_peak * T)) : 0.0;
  // Re-materialization (workloads/remat.h): the MXU FLOPs of the recomputed ops on every chip (part of
  // hardware_flops), and their busy time (the union of their intervals on the MXUs and VPUs) on the chip where it
  // is longest. Moving a recomputed value between chips is not counted as recomputation time.
  const auto [recompute_flops, recompute_s] = recompute_figures(p, s);
  j["recompute_flops"] = recompute_flops;
  j["recompute_s"] = recompute_s;
  // Throughput, for workloads with a batch of examples (not the op-level microbenchmarks: a batched matmul's batch
  // is not one of examples): examples, and tokens for sequence models.
  const auto batch = microbenchmark(p) ? std::nullopt : count_param(e.params, "workload.batch");
  if (const auto n = trainable_parameters(p)) j["parameters"] = *n;
  const auto inference = inference_report(p, s);
  if (T > 0 && batch && inference) {
    // An inference iteration's throughput: the tokens it adds (docs/outputs.md, "inference").
    const double tokens_per_s = (*inference)["tokens_per_s"].get<double>();
    j["tokens_per_s"] = tokens_per_s;
    j["tokens_per_s_per_chip"] = tokens_per_s / static_cast<double>(e.hardware.pod.chips());
  } else if (T > 0 && batch) {
    const double examples = *batch;
    j["samples_per_s"] = examples / T;
    if (const auto seq = count_param(e.params, "workload.seq_len")) {
      const double tokens_per_s = examples * *seq / T;
      j["tokens_per_s"] = tokens_per_s;
      j["tokens_per_s_per_chip"] = tokens_per_s / static_cast<double>(e.hardware.pod.chips());
    }
  }

  // Busy fractions, averaged over the chips that run a program.
  double mxu = 0, vpu = 0, hbm = 0, ici = 0, hbm_read = 0, hbm_write = 0, ici_bytes = 0, qwait = 0;
  J per_mxu = J::array(), per_vpu = J::array(), per_hbm_busy = J::array(), per_ici_busy = J::array();
  J per_hbm = J::array(), per_ici = J::array();
  uint64_t stalls = 0;
  double stall_s = 0;
  double host_to = 0, host_from = 0, host_busy = 0;  // the host link (hw/chip/host_link.h)
  J per_host = J::array();
  for (const auto& chip : chips) {
    const ChipLog& l = chip->log();
    host_to += l.host_bytes[0];
    host_from += l.host_bytes[1];
    per_host.push_back(l.host_bytes[0] + l.host_bytes[1]);
    double cm = T > 0 ? l.mxu_busy / (T * static_cast<double>(cfg.tensorcores)) : 0;
    per_mxu.push_back(r6(cm));
    per_hbm.push_back(l.hbm_read + l.hbm_write);
    double ib = 0, ibusy = 0;
    for (double b : l.link_bytes) ib += b;
    for (double b : l.link_busy) ibusy += b;
    per_ici.push_back(ib);
    double cv = T > 0 ? l.vpu_busy / (T * static_cast<double>(cfg.tensorcores)) : 0;
    double ch = T > 0 ? l.hbm_busy / (T * static_cast<double>(cfg.hbm.channels)) : 0;
    size_t links = 0;
    for (int d = 0; d < p.ctx->torus.directions(); ++d) links += p.ctx->torus.neighbor(chip->id(), d) >= 0;
    double ci = (T > 0 && links) ? ibusy / (T * static_cast<double>(links)) : 0;
    per_vpu.push_back(r6(cv));
    per_hbm_busy.push_back(r6(ch));
    per_ici_busy.push_back(r6(ci));
    hbm_read += l.hbm_read;
    hbm_write += l.hbm_write;
    ici_bytes += ib;
    qwait = std::max(qwait, l.hbm_queue_wait_max);
    stalls += chip->stalls().count();
    stall_s += chip->stalls().total();
    if (chip->role() < 0) continue;
    mxu += cm;
    vpu += cv;
    hbm += ch;
    ici += ci;
    host_busy += T > 0 ? std::max(l.host_busy[0], l.host_busy[1]) / T : 0;
  }
  double n_active = std::max<int64_t>(1, active);
  j["busy_fraction"] = {{"mxu", r6(mxu / n_active)}, {"vpu", r6(vpu / n_active)}, {"hbm", r6(hbm / n_active)},
                        {"ici", r6(ici / n_active)}};
  j["hbm"] = {{"bytes_read", hbm_read},
              {"bytes_written", hbm_write},
              {"bytes", hbm_read + hbm_write},
              {"achieved_bandwidth_Bps", T > 0 ? r6((hbm_read + hbm_write) / (T * n_active)) : 0.0},
              {"peak_bandwidth_Bps", cfg.hbm.bandwidth},
              {"bandwidth_utilization",
               T > 0 && cfg.hbm.bandwidth > 0 ? r6((hbm_read + hbm_write) / (T * n_active) / cfg.hbm.bandwidth) : 0.0},
              {"max_queue_wait_s", qwait}};
  j["ici"] = {{"bytes", ici_bytes}, {"link_bandwidth_Bps", e.hardware.ici.link_bandwidth}};
  // Only when something crossed it: the chip's transfers to and from its host (host offload, the DCN's hop).
  if (host_to + host_from > 0)
    j["host_link"] = {{"bytes_to_host", host_to},
                      {"bytes_from_host", host_from},
                      {"busy_fraction", r6(host_busy / n_active)},
                      {"bandwidth_Bps", cfg.host_link.bandwidth}};

  // Where the result chip's time went.
  const Chip& rc = *chips[p.plan.result_chip];
  if (rc.role() >= 0) {
    const ExecProgram& ep = p.ctx->programs[rc.role()];
    const TimeSplit ts = time_split(ep, rc);
    double compute_s = ts.compute, comm_s = ts.communication, busy_s = ts.busy;
    j["time_breakdown"] = {{"compute_s", compute_s},
                           {"communication_s", comm_s},
                           {"exposed_communication_s", std::max(0.0, busy_s - compute_s)},
                           {"idle_s", std::max(0.0, T - busy_s)},
                           {"idle_fraction", T > 0 ? r6(std::max(0.0, T - busy_s) / T) : 0.0}};
    j["peak_memory_bytes"] = ep.memory.peak_bytes;
    j["memory"] = memory_section(p);  // the result chip's (a pipeline's other stages may peak higher)
  } else {
    j["peak_memory_bytes"] = 0.0;
  }

  roles_and_pipeline(p, s, j);

  // Communication ops of the result chip: time and algorithm bandwidth (bytes per chip / time).
  if (rc.role() >= 0) {
    const ExecProgram& ep = p.ctx->programs[rc.role()];
    const ModelGraph& g = p.plan.programs[rc.role()].graph;
    J comms = J::array();
    int64_t combined = 0, combined_tensors = 0;
    for (size_t i = 0; i < ep.ops.size(); ++i) {
      if (ep.ops[i].unit != Unit::Ici) continue;
      const Op& op = g.op(ep.ops[i].members.front());
      if (op.kind == OpKind::Traffic) continue;
      const OpRecord& r = rc.log().ops[i];
      // A receive has no input: its bytes are those it brings in. A combined collective (partition/combine.h)
      // moves all its tensors as one buffer.
      const TensorInfo& moved = g.tensor(op.inputs.empty() ? op.outputs.front() : op.inputs.front());
      double bytes = 0;
      std::vector<std::string> carried;
      for (TensorId t : op.inputs) {
        bytes += g.tensor(t).bytes() * static_cast<double>(std::max<int64_t>(1, op.attrs.chip_copies));
        carried.push_back(g.tensor(t).name);
      }
      if (op.inputs.empty()) bytes = moved.bytes();
      double t = r.end - r.start;
      // The chips it spans: its group on the mesh, or a point-to-point transfer's peer.
      const bool p2p = op.kind == OpKind::Send || op.kind == OpKind::Recv;
      const CollectiveGroup grp = p.ctx->group(rc.id(), op.attrs.axes, op.attrs.group_block);
      const std::string group = p2p ? (op.kind == OpKind::Send ? "to chip " : "from chip ") +
                                          std::to_string(p.ctx->p2p_peer(rc.id(), op))
                                    : grp.describe();
      J row = {{"name", op.name},
               {"kind", op_kind_name(op.kind)},
               {"algorithm", comm_algorithm(op)},
               {"axes", op.attrs.axes},
               {"tensor", carried.size() > 1 ? std::to_string(carried.size()) + " tensors" : moved.name},
               {"group", group},
               {"group_size", p2p ? 2 : grp.shape.size()},
               {"bytes_per_chip", bytes},
               {"time_s", t},
               {"algorithm_bandwidth_Bps", t > 0 ? r6(bytes / t) : 0.0}};
      if (over_dcn(p, rc.id(), op)) row["dcn"] = true;  // between slices (hw/dcn/dcn.h)
      if (carried.size() > 1) {
        row["tensors"] = carried;
        ++combined;
        combined_tensors += static_cast<int64_t>(carried.size());
      }
      comms.push_back(std::move(row));
    }
    if (!comms.empty()) {
      j["collectives"] = comms;
      // Gradient bucketing (run.combine_threshold): the combined collectives of the result chip's program.
      j["combined_collectives"] = {{"threshold_bytes", e.run.combine_threshold},
                                   {"collectives", combined},
                                   {"tensors", combined_tensors}};
    }
  }

  // Synthetic traffic: offered load, accepted throughput, latency.
  uint64_t msgs = 0;
  double tbytes = 0, lat = 0, lat_max = 0;
  for (const auto& chip : chips) {
    msgs += chip->log().traffic_messages;
    tbytes += chip->log().traffic_bytes_in_window;
    lat += chip->log().traffic_latency_sum;
    lat_max = std::max(lat_max, chip->log().traffic_latency_max);
  }
  // The memory microbenchmark: bandwidth of the stream, idle latency of the two probes (workloads/microbench/memory.cpp).
  if (e.workload == "memory" && rc.role() >= 0) {
    const ExecProgram& ep = p.ctx->programs[rc.role()];
    double stream_t = 0, stream_bytes = 0, hit = 0, miss = 0;
    for (size_t i = 0; i < ep.ops.size(); ++i) {
      const OpRecord& r = rc.log().ops[i];
      double t = r.end - r.start;
      if (ep.ops[i].name == "stream") {
        stream_t = t;
        stream_bytes = r.hbm_read + r.hbm_write;
      } else if (ep.ops[i].name == "probe.row_hit") {
        hit = t;
      } else if (ep.ops[i].name == "probe.row_miss") {
        miss = t;
      }
    }
    double bw = stream_t > 0 ? stream_bytes / stream_t : 0;
    j["memory_benchmark"] = {{"pattern", e.params.s("workload.pattern")},
                             {"bytes", e.params.f("workload.bytes")},
                             {"request_bytes", e.params.f("workload.request")},
                             {"hbm_bytes", stream_bytes},
                             {"time_s", stream_t},
                             {"achieved_bandwidth_Bps", r6(bw)},
                             {"efficiency", r6(bw / cfg.hbm.bandwidth)},
                             {"latency_row_hit_s", hit},
                             {"latency_row_miss_s", miss}};
  }
  if (e.workload == "traffic") {
    double window = e.params.f("workload.duration");
    double link_bw = e.hardware.ici.link_bandwidth;
    j["traffic"] = {{"pattern", e.params.s("workload.pattern")},
                    {"offered_load", e.params.f("workload.rate")},
                    {"messages", msgs},
                    // Bytes that arrived within the injection window, per chip, as a fraction of one link.
                    {"accepted_throughput", r6(tbytes / (static_cast<double>(chips.size()) * window * link_bw))},
                    {"average_latency_s", msgs ? lat / static_cast<double>(msgs) : 0.0},
                    {"max_latency_s", lat_max}};
  }

  // Fusions of the result chip's program: how many, of which kind, how many graph ops they absorb.
  if (rc.role() >= 0) {
    const ExecProgram& ep = p.ctx->programs[rc.role()];
    int64_t fusions = 0, fused_ops = 0, recomputed_ops = 0;
    std::map<std::string, int64_t> by_kind = {{"loop", 0}, {"output", 0}, {"reduction", 0}};
    for (const ExecOp& op : ep.ops) {
      if (op.members.size() < 2) continue;
      ++fusions;
      for (size_t k = 0; k < op.members.size(); ++k) (op.recomputed[k] ? recomputed_ops : fused_ops) += 1;
      ++by_kind[fusion_kind_name(op.fusion)];
    }
    j["fusion"] = {{"mode", e.run.fusion}, {"fusions", fusions}, {"fused_ops", fused_ops},
                   {"recomputed_ops", recomputed_ops}, {"exec_ops", static_cast<int64_t>(ep.ops.size())},
                   {"by_kind", by_kind}};
  }
  j["notes"] = p.plan.notes;  // what the plan did that the user should know (mesh, stages, padding)
  j["ops"] = op_table(p, s, rc);
  j["per_chip"] = {{"mxu_busy_fraction", per_mxu}, {"vpu_busy_fraction", per_vpu},
                   {"hbm_busy_fraction", per_hbm_busy}, {"ici_busy_fraction", per_ici_busy},
                   {"hbm_bytes", per_hbm},         {"ici_bytes", per_ici}};
  if (host_to + host_from > 0) j["per_chip"]["host_link_bytes"] = per_host;

  j["timeline"] = timeline_json(p, s, rc);  // the result chip over the step, in 100 bins (report plots)
  j["stalls"] = {{"injected", stalls}, {"seconds", stall_s}};
  if (inference) j["inference"] = *inference;
  if (auto moe = moe_report(p, s)) j["moe"] = *moe;
  if (auto faults = fault_report(p, s)) j["faults"] = *faults;
  if (auto dcn = dcn_report(p, s)) j["dcn"] = *dcn;
  if (const HloOpStats* st = hlo_op_stats(p, s)) j["hlo_categories"] = hlo_categories_json(*st);
  return j.dump(2) + "\n";
}

}  // namespace podsim

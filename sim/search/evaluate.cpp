#include "sim/search/evaluate.h"

#include <algorithm>
#include <cmath>

#include "hw/compiler/lower.h"
#include "base/error.h"
#include "base/text.h"
#include "sim/config/loader.h"
#include "strategies/planner.h"
#include "workloads/i_workload.h"
#include "workloads/op_def.h"

namespace podsim {
namespace {

// The first line of an error as the CLI prints it, without the location (the candidate's overrides are the cause).
std::string problem_text(const std::exception& ex) {
  if (const auto* e = dynamic_cast<const Error*>(&ex)) return std::string(e->id()) + ": " + e->message();
  return ex.what();
}

std::string layout_key(const Mesh& m) {
  std::string k;
  for (const MeshAxis& ax : m.axes()) {
    k += ax.name + "=";
    for (const MeshFactor& f : ax.factors) k += strprintf("%d:%lld/%lld,", f.dim, static_cast<long long>(f.size),
                                                          static_cast<long long>(f.stride));
    k += ";";
  }
  return k;
}

// Seconds one core's share of a vector op takes on the VPU.
double vector_seconds(const VectorWork& w, const ChipConfig& chip) {
  const VpuConfig& v = chip.vpu;
  const double per_element =
      w.simple + w.transcendental * v.transcendental_cost + w.divide * v.divide_cost + w.reduce * v.reduce_cost;
  return w.elements * per_element / (v.elements_per_cycle() * chip.clock);
}

// A chip's share of the data-center network (hw/dcn/dcn.h): its host's NICs shared by the host's chips, or its host
// link if that is slower.
double dcn_chip_bandwidth(const HardwareConfig& hw) {
  int64_t per_host = 1;
  for (int64_t b : hw.host.block) per_host *= b;
  return std::min(hw.chip.host_link.bandwidth, hw.dcn.bandwidth / static_cast<double>(std::max<int64_t>(1, per_host)));
}

// Seconds a communication op's transfers take on the links, by a bidirectional ring's byte count. Over slices, the
// hierarchical collectives' DCN part (collectives/torus.cpp): the shard left after the ICI part, at the chip's share
// of its host's NICs.
double comm_seconds(const Op& op, const ModelGraph& g, const Mesh& mesh, const HardwareConfig& hw) {
  const double link = hw.ici.link_bandwidth, hop = hw.ici.hop_latency;
  const double in = op.inputs.empty() ? 0 : g.tensor(op.inputs[0]).bytes();
  const double out = op.outputs.empty() ? 0 : g.tensor(op.outputs[0]).bytes();
  if (op.kind == OpKind::Send || op.kind == OpKind::Recv) {
    if (op.kind == OpKind::Recv) return 0;  // the sender's op covers the transfer
    bool across = false;
    for (const auto& a : op.attrs.axes) {
      const int i = mesh.axis_index(a);
      across = across || (i >= 0 && mesh.spans_slices(i));
    }
    return across ? in / dcn_chip_bandwidth(hw) + hw.dcn.latency + 2 * hw.chip.host_link.latency : in / link + hop;
  }
  // The group: a ring per torus dimension it spans, in turn; each step of a ring crosses `stride` links. The slices
  // apart: `slices` ranks over the DCN.
  int64_t n = 1, slices = 1;
  size_t dims = 0;
  double steps = 0;
  for (const auto& a : op.attrs.axes) {
    const int i = mesh.axis_index(a);
    if (i < 0) continue;
    for (const MeshFactor& f : mesh.axis(i).factors) {
      if (f.dim == mesh.slice_dim()) {
        slices *= f.size;
        continue;
      }
      n *= f.size;
      ++dims;
      steps += static_cast<double>((f.size - 1) * f.stride);
    }
  }
  double dcn = 0;
  if (slices > 1) {
    const double s = static_cast<double>(slices), share = (s - 1) / s, bw = dcn_chip_bandwidth(hw);
    const double shard = in / static_cast<double>(n);
    switch (op.kind) {
      case OpKind::AllReduce: dcn = 2 * share * shard / bw; break;
      case OpKind::ReduceScatter: dcn = share * shard / bw; break;
      case OpKind::AllGather: dcn = (s - 1) * in / bw; break;
      default: dcn = share * in / bw; break;
    }
    dcn += (s - 1) * (hw.dcn.latency + 2 * hw.chip.host_link.latency);
  }
  if (n <= 1) return dcn;
  const double bw = 2.0 * link * static_cast<double>(std::max<size_t>(1, dims));
  const double share = static_cast<double>(n - 1) / static_cast<double>(n);
  // An all-gather across slices first gathers there: the ICI then moves `slices` times its input.
  const double gathered = op.kind == OpKind::AllGather ? out : 0;
  switch (op.kind) {
    case OpKind::AllReduce: return dcn + 2 * share * in / bw + 2 * steps * hop;
    case OpKind::ReduceScatter: return dcn + share * in / bw + steps * hop;
    case OpKind::AllGather: return dcn + share * gathered / bw + steps * hop;
    case OpKind::AllToAll: return dcn + share * in / bw + steps * hop;
    case OpKind::CollectivePermute: return dcn + in / link + hop;
    case OpKind::Broadcast: return dcn + in / bw + steps * hop;
    default: return dcn;
  }
}

}  // namespace

Evaluation evaluate_candidate(const std::string& base_yaml, const std::string& label,
                              const std::vector<std::string>& overrides) {
  Evaluation ev;
  try {
    LoadOptions lo;
    lo.overrides = overrides;
    Experiment e = load_experiment_text(base_yaml, label, lo);
    std::unique_ptr<IWorkload> w = WorkloadRegistry::instance().make(e.workload);
    ModelGraph graph = w->build(e.params);
    Plan plan = make_plan(graph, e);
    ev.layout = layout_key(plan.mesh);
    const ChipConfig& chip = e.hardware.chip;
    const double peak = chip.peak_flops(), hbm = chip.hbm.bandwidth;
    const bool pipeline = plan.pipeline.stages > 1 && plan.pipeline.micro_batches > 0;
    for (size_t r = 0; r < plan.programs.size(); ++r) {
      const Program& prog = plan.programs[r];
      ExecProgram ep = lower(prog.graph, prog.order, chip, lower_options(e.run));
      if (r == 0 || ep.memory.peak_bytes > ev.peak_bytes) {
        ev.peak_bytes = ep.memory.peak_bytes;
        ev.peak_role = prog.role;
      }
      // Collectives over the data and fsdp axes (gradient reductions, weight gathers) run beside the compute of other
      // layers; those over the model, expert and pipe axes sit between the ops that need them.
      double compute = 0, comm = 0, hidden = 0;
      for (const ExecOp& op : ep.ops) {
        if (op.unit == Unit::Ici) {
          for (OpId m : op.members) {
            const Op& o = prog.graph.op(m);
            const double t = comm_seconds(o, prog.graph, plan.mesh, e.hardware);
            bool beside = !o.attrs.axes.empty() &&
                          std::all_of(o.attrs.axes.begin(), o.attrs.axes.end(),
                                      [](const std::string& a) { return a == "data" || a == "fsdp"; });
            // Without overlap (run.dcn_overlap), the gradient reductions across slices follow the backward pass.
            if (!e.run.dcn_overlap && (o.kind == OpKind::AllReduce || o.kind == OpKind::ReduceScatter))
              for (const auto& a : o.attrs.axes) {
                const int i = plan.mesh.axis_index(a);
                if (i >= 0 && plan.mesh.spans_slices(i)) beside = false;
              }
            (beside ? hidden : comm) += t;
          }
          continue;
        }
        if (op.unit == Unit::Host) {  // host offload: beside the compute of other layers
          hidden += op.logical_bytes / 2 / chip.host_link.bandwidth + chip.host_link.latency;
          continue;
        }
        const double mxu = op.mxu_flops / peak;
        const double vpu = vector_seconds(op.core_vector, chip);
        const double mem = (op.core_hbm_read + op.core_hbm_write) * op.cores / hbm;
        compute += std::max({mxu, vpu, mem}) + chip.hbm.latency;  // an op waits at least for its first data
      }
      // What the data and fsdp collectives take beyond the compute they overlap with is exposed too.
      comm += std::max(0.0, hidden - compute);
      double bubble = 0;
      if (pipeline) {
        const double M = static_cast<double>(plan.pipeline.micro_batches);
        const double K = static_cast<double>(plan.pipeline.stages);
        bubble = (compute + comm) * (K - 1) / M;
      }
      const double total = compute + comm + bubble;
      if (total > ev.estimate_s) {
        ev.estimate_s = total;
        ev.compute_s = compute;
        ev.comm_s = comm;
        ev.bubble_s = bubble;
      }
    }
    ev.ok = true;
  } catch (const std::exception& ex) {
    ev.ok = false;
    ev.problem = problem_text(ex);
  }
  return ev;
}

}  // namespace podsim

#include "sim/engine/dcn_report.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "hw/chip/dma.h"
#include "hw/pod/pod.h"
#include "sim/engine/busy_time.h"
#include "sim/engine/engine.h"

namespace podsim {
namespace {

using J = nlohmann::ordered_json;

double r6(double x) { return std::isfinite(x) ? std::round(x * 1e6) / 1e6 : 0; }

}  // namespace

bool over_dcn(const Prepared& p, int64_t chip, const Op& op) {
  const Torus& t = p.ctx->torus;
  if (t.slices() <= 1 || !is_communication(op.kind) || op.kind == OpKind::Traffic) return false;
  if (op.kind == OpKind::Send || op.kind == OpKind::Recv) return t.slice_of(p.ctx->p2p_peer(chip, op)) != t.slice_of(chip);
  return p.ctx->group(chip, op.attrs.axes, op.attrs.group_block).shape.spans_dcn();
}

std::optional<J> dcn_report(const Prepared& p, const Simulation& s) {
  const Torus& t = p.ctx->torus;
  const DcnNetwork* net = s.pod->dcn();
  if (t.slices() <= 1 || !net) return std::nullopt;
  const HardwareConfig& hw = p.exp.hardware;
  const double T = s.step_time;
  const std::vector<Chip*>& chips = s.pod->chips();
  const HostMap& hosts = net->hosts();
  const PodSymmetry& sym = s.pod->symmetry();

  // Per chip (each position reports the chip simulated for it) and per host (likewise its representative host).
  J per_chip = J::array();
  double bytes = 0, chip_max = 0;
  for (const Chip* c : chips) {
    per_chip.push_back(c->log().dcn_bytes_out);
    bytes += c->log().dcn_bytes_out;
    chip_max = std::max(chip_max, c->log().dcn_bytes_out);
  }
  std::vector<int64_t> rep_host(static_cast<size_t>(hosts.hosts()), -1);
  for (int64_t c = 0; c < t.chips(); ++c) rep_host[hosts.host_of(c)] = hosts.host_of(sym.representative(c, t));
  const auto& stats = net->host_stats();
  J host_out = J::array(), host_in = J::array(), host_busy = J::array();
  double host_max = 0, busy_sum = 0;
  for (int64_t h = 0; h < hosts.hosts(); ++h) {
    const DcnNetwork::HostStats& st = stats[static_cast<size_t>(rep_host[h])];
    host_out.push_back(st.bytes_out);
    host_in.push_back(st.bytes_in);
    const double busy = T > 0 ? std::max(st.busy_out, st.busy_in) / T : 0;
    host_busy.push_back(r6(busy));
    host_max = std::max(host_max, st.bytes_out);
    busy_sum += busy;
  }

  // The result chip: its DCN communication, and the part of it during which the chip ran nothing else (neither
  // compute nor communication inside its slice): what the step would save if the DCN were free.
  double dcn_s = 0, exposed_s = 0;
  const Chip& rc = *chips[p.plan.result_chip];
  if (rc.role() >= 0) {
    const ExecProgram& ep = p.ctx->programs[rc.role()];
    const ModelGraph& g = p.plan.programs[rc.role()].graph;
    std::vector<std::pair<double, double>> dcn, other;
    for (size_t i = 0; i < ep.ops.size(); ++i) {
      const OpRecord& r = rc.log().ops[i];
      if (r.start < 0 || ep.ops[i].kind == OpKind::Recv) continue;  // a receive's time is waiting for its peer
      const bool across = is_transfer_unit(ep.ops[i].unit) && over_dcn(p, rc.id(), g.op(ep.ops[i].members.front()));
      (across ? dcn : other).push_back({r.start, r.end});
    }
    dcn_s = union_length(dcn);
    std::vector<std::pair<double, double>> both = other;
    both.insert(both.end(), dcn.begin(), dcn.end());
    exposed_s = union_length(both) - union_length(other);
  }

  J out;
  out["slices"] = t.slices();
  out["hosts"] = hosts.hosts();
  out["chips_per_host"] = hosts.chips_per_host();
  out["bandwidth_per_host_Bps"] = hw.dcn.bandwidth;
  out["latency_s"] = hw.dcn.latency;
  out["oversubscription"] = hw.dcn.oversubscription;
  out["overlap"] = p.exp.run.dcn_overlap;
  out["bytes"] = bytes;
  out["max_bytes_per_chip"] = chip_max;
  out["max_bytes_per_host"] = host_max;
  out["nic_busy_fraction"] = r6(hosts.hosts() > 0 ? busy_sum / static_cast<double>(hosts.hosts()) : 0);
  out["communication_s"] = dcn_s;
  out["exposed_s"] = std::max(0.0, exposed_s);
  out["per_chip_bytes"] = per_chip;
  out["per_host"] = {{"bytes_out", host_out}, {"bytes_in", host_in}, {"nic_busy_fraction", host_busy}};
  return out;
}

}  // namespace podsim

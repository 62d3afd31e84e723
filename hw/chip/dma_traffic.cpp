// Synthetic traffic (workload.model: traffic): each chip injects packets as a Poisson process at the offered
// rate, to destinations drawn from the pattern; packets bypass HBM (they measure the network alone).
#include <cmath>

#include "hw/chip/dma.h"
#include "hw/chip/sim_time.h"

namespace podsim {

void Dma::start_traffic(Running& r, const Op& op) {
  r.rng.seed(m_ctx.exp->run.seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(m_chip) + 1);
  r.traffic_end = now_seconds() + op.attrs.duration;
  traffic_tick(r.op);
}

void Dma::traffic_tick(int32_t id) {
  Running& r = m_running.at(id);
  const Op& op = m_graph->op(m_prog->ops[id].members.front());
  const OpAttrs& a = op.attrs;
  const Torus& torus = m_ctx.torus;
  auto unit = [&r] { return static_cast<double>(r.rng() >> 11) * (1.0 / 9007199254740992.0); };
  double now = now_seconds();
  if (now >= r.traffic_end) {
    finish_op(r);
    return;
  }
  // Destination by pattern.
  int64_t dst = -1;
  if (a.pattern == "uniform") {
    if (torus.chips() > 1) {
      dst = static_cast<int64_t>(unit() * static_cast<double>(torus.chips() - 1));
      if (dst >= m_chip) ++dst;
    }
  } else if (a.pattern == "transpose") {
    std::vector<int64_t> c = torus.coords(m_chip);
    std::swap(c[0], c[1]);
    dst = torus.chip(c);
    if (dst == m_chip) dst = -1;  // chips on the diagonal send nothing
  } else {  // neighbor
    std::vector<int64_t> options;
    for (int d = 0; d < torus.directions(); ++d)
      if (torus.neighbor(m_chip, d) >= 0) options.push_back(torus.neighbor(m_chip, d));
    if (!options.empty()) dst = options[static_cast<size_t>(unit() * static_cast<double>(options.size()))];
  }
  if (dst >= 0) {
    Message m;
    m.src = m_chip;
    m.dst = dst;
    m.bytes = a.message_bytes;
    m.kind = MsgKind::Traffic;
    m.created = now;
    m.op = id;
    m_links.send(std::move(m), FlowId{id, 0}, 0, false);
  }
  double rate = a.rate * m_ctx.exp->hardware.ici.link_bandwidth / a.message_bytes;  // packets per second
  double gap = -std::log(1.0 - unit()) / rate;
  m_queue.schedule(at_seconds(now + gap), [this, id] { traffic_tick(id); });
}

}  // namespace podsim

#include "hw/pod/pod.h"

#include <string>

#include "plan/shard_data.h"
#include "workloads/reference.h"

namespace podsim {

Pod::Pod(PodContext& ctx) : m_ctx(ctx) {
  const Torus& t = ctx.torus;
  const int64_t n = t.chips();
  m_chips.reserve(static_cast<size_t>(n));
  for (int64_t c = 0; c < n; ++c)
    m_chips.push_back(std::make_unique<Chip>(("chip" + std::to_string(c)).c_str(), c, ctx));
  // One link per chip and direction that has a neighbour. Reserve first: routers keep pointers to links.
  m_links.reserve(static_cast<size_t>(n * t.directions()));
  const IciConfig& ici = ctx.exp->hardware.ici;
  for (int64_t c = 0; c < n; ++c) {
    for (int d = 0; d < t.directions(); ++d) {
      int64_t to = t.neighbor(c, d);
      if (to < 0) continue;
      IciLink l;
      l.from = c;
      l.to = to;
      l.dir = d;
      l.bandwidth = ici.link_bandwidth;
      l.latency = ici.hop_latency;
      l.sink = &m_chips[to]->router();
      m_links.push_back(l);
      m_chips[c]->router().connect(d, &m_links.back());
    }
  }
  // Numeric mode: the logical step's inputs are drawn once from the run's seed and every chip takes its shard.
  if (ctx.numeric && ctx.logical) {
    TensorStore values;
    init_step_inputs(*ctx.logical, values, ctx.exp->run.seed);
    for (int64_t c = 0; c < n; ++c)
      bind_inputs(*ctx.plan, *ctx.logical, values, c, m_chips[c]->store(), ctx.exp->run.seed);
  }
}

}  // namespace podsim

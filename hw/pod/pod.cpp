#include "hw/pod/pod.h"

#include "hw/chip/action_queue.h"

#include <string>

#include "plan/shard_data.h"
#include "workloads/reference.h"

namespace podsim {

Pod::Pod(PodContext& ctx) : m_ctx(ctx), m_symmetry(find_symmetry(ctx)) {
  Calendar::get();  // its SystemC method at the top of the hierarchy, not inside the first chip that asks for it
  const Torus& t = ctx.torus;
  const int64_t n = t.chips();
  std::vector<int64_t> index(static_cast<size_t>(n), -1);  // torus position -> m_chips, for simulated chips
  for (int64_t c = 0; c < n; ++c) {
    if (m_symmetry.representative(c, t) != c) continue;
    index[c] = static_cast<int64_t>(m_chips.size());
    m_chips.push_back(std::make_unique<Chip>(("chip" + std::to_string(c)).c_str(), c, ctx));
  }
  m_view.resize(static_cast<size_t>(n));
  for (int64_t c = 0; c < n; ++c) m_view[c] = m_chips[index[m_symmetry.representative(c, t)]].get();
  // One link per simulated chip and direction that has a neighbour. Reserve first: routers keep pointers to links.
  m_links.reserve(m_chips.size() * static_cast<size_t>(t.directions()));
  const IciConfig& ici = ctx.exp->hardware.ici;
  for (const auto& chip : m_chips) {
    const int64_t c = chip->id();
    for (int d = 0; d < t.directions(); ++d) {
      int64_t to = t.neighbor(c, d);
      if (to < 0) continue;
      IciLink l;
      l.from = c;
      l.to = to;
      l.dir = d;
      l.bandwidth = ici.link_bandwidth;
      l.latency = ici.hop_latency;
      if (const LinkFault* f = ctx.exp->hardware.faults.link(c, d)) {  // hardware.faults
        l.bandwidth *= f->bandwidth;
        l.down = f->down;
      }
      const int64_t rep = m_symmetry.representative(to, t);
      if (rep != to) {  // leaves the simulated box: re-enter at the chip that stands for `to`
        l.shifted = true;
        const std::vector<int64_t> a = t.coords(rep), b = t.coords(to);
        for (int dim = 0; dim < t.ndims(); ++dim) l.shift[dim] = a[dim] - b[dim];
      }
      l.sink = &m_view[rep]->router();
      m_links.push_back(l);
      chip->router().connect(d, &m_links.back());
    }
  }
  if (t.slices() > 1) {  // the data-center network between the slices' hosts
    m_dcn = std::make_unique<DcnNetwork>(ctx, [this](int64_t c) { return m_symmetry.representative(c, m_ctx.torus); });
    for (const auto& chip : m_chips) chip->attach_dcn(*m_dcn);
  }
  // Numeric mode: the logical step's inputs are drawn once from the run's seed and every chip takes its shard.
  if (ctx.numeric && ctx.logical) {
    TensorStore values;
    init_step_inputs(*ctx.logical, values, ctx.exp->run.seed);
    for (int64_t c = 0; c < n; ++c)
      bind_inputs(*ctx.plan, *ctx.logical, values, c, m_view[c]->store(), ctx.exp->run.seed);
  }
}

}  // namespace podsim

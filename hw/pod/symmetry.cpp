#include "hw/pod/symmetry.h"

#include <set>
#include <tuple>

#include "collectives/i_algorithm.h"
#include "hw/chip/dma.h"
#include "hw/pod/pod_context.h"
#include "sim/common/text.h"

namespace podsim {

bool PodSymmetry::reduced(const Torus& t) const { return simulated < t.chips(); }

int64_t PodSymmetry::representative(int64_t chip, const Torus& t) const {
  int64_t out = 0, scale = 1;
  for (int d = 0; d < t.ndims(); ++d) {
    const int64_t n = t.dims()[d];
    out += (chip % n) % period[d] * scale;
    chip /= n;
    scale *= n;
  }
  return out;
}

std::string PodSymmetry::describe(const Torus& t) const {
  if (!reduced(t)) return "every chip (" + reason + ")";
  std::vector<std::string> p;
  for (int64_t v : period) p.push_back(std::to_string(v));
  return std::to_string(simulated) + " of " + std::to_string(t.chips()) + " chips (one box of " + join(p, " x ") +
         " repeats over the torus)";
}

namespace {

// A collective as the translation test needs it: its group's factors and the rank symmetry of its schedule.
struct GroupUse {
  std::vector<MeshFactor> factors;
  RankSymmetry symmetry = RankSymmetry::None;
  bool operator<(const GroupUse& o) const {
    auto key = [](const GroupUse& g) {
      std::vector<std::tuple<int, int64_t, int64_t>> f;
      for (const MeshFactor& m : g.factors) f.emplace_back(m.dim, m.size, m.stride);
      return std::make_pair(f, static_cast<int>(g.symmetry));
    };
    return key(*this) < key(o);
  }
};

// Whether moving by `p` along dimension `d` maps the group of every chip onto the group of the moved chip, with a
// rank shift the schedule is invariant under.
bool group_invariant(const GroupUse& g, const Torus& t, int d, int64_t p) {
  const int64_t n = t.dims()[d];
  for (size_t i = 0; i < g.factors.size(); ++i) {
    const MeshFactor& f = g.factors[i];
    if (f.dim != d || p % (f.stride * f.size) == 0) continue;  // the rank along this factor is unchanged
    // Otherwise the move must shift this factor's coordinate by the same amount for every chip: the factor is a
    // whole ring of the dimension and the move a multiple of its stride.
    if (p % f.stride != 0 || f.stride * f.size != n || !t.wrap()[d]) return false;
    switch (g.symmetry) {
      case RankSymmetry::Torus: break;  // any shift per group dimension
      case RankSymmetry::Cyclic:        // a shift of the linear rank: only along the slowest group dimension
        if (i + 1 != g.factors.size()) return false;
        break;
      case RankSymmetry::None: return false;
    }
  }
  return true;
}

}  // namespace

PodSymmetry find_symmetry(const PodContext& ctx) {
  const Torus& t = ctx.torus;
  PodSymmetry s;
  s.period = t.dims();
  s.simulated = t.chips();
  const Experiment& e = *ctx.exp;
  if (e.run.symmetry == "off") s.reason = "run.symmetry is off";
  else if (ctx.numeric) s.reason = "numeric mode: every chip holds its own values";
  else if (e.run.stall.probability > 0) s.reason = "stalls are drawn per chip";
  if (!s.reason.empty() || t.chips() == 1) return s;

  const Plan& plan = *ctx.plan;
  std::set<GroupUse> groups;
  std::vector<std::pair<int32_t, const Op*>> p2p;  // distinct Send/Recv per role
  std::set<std::tuple<int32_t, std::vector<std::string>, int64_t, int64_t>> p2p_seen;
  for (int32_t role = 0; role < static_cast<int32_t>(plan.programs.size()); ++role) {
    const Program& prog = plan.programs[role];
    for (const Op& op : prog.graph.ops()) {
      if (!is_communication(op.kind)) continue;
      if (op.kind == OpKind::Traffic) {
        s.reason = "synthetic traffic is drawn per chip";
        return s;
      }
      if (op.kind == OpKind::Send || op.kind == OpKind::Recv) {
        if (p2p_seen.insert({role, op.attrs.axes, op.attrs.shift, op.attrs.peer}).second) p2p.push_back({role, &op});
        continue;
      }
      const MeshGroup mg = plan.mesh.group(0, op.attrs.axes, op.attrs.group_block);
      GroupUse g;
      g.factors = mg.factors;
      std::unique_ptr<ICollectiveAlgorithm> algo = CollectiveRegistry::instance().make(comm_algorithm(op));
      CollectiveRequest req;
      req.kind = collective_of(op.kind);
      req.group = mg.shape;
      g.symmetry = algo ? algo->symmetry(req) : RankSymmetry::None;
      groups.insert(g);
    }
  }

  auto invariant = [&](int d, int64_t p) {
    for (int64_t c = 0; c < t.chips(); ++c)
      if (plan.role_of_chip[c] != plan.role_of_chip[t.shift(c, d, p)]) return false;
    for (const GroupUse& g : groups)
      if (!group_invariant(g, t, d, p)) return false;
    for (const auto& [role, op] : p2p)
      for (int64_t c = 0; c < t.chips(); ++c) {
        if (plan.role_of_chip[c] != role) continue;
        const int64_t moved = t.shift(c, d, p);
        if (ctx.p2p_peer(moved, *op) != t.shift(ctx.p2p_peer(c, *op), d, p)) return false;
      }
    return true;
  };
  s.simulated = 1;
  for (int d = 0; d < t.ndims(); ++d) {
    const int64_t n = t.dims()[d];
    if (t.wrap()[d]) {
      // The smallest period that divides the ring (even on an even ring: routing breaks ties by parity).
      for (int64_t p = 1; p < n; ++p) {
        if (n % p != 0 || (n % 2 == 0 && p % 2 != 0)) continue;
        if (invariant(d, p)) {
          s.period[d] = p;
          break;
        }
      }
    }
    s.simulated *= s.period[d];
  }
  if (!s.reduced(t)) {
    s.reason = "no translation of the torus maps the step onto itself";
    return s;
  }
  // A traced chip must be simulated: the box may stand in only for chips nobody looks at.
  for (int64_t c = 0; c < t.chips(); ++c)
    if (ctx.traced[c] && s.representative(c, t) != c) {
      s.reason = "chip " + std::to_string(c) + " is traced and lies outside the box of chips that would be simulated";
      s.period = t.dims();
      s.simulated = t.chips();
      return s;
    }
  return s;
}

}  // namespace podsim

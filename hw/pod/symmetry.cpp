#include "hw/pod/symmetry.h"

#include <algorithm>
#include <memory>
#include <set>
#include <tuple>

#include "collectives/i_algorithm.h"
#include "hw/chip/dma.h"
#include "hw/pod/pod_context.h"
#include "base/text.h"

namespace podsim {

bool PodSymmetry::reduced(const Torus& t) const { return simulated < t.chips(); }

int64_t PodSymmetry::representative(int64_t chip, const Torus& t) const {
  if (!map.empty()) return map[chip];
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
  if (!map.empty()) return std::to_string(simulated) + " of " + std::to_string(t.chips()) + " chips (" + note + ")";
  std::vector<std::string> p;
  for (int64_t v : period) p.push_back(std::to_string(v));
  return std::to_string(simulated) + " of " + std::to_string(t.chips()) + " chips (one box of " + join(p, " x ") +
         " repeats over the torus" + (note.empty() ? "" : "; " + note) + ")";
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

// Whether moving every chip by `p` along dimension `d` maps each fault onto an equal one.
bool faults_invariant(const FaultConfig& f, const Torus& t, int d, int64_t p) {
  for (const ChipFault& c : f.chips) {
    const ChipFault* o = f.chip(t.shift(c.chip, d, p));
    if (!o || o->clock != c.clock || o->hbm != c.hbm) return false;
  }
  for (const LinkFault& l : f.links) {
    const LinkFault* o = f.link(t.shift(l.chip, d, p), l.dir);
    if (!o || o->bandwidth != l.bandwidth || o->down != l.down) return false;
  }
  return true;
}

// Whether `peer` lies half-way round an even ring from `from` along some dimension, per dimension: adds those
// dimensions to `tie`. Dimension-order routing breaks that tie by the parity of the sender's coordinate
// (topology/torus.h), so along such a dimension chips of odd and even coordinates route alike messages apart.
// A route along dimension d starts from the sender's own coordinate in d (the dimensions before it change
// others), so the pair's offsets decide it.
void mark_halfway(const Torus& t, const std::vector<int64_t>& offset, std::vector<bool>& tie) {
  for (int d = 0; d < t.ici_ndims(); ++d) {
    const int64_t n = t.dims()[d];
    if (n % 2 == 0 && t.wrap()[d] && ((offset[d] % n) + n) % n == n / 2) tie[d] = true;
  }
}

// The torus dimensions along which some message of the step goes half-way round an even ring: only along those
// must a period be even (chips of odd and even coordinates route such a message different ways). Collectives:
// the peers in the algorithm's schedule (for a request large enough that every piece is sent, so the peers are a
// superset of any size's): rank 0's moved by each rank when the schedule is shared round the group's dimensions,
// else every rank's; the offsets follow from the group's factors. Send/Recv: each chip's peer. Conservative where
// it cannot tell: a collective without an algorithm counts as every dimension.
std::vector<bool> halfway_dims(const PodContext& ctx, const std::vector<std::pair<int32_t, const Op*>>& p2p) {
  const Torus& t = ctx.torus;
  const Plan& plan = *ctx.plan;
  std::vector<bool> tie(static_cast<size_t>(t.ndims()), false);
  auto all_tied = [&] {
    for (int d = 0; d < t.ici_ndims(); ++d)
      if (t.dims()[d] % 2 == 0 && t.wrap()[d] && !tie[d]) return false;
    return true;
  };
  std::set<std::tuple<std::vector<std::tuple<int, int64_t, int64_t>>, std::string, int, int64_t, int64_t,
                      std::vector<int64_t>>>
      seen;
  for (const Program& prog : plan.programs) {
    for (const Op& op : prog.graph.ops()) {
      if (all_tied()) return tie;
      if (!is_communication(op.kind) || op.kind == OpKind::Send || op.kind == OpKind::Recv) continue;
      const MeshGroup mg = plan.mesh.group(0, op.attrs.axes, op.attrs.group_block);
      std::vector<std::tuple<int, int64_t, int64_t>> f;
      for (const MeshFactor& m : mg.factors) f.emplace_back(m.dim, m.size, m.stride);
      const std::string name = comm_algorithm(op);
      if (!seen.insert({f, name, static_cast<int>(op.kind), op.attrs.shift, op.attrs.root, op.attrs.targets}).second)
        continue;
      const int64_t size = mg.shape.size();
      if (size <= 1) continue;
      std::unique_ptr<ICollectiveAlgorithm> algo = CollectiveRegistry::instance().make(name);
      if (!algo) {
        std::fill(tie.begin(), tie.end(), true);
        return tie;
      }
      CollectiveRequest req;
      req.kind = collective_of(op.kind);
      req.group = mg.shape;
      req.elements = size * 768;  // every block splits into its pieces, whatever the algorithm cuts them into
      req.shift = op.attrs.shift;
      req.targets = op.attrs.targets;
      req.root = op.attrs.root;
      const RankSymmetry sym = algo->symmetry(req);
      auto sends = [&](int64_t rank) {
        std::vector<int64_t> peers;
        for (const Task& task : algo->schedule(req, rank).tasks)
          if (task.type == Task::Type::Send) peers.push_back(task.peer);
        std::sort(peers.begin(), peers.end());
        peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
        return peers;
      };
      // The torus offset of a message from rank `from` to rank `to`, from the group's factors.
      auto mark_pair = [&](int64_t from, int64_t to) {
        const std::vector<int64_t> a = mg.shape.coords(from), b = mg.shape.coords(to);
        std::vector<int64_t> offset(static_cast<size_t>(t.ndims()), 0);
        for (size_t i = 0; i < mg.factors.size(); ++i)
          offset[static_cast<size_t>(mg.factors[i].dim)] += (b[i] - a[i]) * mg.factors[i].stride;
        mark_halfway(t, offset, tie);
      };
      if (sym == RankSymmetry::Torus) {
        // Rank r's peers are rank 0's moved by r's coordinates round each group dimension: along a factor, a peer
        // o ahead of rank 0 is o ahead of rank r, or o - size where the move wraps round the factor. So the
        // offsets every rank sends along are those of rank 0's peers with each factor's digit o or o - size.
        for (int64_t q : sends(0)) {
          const std::vector<int64_t> o = mg.shape.coords(q);
          std::vector<size_t> wrapping;  // factors whose digit may wrap
          for (size_t i = 0; i < o.size(); ++i)
            if (o[i] != 0) wrapping.push_back(i);
          for (uint64_t pick = 0; pick < (uint64_t{1} << wrapping.size()) && !all_tied(); ++pick) {
            std::vector<int64_t> offset(static_cast<size_t>(t.ndims()), 0);
            for (size_t i = 0; i < o.size(); ++i)
              offset[static_cast<size_t>(mg.factors[i].dim)] += o[i] * mg.factors[i].stride;
            for (size_t w = 0; w < wrapping.size(); ++w)
              if (pick >> w & 1)
                offset[static_cast<size_t>(mg.factors[wrapping[w]].dim)] -=
                    mg.shape.dims[wrapping[w]] * mg.factors[wrapping[w]].stride;
            mark_halfway(t, offset, tie);
          }
          if (all_tied()) break;
        }
      } else {
        // A shift of the linear rank (carries between digits) or a schedule per rank: every rank's own peers.
        const std::vector<int64_t> peers0 = sym == RankSymmetry::Cyclic ? sends(0) : std::vector<int64_t>{};
        for (int64_t r = 0; r < size && !all_tied(); ++r)
          for (int64_t q : sym == RankSymmetry::Cyclic ? peers0 : sends(r))
            mark_pair(r, sym == RankSymmetry::Cyclic ? symmetric_peer(sym, mg.shape, q, r) : q);
      }
    }
  }
  for (const auto& [role, op] : p2p)
    for (int64_t c = 0; c < t.chips() && !all_tied(); ++c) {
      if (plan.role_of_chip[c] != role) continue;
      const std::vector<int64_t> a = t.coords(c), b = t.coords(ctx.p2p_peer(c, *op));
      std::vector<int64_t> offset(a.size());
      for (size_t d = 0; d < a.size(); ++d) offset[d] = b[d] - a[d];
      mark_halfway(t, offset, tie);
    }
  return tie;
}

// The classes of a step with faults (see the header): `s` holds the fault-free periods; `comm` the dimensions any
// group or peer spans. Leaves `s` as the better of the two ways, or every chip with the reason.
void apply_faults(const PodContext& ctx, const std::vector<bool>& comm, PodSymmetry& s) {
  const Torus& t = ctx.torus;
  const FaultConfig& f = ctx.exp->hardware.faults;
  const Plan& plan = *ctx.plan;
  const int64_t n = t.chips();
  const int64_t nf = static_cast<int64_t>(f.chips.size() + f.links.size());
  // Periodic faults: each period grows to a multiple that maps the faults onto themselves.
  PodSymmetry a = s;
  a.simulated = 1;
  for (int d = 0; d < t.ndims(); ++d) {
    const int64_t dim = t.dims()[d];
    int64_t p = a.period[d];
    while (p < dim && (dim % p != 0 || !faults_invariant(f, t, d, p))) p += a.period[d];
    a.period[d] = std::min(p, dim);
    a.simulated *= a.period[d];
  }
  a.note = "the " + std::to_string(nf) + " faults repeat with the box";
  // Independent components: the cosets of the dimensions the step communicates along.
  PodSymmetry b;
  b.simulated = n + 1;
  std::vector<bool> faulted(static_cast<size_t>(n), false);
  auto key = [&](int64_t c) {  // the component: the chip's coordinates outside `comm`, as the chip at comm = 0
    std::vector<int64_t> k = t.coords(c);
    for (int d = 0; d < t.ndims(); ++d)
      if (comm[d]) k[d] = 0;
    return t.chip(k);
  };
  bool independent = false;
  for (int d = 0; d < t.ndims(); ++d) independent = independent || (!comm[d] && t.dims()[d] > 1);
  if (independent) {
    for (const ChipFault& c : f.chips) faulted[key(c.chip)] = true;
    for (const LinkFault& l : f.links) {
      faulted[key(l.chip)] = true;
      faulted[key(t.neighbor(l.chip, l.dir))] = true;
    }
    int64_t reference = -1, touched = 0, components = 0;
    for (int64_t c = 0; c < n; ++c)
      if (key(c) == c) {
        ++components;
        if (faulted[c]) ++touched;
        else if (reference < 0) reference = c;
      }
    if (reference >= 0) {
      const std::vector<int64_t> ref = t.coords(reference);
      b.period = t.dims();
      b.map.resize(static_cast<size_t>(n));
      int64_t box = 1, whole = 1;
      for (int d = 0; d < t.ndims(); ++d)
        if (comm[d]) {
          box *= s.period[d];
          whole *= t.dims()[d];
        }
      bool ok = true;
      for (int64_t c = 0; c < n && ok; ++c) {
        if (faulted[key(c)]) {
          b.map[c] = c;
          continue;
        }
        std::vector<int64_t> r = t.coords(c);
        for (int d = 0; d < t.ndims(); ++d) r[d] = comm[d] ? r[d] % s.period[d] : ref[d];
        b.map[c] = t.chip(r);
        ok = plan.role_of_chip[c] == plan.role_of_chip[b.map[c]];
      }
      b.simulated = touched * whole + box;
      if (!ok) b.simulated = n + 1;
      b.note = "the " + std::to_string(touched) + " of " + std::to_string(components) +
               " independent components that faults touch simulated whole, one box of " + std::to_string(box) +
               " chips for the others";
    }
  }
  if (a.simulated <= b.simulated && a.simulated < n) s = a;
  else if (b.simulated < n) s = b;
  else {
    s.period = t.dims();
    s.simulated = n;
    s.reason = "hardware.faults: no smaller set of classes keeps every fault in place";
  }
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
  std::vector<bool> comm(static_cast<size_t>(t.ndims()), false);  // dimensions a group or a peer spans
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
      for (const MeshFactor& mf : mg.factors)
        if (mf.size > 1) comm[mf.dim] = true;
      std::unique_ptr<ICollectiveAlgorithm> algo = CollectiveRegistry::instance().make(comm_algorithm(op));
      CollectiveRequest req;
      req.kind = collective_of(op.kind);
      req.group = mg.shape;
      req.targets = op.attrs.targets;  // a collective-permute's arbitrary pairs: no translation of rank 0's
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
  // Faults reroute messages round down links (hw/ici/router.cpp): every even ring keeps an even period then.
  std::vector<bool> tie = e.hardware.faults.any() ? std::vector<bool>(static_cast<size_t>(t.ndims()), true)
                                                  : halfway_dims(ctx, p2p);
  s.simulated = 1;
  for (int d = 0; d < t.ndims(); ++d) {
    const int64_t n = t.dims()[d];
    if (t.wrap()[d]) {
      // The smallest period that divides the ring: even on an even ring that some message goes half-way round
      // (routing breaks that tie by parity); the slices have no routes.
      for (int64_t p = 1; p < n; ++p) {
        if (n % p != 0 || (n % 2 == 0 && p % 2 != 0 && d != t.slice_dim() && tie[static_cast<size_t>(d)]))
          continue;
        if (invariant(d, p)) {
          s.period[d] = p;
          break;
        }
      }
    }
    s.simulated *= s.period[d];
  }
  // Traffic between slices shares each host's NICs (hw/dcn/dcn.h): the box holds whole hosts, and whole slices
  // when the network between them is oversubscribed (each slice's way out is shared by all its hosts).
  bool dcn = t.slice_dim() >= 0 && comm[static_cast<size_t>(t.slice_dim())];
  for (const auto& [role, op] : p2p)
    for (int64_t c = 0; c < t.chips() && !dcn && t.slices() > 1; ++c)
      if (plan.role_of_chip[c] == role && t.slice_of(ctx.p2p_peer(c, *op)) != t.slice_of(c)) dcn = true;
  if (dcn) {
    const std::vector<int64_t>& block = e.hardware.host.block;
    s.simulated = 1;
    for (int d = 0; d < t.ndims(); ++d) {
      if (d < t.ici_ndims()) {
        int64_t p = s.period[d];
        if (e.hardware.dcn.oversubscription > 1) p = t.dims()[d];
        const int64_t b = d < static_cast<int>(block.size()) ? block[d] : 1;
        while (p % b != 0) p += s.period[d];
        s.period[d] = p;
      }
      s.simulated *= s.period[d];
    }
  }
  if (e.hardware.faults.any()) {
    for (const auto& [role, op] : p2p)  // a peer's route spans the dimensions it differs in
      for (int64_t c = 0; c < t.chips(); ++c) {
        if (plan.role_of_chip[c] != role) continue;
        const std::vector<int64_t> a = t.coords(c), b = t.coords(ctx.p2p_peer(c, *op));
        for (int d = 0; d < t.ndims(); ++d) comm[d] = comm[d] || a[d] != b[d];
      }
    apply_faults(ctx, comm, s);
    if (!s.reduced(t)) return s;
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
      s.map.clear();
      return s;
    }
  return s;
}

}  // namespace podsim

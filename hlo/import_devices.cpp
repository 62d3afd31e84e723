// The HLO importer's devices: the computations a module calls, the collectives' groups and the device mesh.
#include "hlo/importer.h"

namespace podsim::hlo::import_detail {

namespace {

// A string of its own, not a literal pushed whole: that trips GCC 12's false -Warray-bounds inside basic_string.
const std::string kNotPartitioned =
    "the module is not SPMD-partitioned (it has sharding annotations but no collectives): podsim runs it as one "
    "device's program and ignores the annotations";

}  // namespace

std::vector<int32_t> Importer::called(const Instruction& in) const {
  std::vector<int32_t> out;
  for (const Attribute& a : in.attrs) {
    static const std::set<std::string> names = {"to_apply", "calls", "condition", "body", "true_computation",
                                                "false_computation", "branch_computations", "called_computations"};
    if (!names.count(a.name)) continue;
    std::string v = a.value;
    for (char& ch : v)
      if (ch == '{' || ch == '}' || ch == ',') ch = ' ';
    size_t i = 0;
    while (i < v.size()) {
      while (i < v.size() && v[i] == ' ') ++i;
      size_t b = i;
      while (i < v.size() && v[i] != ' ') ++i;
      if (i == b) continue;
      std::string name = v.substr(b, i - b);
      int32_t c = m_m.find(name);
      if (c < 0)
        throw Error(Err::HloInvalid, SourceLocation{m_m.file, a.value_pos.line, a.value_pos.column, ""},
                    "instruction '" + in.name + "' calls computation '" + name + "', which the module does not define");
      out.push_back(c);
    }
  }
  return out;
}

// Computations reachable from the entry, each once.
std::vector<int32_t> Importer::reachable() const {
  std::vector<int32_t> out{m_m.entry};
  std::vector<bool> seen(m_m.computations.size(), false);
  seen[m_m.entry] = true;
  for (size_t i = 0; i < out.size(); ++i)
    for (const Instruction& in : m_m.computations[out[i]].instructions)
      for (int32_t c : called(in))
        if (!seen[c]) {
          seen[c] = true;
          out.push_back(c);
        }
  return out;
}

Groups Importer::groups_of(const Instruction& in) const {
  if (in.opcode.rfind("collective-permute", 0) == 0) return permute_groups(in);
  return replica_groups(in, m_m.file);
}

// A collective-permute's pairs as a shift: each cycle (or chain) of the permutation in rank order, and the steps
// each pair moves along its group, the same for every pair (a ring forwards: 1; backwards: -1).
Importer::Permutation Importer::permutation(const Instruction& in) const {
  auto pairs = source_target_pairs(in, m_m.file);
  std::map<int64_t, int64_t> next, prev;
  for (auto [s, t] : pairs) {
    if (next.count(s) || prev.count(t)) fail(in, Err::HloUnsupported, "a device sends or receives twice");
    next[s] = t;
    prev[t] = s;
  }
  Permutation p;
  p.pairs = pairs;
  std::set<int64_t> done;
  std::map<int64_t, std::pair<size_t, int64_t>> where;  // device -> (group, position)
  for (auto [s, t] : pairs) {
    if (done.count(s)) continue;
    int64_t first = s;  // walk back to a chain's start (or once round a cycle)
    while (prev.count(first) && prev[first] != s) first = prev[first];
    if (prev.count(first) && prev[first] == s) first = s;
    std::vector<int64_t> grp;
    bool closed = false;
    for (int64_t d = first; !done.count(d);) {
      grp.push_back(d);
      done.insert(d);
      if (!next.count(d)) break;
      d = next[d];
      closed = d == first;
    }
    p.cycles = p.cycles && closed;
    std::sort(grp.begin(), grp.end());
    for (size_t k = 0; k < grp.size(); ++k) where[grp[k]] = {p.groups.size(), static_cast<int64_t>(k)};
    p.groups.push_back(grp);
  }
  std::sort(p.groups.begin(), p.groups.end());
  for (size_t g = 0; g < p.groups.size(); ++g)
    for (size_t k = 0; k < p.groups[g].size(); ++k) where[p.groups[g][k]] = {g, static_cast<int64_t>(k)};
  std::optional<int64_t> shift;
  for (auto [s, t] : pairs) {
    const int64_t n = static_cast<int64_t>(p.groups[where[s].first].size());
    int64_t k = where[t].second - where[s].second;
    if (p.cycles) {
      k = ((k % n) + n) % n;
      if (2 * k > n) k -= n;  // the shorter way round
    }
    if (n == 1) continue;  // a device keeping its own value
    if (shift && *shift != k) p.arbitrary = true;  // no one shift: point-to-point transfers between any devices
    shift = k;
  }
  p.shift = shift.value_or(0);
  if (p.shift == 0) p.shift = 1;  // pairs of a device with itself: groups of one, nothing moves
  return p;
}

// The device count and mesh: from the header, else the collectives' groups; shardings add the digits they split.
void Importer::find_devices() {
  const std::vector<int32_t> comps = reachable();
  int64_t header = 1;
  bool has_header = false;
  for (const char* k : {"num_partitions", "replica_count"})
    if (const Attribute* a = m_m.attr(k)) {
      try {
        header *= std::max<int64_t>(1, std::stoll(a->value));
        has_header = true;
      } catch (const std::exception&) {
        throw Error(Err::HloSyntax, SourceLocation{m_m.file, a->value_pos.line, a->value_pos.column, ""},
                    std::string("HloModule attribute ") + k + "=" + a->value + " is not a whole number");
      }
    }
  int64_t from_groups = 0;
  bool collectives = false, annotated = false;
  for (int32_t c : comps)
    for (const Instruction& in : m_m.computations[c].instructions) {
      if (in.opcode == "custom-call" && word(in, "custom_call_target").value_or("") == "Sharding") annotated = true;
      if (!is_collective(in.opcode)) continue;
      collectives = true;
      for (const auto& g : groups_of(in))
        for (int64_t d : g) from_groups = std::max(from_groups, d + 1);
    }
  if (annotated || (!collectives && has_header && header > 1)) {
    // Before SPMD partitioning: global shapes and sharding annotations, no collectives yet.
    m_partitioned = false;
    m_out.devices = 1;
    m_out.notes.push_back(kNotPartitioned);
  } else {
    m_out.devices = has_header ? header : std::max<int64_t>(1, from_groups);
  }
  if (m_o.devices > 0 && m_partitioned && !has_header && !collectives) m_out.devices = m_o.devices;
  m_mesh = DeviceMesh(m_out.devices);
  if (m_o.devices_per_chip > 1 && m_out.devices % m_o.devices_per_chip == 0) m_mesh.cut(m_o.devices_per_chip);
  if (m_partitioned) {
    // The collectives' groups, the collective-permutes' last: pairs whose groups are no mesh axes (or no one shift)
    // run as transfers between any devices and add nothing to the mesh.
    std::set<std::string> seen;
    for (int pass = 0; pass < 2; ++pass)
      for (int32_t c : comps)
        for (const Instruction& in : m_m.computations[c].instructions) {
          if (!is_collective(in.opcode)) continue;
          const bool permute = in.opcode.rfind("collective-permute", 0) == 0;
          if (permute != (pass == 1)) continue;
          const Attribute* a = in.attr(permute ? "source_target_pairs" : "replica_groups");
          const std::string key = a ? a->value : "{}";
          if (!seen.insert(key).second) continue;
          if (permute) {
            const Permutation p = permutation(in);
            if (p.groups.size() == 1 && p.groups[0].size() == 1) continue;
            DeviceMesh trial = m_mesh;
            bool axes = !p.arbitrary && trial.add(p.groups).empty();
            if (axes) {
              DeviceMesh built = trial;  // the digits nest with the other structures'
              axes = built.build().empty();
            }
            if (axes) m_mesh = trial;
            // Open chains (a device with no source gets zeros, the last sends nothing) and pairs off the mesh's
            // axes: transfers between the devices named.
            if (!axes || (!p.cycles && m_o.devices_per_chip <= 1)) m_free_permutes.insert(key);
            continue;
          }
          Groups g = groups_of(in);
          if (g.size() == 1 && g[0].size() == 1) continue;
          std::string why = m_mesh.add(g);
          if (!why.empty())
            fail(in, Err::HloUnsupported,
                 "its groups are not the axes of a device mesh: " + why + " (podsim runs collectives over mesh axes)");
        }
    for (int32_t p : m_m.entry_computation().parameters) {
      const Instruction& in = m_m.entry_computation().instructions[p];
      std::optional<Sharding> s = sharding(in, m_m.file);
      if (!s || s->kind != Sharding::Kind::Tiled || !in.shape.is_array()) continue;
      for (const auto& g : tile_groups(*s, in)) m_mesh.add(g);
    }
  }
  std::string why = m_mesh.build();
  if (!why.empty()) throw Error(Err::HloUnsupported, SourceLocation{m_m.file, 1, 1, ""}, "the module's " + why);
  m_out.mesh_sizes = m_mesh.sizes();
  for (size_t a = 0; a < m_out.mesh_sizes.size(); ++a) {
    std::string name = "d";
    name += std::to_string(a);
    m_out.mesh_names.push_back(name);
  }
  // The devices of one chip: the innermost axis, when it is exactly them.
  if (m_o.devices_per_chip > 1 && !m_out.mesh_sizes.empty() && m_out.mesh_sizes.back() == m_o.devices_per_chip)
    m_core_axis = m_out.mesh_names.back();
}

// Per split dimension of a tile assignment: the groups of devices along it (the others' tiles fixed), in order.
std::vector<Groups> Importer::tile_groups(const Sharding& s, const Instruction& in) const {
  std::vector<Groups> out;
  const size_t rank = in.shape.dims.size();
  if (s.tile_dims.size() != rank + (s.replicated_last ? 1 : 0)) return out;
  std::vector<int64_t> strides(s.tile_dims.size(), 1);
  for (size_t i = s.tile_dims.size(); i-- > 1;) strides[i - 1] = strides[i] * s.tile_dims[i];
  const int64_t total = static_cast<int64_t>(s.devices.size());
  for (size_t d = 0; d < rank; ++d) {
    if (s.tile_dims[d] <= 1) continue;
    Groups g;
    for (int64_t k = 0; k < total; ++k) {
      if ((k / strides[d]) % s.tile_dims[d] != 0) continue;  // the first tile along d
      std::vector<int64_t> grp;
      for (int64_t j = 0; j < s.tile_dims[d]; ++j) grp.push_back(s.devices[k + j * strides[d]]);
      g.push_back(grp);
    }
    out.push_back(g);
  }
  return out;
}

std::vector<std::string> Importer::axis_names(const Groups& g, const std::string& key) {
  auto it = m_axes_memo.find(key);
  if (it == m_axes_memo.end()) it = m_axes_memo.emplace(key, m_mesh.axes_of(g)).first;
  std::vector<std::string> out;
  for (int a : it->second) out.push_back(m_out.mesh_names[a]);
  return out;
}

}  // namespace podsim::hlo::import_detail

// The StableHLO lowering (hlo/stablehlo_lower.h): functions and regions into computations, values and their
// layouts, and the partitioning helpers of split values.
#include "hlo/stablehlo_lower.h"

#include <algorithm>
#include <functional>
#include <numeric>

namespace podsim::hlo::mlir {

std::string joined(const std::vector<int64_t>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += sep;
    s += std::to_string(v[i]);
  }
  return s;
}

std::string int_set(const std::vector<int64_t>& v) { return "{" + joined(v, ",") + "}"; }

bool Layout::same(const Layout& o) const {
  if (kind != o.kind) return false;
  if (kind != Kind::Split) return true;
  return s.tile_dims == o.s.tile_dims && s.devices == o.s.devices && s.replicated_last == o.s.replicated_last;
}

std::string Layout::text() const {
  if (kind == Kind::Manual) return "{manual}";
  if (kind == Kind::Whole) return "{replicated}";
  std::string t = "{devices=[";
  t += joined(s.tile_dims, ",");
  t += "]";
  t += joined(s.devices, ",");
  if (s.replicated_last) t += " last_tile_dim_replicate";
  return t + "}";
}

std::string Layout::key() const { return kind == Kind::Split ? text() : kind == Kind::Manual ? "m" : "w"; }

std::string Lowerer::computation_name(const std::string& hint) {
  int& n = m_names[hint];
  return n++ == 0 ? hint : hint + "." + std::to_string(n);
}

int32_t Lowerer::emit(Build& b, const std::string& opcode, const Shape& shape, const std::vector<int32_t>& operands,
                      size_t at, const std::string& hint, const Attrs& attrs, const std::string& literal) {
  Instruction in;
  in.opcode = opcode;
  in.shape = shape;
  in.operands = operands;
  in.pos = m_l.pos(at);
  in.operand_pos.assign(operands.size(), in.pos);
  for (const auto& [k, v] : attrs) in.attrs.push_back({k, v, in.pos, in.pos});
  in.literal = literal;
  std::string name = hint;
  for (int k = 2; b.c.index.count(name); ++k) name = hint + "~" + std::to_string(k);
  in.name = name;
  const int32_t idx = static_cast<int32_t>(b.c.instructions.size());
  b.c.index.emplace(name, idx);
  b.c.instructions.push_back(std::move(in));
  return idx;
}

std::string Lowerer::finish(Build& b, const std::vector<Val>& results, size_t at, bool tuple_root) {
  if (results.size() == 1 && !tuple_root) {
    b.c.root = results[0].idx;
  } else {
    Shape t;
    t.type = Type::Tuple;
    std::vector<int32_t> ops;
    for (const Val& v : results) {
      ops.push_back(v.idx);
      t.tuple.push_back(b.c.instructions[v.idx].shape);
    }
    b.c.root = emit(b, "tuple", t, ops, at, "tuple.results");
  }
  b.c.instructions[b.c.root].root = true;
  std::string name = b.c.name;
  m_out.index.emplace(name, static_cast<int32_t>(m_out.computations.size()));
  m_out.computations.push_back(std::move(b.c));
  return name;
}

Val Lowerer::get(const Build& b, const std::string& name, size_t at) const {
  auto it = b.vals.find(name);
  if (it != b.vals.end()) return it->second;
  for (const Build* p = b.parent; p; p = p->parent)
    if (p->vals.count(name))
      fail(at, Err::HloUnsupported,
           "a region reads " + name + " from outside itself: podsim passes such values into while, case and if "
           "regions and copies constants into any region, but a reduction's, sort's or scatter's computation takes "
           "its arguments only, as in XLA (make " + name + " a constant or an operand)");
  fail(at, Err::HloInvalid, "value " + name + " is not defined before its use");
}

std::vector<Val> Lowerer::operands(const Build& b, const Op& op) const {
  std::vector<Val> v;
  for (size_t i = 0; i < op.operands.size(); ++i) v.push_back(get(b, op.operands[i], op.operand_at.at(i)));
  return v;
}

void Lowerer::bind(Build& b, const Op& op, const std::vector<Val>& results) {
  if (results.size() != op.results.size())
    fail(op, Err::HloInvalid, "gives " + std::to_string(results.size()) + " results where the text names " +
                                  std::to_string(op.results.size()));
  for (size_t i = 0; i < results.size(); ++i) {
    b.vals[op.results[i]] = results[i];
    // `%0` names the first result of `%0:2` as well.
    if (op.results.size() > 1 && i == 0) b.vals[op.results[0].substr(0, op.results[0].find('#'))] = results[0];
  }
}

std::vector<Val> Lowerer::untuple(Build& b, int32_t idx, const Shape& shape, size_t at, const std::string& hint) {
  std::vector<Val> out;
  for (size_t i = 0; i < shape.tuple.size(); ++i) {
    Val v;
    v.idx = emit(b, "get-tuple-element", shape.tuple[i], {idx}, at, hint + "." + std::to_string(i),
                 {{"index", std::to_string(i)}});
    v.global = shape.tuple[i];
    out.push_back(v);
  }
  return out;
}

std::vector<Val> Lowerer::body(Build& b, const std::vector<Op>& ops) {
  const Build* saved = m_outer;
  m_outer = &b;
  for (const Op& o : ops) {
    const std::string& n = o.name;
    if (n == "return" || n == "func.return" || n == "stablehlo.return" || n == "mhlo.return" || n == "sdy.return") {
      std::vector<Val> out = operands(b, o);
      m_outer = saved;
      return out;
    }
    bind(b, o, op(b, o));
  }
  m_outer = saved;
  const size_t at = ops.empty() ? 0 : ops.back().at;
  fail(at, Err::HloInvalid, "a function or region without a return");
}

Lowerer::Lowered Lowerer::function(const Func& f, const std::vector<Layout>& args, size_t call_at, bool entry) {
  std::string key = f.name;
  for (const Layout& l : args) key += "|" + l.key();
  if (auto it = m_done.find(key); it != m_done.end()) return it->second;
  if (++m_depth > 64) fail(call_at, Err::HloUnsupported, "functions call each other more than 64 deep (recursion?)");
  if (args.size() != f.body.args.size())
    fail(call_at, Err::HloInvalid, "@" + f.name + " takes " + std::to_string(f.body.args.size()) +
                                       " arguments, called with " + std::to_string(args.size()));
  Build b;
  b.entry = entry;
  b.c.name = computation_name(f.name);
  b.c.pos = f.pos;
  for (size_t i = 0; i < args.size(); ++i) {
    Val v;
    v.lay = args[i];
    v.global = f.body.arg_types[i];
    Attrs a;
    if (b.entry && f.arg_attrs.size() > i &&
        (f.arg_attrs[i].count("mhlo.sharding") || f.arg_attrs[i].count("sdy.sharding") ||
         (f.arg_attrs[i].count("mhlo.frontend_attributes") &&
          !string_field(f.arg_attrs[i].at("mhlo.frontend_attributes").value, "xla.sdy.sharding").empty())))
      a.push_back({"sharding", args[i].text()});
    std::string name = f.body.args[i].substr(1);
    v.idx = emit(b, "parameter", local(v.global, v.lay), {}, f.at, name, a, std::to_string(i));
    b.c.parameters.push_back(v.idx);
    b.vals[f.body.args[i]] = v;
  }
  std::vector<Val> results = body(b, f.body.ops);
  Lowered out;
  for (const Val& v : results) {
    out.results.push_back(v.lay);
    out.shapes.push_back(v.global);
  }
  if (results.empty()) {  // a function of no results: an empty tuple
    Shape t;
    t.type = Type::Tuple;
    Val v;
    v.idx = emit(b, "tuple", t, {}, f.at, "tuple.results");
    b.c.root = v.idx;
    b.c.instructions[b.c.root].root = true;
    out.name = b.c.name;
    m_out.index.emplace(out.name, static_cast<int32_t>(m_out.computations.size()));
    m_out.computations.push_back(std::move(b.c));
  } else {
    out.name = finish(b, results, f.at, results.size() > 1);
  }
  --m_depth;
  m_done[key] = out;
  return out;
}

std::string Lowerer::region(const Region& r, const std::string& hint, size_t at, bool tuple_param, bool tuple_root,
                            const std::vector<std::string>* arg_names, const std::vector<Shape>* arg_types,
                            const std::vector<std::string>* passthrough) {
  Build b;
  b.parent = m_outer;
  b.c.name = computation_name(hint);
  b.c.pos = m_l.pos(at);
  const std::vector<Shape>& types = arg_types ? *arg_types : r.arg_types;
  const std::vector<std::string>& names = arg_names ? *arg_names : r.args;
  if (types.size() != names.size()) fail(at, Err::HloInvalid, "a region whose arguments and types do not match");
  if (tuple_param) {
    Shape t;
    t.type = Type::Tuple;
    t.tuple = types;
    const int32_t p = emit(b, "parameter", t, {}, at, "carried", {}, "0");
    b.c.parameters.push_back(p);
    std::vector<Val> parts = untuple(b, p, t, at, "carried");
    for (size_t i = 0; i < names.size(); ++i) b.vals[names[i]] = parts[i];
  } else {
    for (size_t i = 0; i < names.size(); ++i) {
      Val v;
      v.global = types[i];
      v.idx = emit(b, "parameter", types[i], {}, at, names[i].substr(1), {}, std::to_string(i));
      b.c.parameters.push_back(v.idx);
      b.vals[names[i]] = v;
    }
  }
  sink_constants(b, r, names, at);
  std::vector<Val> results = body(b, r.ops);
  if (passthrough)
    for (const std::string& n : *passthrough) results.push_back(get(b, n, at));
  for (const Val& v : results)
    if (v.lay.kind != Layout::Kind::Whole) fail(at, Err::HloUnsupported, "a region that returns a split value");
  return finish(b, results, at, tuple_root || results.size() != 1);
}

// ---- layouts ----

Layout Lowerer::layout_of(const std::map<std::string, Attr>& attrs, size_t at) const {
  if (auto it = attrs.find("mhlo.sharding"); it != attrs.end()) return mhlo_layout(unquote(it->second.value), it->second.at);
  if (auto it = attrs.find("sdy.sharding"); it != attrs.end()) return sdy_layout(it->second.value, it->second.at);
  if (auto it = attrs.find("mhlo.frontend_attributes"); it != attrs.end()) {  // Shardy's round-trip form
    const std::string s = string_field(it->second.value, "xla.sdy.sharding");
    if (!s.empty()) return sdy_layout(s, it->second.at);
  }
  (void)at;
  return Layout{};
}

Layout Lowerer::mhlo_layout(const std::string& text, size_t at) const {
  Instruction tmp;
  tmp.name = "sharding";
  tmp.opcode = "sharding";
  const Pos p = m_l.pos(at);
  tmp.attrs.push_back({"sharding", text, p, p});
  std::optional<Sharding> s = sharding(tmp, m_l.file());
  Layout l;
  if (!s || s->kind == Sharding::Kind::Replicated) return l;
  if (s->kind == Sharding::Kind::Manual) {
    l.kind = Layout::Kind::Manual;
    return l;
  }
  if (s->kind != Sharding::Kind::Tiled)
    fail(at, Err::HloUnsupported, "sharding " + text + ": podsim partitions tiled and replicated shardings only");
  l.s = *s;
  const size_t n = s->tile_dims.size() - (s->replicated_last ? 1 : 0);
  for (size_t d = 0; d < n; ++d)
    if (s->tile_dims[d] > 1) l.kind = Layout::Kind::Split;
  return l;
}

// `#sdy.sharding<@mesh, [{"x"}, {}]>` (or `<@mesh, [...]>`): each dimension split over the mesh axes it names,
// the mesh's other axes replicating; devices numbered row-major over the mesh's axes.
Layout Lowerer::sdy_layout(const std::string& text, size_t at) const {
  const size_t q = text.find('@');
  if (q == std::string::npos) fail(at, Err::HloSyntax, "a Shardy sharding without its mesh (@mesh): " + text);
  size_t e = q + 1;
  while (e < text.size() && (std::isalnum(static_cast<unsigned char>(text[e])) || text[e] == '_')) ++e;
  const std::string mesh = text.substr(q + 1, e - q - 1);
  auto mit = m_m.meshes.find(mesh);
  if (mit == m_m.meshes.end()) fail(at, Err::HloInvalid, "sharding names mesh @" + mesh + ", which no sdy.mesh declares");
  const auto& axes = mit->second;
  const size_t lb = text.find('[', e);
  if (lb == std::string::npos) fail(at, Err::HloSyntax, "a Shardy sharding without its dimensions: " + text);
  std::vector<std::vector<size_t>> dims;  // per dimension: mesh axes, major first
  size_t i = lb + 1;
  while (i < text.size() && text[i] != ']') {
    if (text[i] == '{') {
      dims.emplace_back();
      ++i;
      while (i < text.size() && text[i] != '}') {
        if (text[i] == '"') {
          const size_t c = text.find('"', i + 1);
          const std::string axis = text.substr(i + 1, c - i - 1);
          if (c + 1 < text.size() && text[c + 1] == ':')
            fail(at, Err::HloUnsupported, "sub-axis \"" + axis + "\":(...) in " + text + ": podsim reads whole mesh axes");
          size_t k = 0;
          while (k < axes.size() && axes[k].first != axis) ++k;
          if (k == axes.size()) fail(at, Err::HloInvalid, "axis \"" + axis + "\" is not an axis of mesh @" + mesh);
          dims.back().push_back(k);
          i = c + 1;
        } else {
          ++i;
        }
      }
    }
    ++i;
  }
  Layout l;
  std::vector<bool> used(axes.size(), false);
  std::vector<int64_t> tiles;
  for (const auto& d : dims) {
    int64_t t = 1;
    for (size_t a : d) {
      t *= axes[a].second;
      used[a] = true;
    }
    tiles.push_back(t);
  }
  std::vector<size_t> order;  // mesh axes in tile order: each dimension's, then the replicating ones
  for (const auto& d : dims) order.insert(order.end(), d.begin(), d.end());
  int64_t rep = 1;
  for (size_t a = 0; a < axes.size(); ++a)
    if (!used[a]) {
      order.push_back(a);
      rep *= axes[a].second;
    }
  bool split = false;
  for (int64_t t : tiles) split = split || t > 1;
  if (!split) return l;
  l.kind = Layout::Kind::Split;
  l.s.kind = Sharding::Kind::Tiled;
  l.s.tile_dims = tiles;
  if (rep > 1) {
    l.s.tile_dims.push_back(rep);
    l.s.replicated_last = true;
  }
  std::vector<int64_t> reshape, perm;
  for (const auto& a : axes) reshape.push_back(a.second);
  for (size_t a : order) perm.push_back(static_cast<int64_t>(a));
  l.s.devices = iota_devices(reshape, perm);
  return l;
}

Shape Lowerer::local(const Shape& global, const Layout& l) const {
  if (!l.split()) return global;
  Shape s = global;
  for (size_t d = 0; d < s.dims.size() && d < l.s.tile_dims.size(); ++d)
    if (l.s.tile_dims[d] > 1 && s.dims[d] > 0) s.dims[d] = (s.dims[d] + l.s.tile_dims[d] - 1) / l.s.tile_dims[d];
  return s;
}

Layout Lowerer::remap(const Layout& l, const std::vector<int64_t>& from, const std::vector<int64_t>& fold) const {
  if (!l.split()) return l;
  const Sharding& s = l.s;
  const size_t rank = s.tile_dims.size() - (s.replicated_last ? 1 : 0);
  std::vector<int64_t> old_strides(s.tile_dims.size(), 1);
  for (size_t i = s.tile_dims.size(); i-- > 1;) old_strides[i - 1] = old_strides[i] * s.tile_dims[i];
  Layout out;
  out.kind = Layout::Kind::Split;
  out.s.kind = Sharding::Kind::Tiled;
  for (int64_t f : from) out.s.tile_dims.push_back(f < 0 ? 1 : s.tile_dims[f]);
  // The replication: the folded dimensions' tiles, then the old replication.
  std::vector<int64_t> rep_dims = fold;
  if (s.replicated_last) rep_dims.push_back(static_cast<int64_t>(rank));
  int64_t rep = 1;
  for (int64_t d : rep_dims) rep *= s.tile_dims[d];
  // Every old dimension must be kept or folded.
  std::vector<bool> seen(rank, false);
  for (int64_t f : from)
    if (f >= 0) seen[f] = true;
  for (int64_t f : fold) seen[f] = true;
  for (size_t d = 0; d < rank; ++d)
    if (!seen[d] && s.tile_dims[d] > 1) return Layout{};  // caller checks
  if (rep > 1) {
    out.s.tile_dims.push_back(rep);
    out.s.replicated_last = true;
  }
  std::vector<int64_t> new_strides(out.s.tile_dims.size(), 1);
  for (size_t i = out.s.tile_dims.size(); i-- > 1;) new_strides[i - 1] = new_strides[i] * out.s.tile_dims[i];
  out.s.devices.assign(s.devices.size(), -1);
  for (size_t k = 0; k < s.devices.size(); ++k) {
    auto coord = [&](int64_t d) { return (static_cast<int64_t>(k) / old_strides[d]) % s.tile_dims[d]; };
    int64_t nk = 0;
    for (size_t j = 0; j < from.size(); ++j)
      if (from[j] >= 0) nk += coord(from[j]) * new_strides[j];
    if (rep > 1) {
      int64_t r = 0;
      for (int64_t d : rep_dims) r = r * s.tile_dims[d] + coord(d);
      nk += r * new_strides.back();
    }
    out.s.devices[static_cast<size_t>(nk)] = s.devices[k];
  }
  bool split = false;
  for (size_t j = 0; j < from.size(); ++j) split = split || out.s.tile_dims[j] > 1;
  if (!split) return Layout{};
  return out;
}

Groups Lowerer::groups_over(const Layout& l, const std::vector<int64_t>& dims) const {
  const Sharding& s = l.s;
  std::vector<int64_t> strides(s.tile_dims.size(), 1);
  for (size_t i = s.tile_dims.size(); i-- > 1;) strides[i - 1] = strides[i] * s.tile_dims[i];
  std::map<std::vector<int64_t>, std::vector<int64_t>> by_rest;  // the other coordinates -> devices in order
  for (size_t k = 0; k < s.devices.size(); ++k) {
    std::vector<int64_t> rest;
    for (size_t d = 0; d < s.tile_dims.size(); ++d)
      if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) == dims.end())
        rest.push_back((static_cast<int64_t>(k) / strides[d]) % s.tile_dims[d]);
    by_rest[rest].push_back(s.devices[k]);
  }
  Groups g;
  for (auto& [k, v] : by_rest) g.push_back(v);
  std::sort(g.begin(), g.end());
  return g;
}

std::string Lowerer::groups_text(const Groups& g) const {
  std::string t = "{";
  for (size_t i = 0; i < g.size(); ++i) {
    if (i) t += ",";
    t += int_set(g[i]);
  }
  return t + "}";
}

int32_t Lowerer::localize(Build& b, const Val& v, const Layout& lay, const Op& op) {
  const Shape want = local(v.global, lay);
  if (!v.splat.empty())
    return emit(b, "constant", want, {}, op.at, b.c.instructions[v.idx].name + ".local", {}, v.splat);
  if (v.bcast_of >= 0) {
    for (size_t i = 0; i < v.bcast_dims.size(); ++i)
      if (lay.s.tile_dims.at(static_cast<size_t>(v.bcast_dims[i])) > 1 &&
          b.c.instructions[v.bcast_of].shape.dims.at(i) > 1)
        fail(op, Err::HloUnsupported, "a whole value broadcast along a dimension its split consumer splits: podsim "
                                      "partitions elementwise ops of operands split alike");
    return emit(b, "broadcast", want, {v.bcast_of}, op.at, b.c.instructions[v.idx].name + ".local",
                {{"dimensions", int_set(v.bcast_dims)}});
  }
  fail(op, Err::HloUnsupported,
       "reads a whole (replicated) array beside a split one: podsim partitions elementwise ops of operands split "
       "alike, and of whole broadcasts and constants; shard_map the computation or give the per-device HLO");
}

Layout Lowerer::elementwise(Build& b, const Op& op, std::vector<Val>& vals) {
  Layout lay;
  for (const Val& v : vals) {
    if (v.lay.split()) {
      if (lay.split() && !lay.same(v.lay))
        fail(op, Err::HloUnsupported, "its operands are split differently (" + lay.text() + " and " + v.lay.text() +
                                          "): podsim does not reshard; give the per-device HLO");
      lay = v.lay;
    } else if (v.lay.kind == Layout::Kind::Manual) {
      if (lay.split()) fail(op, Err::HloUnsupported, "mixes a manual region's value with a split one");
      lay = v.lay;
    }
  }
  if (lay.kind == Layout::Kind::Manual)
    for (const Val& v : vals)
      if (v.lay.split()) fail(op, Err::HloUnsupported, "mixes a manual region's value with a split one");
  if (lay.split())
    for (Val& v : vals)
      if (!v.lay.split() && !v.global.dims.empty()) {
        v.idx = localize(b, v, lay, op);
        v.lay = lay;
      }
  return lay;
}

void Lowerer::need_whole(const Op& op, const std::vector<Val>& vals) const {
  for (const Val& v : vals)
    if (v.lay.split())
      fail(op, Err::HloUnsupported,
           "reads a value split by " + v.lay.text() +
               ": podsim partitions elementwise ops, broadcast_in_dim, transpose, reshape, reduce and dot_general "
               "outside manual regions (shard_map); give the per-device HLO (--xla_dump_hlo_pass_re=spmd-partitioning)");
}

Module Lowerer::run() {
  m_out.file = m_l.file();
  m_out.name = m_m.name;
  for (const Func& f : m_m.funcs) m_funcs[f.name] = &f;
  const Func* main = nullptr;
  if (auto it = m_funcs.find("main"); it != m_funcs.end()) main = it->second;
  for (const Func& f : m_m.funcs)
    if (!main && f.is_public) main = &f;
  if (!main) main = &m_m.funcs.front();
  for (const auto& [k, name] : std::vector<std::pair<const char*, const char*>>{
           {"mhlo.num_partitions", "num_partitions"}, {"mhlo.num_replicas", "replica_count"}}) {
    auto it = m_m.attrs.find(k);
    if (it == m_m.attrs.end()) continue;
    const Pos p = m_l.pos(it->second.at);
    m_out.attrs.push_back({name, std::to_string(int_value(m_l, it->second)), p, p});
  }
  std::vector<Layout> args;
  for (size_t i = 0; i < main->body.args.size(); ++i)
    args.push_back(i < main->arg_attrs.size() ? layout_of(main->arg_attrs[i], main->at) : Layout{});
  Lowered entry = function(*main, args, main->at, true);
  m_out.entry = m_out.index.at(entry.name);
  m_out.computations[m_out.entry].entry = true;
  return std::move(m_out);
}

}  // namespace podsim::hlo::mlir

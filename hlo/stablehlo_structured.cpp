// StableHLO operations with regions, dimension numbers or shardings of their own (hlo/stablehlo_lower.h):
// reduce, dot_general, convolution, custom calls (the SPMD partitioner's markers among them), collectives, while,
// calls and Shardy's manual computations.
#include <algorithm>

#include "hlo/stablehlo_lower.h"

namespace podsim::hlo::mlir {
namespace {

std::string name_of(const Op& op, const std::string& opcode, const Lines& l) {
  if (op.results.empty()) return opcode + ".l" + std::to_string(l.pos(op.at).line);
  std::string r = op.results[0].substr(1);
  return opcode + "." + r.substr(0, r.find('#'));
}

Shape tuple_of(const std::vector<Shape>& s) {
  Shape t;
  t.type = Type::Tuple;
  t.tuple = s;
  return t;
}

// `<...>` groups at the top level of `[<..>, <..>]`.
std::vector<std::string> angle_groups(const std::string& text) {
  std::vector<std::string> out;
  int depth = 0;
  size_t b = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '"') {
      i = text.find('"', i + 1);
      if (i == std::string::npos) break;
      continue;
    }
    if (text[i] == '<' && depth++ == 0) b = i;
    else if (text[i] == '>' && --depth == 0) out.push_back(text.substr(b, i - b + 1));
  }
  return out;
}

}  // namespace

std::string Lowerer::reducer(const Op& op, const Shape& scalar, size_t region_index) {
  const std::string h = name_of(op, op.name.substr(op.name.find('.') + 1), m_l);
  if (op.regions.size() > region_index) return region(*op.regions[region_index], h + ".body", op.at, false, false);
  // `applies stablehlo.add`: a computation of that op on two scalars.
  std::string applied;
  for (size_t i = 0; i + 1 < op.words.size(); ++i)
    if (op.words[i] == "applies") applied = op.words[i + 1];
  if (applied.empty()) fail(op, Err::HloSyntax, "expected its region or 'applies' and the op it applies");
  std::string opcode = applied.substr(applied.find('.') + 1);
  for (char& c : opcode)
    if (c == '_') c = '-';
  Build b;
  b.c.name = computation_name(h + "." + opcode);
  b.c.pos = m_l.pos(op.at);
  Shape s = scalar;
  s.dims.clear();
  const int32_t x = emit(b, "parameter", s, {}, op.at, "x", {}, "0");
  const int32_t y = emit(b, "parameter", s, {}, op.at, "y", {}, "1");
  b.c.parameters = {x, y};
  Val r;
  r.idx = emit(b, opcode, s, {x, y}, op.at, opcode);
  return finish(b, {r}, op.at, false);
}

std::vector<Val> Lowerer::reduce(Build& b, const Op& op, std::vector<Val>& vals) {
  std::vector<Val> xs, inits;
  if (!op.bindings.empty()) {
    for (const auto& [x, init] : op.bindings) {
      xs.push_back(get(b, x, op.at));
      inits.push_back(get(b, init, op.at));
    }
  } else {
    if (vals.size() % 2 != 0 || vals.empty()) fail(op, Err::HloInvalid, "a reduce takes inputs and as many initial values");
    xs.assign(vals.begin(), vals.begin() + static_cast<std::ptrdiff_t>(vals.size() / 2));
    inits.assign(vals.begin() + static_cast<std::ptrdiff_t>(vals.size() / 2), vals.end());
  }
  need_whole(op, inits);
  const std::vector<int64_t> dims = ints(op, "dimensions");
  const Layout in = xs[0].lay;
  for (const Val& x : xs)
    if (!x.lay.same(in)) fail(op, Err::HloUnsupported, "reduces inputs split differently");
  std::vector<int64_t> split_reduced, kept;
  const size_t rank = xs[0].global.dims.size();
  for (size_t d = 0; d < rank; ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
    if (!reduced) kept.push_back(static_cast<int64_t>(d));
    else if (in.split() && in.s.tile_dims[d] > 1) split_reduced.push_back(static_cast<int64_t>(d));
  }
  if (!split_reduced.empty() && xs.size() > 1)
    fail(op, Err::HloUnsupported, "a reduction of several inputs over a split dimension (an arg-max across devices)");
  const Layout out_lay = in.split() ? remap(in, kept, split_reduced) : in;
  const std::string to_apply = reducer(op, inits[0].global, 0);
  const std::string h = name_of(op, "reduce", m_l);
  std::vector<int32_t> ops;
  for (const Val& v : xs) ops.push_back(v.idx);
  for (const Val& v : inits) ops.push_back(v.idx);
  std::vector<Shape> shapes;
  for (const Shape& s : op.result_types) shapes.push_back(local(s, out_lay));
  if (shapes.size() != xs.size()) fail(op, Err::HloInvalid, "a reduce gives one result per input");
  const Shape shape = shapes.size() == 1 ? shapes[0] : tuple_of(shapes);
  const Attrs a = {{"dimensions", int_set(dims)}, {"to_apply", to_apply}};
  int32_t r = emit(b, "reduce", shape, ops, op.at, h, a);
  if (!split_reduced.empty()) {  // the partial results summed over the devices that split the reduced dimensions
    r = emit(b, "all-reduce", shape, {r}, op.at, "all-reduce." + h.substr(7),
             {{"replica_groups", groups_text(groups_over(in, split_reduced))}, {"to_apply", to_apply},
              {"use_global_device_ids", "true"}});
  }
  if (shapes.size() == 1) {
    Val v;
    v.idx = r;
    v.lay = out_lay;
    v.global = op.result_types[0];
    return {v};
  }
  std::vector<Val> out = untuple(b, r, shape, op.at, h);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].lay = out_lay;
    out[i].global = op.result_types[i];
  }
  return out;
}

std::vector<Val> Lowerer::dot_general(Build& b, const Op& op, std::vector<Val>& vals) {
  if (vals.size() != 2) fail(op, Err::HloInvalid, "a dot_general takes two operands");
  std::vector<int64_t> lb, rb, lc, rc;
  auto pair = [&](const char* k, std::vector<int64_t>& l, std::vector<int64_t>& r) {
    const Attr* a = attr(op, k);
    if (!a) return;
    const size_t x = a->value.find(" x ");
    if (x == std::string::npos) fail(a->at, Err::HloSyntax, std::string(k) + " = [lhs] x [rhs] expected");
    l = ints_in(a->value.substr(0, x));
    r = ints_in(a->value.substr(x + 3));
  };
  pair("batching_dims", lb, rb);
  pair("contracting_dims", lc, rc);
  if (const Attr* d = attr(op, "dot_dimension_numbers")) {
    lb = ints_in(field(d->value, "lhs_batching_dimensions"));
    rb = ints_in(field(d->value, "rhs_batching_dimensions"));
    lc = ints_in(field(d->value, "lhs_contracting_dimensions"));
    rc = ints_in(field(d->value, "rhs_contracting_dimensions"));
  }
  const Val &l = vals[0], &r = vals[1];
  const size_t lr = l.global.dims.size(), rr = r.global.dims.size();
  auto has = [](const std::vector<int64_t>& v, size_t d) { return std::find(v.begin(), v.end(), static_cast<int64_t>(d)) != v.end(); };
  // The result's dimensions: batch, lhs free, rhs free; each from an lhs and an rhs dimension (-1: none).
  std::vector<int64_t> from_l, from_r;
  for (size_t i = 0; i < lb.size(); ++i) {
    from_l.push_back(lb[i]);
    from_r.push_back(rb[i]);
  }
  for (size_t d = 0; d < lr; ++d)
    if (!has(lb, d) && !has(lc, d)) {
      from_l.push_back(static_cast<int64_t>(d));
      from_r.push_back(-1);
    }
  for (size_t d = 0; d < rr; ++d)
    if (!has(rb, d) && !has(rc, d)) {
      from_l.push_back(-1);
      from_r.push_back(static_cast<int64_t>(d));
    }
  auto tiles = [](const Val& v, int64_t d) { return v.lay.split() ? v.lay.s.tile_dims[static_cast<size_t>(d)] : 1; };
  std::vector<int64_t> lsplit_c, rsplit_c;
  for (size_t i = 0; i < lc.size(); ++i) {
    if (tiles(l, lc[i]) > 1) lsplit_c.push_back(lc[i]);
    if (tiles(r, rc[i]) > 1) rsplit_c.push_back(rc[i]);
    if (tiles(l, lc[i]) != tiles(r, rc[i]))
      fail(op, Err::HloUnsupported, "contracts a dimension split on one operand only: podsim does not reshard");
  }
  Layout lay;
  bool sum = false;
  if (l.lay.kind == Layout::Kind::Manual || r.lay.kind == Layout::Kind::Manual) {
    if (l.lay.split() || r.lay.split()) fail(op, Err::HloUnsupported, "mixes a manual region's value with a split one");
    lay.kind = Layout::Kind::Manual;
  } else if (!lsplit_c.empty()) {
    // Contracting dimensions split alike, nothing else: each device's partial product, summed over them.
    for (const auto* v : {&l, &r})
      for (size_t d = 0; d < v->global.dims.size(); ++d)
        if (tiles(*v, static_cast<int64_t>(d)) > 1 && !has(v == &l ? lc : rc, d))
          fail(op, Err::HloUnsupported, "splits contracting and other dimensions at once: podsim does not reshard");
    if (groups_over(l.lay, lsplit_c) != groups_over(r.lay, rsplit_c))
      fail(op, Err::HloUnsupported, "its operands split the contracting dimensions over different devices");
    sum = true;
  } else if (l.lay.split() || r.lay.split()) {
    const Layout a = remap(l.lay, from_l, {}), c = remap(r.lay, from_r, {});
    for (size_t i = 0; i < lb.size(); ++i)
      if (tiles(l, lb[i]) != tiles(r, rb[i]))
        fail(op, Err::HloUnsupported, "a batch dimension split on one operand only: podsim does not reshard");
    if (l.lay.split() && r.lay.split()) {
      if (!a.same(c)) fail(op, Err::HloUnsupported, "its operands are split in ways no one result layout holds");
      lay = a;
    } else {
      lay = l.lay.split() ? a : c;
    }
  }
  const Shape shape = local(op.result_types.at(0), lay);
  const std::string h = name_of(op, "dot", m_l);
  Attrs at = {{"lhs_batch_dims", int_set(lb)}, {"rhs_batch_dims", int_set(rb)},
              {"lhs_contracting_dims", int_set(lc)}, {"rhs_contracting_dims", int_set(rc)}};
  Val v;
  v.lay = lay;
  v.global = op.result_types[0];
  v.idx = emit(b, "dot", shape, {l.idx, r.idx}, op.at, h, at);
  if (sum) {
    Shape s;
    s.type = op.result_types[0].type;
    Build add;
    add.c.name = computation_name(h + ".sum");
    add.c.pos = m_l.pos(op.at);
    const int32_t x = emit(add, "parameter", s, {}, op.at, "x", {}, "0"), y = emit(add, "parameter", s, {}, op.at, "y", {}, "1");
    add.c.parameters = {x, y};
    Val z;
    z.idx = emit(add, "add", s, {x, y}, op.at, "add");
    const std::string fn = finish(add, {z}, op.at, false);
    v.idx = emit(b, "all-reduce", shape, {v.idx}, op.at, "all-reduce." + h.substr(4),
                 {{"replica_groups", groups_text(groups_over(l.lay, lsplit_c))}, {"to_apply", fn},
                  {"use_global_device_ids", "true"}});
  }
  return {v};
}

std::vector<Val> Lowerer::convolution(Build& b, const Op& op, std::vector<Val>& vals) {
  need_whole(op, vals);
  if (vals.size() != 2) fail(op, Err::HloInvalid, "a convolution takes an input and a kernel");
  const Attr* dn = attr(op, "dim_numbers", "dimension_numbers");
  if (!dn) fail(op, Err::HloInvalid, "a convolution without its dimension numbers");
  std::string t = dn->value;
  if (t.find("raw") != std::string::npos)
    fail(dn->at, Err::HloUnsupported, "dimension numbers in the raw form: podsim reads [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]");
  std::vector<std::string> labels;
  for (size_t i = t.find('['); i != std::string::npos; i = t.find('[', i + 1)) {
    const size_t e = t.find(']', i);
    if (e == std::string::npos) break;
    std::string l;
    for (size_t k = i + 1; k < e; ++k)
      if (t[k] != ',' && t[k] != ' ') l += t[k];
    labels.push_back(l);
    i = e;
  }
  if (labels.size() != 3) fail(dn->at, Err::HloSyntax, "expected [input]x[kernel]->[output] dimension labels");
  const Shape& k = vals[1].global;
  std::vector<std::pair<int, int64_t>> spatial;  // kernel spatial dimension number -> size
  for (size_t i = 0; i < labels[1].size(); ++i)
    if (std::isdigit(static_cast<unsigned char>(labels[1][i]))) spatial.push_back({labels[1][i] - '0', k.dims.at(i)});
  std::sort(spatial.begin(), spatial.end());
  const size_t n = spatial.size();
  Attrs a = {{"dim_labels", labels[0] + "_" + labels[1] + "->" + labels[2]}};
  if (n > 0) {
    std::vector<int64_t> size, stride(n, 1), lhs(n, 1), rhs(n, 1), pad(2 * n, 0);
    for (auto& [d, s] : spatial) size.push_back(s);
    if (const Attr* w = attr(op, "window")) {  // pretty: {stride = [..], pad = [[..]], lhs_dilate = [..], ...}
      auto read = [&](const char* key, std::vector<int64_t>& out) {
        const std::string f = field(w->value, key);
        if (f.empty()) return;
        std::vector<int64_t> v = ints_in(f);
        if (v.size() != out.size()) fail(w->at, Err::HloSyntax, std::string("window ") + key + " needs " + std::to_string(out.size()) + " values");
        out = v;
      };
      read("stride", stride);
      read("pad", pad);
      read("lhs_dilate", lhs);
      read("rhs_dilate", rhs);
    } else {
      auto read = [&](const char* key, std::vector<int64_t>& out) {
        std::vector<int64_t> v = ints(op, key);
        if (v.size() == 1 && out.size() > 1) v.assign(out.size(), v[0]);  // a splat
        if (!v.empty()) out = v;
      };
      read("window_strides", stride);
      read("padding", pad);
      read("lhs_dilation", lhs);
      read("rhs_dilation", rhs);
    }
    auto join = [](const std::vector<int64_t>& v) { return joined(v, "x"); };
    std::string p;
    for (size_t d = 0; d < n; ++d) {
      if (d) p += "x";
      p += std::to_string(pad[2 * d]) + "_" + std::to_string(pad[2 * d + 1]);
    }
    a.push_back({"window", "{size=" + join(size) + " stride=" + join(stride) + " pad=" + p + " lhs_dilate=" +
                               join(lhs) + " rhs_dilate=" + join(rhs) + "}"});
  }
  for (const char* g : {"feature_group_count", "batch_group_count"})
    if (const Attr* x = attr(op, g)) a.push_back({g, std::to_string(int_value(m_l, *x))});
  Val v;
  v.lay = plain_layout_of(vals);
  v.global = op.result_types.at(0);
  v.idx = emit(b, "convolution", v.global, {vals[0].idx, vals[1].idx}, op.at, name_of(op, "convolution", m_l), a);
  return {v};
}

Layout Lowerer::plain_layout_of(const std::vector<Val>& vals) const {
  Layout l;
  for (const Val& v : vals)
    if (v.lay.kind == Layout::Kind::Manual) l.kind = Layout::Kind::Manual;
  return l;
}

std::vector<Val> Lowerer::custom_call(Build& b, const Op& op, std::vector<Val>& vals) {
  std::string target = op.symbol;
  if (const Attr* t = attr(op, "call_target_name")) target = unquote(t->value);
  if (target.rfind("check.", 0) == 0) return {};  // the StableHLO test suite's checks: sinks
  if (target.rfind("xla.sdy.", 0) == 0) return shardy_call(b, op, target, vals);
  auto sharding_attr = [&]() {
    const Attr* s = attr(op, "mhlo.sharding");
    if (!s) {
      const Attr* f = attr(op, "mhlo.frontend_attributes");
      const std::string sdy = f ? string_field(f->value, "xla.sdy.sharding") : "";
      if (!sdy.empty()) return sdy_layout(sdy, f->at);  // Shardy's round-trip form
      fail(op, Err::HloInvalid, "custom call @" + target + " without its mhlo.sharding");
    }
    return mhlo_layout(unquote(s->value), s->at);
  };
  if (target == "Sharding") {
    const Layout want = sharding_attr();
    Val v = vals.at(0);
    if (v.lay.same(want) || (want.kind == Layout::Kind::Manual && !v.lay.split())) {
      if (want.kind == Layout::Kind::Manual) v.lay = want;
      return {v};
    }
    if (!v.lay.split() && want.split()) {
      v.idx = localize(b, v, want, op);
      v.lay = want;
      return {v};
    }
    fail(op, Err::HloUnsupported, "changes a value's sharding from " + v.lay.text() + " to " + want.text() +
                                      ": podsim does not reshard; give the per-device HLO");
  }
  if (target == "SPMDFullToShardShape") {
    Val v = vals.at(0);
    const Shape& want = op.result_types.at(0);
    if (b.c.instructions[v.idx].shape.dims != want.dims)
      fail(op, Err::HloInvalid, "the shard shape " + want.text() + " is not the local shape " +
                                    b.c.instructions[v.idx].shape.text() + " of its operand's sharding " + v.lay.text());
    v.lay.kind = Layout::Kind::Manual;
    v.global = want;
    v.bcast_of = -1;
    v.splat.clear();
    return {v};
  }
  if (target == "SPMDShardToFullShape") {
    Val v = vals.at(0);
    const Layout lay = sharding_attr();
    if (local(op.result_types.at(0), lay).dims != b.c.instructions[v.idx].shape.dims)
      fail(op, Err::HloInvalid, "the full shape " + op.result_types[0].text() + " under " + lay.text() +
                                    " does not have its operand's shape " + b.c.instructions[v.idx].shape.text());
    v.lay = lay;
    v.global = op.result_types[0];
    return {v};
  }
  need_whole(op, vals);
  Attrs a = {{"custom_call_target", "\"" + target + "\""}};
  if (const Attr* c = attr(op, "backend_config", "mhlo.backend_config")) a.push_back({"backend_config", c->value});
  if (const Attr* c = attr(op, "api_version")) a.push_back({"api_version", c->value});
  // JAX's memory kinds: annotate_device_placement's _xla_buffer_placement (pinned_host, device).
  if (const Attr* c = attr(op, "mhlo.frontend_attributes")) a.push_back({"frontend_attributes", c->value});
  std::vector<int32_t> xs;
  for (const Val& v : vals) xs.push_back(v.idx);
  const std::string h = name_of(op, "custom-call", m_l);
  const Shape shape = op.result_types.size() == 1 ? op.result_types[0] : tuple_of(op.result_types);
  Val v;
  v.lay = plain_layout_of(vals);
  v.global = shape;
  v.idx = emit(b, "custom-call", shape, xs, op.at, h, a);
  if (op.results.empty()) return {};
  if (op.results.size() == 1) return {v};
  std::vector<Val> out = untuple(b, v.idx, shape, op.at, h);
  for (Val& o : out) o.lay = v.lay;
  return out;
}

std::vector<Val> Lowerer::collective(Build& b, const Op& op, const std::string& kind, std::vector<Val>& vals) {
  need_whole(op, vals);
  const std::string opcode = kind == "all_reduce"              ? "all-reduce"
                             : kind == "all_gather"            ? "all-gather"
                             : kind == "reduce_scatter"        ? "reduce-scatter"
                             : kind == "all_to_all"            ? "all-to-all"
                             : kind == "collective_permute"    ? "collective-permute"
                                                               : "collective-broadcast";
  Attrs a;
  auto groups = [&](const char* key, const char* hlo_key) {
    const Attr* g = attr(op, key);
    if (!g) return;
    // dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>: the type gives the groups' count and size.
    const size_t colon = g->value.rfind(" : ");
    Shape t;
    if (colon != std::string::npos) {
      size_t at = g->at + colon + 3;
      t = parse_type(m_l, at, g->at + g->value.size());
    }
    std::vector<int64_t> ids = int_array(m_l, *g);
    if (t.dims.size() != 2) fail(g->at, Err::HloSyntax, std::string(key) + ": expected dense<...> : tensor<GxSxi64>");
    const int64_t n = t.dims[0] * t.dims[1];
    if (ids.size() == 1 && n > 1) ids.assign(static_cast<size_t>(n), ids[0]);
    if (static_cast<int64_t>(ids.size()) != n) fail(g->at, Err::HloSyntax, std::string(key) + ": the values do not fill its type");
    Groups gs;
    for (int64_t i = 0; i < t.dims[0]; ++i)
      gs.emplace_back(ids.begin() + i * t.dims[1], ids.begin() + (i + 1) * t.dims[1]);
    a.push_back({hlo_key, groups_text(gs)});
  };
  groups("replica_groups", "replica_groups");
  groups("source_target_pairs", "source_target_pairs");
  if (const Attr* c = attr(op, "channel_handle")) {
    const std::string h = field(c->value, "handle");
    if (!h.empty()) a.push_back({"channel_id", h});
  }
  if (attr(op, "use_global_device_ids")) a.push_back({"use_global_device_ids", "true"});
  if (const Attr* d = attr(op, "all_gather_dim", "scatter_dimension")) a.push_back({"dimensions", int_set({int_value(m_l, *d)})});
  if (kind == "all_to_all") {
    const Attr* s = attr(op, "split_dimension");
    const Attr* c = attr(op, "concat_dimension");
    if (!s || !c) fail(op, Err::HloInvalid, "an all_to_all without split_dimension and concat_dimension");
    if (int_value(m_l, *s) != int_value(m_l, *c))
      fail(op, Err::HloUnsupported, "an all_to_all whose split and concat dimensions differ (podsim runs the array form, one dimension)");
    a.push_back({"dimensions", int_set({int_value(m_l, *s)})});
  }
  const std::string h = name_of(op, opcode, m_l);
  if (kind == "all_reduce" || kind == "reduce_scatter") a.push_back({"to_apply", reducer(op, vals.at(0).global, 0)});
  std::vector<int32_t> xs;
  for (const Val& v : vals) xs.push_back(v.idx);
  const Shape shape = op.result_types.size() == 1 ? op.result_types[0] : tuple_of(op.result_types);
  Val v;
  v.lay = plain_layout_of(vals);
  v.global = shape;
  v.idx = emit(b, opcode, shape, xs, op.at, h, a);
  if (op.results.size() == 1) return {v};
  std::vector<Val> out = untuple(b, v.idx, shape, op.at, h);
  for (Val& o : out) o.lay = v.lay;
  return out;
}

std::vector<Val> Lowerer::while_loop(Build& b, const Op& op, std::vector<Val>& vals) {
  std::vector<Val> inits = vals;
  std::vector<std::string> names;
  if (!op.bindings.empty()) {
    inits.clear();
    for (const auto& [arg, init] : op.bindings) {
      names.push_back(arg);
      inits.push_back(get(b, init, op.at));
    }
  }
  if (op.regions.size() != 2) fail(op, Err::HloInvalid, "a while takes a condition and a body region");
  // Values the condition or the body reads from outside (other than constants, which are copied in) are carried
  // after the loop's own values, the body passing them through, as XLA's export makes a while's implicit captures
  // explicit.
  const size_t carried = inits.size();
  std::vector<std::string> caps;
  for (size_t k = 0; k < 2; ++k)
    for (const std::string& c : threaded(b, *op.regions[k], names.empty() ? op.regions[k]->args : names))
      if (std::find(caps.begin(), caps.end(), c) == caps.end()) caps.push_back(c);
  for (const std::string& c : caps) inits.push_back(get(b, c, op.at));
  need_whole(op, inits);
  std::vector<Shape> types;
  for (const Val& v : inits) types.push_back(b.c.instructions[v.idx].shape);
  const std::string h = name_of(op, "while", m_l);
  std::vector<std::string> cond_names = names.empty() ? op.regions[0]->args : names,
                           body_names = names.empty() ? op.regions[1]->args : names;
  cond_names.insert(cond_names.end(), caps.begin(), caps.end());
  body_names.insert(body_names.end(), caps.begin(), caps.end());
  const std::string cond = region(*op.regions[0], h + ".cond", op.at, true, false, &cond_names, &types);
  const std::string body_name = region(*op.regions[1], h + ".body", op.at, true, true, &body_names, &types, &caps);
  std::vector<int32_t> xs;
  for (const Val& v : inits) xs.push_back(v.idx);
  const Shape t = tuple_of(types);
  const int32_t tup = emit(b, "tuple", t, xs, op.at, h + ".init");
  const int32_t w = emit(b, "while", t, {tup}, op.at, h, {{"condition", cond}, {"body", body_name}});
  std::vector<Val> out = untuple(b, w, t, op.at, h);
  out.resize(carried);
  Layout lay = plain_layout_of(inits);
  for (Val& o : out) o.lay = lay;
  return out;
}

std::vector<Val> Lowerer::call(Build& b, const Op& op, std::vector<Val>& vals) {
  std::string callee = op.symbol;
  if (const Attr* c = attr(op, "callee")) callee = c->value.substr(c->value.find('@') + 1);
  if (const Attr* d = attr(op, "decomposition")) callee = d->value.substr(d->value.find('@') + 1);
  auto it = m_funcs.find(callee);
  if (it == m_funcs.end()) fail(op, Err::HloInvalid, "calls @" + callee + ", which the module does not define");
  std::vector<Layout> lays;
  for (const Val& v : vals) lays.push_back(v.lay);
  const Lowered f = function(*it->second, lays, op.at);
  const Computation& c = m_out.computations.at(static_cast<size_t>(m_out.index.at(f.name)));
  const Shape shape = c.instructions.at(static_cast<size_t>(c.root)).shape;
  std::vector<int32_t> xs;
  for (const Val& v : vals) xs.push_back(v.idx);
  const std::string h = name_of(op, "call", m_l);
  Val v;
  v.idx = emit(b, "call", shape, xs, op.at, h, {{"to_apply", f.name}});
  std::vector<Val> out;
  if (f.results.size() == 1) {
    out.push_back(v);
  } else {
    out = untuple(b, v.idx, shape, op.at, h);
  }
  if (op.results.empty()) return {};
  for (size_t i = 0; i < out.size() && i < f.results.size(); ++i) {
    out[i].lay = f.results[i];
    out[i].global = i < op.result_types.size() ? op.result_types[i] : f.shapes[i];
  }
  return out;
}

// sdy.manual_computation: the body runs per device on its operands' tiles; inlined with its arguments bound to
// the operands' (local) values, its results taking out_shardings.
std::vector<Val> Lowerer::manual_computation(Build& b, const Op& op, std::vector<Val>& vals) {
  if (op.regions.size() != 1) fail(op, Err::HloInvalid, "a manual computation takes one region");
  const Region& r = *op.regions[0];
  const Attr* ins = attr(op, "in_shardings");
  const Attr* outs = attr(op, "out_shardings");
  if (!ins || !outs) fail(op, Err::HloInvalid, "a manual computation without in_shardings and out_shardings");
  std::vector<std::string> in_s = angle_groups(ins->value), out_s = angle_groups(outs->value);
  if (in_s.size() != vals.size() || r.args.size() != vals.size())
    fail(op, Err::HloInvalid, "in_shardings, the operands and the region's arguments differ in number");
  if (const Attr* m = attr(op, "manual_axes")) {
    const std::string mesh = in_s.empty() ? "" : in_s[0];
    const size_t q = mesh.find('@');
    std::string mesh_name;
    for (size_t i = q + 1; q != std::string::npos && i < mesh.size() && (std::isalnum(static_cast<unsigned char>(mesh[i])) || mesh[i] == '_'); ++i)
      mesh_name += mesh[i];
    auto mit = m_m.meshes.find(mesh_name);
    if (mit != m_m.meshes.end())
      for (const auto& [axis, size] : mit->second)
        if (size > 1 && m->value.find("\"" + axis + "\"") == std::string::npos)
          fail(op, Err::HloUnsupported, "axis \"" + axis + "\" is not manual: podsim runs manual computations over every mesh axis");
  }
  for (size_t i = 0; i < vals.size(); ++i) {
    const Layout want = sdy_layout(in_s[i], ins->at);
    Val v = vals[i];
    if (!v.lay.same(want)) {
      if (v.lay.split() || !want.split())
        fail(op, Err::HloUnsupported, "operand " + std::to_string(i) + " is " + v.lay.text() + " but in_shardings says " +
                                          want.text() + ": podsim does not reshard");
      v.idx = localize(b, v, want, op);
    }
    if (b.c.instructions[v.idx].shape.dims != r.arg_types[i].dims)
      fail(op, Err::HloInvalid, "argument " + r.args[i] + " is " + r.arg_types[i].text() + " but its operand's tile is " +
                                    b.c.instructions[v.idx].shape.text());
    v.lay.kind = Layout::Kind::Manual;
    v.global = r.arg_types[i];
    v.bcast_of = -1;
    v.splat.clear();
    b.vals[r.args[i]] = v;
  }
  std::vector<Val> res = body(b, r.ops);
  if (res.size() != out_s.size() || res.size() != op.result_types.size())
    fail(op, Err::HloInvalid, "out_shardings, the results and the region's returns differ in number");
  for (size_t i = 0; i < res.size(); ++i) {
    res[i].lay = sdy_layout(out_s[i], outs->at);
    res[i].global = op.result_types[i];
    if (local(res[i].global, res[i].lay).dims != b.c.instructions[res[i].idx].shape.dims)
      fail(op, Err::HloInvalid, "result " + std::to_string(i) + " is not the tile of " + op.result_types[i].text() +
                                    " its out_sharding gives");
  }
  return res;
}

}  // namespace podsim::hlo::mlir

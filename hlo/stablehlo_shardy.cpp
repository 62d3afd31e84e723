// Shardy's round-trip form and named computations (hlo/stablehlo_lower.h). When XLA exports a Shardy program to
// HLO and back (the text a JAX dump with Shardy on holds), the dialect's attributes become strings in frontend
// attributes and its ops custom calls (xla/service/spmd/shardy/round_trip_common, sdy_round_trip):
//  - `mhlo.frontend_attributes = {xla.sdy.meshes = "{mesh = #sdy.mesh<[...]>}"}` on the module: the meshes
//    (hlo/stablehlo_read.cpp reads them as `sdy.mesh` declarations);
//  - `{xla.sdy.sharding = "#sdy.sharding<@mesh, [...]>"}` on an argument, and on a `Sharding` custom call
//    (`#sdy.sharding_per_value<[<...>]>`): read as `sdy.sharding`;
//  - `@xla.sdy.FuncResultSharding` and `@xla.sdy.PropagationBarrier`: their operands; `@xla.sdy.ShardingGroup`:
//    nothing;
//  - a manual computation as `@xla.sdy.GlobalToLocalShape` (its operands' tiles, `xla.sdy.in_shardings`), a call of
//    `@xla.sdy.manual_computation_body` (per-device code, as written) and `@xla.sdy.LocalToGlobalShape` (the tiles
//    of its results, `xla.sdy.out_shardings`), as SPMDFullToShardShape and SPMDShardToFullShape are for GSPMD.
// `sdy.named_computation<"name">(%x) (%arg: T) {...}` is its body, inlined (Shardy's name for a group of ops).
#include <algorithm>
#include <functional>

#include "hlo/stablehlo_lower.h"

namespace podsim::hlo::mlir {
namespace {

// The `<@mesh, [...]>` of `#sdy.sharding_per_value<[<...>, <...>]>`.
std::vector<std::string> per_value(const std::string& text) {
  std::vector<std::string> out;
  const size_t lb = text.find('[');
  if (lb == std::string::npos) return out;
  int depth = 0;
  size_t b = 0;
  for (size_t i = lb; i < text.size(); ++i) {
    if (text[i] == '"') {
      i = text.find('"', i + 1);
      if (i == std::string::npos) break;
      continue;
    }
    if (text[i] == '<' && depth++ == 0) b = i;
    else if (text[i] == '>' && depth > 0 && --depth == 0) out.push_back(text.substr(b, i - b + 1));
  }
  return out;
}

std::string name_of_result(const Op& op) {
  if (op.results.empty()) return "tiles";
  const std::string r = op.results[0].substr(1);
  return "tiles." + r.substr(0, r.find('#'));
}

Shape tuple_of(const std::vector<Shape>& s) {
  Shape t;
  t.type = Type::Tuple;
  t.tuple = s;
  return t;
}

}  // namespace

void Lowerer::all_axes_manual(const Op& op, const std::string& sharding, const std::string& manual_axes) const {
  const size_t q = sharding.find('@');
  std::string mesh;
  for (size_t i = q + 1; q != std::string::npos && i < sharding.size() &&
                         (std::isalnum(static_cast<unsigned char>(sharding[i])) || sharding[i] == '_');
       ++i)
    mesh += sharding[i];
  auto it = m_m.meshes.find(mesh);
  if (it == m_m.meshes.end()) return;
  for (const auto& [axis, size] : it->second)
    if (size > 1 && manual_axes.find("\"" + axis + "\"") == std::string::npos)
      fail(op, Err::HloUnsupported, "axis \"" + axis + "\" is not manual: podsim runs manual computations over every mesh axis");
}

std::vector<Val> Lowerer::shardy_call(Build& b, const Op& op, const std::string& target, std::vector<Val>& vals) {
  if (target == "xla.sdy.FuncResultSharding" || target == "xla.sdy.PropagationBarrier") {
    if (vals.size() == op.results.size()) return vals;
    fail(op, Err::HloInvalid, "gives " + std::to_string(op.results.size()) + " results of " +
                                  std::to_string(vals.size()) + " operands");
  }
  if (target == "xla.sdy.ShardingGroup") return {};
  const Attr* fa = attr(op, "mhlo.frontend_attributes");
  const std::string fe = fa ? fa->value : "";
  const size_t fat = fa ? fa->at : op.at;
  if (target == "xla.sdy.GlobalToLocalShape") {
    const std::vector<std::string> ins = per_value(string_field(fe, "xla.sdy.in_shardings"));
    const std::string manual = string_field(fe, "xla.sdy.manual_axes");
    size_t k = 0;  // the next sharding, one per array among the operands (a tuple operand's elements each)
    std::function<Val(const Val&)> tile = [&](const Val& v) -> Val {
      const Shape& s = b.c.instructions.at(static_cast<size_t>(v.idx)).shape;
      if (s.type == Type::Tuple) {
        std::vector<int32_t> parts;
        std::vector<Shape> shapes;
        std::vector<Val> elems = untuple(b, v.idx, s, op.at, name_of_result(op) + ".elem");
        for (Val& e : elems) {
          e.lay = v.lay;
          const Val t = tile(e);
          parts.push_back(t.idx);
          shapes.push_back(b.c.instructions[t.idx].shape);
        }
        Val out;
        out.lay.kind = Layout::Kind::Manual;
        out.idx = emit(b, "tuple", tuple_of(shapes), parts, op.at, name_of_result(op) + ".tiles");
        out.global = tuple_of(shapes);
        return out;
      }
      if (k >= ins.size()) fail(fat, Err::HloInvalid, "'" + op.name + "': xla.sdy.in_shardings names fewer shardings than its operands hold arrays");
      const std::string& want_text = ins[k++];
      all_axes_manual(op, want_text, manual);
      const Layout want = sdy_layout(want_text, fat);
      Val out = v;
      if (!out.lay.same(want)) {
        if (out.lay.split() || !want.split())
          fail(op, Err::HloUnsupported, "an operand is " + out.lay.text() + " but xla.sdy.in_shardings says " + want.text() +
                                            ": podsim does not reshard");
        out.idx = localize(b, out, want, op);
      }
      out.lay.kind = Layout::Kind::Manual;
      out.global = b.c.instructions[out.idx].shape;
      out.bcast_of = -1;
      out.splat.clear();
      return out;
    };
    std::vector<Val> out;
    for (const Val& v : vals) out.push_back(tile(v));
    if (k != ins.size()) fail(fat, Err::HloInvalid, "'" + op.name + "': xla.sdy.in_shardings names more shardings than its operands hold arrays");
    if (op.results.size() == out.size()) return out;
    if (op.results.size() != 1) fail(op, Err::HloInvalid, "gives neither one result per operand nor one tuple");
    std::vector<int32_t> parts;
    std::vector<Shape> shapes;
    for (const Val& v : out) {
      parts.push_back(v.idx);
      shapes.push_back(b.c.instructions[v.idx].shape);
    }
    Val t;
    t.lay.kind = Layout::Kind::Manual;
    t.global = tuple_of(shapes);
    t.idx = emit(b, "tuple", t.global, parts, op.at, name_of_result(op));
    return {t};
  }
  if (target == "xla.sdy.LocalToGlobalShape") {
    const std::vector<std::string> outs = per_value(string_field(fe, "xla.sdy.out_shardings"));
    if (outs.size() != vals.size() || op.result_types.size() != vals.size())
      fail(op, Err::HloInvalid, "xla.sdy.out_shardings, the operands and the results differ in number");
    std::vector<Val> res;
    for (size_t i = 0; i < vals.size(); ++i) {
      Val v = vals[i];
      v.lay = sdy_layout(outs[i], fat);
      v.global = op.result_types[i];
      if (local(v.global, v.lay).dims != b.c.instructions.at(static_cast<size_t>(v.idx)).shape.dims)
        fail(op, Err::HloInvalid, "result " + std::to_string(i) + " " + v.global.text() + " under " + v.lay.text() +
                                      " is not its operand's tile " + b.c.instructions[v.idx].shape.text());
      res.push_back(v);
    }
    return res;
  }
  fail(op, Err::HloUnsupported,
       "custom call @" + target + ": of Shardy's round-trip calls podsim reads xla.sdy.FuncResultSharding, "
       "PropagationBarrier, ShardingGroup, GlobalToLocalShape and LocalToGlobalShape (docs/hlo.md, \"StableHLO\")");
}

std::vector<Val> Lowerer::named_computation(Build& b, const Op& op, std::vector<Val>& vals) {
  if (op.regions.size() != 1) fail(op, Err::HloInvalid, "a named computation takes one region");
  const Region& r = *op.regions[0];
  if (r.args.size() != vals.size()) fail(op, Err::HloInvalid, "its region's arguments and its operands differ in number");
  for (size_t i = 0; i < vals.size(); ++i) b.vals[r.args[i]] = vals[i];
  std::vector<Val> res = body(b, r.ops);
  if (res.size() != op.results.size()) fail(op, Err::HloInvalid, "its region returns another number of values than it gives");
  return res;
}

}  // namespace podsim::hlo::mlir

// StableHLO's conditionals and the values regions read from outside themselves (hlo/stablehlo_lower.h).
//
// An MLIR region may read any value its enclosing scopes define (an implicit capture); an HLO computation reads its
// parameters only. The lowering does what XLA's MLIR-to-HLO export does (xla/hlo/translate/mhlo_to_hlo: the
// sinking of constants into control flow, then the captures made explicit): a constant is copied into the region,
// and any other value is passed in. A while carries it after its own values, the body passing it through; a branch
// of a case or if takes a tuple of what it reads as its one parameter, the conditional passing each branch its
// tuple. The computations of a reduce, sort, scatter, reduce_window or select_and_scatter take their arguments
// only, in XLA too: a capture there that is no constant is an error at its use.
//
// `stablehlo.if %pred` is HLO's conditional of a predicate (true_computation the first region, false_computation
// the second); `stablehlo.case %index` the conditional of branch_computations (an index out of range takes the
// last branch). The HLO importer runs the branch a constant selector picks, else branch 0 (workload.branches picks
// another; hlo/import_conditional.cpp).
#include <algorithm>
#include <set>

#include "hlo/stablehlo_lower.h"

namespace podsim::hlo::mlir {
namespace {

bool is_while(const Op& op) {
  const size_t n = op.name.size();
  return n >= 5 && op.name.compare(n - 5, 5, "while") == 0;
}

void free_names(const Region& r, std::set<std::string> defined, std::vector<std::string>& out,
                std::set<std::string>& seen) {
  for (const std::string& a : r.args) defined.insert(a);
  for (const Op& op : r.ops) {
    auto use = [&](const std::string& n) {
      if (!defined.count(n) && seen.insert(n).second) out.push_back(n);
    };
    for (const std::string& o : op.operands) use(o);
    const bool loop = is_while(op);
    for (const auto& [arg, init] : op.bindings) {  // while's `%iterArg = %init`; reduce's `(%x init: %c)`
      use(init);
      if (!loop) use(arg);
    }
    std::set<std::string> inner = defined;
    if (loop)
      for (const auto& [arg, init] : op.bindings) inner.insert(arg);
    for (const auto& sub : op.regions) free_names(*sub, inner, out, seen);
    for (const std::string& res : op.results) {
      defined.insert(res);
      defined.insert(res.substr(0, res.find('#')));
    }
  }
}

Shape tuple_of(const std::vector<Shape>& s) {
  Shape t;
  t.type = Type::Tuple;
  t.tuple = s;
  return t;
}

}  // namespace

std::vector<std::string> Lowerer::captures(const Region& r, const std::vector<std::string>& args) const {
  std::set<std::string> defined(args.begin(), args.end()), seen;
  std::vector<std::string> out;
  free_names(r, defined, out, seen);
  return out;
}

const Val* Lowerer::outer(const Build* from, const std::string& name, const Build** where) const {
  for (const Build* p = from; p; p = p->parent)
    if (auto it = p->vals.find(name); it != p->vals.end()) {
      if (where) *where = p;
      return &it->second;
    }
  return nullptr;
}

std::vector<std::string> Lowerer::threaded(const Build& b, const Region& r, const std::vector<std::string>& args) const {
  std::vector<std::string> out;
  for (const std::string& n : captures(r, args)) {
    const Build* w = nullptr;
    const Val* v = outer(&b, n, &w);
    if (v && w->c.instructions.at(static_cast<size_t>(v->idx)).opcode == "constant") continue;
    out.push_back(n);
  }
  return out;
}

void Lowerer::sink_constants(Build& inner, const Region& r, const std::vector<std::string>& args, size_t at) {
  for (const std::string& n : captures(r, args)) {
    if (inner.vals.count(n)) continue;
    const Build* w = nullptr;
    const Val* v = outer(inner.parent, n, &w);
    if (!v) continue;
    const Instruction& src = w->c.instructions.at(static_cast<size_t>(v->idx));
    if (src.opcode != "constant") continue;
    Val copy = *v;
    copy.idx = emit(inner, "constant", src.shape, {}, at, src.name, {}, src.literal);
    copy.bcast_of = -1;
    inner.vals[n] = copy;
  }
}

std::vector<Val> Lowerer::conditional(Build& b, const Op& op, std::vector<Val>& vals) {
  const bool is_if = op.name.size() > 3 && op.name.compare(op.name.size() - 3, 3, ".if") == 0;
  if (vals.size() != 1) fail(op, Err::HloInvalid, std::string("takes one operand, its ") + (is_if ? "predicate" : "index"));
  const Shape& sel = b.c.instructions.at(static_cast<size_t>(vals[0].idx)).shape;
  if (!sel.dims.empty() || (is_if ? sel.type != Type::Pred : (sel.type != Type::S32 && sel.type != Type::U32)))
    fail(op.operand_at.at(0), Err::HloInvalid,
         "'" + op.name + "': its operand is " + sel.text() + ", where it takes a scalar " +
             (is_if ? "i1 (tensor<i1>)" : "i32 (tensor<i32>)"));
  if (op.regions.empty() || (is_if && op.regions.size() != 2))
    fail(op, Err::HloInvalid, is_if ? "an if takes two regions (then, else)" : "a case takes one region per branch");
  need_whole(op, vals);
  const std::string opcode = op.name.substr(op.name.find('.') + 1);
  const std::string h = [&] {
    if (op.results.empty()) return "conditional.l" + std::to_string(m_l.pos(op.at).line);
    const std::string r = op.results[0].substr(1);
    return "conditional." + r.substr(0, r.find('#'));
  }();
  std::vector<int32_t> xs = {vals[0].idx};
  std::vector<std::string> names;
  for (size_t k = 0; k < op.regions.size(); ++k) {
    const Region& r = *op.regions[k];
    if (!r.args.empty()) fail(op, Err::HloInvalid, "a branch of " + opcode + " takes no arguments");
    const std::vector<std::string> caps = threaded(b, r, {});
    std::vector<int32_t> parts;
    std::vector<Shape> types;
    for (const std::string& c : caps) {
      const Val v = get(b, c, op.at);
      if (v.lay.split()) fail(op, Err::HloUnsupported, "a branch reads " + c + ", split by " + v.lay.text() + ": podsim runs conditionals on whole values");
      parts.push_back(v.idx);
      types.push_back(b.c.instructions[v.idx].shape);
    }
    xs.push_back(emit(b, "tuple", tuple_of(types), parts, op.at, h + ".operands." + std::to_string(k)));
    const std::string branch = is_if ? (k == 0 ? "true" : "false") : "branch" + std::to_string(k);
    names.push_back(region(r, h + "." + branch, op.at, true, op.result_types.size() > 1, &caps, &types));
  }
  const size_t n = op.result_types.size();
  if (n != op.results.size()) fail(op, Err::HloSyntax, "expected the type of each of its results");
  const Shape shape = n == 1 ? op.result_types[0] : tuple_of(op.result_types);
  for (size_t k = 0; k < names.size(); ++k) {
    const Computation& c = m_out.computations.at(static_cast<size_t>(m_out.index.at(names[k])));
    const Shape& got = c.instructions.at(static_cast<size_t>(c.root)).shape;
    if (got.text() != shape.text())
      fail(op, Err::HloInvalid, "branch " + std::to_string(k) + " returns " + got.text() + " where the " + opcode +
                                    " gives " + shape.text());
  }
  Attrs a;
  if (is_if) {
    a = {{"true_computation", names[0]}, {"false_computation", names[1]}};
  } else {
    std::string list = "{";
    for (size_t k = 0; k < names.size(); ++k) list += (k ? ", " : "") + names[k];
    a = {{"branch_computations", list + "}"}};
  }
  Val v;
  v.global = shape;
  v.lay = plain_layout_of(vals);
  v.idx = emit(b, "conditional", shape, xs, op.at, h, a);
  if (n == 1) return {v};
  std::vector<Val> out = untuple(b, v.idx, shape, op.at, h);
  for (Val& o : out) o.lay = v.lay;
  return out;
}

}  // namespace podsim::hlo::mlir

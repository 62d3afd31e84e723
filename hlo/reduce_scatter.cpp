#include "hlo/reduce_scatter.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "base/text.h"
#include "hlo/attributes.h"

namespace podsim::hlo {

namespace {

// The integers of a constant's literal text ("{0, 64, 128}", "7", "s32[] 7"), or nullopt when it holds anything else.
std::optional<std::vector<int64_t>> literal_ints(const std::string& text) {
  std::vector<int64_t> v;
  std::string cur;
  auto flush = [&]() -> bool {
    if (cur.empty()) return true;
    try {
      size_t used = 0;
      v.push_back(std::stoll(cur, &used));
      if (used != cur.size()) return false;
    } catch (const std::exception&) {
      return false;
    }
    cur.clear();
    return true;
  };
  for (char ch : text) {
    if (ch == '{' || ch == '}' || ch == ',' || ch == ' ' || ch == '\n') {
      if (!flush()) return std::nullopt;
    } else {
      cur += ch;
    }
  }
  if (!flush()) return std::nullopt;
  return v;
}

// A scalar (or one-element) integer value of instruction `i` of `c` on device `d`; nullopt when it depends on
// anything but constants, the partition id and scalar arithmetic.
std::optional<int64_t> scalar_on(const Computation& c, int32_t i, int64_t d, int depth = 0) {
  if (depth > 32 || i < 0) return std::nullopt;
  const Instruction& in = c.instructions[static_cast<size_t>(i)];
  if (!in.shape.is_array() || in.shape.elements() != 1 || !is_integer(in.shape.type)) return std::nullopt;
  auto operand = [&](size_t k) { return scalar_on(c, in.operands.at(k), d, depth + 1); };
  const std::string& op = in.opcode;
  if (op == "partition-id") return d;
  if (op == "constant") {
    auto v = literal_ints(in.literal);
    if (!v || v->size() != 1) return std::nullopt;
    return v->front();
  }
  if (op == "reshape" || op == "bitcast" || op == "convert" || op == "copy") {
    if (in.operands.size() != 1) return std::nullopt;
    return operand(0);
  }
  if (op == "dynamic-slice" && in.operands.size() == 2) {  // a table of one dimension indexed by a scalar
    const Instruction& table = c.instructions[static_cast<size_t>(in.operands[0])];
    if (table.opcode != "constant" || table.shape.dims.size() != 1) return std::nullopt;
    auto v = literal_ints(table.literal);
    auto k = operand(1);
    if (!v || !k || v->empty() || static_cast<int64_t>(v->size()) != table.shape.dims[0]) return std::nullopt;
    return (*v)[static_cast<size_t>(std::clamp<int64_t>(*k, 0, static_cast<int64_t>(v->size()) - 1))];
  }
  if (in.operands.size() != 2) return std::nullopt;
  auto a = operand(0), b = operand(1);
  if (!a || !b) return std::nullopt;
  if (op == "add") return *a + *b;
  if (op == "subtract") return *a - *b;
  if (op == "multiply") return *a * *b;
  if (op == "maximum") return std::max(*a, *b);
  if (op == "minimum") return std::min(*a, *b);
  if ((op == "divide" || op == "remainder") && *b != 0) return op == "divide" ? *a / *b : *a % *b;
  return std::nullopt;
}

// `dimensions={dim}`, placed at `pos` (the all-reduce's, for messages).
Attribute dimensions_attribute(int64_t dim, Pos pos) {
  Attribute a;
  a.name = "dimensions";
  a.value = strprintf("{%lld}", static_cast<long long>(dim));
  a.pos = pos;
  a.value_pos = pos;
  return a;
}

}  // namespace

int64_t create_reduce_scatters(Module& m, int64_t devices) {
  if (const Attribute* s = m.attr("is_scheduled"); s && s->value == "true") return 0;
  if (const Attribute* r = m.attr("replica_count"); r && r->value != "1") return 0;  // groups of partitions only
  int64_t made = 0;
  for (Computation& c : m.computations) {
    std::vector<std::vector<int32_t>> users(c.instructions.size());
    for (size_t i = 0; i < c.instructions.size(); ++i)
      for (int32_t o : c.instructions[i].operands) users[static_cast<size_t>(o)].push_back(static_cast<int32_t>(i));
    for (size_t ai = 0; ai < c.instructions.size(); ++ai) {
      Instruction& ar = c.instructions[ai];
      if (ar.opcode != "all-reduce" || ar.root || !ar.shape.is_array() || ar.operands.size() != 1 ||
          users[ai].size() != 1)
        continue;
      const int32_t di = users[ai][0];
      Instruction& ds = c.instructions[static_cast<size_t>(di)];
      const size_t rank = ar.shape.dims.size();
      if (ds.opcode != "dynamic-slice" || ds.operands.size() != rank + 1 || ds.operands[0] != static_cast<int32_t>(ai) ||
          ds.shape.dims.size() != rank)
        continue;
      Groups groups;
      try {
        groups = replica_groups(ar, m.file);
      } catch (const std::exception&) {
        continue;
      }
      if (groups.empty()) {
        groups.emplace_back();
        for (int64_t d = 0; d < devices; ++d) groups.back().push_back(d);
      }
      // The one dimension the slice cuts into the group's blocks.
      int64_t dim = -1;
      for (size_t k = 0; k < rank; ++k)
        if (ds.shape.dims[k] != ar.shape.dims[k]) dim = dim < 0 ? static_cast<int64_t>(k) : -2;
      if (dim < 0) continue;
      const int64_t block = ds.shape.dims[static_cast<size_t>(dim)];
      bool ok = true;
      for (const auto& g : groups) {
        ok = ok && static_cast<int64_t>(g.size()) * block == ar.shape.dims[static_cast<size_t>(dim)];
        for (size_t r = 0; ok && r < g.size(); ++r)
          for (size_t k = 0; ok && k < rank; ++k) {
            const auto off = scalar_on(c, ds.operands[k + 1], g[r]);
            ok = off && *off == (static_cast<int64_t>(k) == dim ? static_cast<int64_t>(r) * block : 0);
          }
      }
      if (!ok) continue;
      ar.opcode = "reduce-scatter";
      ar.shape.dims = ds.shape.dims;
      ar.attrs.push_back(dimensions_attribute(dim, ar.pos));
      ds.opcode = "bitcast";
      ds.operands.resize(1);
      ds.operand_pos.resize(std::min<size_t>(ds.operand_pos.size(), 1));
      ds.attrs.erase(std::remove_if(ds.attrs.begin(), ds.attrs.end(),
                                    [](const Attribute& x) { return x.name == "dynamic_slice_sizes"; }),
                     ds.attrs.end());
      ++made;
    }
  }
  return made;
}

}  // namespace podsim::hlo

#include "workloads/einsum.h"

#include "base/error.h"

namespace podsim {
namespace {

bool has(const std::string& s, char c) { return s.find(c) != std::string::npos; }

}  // namespace

Einsum Einsum::parse(const std::string& eq) {
  auto bad = [&](const std::string& why) -> void {
    throw Error(Err::Internal, "einsum '" + eq + "': " + why);
  };
  Einsum e;
  size_t comma = eq.find(','), arrow = eq.find("->");
  if (comma == std::string::npos || arrow == std::string::npos || arrow < comma) bad("expected 'lhs,rhs->out'");
  e.lhs = eq.substr(0, comma);
  e.rhs = eq.substr(comma + 1, arrow - comma - 1);
  e.out = eq.substr(arrow + 2);
  for (const std::string* s : {&e.lhs, &e.rhs, &e.out}) {
    for (size_t i = 0; i < s->size(); ++i) {
      char c = (*s)[i];
      if (c < 'a' || c > 'z') bad("dimension names are lower-case letters");
      if (s->find(c, i + 1) != std::string::npos) bad(std::string("letter '") + c + "' repeats within one tensor");
    }
  }
  for (char c : e.out) {
    bool l = has(e.lhs, c), r = has(e.rhs, c);
    if (!l && !r) bad(std::string("output letter '") + c + "' is in no operand");
    if (l && r) e.batch += c;
    else if (l) e.lfree += c;
    else e.rfree += c;
  }
  for (char c : e.lhs)
    if (!has(e.out, c)) {
      if (!has(e.rhs, c)) bad(std::string("letter '") + c + "' is summed over one operand only");
      e.contract += c;
    }
  for (char c : e.rhs)
    if (!has(e.out, c) && !has(e.lhs, c)) bad(std::string("letter '") + c + "' is summed over one operand only");
  return e;
}

std::vector<int64_t> Einsum::sizes(const std::vector<int64_t>& ls, const std::vector<int64_t>& rs) const {
  if (ls.size() != lhs.size() || rs.size() != rhs.size())
    throw Error(Err::Internal, "einsum '" + text() + "' applied to operands of rank " + std::to_string(ls.size()) +
                                   " and " + std::to_string(rs.size()));
  std::vector<int64_t> sz(26, 0);
  auto take = [&](const std::string& letters, const std::vector<int64_t>& shape) {
    for (size_t i = 0; i < letters.size(); ++i) {
      int64_t& s = sz[letters[i] - 'a'];
      if (s != 0 && s != shape[i])
        throw Error(Err::Internal, "einsum '" + text() + "': dimension '" + std::string(1, letters[i]) + "' is " +
                                       std::to_string(s) + " in one operand and " + std::to_string(shape[i]) +
                                       " in the other");
      s = shape[i];
    }
  };
  take(lhs, ls);
  take(rhs, rs);
  return sz;
}

std::vector<int64_t> Einsum::out_shape(const std::vector<int64_t>& ls, const std::vector<int64_t>& rs) const {
  std::vector<int64_t> sz = sizes(ls, rs), shape;
  for (char c : out) shape.push_back(sz[c - 'a']);
  return shape;
}

int64_t Einsum::product(const std::vector<int64_t>& sizes, const std::string& letters) {
  int64_t p = 1;
  for (char c : letters) p *= sizes[c - 'a'];
  return p;
}

}  // namespace podsim

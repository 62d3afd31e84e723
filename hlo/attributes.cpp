#include "hlo/attributes.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <numeric>

#include "base/error.h"

namespace podsim::hlo {
namespace {

// Reads one attribute's value; errors point into it.
class Cursor {
 public:
  Cursor(const Attribute& a, const std::string& file, std::string what)
      : m_a(a), m_s(a.value), m_file(file), m_what(std::move(what)) {}

  bool done() const { return m_at >= m_s.size(); }
  char peek() const { return m_at < m_s.size() ? m_s[m_at] : '\0'; }
  bool eat(char c) {
    skip();
    if (peek() != c) return false;
    ++m_at;
    return true;
  }
  bool eat(const char* w) {
    skip();
    if (m_s.compare(m_at, std::strlen(w), w) != 0) return false;
    m_at += std::strlen(w);
    return true;
  }
  void need(char c) {
    if (!eat(c)) fail(std::string("'") + c + "'");
  }
  void skip() {
    while (m_at < m_s.size() && std::isspace(static_cast<unsigned char>(m_s[m_at]))) ++m_at;
  }
  bool number_ahead() {
    skip();
    return std::isdigit(static_cast<unsigned char>(peek())) || (peek() == '-' && m_at + 1 < m_s.size() &&
                                                                std::isdigit(static_cast<unsigned char>(m_s[m_at + 1])));
  }
  int64_t number() {
    skip();
    size_t b = m_at;
    if (peek() == '-') ++m_at;
    if (!std::isdigit(static_cast<unsigned char>(peek()))) {
      m_at = b;
      fail("a whole number");
    }
    int64_t v = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      if (v > (INT64_MAX - 9) / 10) fail("a number that fits in 64 bits");
      v = v * 10 + (m_s[m_at++] - '0');
    }
    return m_s[b] == '-' ? -v : v;
  }
  std::string word() {
    skip();
    size_t b = m_at;
    while (m_at < m_s.size() && (std::isalnum(static_cast<unsigned char>(m_s[m_at])) || m_s[m_at] == '_')) ++m_at;
    return m_s.substr(b, m_at - b);
  }
  // `{a,b,c}` after the opening brace was read.
  std::vector<int64_t> numbers_until(char close) {
    std::vector<int64_t> v;
    if (eat(close)) return v;
    while (true) {
      v.push_back(number());
      if (eat(close)) return v;
      need(',');
    }
  }
  // `[a,b]`
  std::vector<int64_t> bracketed() {
    need('[');
    return numbers_until(']');
  }
  void end() {
    skip();
    if (!done()) fail("the end of the value");
  }
  [[noreturn]] void fail(const std::string& expected) const {
    Pos p = m_a.value_pos;
    for (size_t i = 0; i < m_at && i < m_s.size(); ++i) {
      if (m_s[i] == '\n') {
        ++p.line;
        p.column = 1;
      } else {
        ++p.column;
      }
    }
    std::string found = done() ? "the end of the value" : "'" + std::string(1, m_s[m_at]) + "'";
    throw Error(Err::HloSyntax, SourceLocation{m_file, p.line, p.column, ""},
                "attribute " + m_a.name + "=" + shorten(m_s) + ": expected " + expected + " (" + m_what + "), found " +
                    found);
  }
  size_t at() const { return m_at; }
  void seek(size_t at) { m_at = at; }

 private:
  static std::string shorten(const std::string& s) { return s.size() > 60 ? s.substr(0, 57) + "..." : s; }
  const Attribute& m_a;
  const std::string& m_s;
  const std::string& m_file;
  std::string m_what;
  size_t m_at = 0;
};

[[noreturn]] void missing(const Instruction& in, const char* name, const std::string& file) {
  throw Error(Err::HloInvalid, SourceLocation{file, in.pos.line, in.pos.column, ""},
              "instruction '" + in.name + "' (" + in.opcode + ") has no attribute " + name);
}

// `[G,S]<=[dims]T(perm)` after nothing was read; the device ids in row-major order of [G,S].
std::vector<int64_t> iota_form(Cursor& c, std::vector<int64_t>& tile) {
  tile = c.bracketed();
  if (!c.eat("<=")) c.fail("'<=' in the iota form [dims]<=[reshape]");
  std::vector<int64_t> reshape = c.bracketed();
  std::vector<int64_t> perm(reshape.size());
  std::iota(perm.begin(), perm.end(), 0);
  if (c.eat('T')) {
    c.need('(');
    perm = c.numbers_until(')');
  }
  int64_t n = 1, m = 1;
  for (int64_t d : reshape) {
    if (d <= 0 || d > (int64_t{1} << 24)) c.fail("positive sizes below 2^24 in the reshape");
    n *= d;
    if (n > (int64_t{1} << 24)) c.fail("at most 2^24 devices");
  }
  for (int64_t d : tile) {
    if (d <= 0) c.fail("positive sizes");
    m *= d;
    if (m > (int64_t{1} << 24)) c.fail("at most 2^24 devices");
  }
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool permutation = perm.size() == reshape.size();
  for (size_t i = 0; i < sorted.size(); ++i) permutation = permutation && sorted[i] == static_cast<int64_t>(i);
  if (!permutation) c.fail("a permutation of the " + std::to_string(reshape.size()) + " reshape dimensions in T(...)");
  if (n != m) c.fail("the same device count on both sides of '<='");
  return iota_devices(reshape, perm);
}

}  // namespace

std::vector<int64_t> iota_devices(const std::vector<int64_t>& reshape, const std::vector<int64_t>& perm) {
  const size_t r = reshape.size();
  std::vector<int64_t> strides(r, 1);
  for (size_t i = r; i-- > 1;) strides[i - 1] = strides[i] * reshape[i];
  int64_t n = 1;
  for (int64_t d : reshape) n *= d;
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(n));
  std::vector<int64_t> idx(r, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t id = 0;
    for (size_t j = 0; j < r; ++j) id += idx[j] * strides[perm[j]];
    out.push_back(id);
    for (size_t j = r; j-- > 0;) {  // odometer over the transposed dims
      if (++idx[j] < reshape[perm[j]]) break;
      idx[j] = 0;
    }
  }
  return out;
}

std::optional<int64_t> integer(const Instruction& in, const char* name, const std::string& file) {
  const Attribute* a = in.attr(name);
  if (!a) return std::nullopt;
  Cursor c(*a, file, "a whole number");
  int64_t v = c.number();
  c.end();
  return v;
}

int64_t required_integer(const Instruction& in, const char* name, const std::string& file) {
  auto v = integer(in, name, file);
  if (!v) missing(in, name, file);
  return *v;
}

std::optional<std::vector<int64_t>> int_list(const Instruction& in, const char* name, const std::string& file) {
  const Attribute* a = in.attr(name);
  if (!a) return std::nullopt;
  Cursor c(*a, file, "a list of whole numbers such as {0,2}");
  c.need('{');
  std::vector<int64_t> v = c.numbers_until('}');
  c.end();
  return v;
}

std::vector<int64_t> required_ints(const Instruction& in, const char* name, const std::string& file) {
  auto v = int_list(in, name, file);
  if (!v) missing(in, name, file);
  return *v;
}

std::optional<std::string> word(const Instruction& in, const char* name) {
  const Attribute* a = in.attr(name);
  if (!a) return std::nullopt;
  std::string v = a->value;
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  if (!v.empty() && v.front() == '%') v = v.substr(1);
  return v;
}

std::string required_word(const Instruction& in, const char* name, const std::string& file) {
  auto v = word(in, name);
  if (!v) missing(in, name, file);
  return *v;
}

Groups replica_groups(const Instruction& in, const std::string& file) {
  const Attribute* a = in.attr("replica_groups");
  if (!a) return {};
  Cursor c(*a, file, "replica groups: {{0,1},{2,3}}, {} or the iota form [2,4]<=[8]");
  Groups g;
  if (c.peek() == '[') {
    std::vector<int64_t> tile;
    std::vector<int64_t> ids = iota_form(c, tile);
    if (tile.size() != 2) c.fail("two dimensions [groups,size] before '<='");
    for (int64_t i = 0; i < tile[0]; ++i)
      g.emplace_back(ids.begin() + i * tile[1], ids.begin() + (i + 1) * tile[1]);
    c.end();
    return g;
  }
  c.need('{');
  if (c.eat('}')) {
    c.end();
    return g;
  }
  while (true) {
    c.need('{');
    g.push_back(c.numbers_until('}'));
    if (c.eat('}')) break;
    c.need(',');
  }
  c.end();
  return g;
}

std::vector<std::pair<int64_t, int64_t>> source_target_pairs(const Instruction& in, const std::string& file) {
  const Attribute* a = in.attr("source_target_pairs");
  if (!a) missing(in, "source_target_pairs", file);
  Cursor c(*a, file, "pairs {{source,target},...}");
  std::vector<std::pair<int64_t, int64_t>> out;
  c.need('{');
  if (c.eat('}')) return out;
  while (true) {
    c.need('{');
    int64_t s = c.number();
    c.need(',');
    int64_t t = c.number();
    c.need('}');
    out.push_back({s, t});
    if (c.eat('}')) break;
    c.need(',');
  }
  c.end();
  return out;
}

SliceDims slice_dims(const Instruction& in, const std::string& file) {
  const Attribute* a = in.attr("slice");
  if (!a) missing(in, "slice", file);
  Cursor c(*a, file, "one [start:limit] or [start:limit:stride] per dimension");
  SliceDims s;
  c.need('{');
  if (!c.eat('}')) {
    while (true) {
      c.need('[');
      s.start.push_back(c.number());
      c.need(':');
      s.limit.push_back(c.number());
      s.stride.push_back(c.eat(':') ? c.number() : 1);
      c.need(']');
      if (c.eat('}')) break;
      c.need(',');
    }
  }
  c.end();
  return s;
}

PadDims pad_dims(const Instruction& in, const std::string& file) {
  const Attribute* a = in.attr("padding");
  if (!a) missing(in, "padding", file);
  Cursor c(*a, file, "low_high or low_high_interior per dimension, joined by 'x'");
  PadDims p;
  while (true) {
    p.low.push_back(c.number());
    c.need('_');
    p.high.push_back(c.number());
    p.interior.push_back(c.eat('_') ? c.number() : 0);
    if (!c.eat('x')) break;
  }
  c.end();
  return p;
}

Window window(const Instruction& in, const std::string& file, size_t rank) {
  Window w;
  w.size.assign(rank, 1);
  w.stride.assign(rank, 1);
  w.pad_low.assign(rank, 0);
  w.pad_high.assign(rank, 0);
  w.lhs_dilate.assign(rank, 1);
  w.rhs_dilate.assign(rank, 1);
  const Attribute* a = in.attr("window");
  if (!a) return w;
  Cursor c(*a, file, "a window such as {size=3x3 stride=2x2 pad=1_1x1_1}");
  c.need('{');
  while (!c.eat('}')) {
    std::string key = c.word();
    if (key.empty()) c.fail("a window field (size, stride, pad, lhs_dilate, rhs_dilate)");
    c.need('=');
    auto dims = [&](std::vector<int64_t>& out) {
      for (size_t d = 0;; ++d) {
        int64_t v = c.number();
        if (d >= rank) c.fail(std::to_string(rank) + " dimensions");
        out[d] = v;
        if (!c.eat('x')) break;
      }
    };
    if (key == "size") dims(w.size);
    else if (key == "stride") dims(w.stride);
    else if (key == "lhs_dilate") dims(w.lhs_dilate);
    else if (key == "rhs_dilate") dims(w.rhs_dilate);
    else if (key == "pad") {
      for (size_t d = 0;; ++d) {
        if (d >= rank) c.fail(std::to_string(rank) + " dimensions");
        w.pad_low[d] = c.number();
        c.need('_');
        w.pad_high[d] = c.number();
        if (!c.eat('x')) break;
      }
    } else if (key == "rhs_reversal") {
      for (;;) {
        c.number();
        if (!c.eat('x')) break;
      }
    } else {
      c.fail("a window field (size, stride, pad, lhs_dilate, rhs_dilate), not '" + key + "'");
    }
  }
  c.end();
  for (size_t d = 0; d < rank; ++d)
    if (w.size[d] < 1 || w.stride[d] < 1 || w.lhs_dilate[d] < 1 || w.rhs_dilate[d] < 1)
      c.fail("sizes, strides and dilations of at least 1");
  return w;
}

ConvLabels conv_labels(const Instruction& in, const std::string& file) {
  const Attribute* a = in.attr("dim_labels");
  if (!a) missing(in, "dim_labels", file);
  Cursor c(*a, file, "dimension labels such as b01f_01io->b01f");
  ConvLabels l;
  const std::string& v = a->value;
  size_t us = v.find('_'), ar = v.find("->");
  if (us == std::string::npos || ar == std::string::npos || ar < us) c.fail("'<input>_<filter>-><output>'");
  std::string lhs = v.substr(0, us), rhs = v.substr(us + 1, ar - us - 1), out = v.substr(ar + 2);
  auto read = [&](const std::string& s, char a1, char a2, int64_t& p1, int64_t& p2, std::vector<int64_t>& sp) {
    std::vector<std::pair<int, int64_t>> spatial;
    for (size_t i = 0; i < s.size(); ++i) {
      char ch = s[i];
      if (ch == a1) p1 = static_cast<int64_t>(i);
      else if (ch == a2) p2 = static_cast<int64_t>(i);
      else if (std::isdigit(static_cast<unsigned char>(ch))) spatial.push_back({ch - '0', static_cast<int64_t>(i)});
      else c.fail(std::string("labels ") + a1 + ", " + a2 + " and spatial digits, not '" + ch + "'");
    }
    std::sort(spatial.begin(), spatial.end());
    for (auto& [k, i] : spatial) sp.push_back(i);
    if (p1 < 0 || p2 < 0) c.fail(std::string("both '") + a1 + "' and '" + a2 + "' in '" + s + "'");
  };
  read(lhs, 'b', 'f', l.in_batch, l.in_feature, l.in_spatial);
  read(rhs, 'i', 'o', l.k_in, l.k_out, l.k_spatial);
  read(out, 'b', 'f', l.out_batch, l.out_feature, l.out_spatial);
  if (l.in_spatial.size() != l.k_spatial.size() || l.out_spatial.size() != l.in_spatial.size())
    c.fail("as many spatial dimensions in the input, filter and output");
  return l;
}

std::optional<Sharding> sharding(const Instruction& in, const std::string& file) {
  const Attribute* a = in.attr("sharding");
  if (!a) return std::nullopt;
  Cursor c(*a, file, "a sharding: {replicated}, {maximal device=N}, {devices=[2,1]0,1} or {devices=[2,1]<=[2]}");
  // One sharding from '{' to its '}'.
  std::function<Sharding()> one = [&]() -> Sharding {
    Sharding s;
    c.need('{');
    c.skip();
    if (c.peek() == '{') {  // a tuple's shardings
      s.kind = Sharding::Kind::Tuple;
      while (true) {
        s.tuple.push_back(one());
        if (c.eat('}')) return s;
        c.need(',');
      }
    }
    if (c.eat('}')) {
      s.kind = Sharding::Kind::Tuple;  // `{}`: an empty tuple's
      return s;
    }
    std::string w = c.word();
    if (w == "replicated") s.kind = Sharding::Kind::Replicated;
    else if (w == "manual") s.kind = Sharding::Kind::Manual;
    else if (w == "unknown") s.kind = Sharding::Kind::Unknown;
    else if (w == "maximal") {
      s.kind = Sharding::Kind::Maximal;
      if (c.word() != "device") c.fail("'device=' after 'maximal'");
      c.need('=');
      s.device = c.number();
    } else if (w == "devices") {
      s.kind = Sharding::Kind::Tiled;
      c.need('=');
      c.skip();
      size_t at = c.at();
      std::vector<int64_t> tile = c.bracketed();
      c.skip();
      if (c.peek() == '<') {
        c.seek(at);
        s.devices = iota_form(c, s.tile_dims);
      } else {
        s.tile_dims = tile;
        for (;;) {
          s.devices.push_back(c.number());
          if (!c.eat(',')) break;
        }
        int64_t n = 1;
        for (int64_t d : tile) n *= d;
        if (n != static_cast<int64_t>(s.devices.size()))
          c.fail(std::to_string(n) + " device ids for tiles " + std::to_string(tile.size()) + "-D");
      }
    } else {
      c.fail("replicated, maximal, manual or devices=");
    }
    // Trailing words: last_tile_dim_replicate, last_tile_dims={...}, metadata={...}.
    while (true) {
      c.skip();
      if (c.peek() == '}') break;
      std::string extra = c.word();
      if (extra == "last_tile_dim_replicate") {
        s.replicated_last = true;
      } else if (extra == "last_tile_dims") {
        c.need('=');
        c.need('{');
        int depth = 1;
        while (depth > 0 && !c.done()) {
          char ch = c.peek();
          depth += ch == '{' ? 1 : ch == '}' ? -1 : 0;
          c.seek(c.at() + 1);
        }
        s.replicated_last = true;
      } else if (extra == "metadata") {
        c.need('=');
        c.need('{');
        int depth = 1;
        while (depth > 0 && !c.done()) {
          char ch = c.peek();
          if (ch == '"') {
            c.seek(c.at() + 1);
            while (!c.done() && c.peek() != '"') c.seek(c.at() + (c.peek() == '\\' ? 2 : 1));
          }
          depth += ch == '{' ? 1 : ch == '}' ? -1 : 0;
          c.seek(c.at() + 1);
        }
      } else {
        c.fail("'}' or last_tile_dim_replicate");
      }
    }
    c.need('}');
    return s;
  };
  Sharding s = one();
  c.end();
  return s;
}

std::optional<int64_t> known_trip_count(const Instruction& in) {
  const Attribute* a = in.attr("backend_config");
  if (!a) return std::nullopt;
  const std::string& v = a->value;
  size_t k = v.find("known_trip_count");
  if (k == std::string::npos) return std::nullopt;
  size_t n = v.find("\"n\"", k);
  if (n == std::string::npos) return std::nullopt;
  size_t i = n + 3;
  while (i < v.size() && (v[i] == ':' || v[i] == ' ' || v[i] == '"' || v[i] == '\\')) ++i;
  int64_t t = 0;
  size_t b = i;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i])) && t < (int64_t{1} << 40)) t = t * 10 + (v[i++] - '0');
  if (i == b) return std::nullopt;
  return t;
}

std::optional<double> config_number(const Instruction& in, const std::string& key) {
  const Attribute* a = in.attr("backend_config");
  if (!a) return std::nullopt;
  const std::string& v = a->value;
  for (size_t k = v.find(key); k != std::string::npos; k = v.find(key, k + 1)) {
    // A whole key: not preceded or followed by a name character.
    auto namec = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
    if (k > 0 && namec(v[k - 1])) continue;
    size_t i = k + key.size();
    if (i < v.size() && namec(v[i])) continue;
    while (i < v.size() && (v[i] == '"' || v[i] == '\\' || v[i] == ' ' || v[i] == ':' || v[i] == '=')) ++i;
    size_t b = i;
    while (i < v.size() && (std::isdigit(static_cast<unsigned char>(v[i])) || v[i] == '.' || v[i] == '-' ||
                            v[i] == '+' || v[i] == 'e' || v[i] == 'E'))
      ++i;
    if (i == b) continue;
    try {
      return std::stod(v.substr(b, i - b));
    } catch (const std::exception&) {
      continue;
    }
  }
  return std::nullopt;
}

}  // namespace podsim::hlo

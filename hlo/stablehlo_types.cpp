// The StableHLO reader's positions, types and attribute values (hlo/stablehlo_ir.h).
#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>

#include "hlo/stablehlo_cursor.h"

namespace podsim::hlo::mlir {

Lines::Lines(std::string_view text, std::string file) : m_text(text), m_file(std::move(file)) {
  m_starts.push_back(0);
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') m_starts.push_back(i + 1);
}

Pos Lines::pos(size_t at) const {
  auto it = std::upper_bound(m_starts.begin(), m_starts.end(), at);
  const size_t line = static_cast<size_t>(it - m_starts.begin());
  return {static_cast<int32_t>(line), static_cast<int32_t>(at - m_starts[line - 1] + 1)};
}

void Lines::fail(size_t at, Err e, const std::string& what) const {
  const Pos p = pos(at);
  throw Error(e, SourceLocation{m_file, p.line, p.column, ""}, what);
}

namespace {

Type element_type(const std::string& t) {
  static const std::map<std::string, Type> k = {
      {"i1", Type::Pred}, {"i2", Type::S2}, {"i4", Type::S4}, {"i8", Type::S8}, {"i16", Type::S16},
      {"i32", Type::S32}, {"i64", Type::S64}, {"si8", Type::S8}, {"si16", Type::S16}, {"si32", Type::S32},
      {"si64", Type::S64}, {"ui2", Type::U2}, {"ui4", Type::U4}, {"ui8", Type::U8}, {"ui16", Type::U16},
      {"ui32", Type::U32}, {"ui64", Type::U64}, {"f16", Type::F16}, {"bf16", Type::BF16}, {"f32", Type::F32},
      {"f64", Type::F64}, {"f4E2M1FN", Type::F4E2M1FN}, {"f8E3M4", Type::F8E3M4}, {"f8E4M3", Type::F8E4M3},
      {"f8E4M3FN", Type::F8E4M3FN}, {"f8E4M3B11FNUZ", Type::F8E4M3B11FNUZ}, {"f8E4M3FNUZ", Type::F8E4M3FNUZ},
      {"f8E5M2", Type::F8E5M2}, {"f8E5M2FNUZ", Type::F8E5M2FNUZ}, {"f8E8M0FNU", Type::F8E8M0FNU},
      {"complex<f32>", Type::C64}, {"complex<f64>", Type::C128}};
  auto it = k.find(t);
  return it == k.end() ? Type::Invalid : it->second;
}

}  // namespace

Shape parse_type(const Lines& l, size_t& at, size_t end, Quant* quant) {
  std::string_view s = l.text();
  auto starts = [&](const char* w) { return s.compare(at, std::strlen(w), w) == 0; };
  std::function<Type(size_t&, size_t)> element = [&](size_t& i, size_t stop) -> Type {
    const size_t b = i;
    if (s.compare(i, 15, "!quant.uniform<") == 0) {
      i += 15;
      const Type storage = element(i, stop);
      Quant q;
      q.any = true;
      const int bits = type_bits(storage);
      const bool is_unsigned = storage == Type::U2 || storage == Type::U4 || storage == Type::U8 ||
                               storage == Type::U16 || storage == Type::U32;
      if (is_float(storage) || bits < 2 || bits > 32) l.fail(b, Err::HloUnsupported, "a quantized type whose storage is not an integer of 2 to 32 bits");
      q.lo = is_unsigned ? 0 : -(int64_t{1} << (bits - 1));
      q.hi = is_unsigned ? (int64_t{1} << bits) - 1 : (int64_t{1} << (bits - 1)) - 1;
      auto integer = [&]() {
        const size_t k = i;
        if (i < stop && (s[i] == '-' || s[i] == '+')) ++i;
        while (i < stop && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
        if (k == i) l.fail(k, Err::HloSyntax, "expected a whole number in a quantized type");
        return std::stoll(std::string(s.substr(k, i - k)));
      };
      auto expect = [&](char c) {
        while (i < stop && s[i] == ' ') ++i;
        if (i >= stop || s[i] != c) l.fail(i, Err::HloSyntax, std::string("expected '") + c + "' in a quantized type (!quant.uniform<i8:f32, 0.1:-3>)");
        ++i;
        while (i < stop && s[i] == ' ') ++i;
      };
      if (i < stop && s[i] == '<') {  // the storage range
        ++i;
        q.lo = integer();
        expect(':');
        q.hi = integer();
        expect('>');
      }
      expect(':');
      q.expressed = element(i, stop);
      if (i < stop && s[i] == ':') {
        ++i;
        q.axis = integer();
      }
      expect(',');
      auto scale_zero = [&]() {
        const size_t k = i;
        while (i < stop && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == 'e' || s[i] == 'E' ||
                            s[i] == '-' || s[i] == '+'))
          ++i;
        if (k == i) l.fail(k, Err::HloSyntax, "expected a scale in a quantized type");
        q.scales.push_back(std::stod(std::string(s.substr(k, i - k))));
        int64_t z = 0;
        if (i < stop && s[i] == ':') {
          ++i;
          z = integer();
        }
        q.zeros.push_back(z);
      };
      if (i < stop && s[i] == '{') {
        ++i;
        while (true) {
          while (i < stop && s[i] == ' ') ++i;
          scale_zero();
          while (i < stop && s[i] == ' ') ++i;
          if (i < stop && s[i] == ',') {
            ++i;
            continue;
          }
          expect('}');
          break;
        }
      } else {
        scale_zero();
      }
      if (q.axis < 0 && q.scales.size() != 1)
        l.fail(b, Err::HloSyntax, "scales per index without their axis (!quant.uniform<i8:f32:AXIS, {...}>)");
      expect('>');
      if (quant) *quant = q;
      return storage;
    }
    if (s.compare(i, 8, "complex<") == 0) {
      i = s.find('>', i);
      if (i == std::string_view::npos || i > stop) l.fail(b, Err::HloSyntax, "a 'complex<' type that never closes");
      ++i;
    } else {
      while (i < stop && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
    }
    const std::string t(s.substr(b, i - b));
    const Type ty = element_type(t);
    if (ty == Type::Invalid)
      l.fail(b, Err::HloSyntax, "unknown element type '" + t + "' (valid: i1, i8, i32, i64, ui8, ui32, bf16, f16, f32, "
                                "f64, f8E4M3FN, f8E5M2, complex<f32>, ...)");
    return ty;
  };
  Shape sh;
  if (starts("!stablehlo.token") || starts("!mhlo.token")) {
    sh.type = Type::Token;
    at += starts("!stablehlo.token") ? 16 : 11;
    return sh;
  }
  if (starts("tuple<")) {
    sh.type = Type::Tuple;
    at += 6;
    while (at < end && (s[at] == ' ')) ++at;
    if (at < end && s[at] == '>') {
      ++at;
      return sh;
    }
    while (true) {
      while (at < end && space(s[at])) ++at;
      sh.tuple.push_back(parse_type(l, at, end));
      while (at < end && space(s[at])) ++at;
      if (at < end && s[at] == ',') {
        ++at;
        continue;
      }
      if (at < end && s[at] == '>') {
        ++at;
        return sh;
      }
      l.fail(at, Err::HloSyntax, "expected ',' or '>' in a tuple type");
    }
  }
  if (!starts("tensor<")) {
    if (at < end && (std::isalpha(static_cast<unsigned char>(s[at])) || starts("!quant."))) {  // a bare element type
      sh.type = element(at, end);
      return sh;
    }
    l.fail(at, Err::HloSyntax, "expected a type such as tensor<4x8xf32>, found '" +
                                   std::string(s.substr(at, std::min<size_t>(16, end - std::min(at, end)))) + "'");
  }
  const size_t b = at;
  at += 7;
  while (at < end) {
    if (s[at] == '?') {
      sh.dims.push_back(-1);
      ++at;
    } else if (std::isdigit(static_cast<unsigned char>(s[at]))) {
      int64_t d = 0;
      while (at < end && std::isdigit(static_cast<unsigned char>(s[at]))) {
        if (d > (int64_t{1} << 50)) l.fail(at, Err::HloSyntax, "a dimension too large");
        d = d * 10 + (s[at++] - '0');
      }
      sh.dims.push_back(d);
    } else {
      break;
    }
    if (at >= end || s[at] != 'x') l.fail(at, Err::HloSyntax, "expected 'x' after a dimension in a tensor type");
    ++at;
  }
  sh.type = element(at, end);
  if (at < end && s[at] == ',') {  // an encoding (bounds, sparsity): read past
    int depth = 0;
    while (at < end && !(depth == 0 && s[at] == '>')) {
      depth += s[at] == '<' ? 1 : s[at] == '>' ? -1 : 0;
      ++at;
    }
  }
  if (at >= end || s[at] != '>') l.fail(b, Err::HloSyntax, "a tensor type that does not close with '>'");
  ++at;
  return sh;
}

std::vector<int64_t> ints_in(const std::string& text) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < text.size();) {
    const bool neg = text[i] == '-' && i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i + 1]));
    if (std::isdigit(static_cast<unsigned char>(text[i])) || neg) {
      if (i > 0 && (std::isalpha(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_')) {  // i64, f32
        while (i < text.size() && std::isalnum(static_cast<unsigned char>(text[i]))) ++i;
        continue;
      }
      size_t used = 0;
      out.push_back(std::stoll(text.substr(i), &used));
      i += used;
    } else {
      ++i;
    }
  }
  return out;
}

std::vector<int64_t> int_array(const Lines& l, const Attr& a) {
  std::string v = a.value;
  if (v.rfind("array<", 0) == 0) {  // array<i64: 1, 2>
    size_t colon = v.find(':');
    if (colon == std::string::npos) return {};
    return ints_in(v.substr(colon + 1));
  }
  if (v.rfind("dense<", 0) == 0) {  // dense<[1, 2]> : tensor<2xi64>
    size_t close = v.rfind('>', v.find(" : ") == std::string::npos ? v.size() : v.find(" : "));
    return ints_in(v.substr(6, close == std::string::npos ? std::string::npos : close - 6));
  }
  if (!v.empty() && v.front() == '[') return ints_in(v);
  l.fail(a.at, Err::HloSyntax, "expected a list of whole numbers such as [0, 1] or array<i64: 0, 1>, found '" + v + "'");
}

int64_t int_value(const Lines& l, const Attr& a) {
  std::vector<int64_t> v = ints_in(a.value.substr(0, a.value.find(':')));
  if (v.size() != 1) l.fail(a.at, Err::HloSyntax, "expected a whole number such as 1 : i64, found '" + a.value + "'");
  return v[0];
}

std::string field(const std::string& text, const std::string& key) {
  for (size_t k = text.find(key); k != std::string::npos; k = text.find(key, k + 1)) {
    if (k > 0 && (std::isalnum(static_cast<unsigned char>(text[k - 1])) || text[k - 1] == '_')) continue;
    size_t i = k + key.size();
    while (i < text.size() && text[i] == ' ') ++i;
    if (i >= text.size() || text[i] != '=') continue;
    ++i;
    while (i < text.size() && text[i] == ' ') ++i;
    size_t b = i;
    int depth = 0;
    while (i < text.size()) {
      char c = text[i];
      if (c == '[' || c == '(' || c == '{' || c == '<') ++depth;
      else if (c == ']' || c == ')' || c == '}' || c == '>') {
        if (depth == 0) break;
        --depth;
      } else if (c == ',' && depth == 0) break;
      ++i;
    }
    return text.substr(b, i - b);
  }
  return "";
}

std::string unquote(const std::string& s) {
  if (s.size() < 2 || s.front() != '"') return s;
  std::string out;
  for (size_t i = 1; i + 1 < s.size(); ++i) {
    if (s[i] == '\\' && i + 2 < s.size()) {
      char n = s[i + 1];
      if (n == 'n') out += '\n';
      else if (n == 't') out += '\t';
      else if (n == '"' || n == '\\') out += n;
      else if (std::isxdigit(static_cast<unsigned char>(n)) && std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
        out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
        ++i;
      } else out += n;
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string string_field(const std::string& dict, const std::string& key) {
  for (size_t k = dict.find(key); k != std::string::npos; k = dict.find(key, k + 1)) {
    if (k > 0 && (std::isalnum(static_cast<unsigned char>(dict[k - 1])) || dict[k - 1] == '.' || dict[k - 1] == '_')) continue;
    size_t i = k + key.size();
    while (i < dict.size() && space(dict[i])) ++i;
    if (i >= dict.size() || dict[i] != '=') continue;
    ++i;
    while (i < dict.size() && space(dict[i])) ++i;
    if (i >= dict.size() || dict[i] != '"') continue;
    size_t e = i + 1;
    while (e < dict.size() && dict[e] != '"') e += dict[e] == '\\' ? 2 : 1;
    return unquote(dict.substr(i, e - i + 1));
  }
  return "";
}

std::vector<std::pair<std::string, int64_t>> mesh_axes(const Lines& l, size_t at, const std::string& text) {
  std::vector<std::pair<std::string, int64_t>> axes;
  const size_t end = text.find(']');
  for (size_t q = text.find('"'); q != std::string::npos && q < end; q = text.find('"', q)) {
    size_t e = text.find('"', q + 1);
    if (e == std::string::npos) break;
    std::string axis = text.substr(q + 1, e - q - 1);
    size_t eq = text.find('=', e);
    if (eq == std::string::npos) l.fail(at, Err::HloSyntax, "mesh axis \"" + axis + "\" has no size");
    int64_t n = 0;
    size_t i = eq + 1;
    while (i < text.size() && space(text[i])) ++i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) n = n * 10 + (text[i++] - '0');
    if (n < 1) l.fail(at, Err::HloSyntax, "mesh axis \"" + axis + "\" needs a size of at least 1");
    axes.push_back({axis, n});
    q = i;
  }
  return axes;
}

}  // namespace podsim::hlo::mlir

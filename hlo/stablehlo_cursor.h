// The StableHLO reader's cursor over MLIR text (hlo/stablehlo_read.cpp reads operations with it): blanks, comments
// and locations skipped, balanced brackets, strings, attribute dictionaries and values, SSA references and types.
#pragma once

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <string_view>

#include "hlo/stablehlo_ir.h"

namespace podsim::hlo::mlir {

inline bool word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$' || c == '-';
}
inline bool space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

class Cursor {
 public:
  explicit Cursor(const Lines& l) : m_l(l), m_s(l.text()) {}

 protected:
  const Lines& m_l;
  std::string_view m_s;
  size_t m_at = 0;

  char peek(size_t k = 0) const { return m_at + k < m_s.size() ? m_s[m_at + k] : '\0'; }
  [[noreturn]] void fail(const std::string& what) const { m_l.fail(m_at, Err::HloSyntax, what); }
  [[noreturn]] void expected(const std::string& what) const {
    std::string found = "end of file";
    if (m_at < m_s.size()) {
      size_t n = 0;
      while (m_at + n < m_s.size() && n < 24 && word_char(m_s[m_at + n])) ++n;
      found = "'" + std::string(m_s.substr(m_at, std::max<size_t>(n, 1))) + "'";
      if (found == "'\n'") found = "end of line";
    }
    fail("expected " + what + ", found " + found);
  }
  void need(char c, const std::string& what) {
    skip();
    if (peek() != c) expected(what);
    ++m_at;
  }
  bool eat(char c) {
    skip();
    if (peek() != c) return false;
    ++m_at;
    return true;
  }
  bool word_ahead(std::string_view w) const {
    if (m_s.compare(m_at, w.size(), w) != 0) return false;
    return m_at + w.size() >= m_s.size() || !word_char(m_s[m_at + w.size()]);
  }
  std::string take_word() {
    size_t b = m_at;
    while (m_at < m_s.size() && word_char(m_s[m_at])) {
      if (m_s[m_at] == '-' && peek(1) == '>') break;
      ++m_at;
    }
    return std::string(m_s.substr(b, m_at - b));
  }

  // Between top-level declarations: also `#loc1 = loc(...)` and attribute aliases, a line each.
  void skip_top() {
    while (true) {
      skip();
      if (peek() != '#') return;
      while (m_at < m_s.size() && m_s[m_at] != '\n') ++m_at;
    }
  }
  // Whitespace, `// ...` comments and `loc(...)` trailers.
  void skip() {
    while (m_at < m_s.size()) {
      char c = m_s[m_at];
      if (space(c)) {
        ++m_at;
      } else if (c == '/' && peek(1) == '/') {
        while (m_at < m_s.size() && m_s[m_at] != '\n') ++m_at;
      } else if (m_s.compare(m_at, 4, "loc(") == 0 && (m_at == 0 || !word_char(m_s[m_at - 1]))) {
        m_at += 3;
        balanced();
      } else {
        break;
      }
    }
  }
  void skip_string() {
    const size_t b = m_at;
    ++m_at;
    while (m_at < m_s.size() && m_s[m_at] != '"') m_at += m_s[m_at] == '\\' ? 2 : 1;
    if (m_at >= m_s.size()) m_l.fail(b, Err::HloSyntax, "a string that never ends");
    ++m_at;
  }
  // From an opening bracket ( [ { < to just past its partner; strings kept whole, `->` is no bracket.
  void balanced() {
    const size_t b = m_at;
    std::string stack;
    do {
      if (m_at >= m_s.size())
        m_l.fail(b, Err::HloSyntax, std::string("a '") + m_s[b] + "' that is never closed");
      char c = m_s[m_at];
      if (c == '"') {
        skip_string();
        continue;
      }
      if (c == '-' && peek(1) == '>') {
        m_at += 2;
        continue;
      }
      if (c == '(') stack.push_back(')');
      else if (c == '[') stack.push_back(']');
      else if (c == '{') stack.push_back('}');
      else if (c == '<') stack.push_back('>');
      else if (c == ')' || c == ']' || c == '}' || c == '>') {
        if (stack.empty() || c != stack.back())
          m_l.fail(m_at, Err::HloSyntax, std::string("found '") + c + "' where '" + (stack.empty() ? '?' : stack.back()) +
                                             "' closes the bracket at line " + std::to_string(m_l.pos(b).line) + ":" +
                                             std::to_string(m_l.pos(b).column));
        stack.pop_back();
      }
      ++m_at;
    } while (!stack.empty());
  }
  // A value up to a ',' or a closing bracket at depth 0 (dictionary entries: `1 : i64`, `dense<0> : tensor<2xi64>`).
  Attr dict_value() {
    skip();
    Attr a;
    a.at = m_at;
    while (m_at < m_s.size()) {
      char c = m_s[m_at];
      if (c == ',' || c == '}' || c == ')' || c == ']' || c == '>') break;
      if (c == '"') skip_string();
      else if (c == '(' || c == '[' || c == '{' || c == '<') balanced();
      else if (c == '-' && peek(1) == '>') m_at += 2;
      else ++m_at;
    }
    size_t e = m_at;
    while (e > a.at && space(m_s[e - 1])) --e;
    a.value = std::string(m_s.substr(a.at, e - a.at));
    return a;
  }
  // A keyword's value in a pretty form: one run without blanks (brackets whole), or `[1] x [0]`.
  Attr pretty_value() {
    skip();
    Attr a;
    a.at = m_at;
    while (m_at < m_s.size()) {
      char c = m_s[m_at];
      if (c == '"') skip_string();
      else if (c == '(' || c == '[' || c == '{' || c == '<') balanced();
      else if (c == '-' && peek(1) == '>') m_at += 2;
      else if (word_char(c) || c == '#' || c == '@' || c == '!' || c == '+') ++m_at;
      else if (space(c)) {  // `[1] x [0]`
        size_t k = m_at;
        while (k < m_s.size() && space(m_s[k])) ++k;
        if (k + 1 < m_s.size() && m_s[k] == 'x' && space(m_s[k + 1])) {
          m_at = k + 1;
          while (m_at < m_s.size() && space(m_s[m_at])) ++m_at;
          continue;
        }
        break;
      } else break;
    }
    if (m_at == a.at) expected("a value");
    a.value = std::string(m_s.substr(a.at, m_at - a.at));
    return a;
  }
  std::string key() {
    skip();
    if (peek() == '"') {
      size_t b = m_at;
      skip_string();
      return std::string(m_s.substr(b + 1, m_at - b - 2));
    }
    std::string k = take_word();
    if (k.empty()) expected("an attribute name");
    return k;
  }
  // `{name = value, flag, ...}`
  void dict(std::map<std::string, Attr>& out) {
    need('{', "'{'");
    if (eat('}')) return;
    while (true) {
      std::string k = key();
      skip();
      Attr a;
      if (peek() == '=') {
        ++m_at;
        a = dict_value();
      } else {
        a.at = m_at;
        a.value = "unit";
      }
      out[k] = a;
      if (eat('}')) return;
      need(',', "',' or '}' in an attribute dictionary");
    }
  }
  // `%name`, `%name#1`
  std::string ref() {
    skip();
    if (peek() != '%') expected("a value such as %0");
    size_t b = m_at++;
    while (m_at < m_s.size() && (word_char(m_s[m_at]) || m_s[m_at] == '#') && m_s[m_at] != '-') ++m_at;
    return std::string(m_s.substr(b, m_at - b));
  }
  Shape type() {
    skip();
    return parse_type(m_l, m_at, m_s.size());
  }
  Shape type(std::vector<Quant>& quant) {  // the quantization beside it
    skip();
    Quant q;
    Shape t = parse_type(m_l, m_at, m_s.size(), &q);
    quant.push_back(q);
    return t;
  }
  // `T, T` or `(T, T) -> T` / `-> (T, T)`.
  void types(Op& op) {
    skip();
    if (peek() == '(') {
      ++m_at;
      if (!eat(')')) {
        while (true) {
          op.operand_types.push_back(type(op.operand_quant));
          if (eat(')')) break;
          need(',', "',' or ')' in the operands' types");
        }
      }
      skip();
      if (peek() != '-' || peek(1) != '>') expected("'->' and the results' types");
      m_at += 2;
      skip();
      if (peek() == '(') {
        ++m_at;
        if (!eat(')')) {
          while (true) {
            op.result_types.push_back(type(op.result_quant));
            if (eat(')')) break;
            need(',', "',' or ')' in the results' types");
          }
        }
      } else {
        op.result_types.push_back(type(op.result_quant));
      }
      return;
    }
    std::vector<Quant> lq;
    std::vector<Shape> list{type(lq)};
    while (true) {
      size_t save = m_at;
      skip();
      if (peek() != ',') {
        m_at = save;
        break;
      }
      ++m_at;
      list.push_back(type(lq));
    }
    {  // `T -> (R, S)`: one operand's type unparenthesized (chlo.top_k)
      size_t save = m_at;
      skip();
      if (peek() == '-' && peek(1) == '>') {
        m_at += 2;
        skip();
        op.operand_types = list;
        op.operand_quant = lq;
        if (!eat('(')) {
          op.result_types.push_back(type(op.result_quant));
          return;
        }
        while (true) {
          op.result_types.push_back(type(op.result_quant));
          if (eat(')')) break;
          need(',', "',' or ')' in the results' types");
        }
        return;
      }
      m_at = save;
    }
    // A list names the operands' types, the result's last (select: `pred, T`); as many results as are named.
    size_t n = std::max<size_t>(1, op.results.size());
    if (list.size() >= n) {
      op.result_types.assign(list.end() - static_cast<std::ptrdiff_t>(n), list.end());
      op.result_quant.assign(lq.end() - static_cast<std::ptrdiff_t>(n), lq.end());
    }
    op.operand_types = list;
    op.operand_quant = lq;
  }
  // `(%a: T, %b: T)` after the '('.
  void block_args(Region& r) {
    if (eat(')')) return;
    while (true) {
      r.args.push_back(ref());
      need(':', "':' and the argument's type");
      r.arg_types.push_back(type());
      skip();
      if (peek() == '{') {  // argument attributes
        std::map<std::string, Attr> ignored;
        dict(ignored);
      }
      if (eat(')')) return;
      need(',', "',' or ')' in the block's arguments");
    }
  }
};

}  // namespace podsim::hlo::mlir

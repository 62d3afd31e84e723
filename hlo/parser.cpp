#include "hlo/parser.h"

#include <zlib.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "hlo/stablehlo_parser.h"

namespace podsim::hlo {
namespace {

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-' || c == '$';
}

// What a token looks like in a message: up to 24 characters of the text at the position, or "end of file".
std::string token_at(std::string_view s, size_t at) {
  if (at >= s.size()) return "end of file";
  size_t n = 0;
  if (name_char(s[at]) || s[at] == '%') {
    while (at + n < s.size() && n < 24 && (name_char(s[at + n]) || (n == 0 && s[at] == '%'))) ++n;
  } else {
    n = 1;
  }
  std::string t(s.substr(at, n));
  if (t == "\n") return "end of line";
  return "'" + t + "'";
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& file) : m_s(text), m_file(file) {}

  Module module() {
    Module m;
    m.file = m_file;
    skip();
    if (word_ahead("HloModule")) {
      take_word();
      skip();
      if (peek() == '%') advance();
      m.name = name("the module's name after 'HloModule'");
      skip();
      while (peek() == ',') {
        advance();
        skip();
        m.attrs.push_back(attribute());
        skip();
      }
    }
    while (true) {
      skip();
      if (at_end()) break;
      if (word_ahead("HloModule"))
        fail("a second 'HloModule': the file holds several modules (split it at its `// -----` lines)");
      m.computations.push_back(computation());
      Computation& c = m.computations.back();
      if (m.index.count(c.name)) fail_at(c.pos, Err::HloInvalid, "computation '" + c.name + "' is defined twice");
      m.index.emplace(c.name, static_cast<int32_t>(m.computations.size() - 1));
      if (c.entry) {
        if (m.entry >= 0) fail_at(c.pos, Err::HloInvalid, "a second ENTRY computation '" + c.name + "'");
        m.entry = static_cast<int32_t>(m.computations.size() - 1);
      }
    }
    if (m.computations.empty()) fail("no computation: an HLO module has at least its entry computation");
    if (m.entry < 0) m.entry = static_cast<int32_t>(m.computations.size() - 1);
    return m;
  }

 private:
  std::string_view m_s;
  std::string m_file;
  size_t m_at = 0;
  int32_t m_line = 1;
  size_t m_line_start = 0;

  bool at_end() const { return m_at >= m_s.size(); }
  char peek(size_t k = 0) const { return m_at + k < m_s.size() ? m_s[m_at + k] : '\0'; }
  void advance() {
    if (m_s[m_at] == '\n') {
      ++m_line;
      m_line_start = m_at + 1;
    }
    ++m_at;
  }
  Pos pos() const { return {m_line, static_cast<int32_t>(m_at - m_line_start + 1)}; }

  [[noreturn]] void fail_at(Pos p, Err e, const std::string& what) const {
    throw Error(e, SourceLocation{m_file, p.line, p.column, ""}, what);
  }
  [[noreturn]] void fail(const std::string& what) const { fail_at(pos(), Err::HloSyntax, what); }
  [[noreturn]] void expected(const std::string& what) const {
    fail("expected " + what + ", found " + token_at(m_s, m_at));
  }

  // Whitespace and comments: `/* ... */` (index comments) and `// ...` to the end of the line.
  void skip() {
    while (!at_end()) {
      char c = m_s[m_at];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        advance();
      } else if (c == '/' && peek(1) == '*') {
        Pos p = pos();
        size_t end = m_s.find("*/", m_at + 2);
        if (end == std::string_view::npos) fail_at(p, Err::HloSyntax, "a '/*' comment that never ends");
        while (m_at < end + 2) advance();
      } else if (c == '/' && peek(1) == '/') {
        while (!at_end() && m_s[m_at] != '\n') ++m_at;
      } else {
        break;
      }
    }
  }
  // Like skip(), but stops at a line break (which may end an instruction's attribute list).
  void expect(char c, const std::string& what) {
    skip();
    if (peek() != c) expected(what);
    advance();
  }
  bool word_ahead(std::string_view w) const {
    if (m_s.compare(m_at, w.size(), w) != 0) return false;
    return m_at + w.size() >= m_s.size() || !name_char(m_s[m_at + w.size()]);
  }
  // An optional leading keyword (ROOT before an instruction, ENTRY before a computation): taken with the space
  // after it when it is there.
  bool keyword(std::string_view w) {
    if (!word_ahead(w)) return false;
    take_word();
    skip();
    return true;
  }
  std::string_view take_word() {
    size_t b = m_at;
    while (!at_end() && name_char(m_s[m_at])) ++m_at;
    return m_s.substr(b, m_at - b);
  }
  std::string name(const std::string& what) {
    if (!name_char(peek())) expected(what);
    return std::string(take_word());
  }
  int64_t integer(const std::string& what) {
    skip();
    size_t b = m_at;
    if (peek() == '-') ++m_at;
    if (!(peek() >= '0' && peek() <= '9')) {
      m_at = b;
      expected(what);
    }
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      if (v > (INT64_MAX - 9) / 10) fail("the number " + std::string(m_s.substr(b, m_at - b + 1)) + "... is too large");
      v = v * 10 + (m_s[m_at] - '0');
      ++m_at;
    }
    return m_s[b] == '-' ? -v : v;
  }

  // A string literal's end: m_at at the opening quote; afterwards just past the closing one.
  void skip_string() {
    Pos p = pos();
    advance();
    while (!at_end() && m_s[m_at] != '"') {
      if (m_s[m_at] == '\\' && m_at + 1 < m_s.size()) advance();
      advance();
    }
    if (at_end()) fail_at(p, Err::HloSyntax, "a string that never ends");
    advance();
  }
  // From an opening bracket to just past its partner, strings and nested brackets included.
  void skip_balanced() {
    Pos p = pos();
    char open = m_s[m_at];
    std::string stack(1, open == '(' ? ')' : open == '[' ? ']' : '}');
    advance();
    while (!stack.empty()) {
      if (at_end())
        fail_at(p, Err::HloSyntax, std::string("a '") + open + "' that is never closed (expected '" + stack.back() + "')");
      char c = m_s[m_at];
      if (c == '"') {
        skip_string();
        continue;
      }
      if (c == '(') stack.push_back(')');
      else if (c == '[') stack.push_back(']');
      else if (c == '{') stack.push_back('}');
      else if (c == ')' || c == ']' || c == '}') {
        if (c != stack.back())
          fail(std::string("found '") + c + "' where '" + stack.back() + "' closes the '" + open + "' at line " +
               std::to_string(p.line) + ":" + std::to_string(p.column));
        stack.pop_back();
      }
      advance();
    }
  }

  // An attribute value: non-blank text up to a ',' or a blank outside brackets and strings.
  std::string value() {
    size_t b = m_at;
    while (!at_end()) {
      char c = m_s[m_at];
      if (c == '"') skip_string();
      else if (c == '(' || c == '[' || c == '{') skip_balanced();
      else if (c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ')' || c == ']' || c == '}') break;
      else if (c == '/' && (peek(1) == '*' || peek(1) == '/')) break;
      else advance();
    }
    if (m_at == b) expected("an attribute value");
    return std::string(m_s.substr(b, m_at - b));
  }

  Attribute attribute() {
    Attribute a;
    a.pos = pos();
    a.name = name("an attribute name");
    skip();
    if (peek() != '=') expected("'=' after attribute '" + a.name + "'");
    advance();
    skip();
    a.value_pos = pos();
    a.value = value();
    if (a.name == "literal") {  // a custom call's literal: a shape, then its value (`literal=s32[] 1`)
      skip();
      const std::string literal = value();
      a.value += ' ';
      a.value += literal;
    }
    return a;
  }

  Shape shape() {
    skip();
    Shape s;
    if (peek() == '(') {
      s.type = Type::Tuple;
      advance();
      skip();
      if (peek() == ')') {
        advance();
        return s;
      }
      while (true) {
        s.tuple.push_back(shape());
        skip();
        if (peek() == ',') {
          advance();
          continue;
        }
        if (peek() == ')') {
          advance();
          return s;
        }
        expected("',' or ')' in a tuple shape");
      }
    }
    Pos p = pos();
    if (!name_char(peek())) expected("a shape (e.g. f32[2,3]{1,0})");
    std::string_view t = take_word();
    s.type = type_from_name(t);
    if (s.type == Type::Invalid || s.type == Type::Tuple) {
      m_at -= t.size();
      fail_at(p, Err::HloSyntax, "unknown element type '" + std::string(t) + "' (valid: pred, s8, s32, u32, bf16, f16, f32, f64, ...)");
    }
    if (peek() != '[') expected("'[' after the element type " + std::string(t));
    advance();
    skip();
    if (peek() != ']') {
      while (true) {
        skip();
        if (peek() == '<' && peek(1) == '=') {  // a bounded dynamic dimension: its bound
          m_at += 2;
        } else if (peek() == '?') {  // unbounded: no size (the importer refuses it)
          advance();
          s.dims.push_back(-1);
          skip();
          if (peek() == ',') {
            advance();
            continue;
          }
          if (peek() == ']') break;
          expected("',' or ']' in the dimensions");
        }
        int64_t d = integer("a dimension size");
        if (d < 0) fail("a negative dimension size " + std::to_string(d));
        s.dims.push_back(d);
        skip();
        if (peek() == ',') {
          advance();
          continue;
        }
        if (peek() == ']') break;
        expected("',' or ']' in the dimensions");
      }
    }
    advance();
    if (peek() == '{') layout(s);
    return s;
  }

  // `{1,0}` or `{1,0:T(8,128)(2,1)S(1)}`: the minor-to-major order, the tiles and the memory space.
  void layout(Shape& s) {
    Pos p = pos();
    advance();
    skip();
    while (peek() >= '0' && peek() <= '9') {
      s.minor_to_major.push_back(integer("a layout dimension"));
      skip();
      if (peek() == ',') {
        advance();
        skip();
      }
    }
    if (peek() == ':') {
      // Tiles: `T(8,128)(2,1)`, each `(...)` one tile, `*` a combined dimension (taken as no padding); memory
      // space S(n), element size E(n) and the rest are read past.
      advance();
      while (!at_end() && peek() != '}') {
        if (peek() == 'T') {
          advance();
          while (peek() == '(') {
            advance();
            std::vector<int64_t> tile;
            skip();
            while (!at_end() && peek() != ')') {
              if (peek() == '*') {
                advance();
                tile.push_back(1);
              } else {
                tile.push_back(integer("a tile dimension"));
              }
              skip();
              if (peek() == ',') {
                advance();
                skip();
              } else if (peek() != ')') {
                expected("',' or ')' in a tile");
              }
            }
            if (peek() != ')') expected("')' closing a tile");
            advance();
            s.tiles.push_back(std::move(tile));
          }
          continue;
        }
        if (peek() == 'S' && m_at + 1 < m_s.size() && m_s[m_at + 1] == '(') {
          advance();
          advance();
          skip();
          s.memory_space = integer("a memory space");
          skip();
          if (peek() != ')') expected("')' closing the memory space");
          advance();
          continue;
        }
        if (peek() == '(' || peek() == '[' || peek() == '{') skip_balanced();
        else advance();
      }
    }
    if (peek() != '}') expected("'}' closing the layout");
    advance();
    if (!s.minor_to_major.empty() && s.minor_to_major.size() != s.dims.size())
      fail_at(p, Err::HloSyntax, "the layout lists " + std::to_string(s.minor_to_major.size()) +
                                    " dimensions for a shape of " + std::to_string(s.dims.size()));
  }

  // An operand: a name, optionally after its shape (typed operands: `f32[2]{0} %x`).
  void operand(std::vector<std::string>& names, std::vector<Pos>& where) {
    skip();
    if (peek() == '(') {  // a typed operand of tuple shape
      shape();
      skip();
    } else {
      size_t b = m_at;
      while (b < m_s.size() && name_char(m_s[b])) ++b;
      if (b < m_s.size() && m_s[b] == '[') {
        shape();
        skip();
      }
    }
    where.push_back(pos());
    if (peek() == '%') advance();
    names.push_back(name("an operand name"));
  }

  Instruction instruction(std::vector<std::vector<std::string>>& operand_names) {
    Instruction in;
    skip();
    in.root = keyword("ROOT");
    in.pos = pos();
    if (peek() == '%') advance();
    in.name = name("an instruction name or '}'");
    expect('=', "'=' after instruction '" + in.name + "'");
    skip();
    {  // Newer XLA may leave out a shape it can infer (`gte = get-tuple-element(t), index=0`).
      size_t b = m_at;
      while (b < m_s.size() && name_char(m_s[b])) ++b;
      const bool opcode_first = b < m_s.size() && m_s[b] == '(' && b > m_at &&
                                type_from_name(m_s.substr(m_at, b - m_at)) == Type::Invalid;
      if (!opcode_first) in.shape = shape();
    }
    skip();
    Pos op_pos = pos();
    in.opcode = name("an opcode after the shape of '" + in.name + "'");
    if (peek() != '(') expected("'(' after opcode '" + in.opcode + "'");
    std::vector<std::string> names;
    if (in.opcode == "constant" || in.opcode == "parameter") {
      size_t b = m_at;
      skip_balanced();
      in.literal = std::string(m_s.substr(b + 1, m_at - b - 2));
    } else {
      advance();
      skip();
      if (peek() != ')') {
        while (true) {
          operand(names, in.operand_pos);
          skip();
          if (peek() == ',') {
            advance();
            continue;
          }
          if (peek() == ')') break;
          expected("',' or ')' after an operand of '" + in.name + "'");
        }
      }
      advance();
    }
    (void)op_pos;
    operand_names.push_back(std::move(names));
    // Attributes: `, name=value` while a comma follows.
    while (true) {
      size_t save = m_at;
      int32_t line = m_line;
      size_t ls = m_line_start;
      skip();
      if (peek() != ',') {
        m_at = save;
        m_line = line;
        m_line_start = ls;
        break;
      }
      advance();
      skip();
      in.attrs.push_back(attribute());
    }
    return in;
  }

  Computation computation() {
    Computation c;
    skip();
    c.entry = keyword("ENTRY");
    c.pos = pos();
    if (peek() == '%') advance();
    c.name = name("a computation name (or ENTRY)");
    skip();
    if (peek() == '(') {  // the signature: parameters, then '->' and the result shape
      skip_balanced();
      skip();
      if (peek() != '-' || peek(1) != '>') expected("'->' and the result shape after the parameters");
      m_at += 2;
      shape();
      skip();
    }
    if (peek() != '{') expected("'{' opening computation '" + c.name + "'");
    advance();
    std::vector<std::vector<std::string>> names;
    while (true) {
      skip();
      if (at_end()) fail_at(c.pos, Err::HloSyntax, "computation '" + c.name + "' is never closed with '}'");
      if (peek() == '}') {
        advance();
        break;
      }
      c.instructions.push_back(instruction(names));
      Instruction& in = c.instructions.back();
      int32_t idx = static_cast<int32_t>(c.instructions.size() - 1);
      if (!c.index.emplace(in.name, idx).second)
        fail_at(in.pos, Err::HloInvalid, "instruction '" + in.name + "' is defined twice in '" + c.name + "'");
      if (in.root) {
        if (c.root >= 0) fail_at(in.pos, Err::HloInvalid, "a second ROOT in computation '" + c.name + "'");
        c.root = idx;
      }
    }
    // Newer XLA prints `, execution_thread="..."` after a computation's brace.
    while (true) {
      const size_t save = m_at, ls = m_line_start;
      const int32_t line = m_line;
      skip();
      if (peek() != ',') {
        m_at = save;
        m_line = line;
        m_line_start = ls;
        break;
      }
      advance();
      skip();
      attribute();
    }
    if (c.instructions.empty()) fail_at(c.pos, Err::HloInvalid, "computation '" + c.name + "' has no instruction");
    if (c.root < 0) c.root = static_cast<int32_t>(c.instructions.size() - 1);
    for (size_t i = 0; i < c.instructions.size(); ++i) {
      Instruction& in = c.instructions[i];
      for (size_t k = 0; k < names[i].size(); ++k) {
        auto it = c.index.find(names[i][k]);
        if (it == c.index.end())
          fail_at(in.operand_pos[k], Err::HloInvalid,
                  "instruction '" + in.name + "' reads '" + names[i][k] + "', which computation '" + c.name +
                      "' does not define");
        in.operands.push_back(it->second);
      }
      if (in.opcode == "parameter") {
        int64_t n = -1;
        try {
          n = std::stoll(in.literal);
        } catch (const std::exception&) {
        }
        if (n < 0 || n > 1000000)
          fail_at(in.pos, Err::HloSyntax, "parameter '" + in.name + "' has number '" + in.literal +
                                              "'; expected parameter(N) with N = 0, 1, ...");
        if (c.parameters.size() <= static_cast<size_t>(n)) c.parameters.resize(static_cast<size_t>(n) + 1, -1);
        if (c.parameters[n] >= 0)
          fail_at(in.pos, Err::HloInvalid, "computation '" + c.name + "' has two parameter(" + std::to_string(n) + ")");
        c.parameters[n] = static_cast<int32_t>(i);
      }
    }
    for (size_t n = 0; n < c.parameters.size(); ++n)
      if (c.parameters[n] < 0)
        fail_at(c.pos, Err::HloInvalid, "computation '" + c.name + "' has no parameter(" + std::to_string(n) +
                                            ") but a later one");
    return c;
  }
};

}  // namespace

Module parse_module(std::string_view text, const std::string& file) { return Parser(text, file).module(); }

std::string read_module_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(Err::FileUnreadable, "cannot open HLO module '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string raw = ss.str();
  if (raw.size() < 2 || static_cast<unsigned char>(raw[0]) != 0x1f || static_cast<unsigned char>(raw[1]) != 0x8b)
    return raw;
  gzFile gz = gzopen(path.c_str(), "rb");
  if (!gz) throw Error(Err::FileUnreadable, "cannot open gzip'd HLO module '" + path + "'");
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(gz, buf, sizeof buf)) > 0) {
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (size_t{1} << 33)) {
      gzclose(gz);
      throw Error(Err::FileUnreadable, "gzip'd HLO module '" + path + "' inflates to more than 8 GiB");
    }
  }
  int err = 0;
  const char* msg = gzerror(gz, &err);
  std::string why = msg ? msg : "";
  gzclose(gz);
  if (n < 0 || (err != Z_OK && err != Z_STREAM_END))
    throw Error(Err::FileUnreadable, "gzip'd HLO module '" + path + "' is damaged: " + why);
  return out;
}

Module read_module(const std::string& path) { return parse_any(read_module_text(path), path); }

}  // namespace podsim::hlo

// MLIR text as JAX prints it (`jax.jit(f).lower(...).as_text()`), read into operations as written
// (hlo/stablehlo_ir.h): the module and its attributes, `sdy.mesh` declarations, functions with their argument and
// result attributes, and every operation in the generic form (`"stablehlo.add"(%a, %b) : (T, T) -> T`, properties
// `<{...}>`, regions `({...})`, attributes `{...}`) or a pretty form (`stablehlo.add %a, %b : T`), whose keywords,
// groups and regions are kept for the lowering to read. Comments, `loc(...)` trailers and `#loc` lines are skipped.
#include <algorithm>
#include <cctype>
#include <cstring>

#include "hlo/stablehlo_ir.h"

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

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$' || c == '-'; }
bool space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

class Reader {
 public:
  explicit Reader(const Lines& l) : m_l(l), m_s(l.text()) {}

  MlirModule module() {
    MlirModule m;
    skip_top();
    const bool wrapped = word_ahead("module");
    size_t end = m_s.size();
    if (wrapped) {
      m.at = m_at;
      take_word();
      skip();
      if (peek() == '@') {
        ++m_at;
        m.name = take_word();
        skip();
      }
      if (word_ahead("attributes")) {
        take_word();
        skip();
        dict(m.attrs);
        skip();
      }
      need('{', "'{' opening the module");
    }
    while (true) {
      skip();
      if (m_at >= end) {
        if (wrapped) m_l.fail(m.at, Err::HloSyntax, "the module's '{' is never closed");
        break;
      }
      if (peek() == '}' && wrapped) {
        ++m_at;
        break;
      }
      if (peek() == '#') {  // `#loc1 = loc(...)`, attribute aliases
        while (m_at < m_s.size() && m_s[m_at] != '\n') ++m_at;
        continue;
      }
      if (word_ahead("func.func")) {
        m.funcs.push_back(func());
      } else if (word_ahead("sdy.mesh")) {
        mesh(m);
      } else if (word_ahead("module")) {
        fail("a second 'module': the file holds several modules (split it at its `// -----` lines)");
      } else {
        const size_t b = m_at;
        std::string w = take_word();
        if (w.empty()) expected("'func.func' or the module's end");
        // Other top-level declarations (sdy.meshes, ml_program globals): skipped to the line's end.
        (void)b;
        while (m_at < m_s.size() && m_s[m_at] != '\n') ++m_at;
      }
    }
    skip_top();
    if (m_at < m_s.size()) expected("the end of the file after the module");
    if (m.funcs.empty()) m_l.fail(0, Err::HloSyntax, "no func.func: a StableHLO module holds at least its @main");
    return m;
  }

 private:
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
  // `T, T` or `(T, T) -> T` / `-> (T, T)`.
  void types(Op& op) {
    skip();
    if (peek() == '(') {
      ++m_at;
      if (!eat(')')) {
        while (true) {
          op.operand_types.push_back(type());
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
            op.result_types.push_back(type());
            if (eat(')')) break;
            need(',', "',' or ')' in the results' types");
          }
        }
      } else {
        op.result_types.push_back(type());
      }
      return;
    }
    std::vector<Shape> list{type()};
    while (true) {
      size_t save = m_at;
      skip();
      if (peek() != ',') {
        m_at = save;
        break;
      }
      ++m_at;
      list.push_back(type());
    }
    // A list names the operands' types, the result's last (select: `pred, T`); as many results as are named.
    size_t n = std::max<size_t>(1, op.results.size());
    if (list.size() >= n) op.result_types.assign(list.end() - static_cast<std::ptrdiff_t>(n), list.end());
    op.operand_types = list;
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
  // `{ [^bb0(args):] ops }`; `args` given by a pretty form before the brace.
  std::unique_ptr<Region> region(const Region* args) {
    auto r = std::make_unique<Region>();
    if (args) {
      r->args = args->args;
      r->arg_types = args->arg_types;
    }
    need('{', "'{' opening a region");
    skip();
    if (peek() == '^') {
      take_word_label();
      if (eat('(')) block_args(*r);
      need(':', "':' after the block's label");
    }
    ops(*r);
    return r;
  }
  void take_word_label() {
    ++m_at;
    take_word();
  }
  // Operations until the region's '}'.
  void ops(Region& r) {
    while (true) {
      skip();
      if (m_at >= m_s.size()) expected("'}' closing a region");
      if (peek() == '}') {
        ++m_at;
        return;
      }
      if (peek() == '^') fail("a region of several blocks (branches between blocks): podsim reads one block per region");
      r.ops.push_back(op());
    }
  }
  bool region_ahead() {
    size_t k = m_at + 1;
    while (k < m_s.size() && space(m_s[k])) ++k;
    if (k >= m_s.size()) return false;
    if (m_s[k] == '^' || m_s[k] == '%') return true;
    if (m_s[k] == '}' || m_s[k] == '"') return false;
    while (k < m_s.size() && word_char(m_s[k])) ++k;
    while (k < m_s.size() && (m_s[k] == ' ' || m_s[k] == '\t')) ++k;
    return k < m_s.size() && m_s[k] != '=' && m_s[k] != ',' && m_s[k] != '}';
  }

  Op op() {
    Op op;
    skip();
    if (peek() == '%') {
      while (true) {
        std::string r = ref();
        if (peek() == ':') {  // `%0:2`
          ++m_at;
          size_t b = m_at;
          while (std::isdigit(static_cast<unsigned char>(peek()))) ++m_at;
          if (b == m_at) expected("the number of results after ':'");
          const int n = std::stoi(std::string(m_s.substr(b, m_at - b)));
          for (int i = 0; i < n; ++i) op.results.push_back(r + "#" + std::to_string(i));
        } else {
          op.results.push_back(r);
        }
        if (!eat(',')) break;
      }
      need('=', "'=' after the results");
    }
    skip();
    op.at = m_at;
    op.pos = m_l.pos(m_at);
    if (peek() == '"') {
      size_t b = m_at;
      skip_string();
      op.name = std::string(m_s.substr(b + 1, m_at - b - 2));
      generic(op);
    } else {
      op.name = take_word();
      if (op.name.empty()) expected("an operation");
      pretty(op);
    }
    return op;
  }

  void generic(Op& op) {
    need('(', "'(' and the operands");
    if (!eat(')')) {
      while (true) {
        op.operand_at.push_back(m_at);
        op.operands.push_back(ref());
        if (eat(')')) break;
        need(',', "',' or ')' after an operand");
      }
    }
    skip();
    if (peek() == '<' && peek(1) == '{') {  // properties
      ++m_at;
      dict(op.attrs);
      need('>', "'>' closing the properties");
    }
    skip();
    if (peek() == '(') {
      ++m_at;
      while (true) {
        op.regions.push_back(region(nullptr));
        if (eat(')')) break;
        need(',', "',' or ')' after a region");
      }
    }
    skip();
    if (peek() == '{') dict(op.attrs);
    need(':', "':' and the operation's type");
    types(op);
  }

  void pretty(Op& op) {
    Region pending;  // block arguments written before a region (`(%a: T) {`)
    bool have_pending = false;
    while (true) {
      skip();
      char c = peek();
      if (c == ':' || c == '}' || m_at >= m_s.size()) break;
      if (c == ',') {
        ++m_at;
      } else if (c == '%') {
        const size_t at = m_at;
        std::string r = ref();
        size_t save = m_at;
        skip();
        if (peek() == '=' && peek(1) != '=') {  // `%iterArg = %0`
          ++m_at;
          op.bindings.push_back({r, ref()});
          continue;
        }
        m_at = save;
        op.operand_at.push_back(at);
        op.operands.push_back(r);
        if (peek() == '[') {  // get_tuple_element's `%t[0]`
          Attr g;
          g.at = m_at + 1;
          balanced();
          g.value = std::string(m_s.substr(g.at, m_at - g.at - 1));
          op.groups.push_back(g);
        }
      } else if (c == '(') {
        // Operands `(%a, %b)`, reduce's `(%x init: %c)`, block arguments `(%a: T, ...)`.
        ++m_at;
        skip();
        bool typed = false;
        {
          size_t k = m_at;
          if (k < m_s.size() && m_s[k] == '%') {
            ++k;
            while (k < m_s.size() && (word_char(m_s[k]) || m_s[k] == '#')) ++k;
            while (k < m_s.size() && space(m_s[k])) ++k;
            typed = k < m_s.size() && m_s[k] == ':';
          }
        }
        if (typed) {
          Region args;
          block_args(args);
          pending.args = args.args;
          pending.arg_types = args.arg_types;
          have_pending = true;
          continue;
        }
        if (eat(')')) continue;
        while (true) {
          const size_t at = m_at;
          std::string r = ref();
          skip();
          if (word_ahead("init")) {  // `%x init: %c`
            take_word();
            need(':', "':' after 'init'");
            op.bindings.push_back({r, ref()});
          } else if (peek() == '=') {
            ++m_at;
            op.bindings.push_back({r, ref()});
          } else {
            op.operand_at.push_back(at);
            op.operands.push_back(r);
          }
          if (eat(')')) break;
          need(',', "',' or ')' after an operand");
        }
      } else if (c == '{') {
        if (region_ahead()) {
          op.regions.push_back(region(have_pending ? &pending : nullptr));
          have_pending = false;
        } else {
          dict(op.attrs);
        }
      } else if (c == '[' || c == '<') {
        Attr g;
        g.at = m_at + 1;
        balanced();
        g.value = std::string(m_s.substr(g.at, m_at - g.at - 1));
        op.groups.push_back(g);
      } else if (c == '@') {
        ++m_at;
        op.symbol = take_word();
      } else if (word_char(c)) {
        const size_t at = m_at;
        std::string w = take_word();
        if (peek() == '<') {  // `dense<...>`, `array<...>`: the op's value
          m_at = at;
          op.attrs["value"] = pretty_value();
          continue;
        }
        size_t save = m_at;
        skip();
        if (peek() == '=') {
          ++m_at;
          op.attrs[w] = pretty_value();
          continue;
        }
        m_at = save;
        op.words.push_back(w);
        if (w == "cond" || w == "do" || w == "reducer") continue;
      } else {
        expected("an operand, attribute or ':' and the type in '" + op.name + "'");
      }
    }
    if (peek() == ':') {
      ++m_at;
      types(op);
    }
    // Regions after the type: while's `cond {...} do {...}`, reduce's `reducer(...) (...) {...}`.
    while (true) {
      size_t save = m_at;
      skip();
      if (word_ahead("cond") || word_ahead("do")) {
        take_word();
        skip();
        op.regions.push_back(region(nullptr));
        continue;
      }
      if (word_ahead("reducer")) {
        take_word();
        Region args;
        while (eat('(')) {
          Region pair;
          block_args(pair);
          args.args.insert(args.args.begin() + static_cast<std::ptrdiff_t>(args.args.size() / 2), pair.args.at(0));
          args.arg_types.insert(args.arg_types.begin() + static_cast<std::ptrdiff_t>(args.arg_types.size() / 2), pair.arg_types.at(0));
          for (size_t i = 1; i < pair.args.size(); ++i) {
            args.args.push_back(pair.args[i]);
            args.arg_types.push_back(pair.arg_types[i]);
          }
        }
        skip();
        op.regions.push_back(region(&args));
        continue;
      }
      m_at = save;
      break;
    }
  }

  Func func() {
    Func f;
    take_word();  // func.func
    skip();
    if (word_ahead("public") || word_ahead("private") || word_ahead("nested")) {
      f.is_public = take_word() == "public";
      skip();
    }
    f.at = m_at;
    f.pos = m_l.pos(m_at);
    if (peek() != '@') expected("'@' and the function's name");
    ++m_at;
    f.name = take_word();
    need('(', "'(' and the function's arguments");
    if (!eat(')')) {
      while (true) {
        f.body.args.push_back(ref());
        need(':', "':' and the argument's type");
        f.body.arg_types.push_back(type());
        f.arg_attrs.emplace_back();
        skip();
        if (peek() == '{') dict(f.arg_attrs.back());
        if (eat(')')) break;
        need(',', "',' or ')' after an argument");
      }
    }
    skip();
    if (peek() == '-' && peek(1) == '>') {
      m_at += 2;
      skip();
      if (peek() == '(') {
        ++m_at;
        if (!eat(')')) {
          while (true) {
            f.result_types.push_back(type());
            f.result_attrs.emplace_back();
            skip();
            if (peek() == '{') dict(f.result_attrs.back());
            if (eat(')')) break;
            need(',', "',' or ')' after a result");
          }
        }
      } else {
        f.result_types.push_back(type());
        f.result_attrs.emplace_back();
      }
    }
    skip();
    if (word_ahead("attributes")) {
      take_word();
      std::map<std::string, Attr> ignored;
      dict(ignored);
    }
    need('{', "'{' opening the function's body");
    ops(f.body);
    return f;
  }

  // `sdy.mesh @mesh = <["x"=2, "y"=4]>` (or `<[]>`, or `<device_ids=[...]>`).
  void mesh(MlirModule& m) {
    const size_t at = m_at;
    take_word();
    skip();
    if (peek() != '@') expected("'@' and the mesh's name");
    ++m_at;
    std::string name = take_word();
    need('=', "'=' after the mesh's name");
    skip();
    const size_t b = m_at;
    if (peek() != '<') expected("'<' and the mesh's axes");
    balanced();
    const std::string text(m_s.substr(b, m_at - b));
    std::vector<std::pair<std::string, int64_t>> axes;
    for (size_t q = text.find('"'); q != std::string::npos; q = text.find('"', q)) {
      size_t e = text.find('"', q + 1);
      if (e == std::string::npos) break;
      std::string axis = text.substr(q + 1, e - q - 1);
      size_t eq = text.find('=', e);
      if (eq == std::string::npos) m_l.fail(at, Err::HloSyntax, "mesh axis \"" + axis + "\" has no size");
      int64_t n = 0;
      size_t i = eq + 1;
      while (i < text.size() && space(text[i])) ++i;
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) n = n * 10 + (text[i++] - '0');
      if (n < 1) m_l.fail(at, Err::HloSyntax, "mesh axis \"" + axis + "\" needs a size of at least 1");
      axes.push_back({axis, n});
      q = i;
    }
    m.meshes[name] = axes;
  }
};

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

Shape parse_type(const Lines& l, size_t& at, size_t end) {
  std::string_view s = l.text();
  auto starts = [&](const char* w) { return s.compare(at, std::strlen(w), w) == 0; };
  auto element = [&](size_t& i, size_t stop) {
    const size_t b = i;
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
    if (at < end && std::isalpha(static_cast<unsigned char>(s[at]))) {  // a bare element type
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

MlirModule read(const Lines& lines) { return Reader(lines).module(); }

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

}  // namespace podsim::hlo::mlir

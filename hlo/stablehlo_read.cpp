// MLIR text as JAX prints it (`jax.jit(f).lower(...).as_text()`), read into operations as written
// (hlo/stablehlo_ir.h): the module and its attributes, `sdy.mesh` declarations, functions with their argument and
// result attributes, and every operation in the generic form (`"stablehlo.add"(%a, %b) : (T, T) -> T`, properties
// `<{...}>`, regions `({...})`, attributes `{...}`) or a pretty form (`stablehlo.add %a, %b : T`), whose keywords,
// groups and regions are kept for the lowering to read. Comments, `loc(...)` trailers and `#loc` lines are skipped.
#include <algorithm>
#include <cctype>
#include <cstring>

#include "hlo/stablehlo_cursor.h"

namespace podsim::hlo::mlir {

namespace {

class Reader : public Cursor {
 public:
  explicit Reader(const Lines& l) : Cursor(l) {}

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
    frontend_meshes(m);
    skip_top();
    if (m_at < m_s.size()) expected("the end of the file after the module");
    if (m.funcs.empty()) m_l.fail(0, Err::HloSyntax, "no func.func: a StableHLO module holds at least its @main");
    return m;
  }

 private:
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
        if (peek() == '{') {  // regions `({...}, {...})`: a case's or an if's branches
          while (true) {
            op.regions.push_back(region(nullptr));
            if (eat(')')) break;
            need(',', "',' or ')' after a region");
            skip();
          }
          continue;
        }
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
          skip();
          if (word_char(peek())) {  // `k = 8` among the operands (chlo.top_k)
            const std::string w = take_word();
            need('=', "'=' after '" + w + "'");
            skip();
            op.attrs[w] = pretty_value();
            if (eat(')')) break;
            need(',', "',' or ')' after an attribute");
            continue;
          }
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
    m.meshes[name] = mesh_axes(m_l, at, std::string(m_s.substr(b, m_at - b)));
  }
  // Shardy's round-trip form (the text XLA's Shardy export leaves for HLO): the meshes as a string in the module's
  // frontend attributes, `xla.sdy.meshes = "{mesh = #sdy.mesh<[\"x\"=2]>, ...}"`.
  void frontend_meshes(MlirModule& m) {
    auto it = m.attrs.find("mhlo.frontend_attributes");
    if (it == m.attrs.end()) return;
    const std::string text = string_field(it->second.value, "xla.sdy.meshes");
    for (size_t k = text.find("#sdy.mesh<"); k != std::string::npos; k = text.find("#sdy.mesh<", k + 1)) {
      size_t e = k;
      while (e > 0 && (text[e - 1] == ' ' || text[e - 1] == '=')) --e;
      size_t b = e;
      while (b > 0 && (std::isalnum(static_cast<unsigned char>(text[b - 1])) || text[b - 1] == '_')) --b;
      if (b == e) m_l.fail(it->second.at, Err::HloSyntax, "xla.sdy.meshes: a mesh without its name");
      const std::string name = text.substr(b, e - b);
      if (!m.meshes.count(name)) m.meshes[name] = mesh_axes(m_l, it->second.at, text.substr(k + 9));
    }
  }
};

}  // namespace

MlirModule read(const Lines& lines) { return Reader(lines).module(); }

}  // namespace podsim::hlo::mlir

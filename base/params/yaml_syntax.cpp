#include "base/params/yaml_syntax.h"

#include <algorithm>
#include <vector>

namespace podsim {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

size_t indent_of(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return i;
}

// The line without its comment and surrounding blanks. A '#' starts a comment at the start of the line or after a
// blank, outside quotes.
std::string content_of(const std::string& s) {
  char quote = 0;
  size_t end = s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) {
      end = i;
      break;
    }
  }
  size_t b = indent_of(s);
  while (end > b && (s[end - 1] == ' ' || s[end - 1] == '\t')) --end;
  return b < end ? s.substr(b, end - b) : std::string();
}

// Position of the first ':' that ends a key (followed by a blank or the end of the text), outside quotes.
size_t key_colon(const std::string& content) {
  char quote = 0;
  for (size_t i = 0; i < content.size(); ++i) {
    char c = content[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == ':' && (i + 1 == content.size() || content[i + 1] == ' ' || content[i + 1] == '\t')) {
      return i;
    }
  }
  return std::string::npos;
}

std::string shown(const std::string& content) {
  return "'" + (content.size() > 40 ? content.substr(0, 37) + "..." : content) + "'";
}

Error located(const std::string& file, int line0, int column0, const std::string& message) {
  SourceLocation w;
  w.file = file;
  w.line = line0 + 1;
  w.column = column0 + 1;
  return Error(Err::YamlSyntax, w, "YAML syntax error: " + message);
}

}  // namespace

Error yaml_syntax_error(const std::string& text, const std::string& file, int mark_line, int mark_column,
                        const std::string& parser_message) {
  const std::vector<std::string> lines = split_lines(text);
  const int last = static_cast<int>(lines.size()) - 1;
  const int stop = mark_line >= 0 && mark_line <= last ? mark_line : last;

  // A tab in the indentation of a line the parser read.
  for (int i = 0; i <= stop; ++i) {
    const std::string& s = lines[i];
    const size_t ind = indent_of(s);
    const size_t tab = s.find('\t');
    if (tab < ind && ind < s.size() && s[ind] != '#')
      return located(file, i, static_cast<int>(tab),
                     "line " + std::to_string(i + 1) + " is indented with a tab; YAML indents with spaces");
  }

  if (parser_message == "illegal map value" && mark_line >= 0 && mark_line <= last) {
    const std::string& here = lines[mark_line];
    const std::string before = here.substr(0, std::min<size_t>(std::max(mark_column, 0), here.size()));
    // A key: value line with a second ': ' (the parser stopped at the second).
    if (key_colon(content_of(before + " ")) != std::string::npos)
      return located(file, mark_line, mark_column,
                     "a second ': ' on line " + std::to_string(mark_line + 1) + " (" + shown(content_of(here)) +
                         "); quote a value that holds ': '");
    int prev = mark_line - 1;
    while (prev >= 0 && content_of(lines[prev]).empty()) --prev;
    if (prev >= 0) {
      const std::string pc = content_of(lines[prev]);
      const size_t colon = key_colon(pc);
      const bool item = pc[0] == '-' && (pc.size() == 1 || pc[1] == ' ');
      // The line above has no ':' at all: a key without its colon, read together with this line as one text.
      if (colon == std::string::npos && !item && pc.find_first_of("{}[]|>&*!") == std::string::npos)
        return located(file, prev, static_cast<int>(indent_of(lines[prev]) + pc.size()),
                       "line " + std::to_string(prev + 1) + " (" + shown(pc) + ") has no ':' after its key (key: " +
                           "value, or key: alone above an indented block); YAML read it and line " +
                           std::to_string(mark_line + 1) + " as one text");
      // The line above is key: value and this one is indented under it, as if it opened a block.
      if (colon != std::string::npos && colon + 1 < pc.size() && indent_of(here) > indent_of(lines[prev]))
        return located(file, mark_line, static_cast<int>(indent_of(here)),
                       "line " + std::to_string(mark_line + 1) + " (" + shown(content_of(here)) +
                           ") is indented more than line " + std::to_string(prev + 1) + " (" + shown(pc) +
                           "), which already has a value; keys of one mapping line up");
    }
  }

  if (parser_message == "end of map not found" && mark_line >= 0 && mark_line <= last) {
    const std::string& here = lines[mark_line];
    const std::string hc = content_of(here);
    const bool item = !hc.empty() && hc[0] == '-' && (hc.size() == 1 || hc[1] == ' ');
    // A key without its ':' (a comment after it ends the text, so the parser stops at this line).
    const bool plain = hc.find_first_of("{}[]|>&*!") == std::string::npos;
    if (!hc.empty() && !item && plain && key_colon(hc) == std::string::npos)
      return located(file, mark_line, static_cast<int>(indent_of(here) + hc.size()),
                     "line " + std::to_string(mark_line + 1) + " (" + shown(hc) + ") has no ':' after its key (key: " +
                         "value, or key: alone above an indented block)");
    // A key indented by a width that no key above it has.
    if (!hc.empty() && !item && key_colon(hc) != std::string::npos) {
      std::vector<size_t> widths;
      bool items = false;  // list items at this width: a list and a mapping mixed, not an indentation slip
      for (int i = 0; i < mark_line; ++i) {
        const std::string c = content_of(lines[i]);
        items = items || (!c.empty() && c[0] == '-' && indent_of(lines[i]) == indent_of(here));
        if (c.empty() || key_colon(c) == std::string::npos || c[0] == '-') continue;
        if (std::find(widths.begin(), widths.end(), indent_of(lines[i])) == widths.end())
          widths.push_back(indent_of(lines[i]));
      }
      const size_t ind = indent_of(here);
      if (!items && !widths.empty() && std::find(widths.begin(), widths.end(), ind) == widths.end()) {
        std::sort(widths.begin(), widths.end());
        std::string list;
        for (size_t w : widths) list += (list.empty() ? "" : ", ") + std::to_string(w);
        return located(file, mark_line, static_cast<int>(ind),
                       "line " + std::to_string(mark_line + 1) + " (" + shown(hc) + ") is indented by " +
                           std::to_string(ind) + (ind == 1 ? " space" : " spaces") +
                           ", which lines up with no key above it (they are indented by " + list + ")");
      }
    }
  }

  // yaml-cpp stops nesting deeper than a fixed limit with the bare message "bad file".
  const std::string msg = parser_message == "bad file" ? "nesting too deep or malformed" : parser_message;
  return located(file, mark_line, mark_column, msg);
}

}  // namespace podsim

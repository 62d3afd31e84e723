#include "plan/sharding.h"

#include <algorithm>
#include <cctype>

#include "plan/mesh.h"
#include "base/error.h"
#include "base/text.h"

namespace podsim {

bool ShardSpec::is_replicated() const {
  if (per_device || !partial.empty()) return false;
  for (const auto& d : dims)
    if (!d.empty()) return false;
  return true;
}

std::vector<std::string> ShardSpec::axes() const {
  std::vector<std::string> out;
  for (const auto& d : dims) out.insert(out.end(), d.begin(), d.end());
  return out;
}

bool ShardSpec::uses(const std::string& axis) const {
  for (const auto& d : dims)
    if (std::find(d.begin(), d.end(), axis) != d.end()) return true;
  return std::find(partial.begin(), partial.end(), axis) != partial.end();
}

std::string ShardSpec::text() const {
  if (per_device) return "per_device";
  std::vector<std::string> parts;
  for (const auto& d : dims) {
    if (d.empty()) parts.push_back("-");
    else if (d.size() == 1) parts.push_back(d[0]);
    else parts.push_back(bracketed(d, '(', ')'));
  }
  std::string t = bracketed(parts);
  if (!partial.empty()) t += " partial" + bracketed(partial, '(', ')');
  return t;
}

ShardSpec ShardSpec::parse(const std::string& text) {
  auto fail = [&](const std::string& why) -> void {
    throw Error(Err::BadSharding, "cannot read the sharding '" + text + "': " + why +
                                      "; write one entry per tensor dimension, e.g. [data, -] or [(data, model), -]");
  };
  ShardSpec s;
  size_t i = 0;
  auto skip = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  auto word = [&]() {
    skip();
    std::string w;
    while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_' || text[i] == '-'))
      w += text[i++];
    return w;
  };
  skip();
  if (text.compare(i, 10, "per_device") == 0) {
    s.per_device = true;
    return s;
  }
  if (i >= text.size() || text[i] != '[') fail("it must start with '['");
  ++i;
  skip();
  if (i < text.size() && text[i] == ']') {
    ++i;
  } else {
    for (;;) {
      skip();
      std::vector<std::string> axes;
      if (i < text.size() && text[i] == '(') {
        ++i;
        for (;;) {
          std::string w = word();
          if (w.empty() || w == "-") fail("a parenthesised group lists mesh axis names");
          axes.push_back(w);
          skip();
          if (i < text.size() && text[i] == ',') { ++i; continue; }
          if (i < text.size() && text[i] == ')') { ++i; break; }
          fail("unclosed '('");
        }
      } else {
        std::string w = word();
        if (w.empty()) fail("an entry is empty");
        if (w != "-") axes.push_back(w);
      }
      s.dims.push_back(axes);
      skip();
      if (i < text.size() && text[i] == ',') { ++i; continue; }
      if (i < text.size() && text[i] == ']') { ++i; break; }
      fail("expected ',' or ']'");
    }
  }
  skip();
  if (text.compare(i, 8, "partial(") == 0) {
    i += 8;
    for (;;) {
      std::string w = word();
      if (w.empty() || w == "-") fail("partial(...) lists mesh axis names");
      s.partial.push_back(w);
      skip();
      if (i < text.size() && text[i] == ',') { ++i; continue; }
      if (i < text.size() && text[i] == ')') { ++i; break; }
      fail("unclosed 'partial('");
    }
    std::sort(s.partial.begin(), s.partial.end());
  }
  skip();
  if (i != text.size()) fail("unexpected text after the closing bracket");
  std::vector<std::string> seen = s.axes();
  seen.insert(seen.end(), s.partial.begin(), s.partial.end());
  std::sort(seen.begin(), seen.end());
  for (size_t k = 1; k < seen.size(); ++k)
    if (seen[k] == seen[k - 1]) fail("mesh axis '" + seen[k] + "' appears twice (an axis splits one dimension at most)");
  return s;
}

int64_t split_count(const ShardSpec& s, size_t dim, const Mesh& m) {
  if (dim >= s.dims.size()) return 1;
  return m.size(s.dims[dim]);
}

std::vector<int64_t> local_shape(const std::vector<int64_t>& global, const ShardSpec& s, const Mesh& m) {
  std::vector<int64_t> out = global;
  for (size_t d = 0; d < out.size(); ++d) out[d] = ceil_div64(out[d], split_count(s, d, m));
  return out;
}

int64_t padding_elements(const std::vector<int64_t>& global, const ShardSpec& s, const Mesh& m) {
  int64_t total = 1, real = 1;
  for (size_t d = 0; d < global.size(); ++d) {
    int64_t p = split_count(s, d, m);
    total *= ceil_div64(global[d], p) * p;
    real *= global[d];
  }
  return total - real;
}

}  // namespace podsim

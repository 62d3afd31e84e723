#include "base/params/param_reader.h"

#include <algorithm>
#include <tuple>

#include "base/text.h"

namespace podsim {

std::vector<ParamReader::Entry> ParamReader::entries(const YAML::Node& node, const std::string& src,
                                                     const std::string& path) {
  std::vector<Entry> out;
  if (node.IsNull() || !node.IsDefined()) return out;
  if (!node.IsMap()) {
    fail(Error(Err::NotAMapping, node_location(src, node),
               (path.empty() ? std::string("the experiment file") : "'" + path + "'") +
                   " must be a mapping of keys to values, not " +
                   (node.IsSequence() ? "a list" : "'" + node.Scalar() + "'"),
               path));
    return out;
  }
  std::map<std::string, SourceLocation> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node k = it->first;  // a copy: the iterator hands out temporaries
    SourceLocation kw = node_location(src, k);
    if (!k.IsScalar()) {
      fail(Error(Err::WrongType, kw, "keys must be plain words" + (path.empty() ? "" : " under '" + path + "'"),
                 path));
      continue;
    }
    std::string key = k.Scalar();
    auto [pos, fresh] = seen.emplace(key, kw);
    if (!fresh) {
      std::string full = path.empty() ? key : path + "." + key;
      fail(Error(Err::DuplicateKey, kw,
                 "duplicated key '" + full + "' (first given at line " + std::to_string(pos->second.line) + ")",
                 full));
      continue;
    }
    out.push_back({key, it->second, kw});
  }
  return out;
}

void ParamReader::unknown_key(const std::string& prefix, const std::string& key, const SourceLocation& where) {
  std::string path = prefix.empty() ? key : prefix + "." + key;
  std::vector<std::string> siblings = schema.children(prefix);
  std::string near = nearest(key, siblings);
  for (const auto& [group, known] : lenient)
    if ((path.rfind(group + ".", 0) == 0 && known.count(path)) || (near.empty() && prefix == group)) return;
  std::string hint;
  if (!near.empty()) {
    hint = "did you mean '" + near + "'?";
    suggested.insert(prefix.empty() ? near : prefix + "." + near);
  } else {
    // A valid key in the wrong place: offer its full path.
    for (const auto& s : schema.specs())
      if (s.leaf() == key) {
        hint = "'" + key + "' belongs at '" + s.path + "'";
        break;
      }
    if (hint.empty()) hint = "valid keys here: " + join(siblings, ", ");
  }
  fail(Error(Err::UnknownKey, where, "unknown key '" + path + "' (" + hint + ")", path));
}

void ParamReader::walk(const YAML::Node& node, const std::string& prefix, const std::string& src,
                       const std::set<std::string>& skip) {
  for (const Entry& en : entries(node, src, prefix)) {
    std::string path = prefix.empty() ? en.key : prefix + "." + en.key;
    if (skip.count(path)) continue;
    if (const ParamSpec* spec = schema.find(path)) {
      given.insert(path);
      SourceLocation vw = node_location(src, en.value);
      if (vw.line == 0) vw = en.where;
      try {
        values.put({*spec, parse_param_node(*spec, en.value, vw), vw, true});
      } catch (const Error& e) {
        fail(e);
      }
    } else if (schema.is_group(path)) {
      if (!en.value.IsMap() && !en.value.IsNull()) {
        fail(Error(Err::WrongType, node_location(src, en.value),
                   "'" + path + "' expects a mapping with keys " + join(schema.children(path), ", "), path));
        continue;
      }
      group_where[path] = en.where;
      walk(en.value, path, src, skip);
    } else {
      unknown_key(prefix, en.key, en.where);
    }
  }
}

void ParamReader::throw_if_failed() const {
  if (errors.empty()) return;
  std::vector<std::string> origins;  // files and --set origins in the order they were first seen
  auto rank = [&](const Error& e) {
    std::string o = e.where().file.empty() ? e.where().origin : e.where().file;
    auto it = std::find(origins.begin(), origins.end(), o);
    if (it == origins.end()) {
      origins.push_back(o);
      return static_cast<int>(origins.size() - 1);
    }
    return static_cast<int>(it - origins.begin());
  };
  std::vector<std::tuple<int, int, int, int, size_t>> order;
  for (size_t i = 0; i < errors.size(); ++i) {
    const Error& e = errors[i];
    order.emplace_back(e.err() == Err::MissingKey, rank(e), e.where().line, e.where().column, i);
  }
  std::sort(order.begin(), order.end());
  Error first = errors[std::get<4>(order.front())];
  for (size_t i = 1; i < order.size(); ++i) first.add_also(errors[std::get<4>(order[i])]);
  throw first;
}

}  // namespace podsim

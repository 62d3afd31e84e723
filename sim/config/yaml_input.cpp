// The input of an experiment (loader_impl.h): YAML files and text, one document each, and --set overrides.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/params/yaml_syntax.h"
#include "base/text.h"
#include "sim/config/loader_impl.h"

namespace podsim::loader_detail {
namespace fs = std::filesystem;

std::vector<Override> parse_overrides(const std::vector<std::string>& raw) {
  std::vector<Override> out;
  for (const auto& r : raw) {
    SourceLocation where;
    where.origin = "--set " + r;
    auto eq = r.find('=');
    std::string path = eq == std::string::npos ? r : r.substr(0, eq);
    bool ok = eq != std::string::npos && !path.empty() && path.front() != '.' && path.back() != '.' &&
              path.find("..") == std::string::npos;
    for (char c : path) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.');
    if (!ok)
      throw Error(Err::BadOverride, where,
                  "cannot read override '" + r + "': expected path=value with a dotted key path, e.g. "
                  "--set hardware.pod.dims=[4,4]");
    out.push_back({path, r.substr(eq + 1), where});
  }
  return out;
}

YAML::Node load_yaml_file(const std::string& path, const std::string& what) {
  std::error_code rec;
  // Regular files and pipes (`podsim run <(...)`); a device such as /dev/zero named as a preset or experiment would
  // never end, and a folder is no file.
  const fs::file_type type = fs::status(path, rec).type();
  const bool regular = type == fs::file_type::regular || type == fs::file_type::fifo;
  std::ifstream in;
  if (regular) in.open(path);
  if (!regular || !in) {
    SourceLocation w;
    w.file = path;
    std::error_code ec;  // the throwing fs::exists fails on names the OS rejects (too long, ...)
    throw Error(Err::FileUnreadable, w, "cannot open " + what + " '" + path + "': " +
                                            (fs::exists(path, ec) ? "permission denied or not a file" : "no such file"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return load_yaml_text(ss.str(), path);
}

YAML::Node load_yaml_text(const std::string& text, const std::string& label) {
  SourceLocation w;
  w.file = label;
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text);
  } catch (const YAML::ParserException& e) {
    throw yaml_syntax_error(text, label, e.mark.line, e.mark.column, e.msg);
  }
  if (docs.size() > 1) {
    const YAML::Mark m = docs[1].Mark();
    if (!m.is_null()) {
      w.line = m.line + 1;
      w.column = m.column + 1;
    }
    throw Error(Err::YamlSyntax, w,
                strprintf("the file holds %zu YAML documents (separated by '---'); an experiment is one document",
                          docs.size()));
  }
  return docs.empty() ? YAML::Node() : docs.front();
}

std::optional<YAML::Node> child(const YAML::Node& map, const std::string& key) {
  if (!map.IsMap()) return std::nullopt;
  for (auto it = map.begin(); it != map.end(); ++it)
    if (it->first.IsScalar() && it->first.Scalar() == key) return it->second;
  return std::nullopt;
}

std::string file_stem(const std::string& path) {
  std::string stem = fs::path(path).stem().string();
  return stem.empty() ? "experiment" : stem;
}

SourceLocation file_location(const std::string& file) {
  SourceLocation w;
  w.file = file;
  return w;
}

}  // namespace podsim::loader_detail

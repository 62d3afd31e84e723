#include "sim/config/faults.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <regex>

#include <yaml-cpp/yaml.h>

#include "base/text.h"
#include "base/params/param_yaml.h"

namespace podsim {

const ChipFault* FaultConfig::chip(int64_t c) const {
  auto it = std::lower_bound(chips.begin(), chips.end(), c, [](const ChipFault& f, int64_t v) { return f.chip < v; });
  return it != chips.end() && it->chip == c ? &*it : nullptr;
}

const LinkFault* FaultConfig::link(int64_t c, int dir) const {
  auto it = std::lower_bound(links.begin(), links.end(), std::make_pair(c, dir), [](const LinkFault& f, auto v) {
    return std::make_pair(f.chip, f.dir) < v;
  });
  return it != links.end() && it->chip == c && it->dir == dir ? &*it : nullptr;
}

namespace {

const char* kForm =
    "expected \"chip ID: clock F, hbm F\", \"chip (x,y): ...\", \"random N: ...\" or \"random P%: ...\" for chips, "
    "\"link CHIP DIR: bandwidth F\" or \"link CHIP DIR: down\" for links (CHIP an id or (x,y[,z]), DIR one of +x, "
    "-x, +y, -y, +z, -z; factors in (0, 1])";

// Where entry `i` of hardware.faults stands: its own line when the list came from a YAML file.
SourceLocation entry_location(const SourceLocation& list, size_t i) {
  if (list.file.empty()) return list;
  try {
    YAML::Node root = YAML::LoadFile(list.file);
    for (YAML::Node n : {root["hardware"]["faults"], root["faults"]})
      if (n && n.IsSequence() && i < n.size()) return node_location(list.file, n[i]);
  } catch (const std::exception&) {
  }
  return list;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t from = 0;
  for (size_t at; (at = s.find(sep, from)) != std::string::npos; from = at + 1) out.push_back(s.substr(from, at - from));
  out.push_back(s.substr(from));
  return out;
}

}  // namespace

FaultConfig read_faults(const ParamSet& p, const PodConfig& pod, uint64_t seed) {
  FaultConfig out;
  if (!p.has("hardware.faults")) return out;
  const std::vector<std::string>& entries = p.strings("hardware.faults");
  const SourceLocation list_where = p.where("hardware.faults");
  const int64_t chips = pod.chips();
  std::map<int64_t, ChipFault> chip_faults;
  std::map<std::pair<int64_t, int>, LinkFault> link_faults;
  static const std::regex entry_re(R"(^\s*(chip|random|link)\s+([^:]*?)\s*:\s*(.*?)\s*$)");
  static const std::regex coord_re(R"(^\(\s*(\d+)\s*,\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)$)");
  static const std::regex effect_re(R"(^\s*(clock|hbm|bandwidth)\s+([0-9.eE+-]+)\s*$|^\s*(down)\s*$)");
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& text = entries[i];
    auto fail = [&](const std::string& why) {
      throw Error(Err::BadFault, entry_location(list_where, i),
                  "hardware.faults entry " + std::to_string(i + 1) + " '" + text + "': " + why, "hardware.faults");
    };
    std::smatch m;
    if (!std::regex_match(text, m, entry_re)) fail(kForm);
    const std::string kind = m[1], target = m[2], effects = m[3];
    // A chip named by id or by coordinates.
    auto chip_of = [&](const std::string& s) -> int64_t {
      std::smatch c;
      if (std::regex_match(s, c, coord_re)) {
        const size_t n = c[3].matched ? 3 : 2;
        if (n != pod.dims.size())
          fail("'" + s + "' has " + std::to_string(n) + " coordinates but the pod has " +
               std::to_string(pod.dims.size()) + " dimensions");
        int64_t id = 0;
        for (size_t d = n; d-- > 0;) {
          const int64_t v = std::stoll(c[d + 1]);
          if (v >= pod.dims[d])
            fail(std::string("coordinate ") + "xyz"[d] + "=" + std::to_string(v) + " is outside the pod (0 to " +
                 std::to_string(pod.dims[d] - 1) + ")");
          id = id * pod.dims[d] + v;
        }
        return id;
      }
      if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) fail(kForm);
      const int64_t id = std::stoll(s);
      if (id >= chips) fail("chip " + s + " is outside the pod (chips 0 to " + std::to_string(chips - 1) + ")");
      return id;
    };
    // The effects.
    double clock = 1, hbm = 1, bandwidth = 1;
    bool down = false;
    for (const std::string& e : effects.empty() ? std::vector<std::string>{} : split(effects, ',')) {
      std::smatch em;
      if (!std::regex_match(e, em, effect_re)) fail("cannot read the effect '" + trim(e) + "'; " + kForm);
      if (em[3].matched) {
        down = true;
        continue;
      }
      double f = 0;
      try {
        const std::string factor = em[2];
        size_t used = 0;
        f = std::stod(factor, &used);
        if (used != factor.size()) f = -1;
      } catch (const std::exception&) {
        f = -1;
      }
      if (!(f > 0 && f <= 1)) fail(std::string(em[1]) + " factor '" + std::string(em[2]) + "' must lie in (0, 1]");
      (em[1] == "clock" ? clock : em[1] == "hbm" ? hbm : bandwidth) = f;
    }
    const bool link = kind == "link";
    if (link && (clock != 1 || hbm != 1)) fail("a link takes 'bandwidth F' or 'down', not clock or hbm");
    if (!link && (bandwidth != 1 || down)) fail("a chip takes 'clock F' and 'hbm F', not bandwidth or down");
    if (effects.empty()) fail("no effect: give clock F, hbm F, bandwidth F or down after the ':'");

    std::vector<int64_t> targets;
    if (kind == "chip") {
      targets.push_back(chip_of(target));
    } else if (kind == "random") {
      int64_t count = 0;
      static const std::regex count_re(R"(^(\d+)$|^([0-9.]+)\s*%$)");
      std::smatch cm;
      if (!std::regex_match(target, cm, count_re)) fail("'random' takes a number of chips or a percentage, e.g. random 4 or random 25%");
      if (cm[1].matched) count = std::stoll(cm[1]);
      else count = std::llround(std::stod(cm[2]) / 100.0 * static_cast<double>(chips));
      if (count < 0 || count > chips)
        fail("'random " + target + "' asks for more chips than the pod's " + std::to_string(chips));
      // Chips drawn with the run's seed: the first `count` of a seeded shuffle (entry i draws its own stream).
      std::vector<int64_t> ids(static_cast<size_t>(chips));
      std::iota(ids.begin(), ids.end(), 0);
      std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 0x5851f42d4c957f2dull * (i + 1));
      for (int64_t k = 0; k < count; ++k) {
        std::uniform_int_distribution<int64_t> pick(k, chips - 1);
        std::swap(ids[k], ids[pick(rng)]);
      }
      targets.assign(ids.begin(), ids.begin() + count);
    } else {
      static const std::regex link_re(R"(^(.*?)\s*([+-][xyz])$)");
      std::smatch lm;
      if (!std::regex_match(target, lm, link_re)) fail(kForm);
      const int64_t c = chip_of(lm[1]);
      const std::string dn = lm[2];
      const int dim = dn[1] - 'x';
      if (dim >= static_cast<int>(pod.dims.size())) fail("the pod has no " + dn.substr(1) + " dimension");
      const int dir = 2 * dim + (dn[0] == '+' ? 0 : 1);
      const int64_t n = pod.dims[dim];
      int64_t coord = c;
      for (int d = 0; d < dim; ++d) coord /= pod.dims[d];
      coord %= n;
      const bool wrap = dim < static_cast<int>(pod.wrap.size()) ? pod.wrap[dim] : true;
      if (n < 2 || (!wrap && (dn[0] == '+' ? coord == n - 1 : coord == 0)))
        fail("chip " + std::to_string(c) + " has no link in direction " + dn);
      LinkFault& f = link_faults[{c, dir}];
      f.chip = c;
      f.dir = dir;
      f.bandwidth *= bandwidth;
      f.down = f.down || down;
      continue;
    }
    for (int64_t c : targets) {
      ChipFault& f = chip_faults[c];
      f.chip = c;
      f.clock *= clock;
      f.hbm *= hbm;
    }
  }
  for (auto& [c, f] : chip_faults) out.chips.push_back(f);
  for (auto& [k, f] : link_faults) out.links.push_back(f);
  return out;
}

}  // namespace podsim

#include "hlo/devices.h"

#include <algorithm>

namespace podsim::hlo {
namespace {

std::string text(const std::vector<int64_t>& g) {
  std::string s = "{";
  for (size_t i = 0; i < g.size() && i < 8; ++i) {
    if (i) s += ',';
    s += std::to_string(g[i]);
  }
  return s + (g.size() > 8 ? ",...}" : "}");
}

}  // namespace

// The digits (stride, size), fastest first, that give every group's members from its first: member r = first +
// sum of digit_k(r) * stride_k, r read in mixed radix over the sizes.
std::string DeviceMesh::pattern(const std::vector<std::vector<int64_t>>& groups_in,
                                std::vector<Digit>& digits) const {
  std::vector<std::vector<int64_t>> all;
  const auto& groups = groups_in.empty() ? all : groups_in;
  if (groups_in.empty()) {
    all.emplace_back();
    for (int64_t d = 0; d < m_devices; ++d) all.back().push_back(d);
  }
  const size_t S = groups.front().size();
  std::vector<bool> seen(static_cast<size_t>(m_devices), false);
  for (const auto& g : groups) {
    if (g.size() != S)
      return "its groups have different sizes (" + std::to_string(S) + " and " + std::to_string(g.size()) + ")";
    for (int64_t d : g) {
      if (d < 0 || d >= m_devices)
        return "it names device " + std::to_string(d) + " of a module on " + std::to_string(m_devices) + " devices";
      if (seen[d]) return "device " + std::to_string(d) + " is in two of its groups, or twice in one";
      seen[d] = true;
    }
  }
  if (S * groups.size() != static_cast<size_t>(m_devices))
    return "its groups hold " + std::to_string(S * groups.size()) + " of the module's " + std::to_string(m_devices) +
           " devices";
  const std::vector<int64_t>& g = groups.front();
  int64_t block = 1;
  while (block < static_cast<int64_t>(S)) {
    const int64_t s = g[block] - g[0];
    if (s <= 0) return "group " + text(g) + " is in no mixed-radix order of the device ids";
    int64_t n = 1;
    while (block * (n + 1) <= static_cast<int64_t>(S) && g[block * n] - g[0] == n * s) ++n;
    while (n > 1 && static_cast<int64_t>(S) % (block * n) != 0) --n;
    if (n < 2) return "group " + text(g) + " is in no mixed-radix order of the device ids";
    digits.push_back({s, n});
    block *= n;
  }
  for (const auto& grp : groups) {
    for (int64_t r = 0; r < static_cast<int64_t>(S); ++r) {
      int64_t off = 0, rest = r;
      for (const Digit& dg : digits) {
        off += (rest % dg.size) * dg.stride;
        rest /= dg.size;
      }
      if (grp[r] - grp[0] != off)
        return "group " + text(grp) + " is not group " + text(g) + " moved to another place";
    }
  }
  return "";
}

std::string DeviceMesh::add(const std::vector<std::vector<int64_t>>& groups) {
  std::vector<Digit> digits;
  std::string why = pattern(groups, digits);
  if (!why.empty()) return why;
  for (const Digit& d : digits) {
    m_cuts[d.stride] = true;
    m_cuts[d.stride * d.size] = true;
  }
  return "";
}

std::string DeviceMesh::build() {
  m_cuts[1] = true;
  m_cuts[m_devices] = true;
  std::vector<int64_t> cuts;
  for (const auto& [c, _] : m_cuts) cuts.push_back(c);
  if (cuts.back() != m_devices)
    return "a group structure reaches past the " + std::to_string(m_devices) + " devices";
  for (size_t i = 0; i + 1 < cuts.size(); ++i)
    if (cuts[i + 1] % cuts[i] != 0)
      return "the groups of two collectives cut the device ids at strides " + std::to_string(cuts[i]) + " and " +
             std::to_string(cuts[i + 1]) + ", which do not nest (no mesh has both as axes)";
  m_sizes.clear();
  m_strides.clear();
  for (size_t i = cuts.size() - 1; i-- > 0;) {  // outermost (largest stride) first
    m_sizes.push_back(cuts[i + 1] / cuts[i]);
    m_strides.push_back(cuts[i]);
  }
  return "";
}

std::vector<int> DeviceMesh::axes_of(const std::vector<std::vector<int64_t>>& groups) const {
  std::vector<Digit> digits;
  pattern(groups, digits);
  std::vector<int> out;
  for (size_t k = digits.size(); k-- > 0;) {  // slowest digit first
    const Digit& d = digits[k];
    for (size_t a = 0; a < m_sizes.size(); ++a)  // outermost axes of the digit first
      if (m_strides[a] >= d.stride && m_strides[a] < d.stride * d.size) out.push_back(static_cast<int>(a));
  }
  return out;
}

}  // namespace podsim::hlo

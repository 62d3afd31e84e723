#include "sim/serving/relayout.h"

#include <algorithm>

namespace podsim::serving {
namespace {

using Box = std::vector<std::pair<int64_t, int64_t>>;

double volume(const Box& b) {
  double v = 1;
  for (const auto& [lo, hi] : b) v *= static_cast<double>(std::max<int64_t>(0, hi - lo));
  return b.empty() ? 0 : v;
}

Box meet(const Box& a, const Box& b) {
  if (a.empty() || b.empty()) return {};
  Box m(a.size());
  for (size_t d = 0; d < a.size(); ++d) m[d] = {std::max(a[d].first, b[d].first), std::min(a[d].second, b[d].second)};
  return m;
}

}  // namespace

RelayoutCount relayout_count(const Held& from, const Held& to, const std::vector<int64_t>& tokens, const KvBytes& kv) {
  RelayoutCount c;
  c.received.assign(to.size(), 0.0);
  for (size_t chip = 0; chip < to.size(); ++chip) {
    if (to[chip].empty()) continue;
    const Box mine = chip < from.size() ? from[chip] : Box{};
    const int64_t head_dim = to[chip].back().second - to[chip].back().first;
    double elements = 0;
    for (size_t i = 0; i < tokens.size(); ++i) {
      Box row = to[chip];
      row[0] = {std::max<int64_t>(row[0].first, static_cast<int64_t>(i)),
                std::min<int64_t>(row[0].second, static_cast<int64_t>(i) + 1)};
      row[1] = {std::max<int64_t>(row[1].first, 0), std::min(row[1].second, tokens[i])};
      elements += volume(row) - volume(meet(row, mine));
    }
    const double vectors = head_dim > 0 ? elements / static_cast<double>(head_dim) : 0;
    const double bytes =
        2.0 * static_cast<double>(kv.layers) * (elements * kv.element_bytes + vectors * kv.scale_bytes);
    c.received[chip] = bytes;
    c.total += bytes;
    c.max_per_chip = std::max(c.max_per_chip, bytes);
    if (bytes > 0) ++c.chips;
  }
  return c;
}

double relayout_seconds(const RelayoutCount& c, double chip_bandwidth, double latency) {
  if (c.max_per_chip <= 0 || chip_bandwidth <= 0) return 0;
  return latency + c.max_per_chip / chip_bandwidth;
}

}  // namespace podsim::serving

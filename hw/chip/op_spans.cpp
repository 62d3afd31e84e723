#include "hw/chip/op_spans.h"

#include <algorithm>
#include <iterator>

namespace podsim {

void OpSpans::add(int32_t op, double begin, double end) {
  if (op < 0 || !(end > begin)) return;
  if (static_cast<size_t>(op) >= m_spans.size()) m_spans.resize(static_cast<size_t>(op) + 1);
  auto& s = m_spans[static_cast<size_t>(op)];
  // Most intervals come after or over the op's last span (its units work forward in time).
  if (s.empty() || begin > s.back().second) {
    s.push_back({begin, end});
    return;
  }
  if (begin >= s.back().first) {
    s.back().second = std::max(s.back().second, end);
    return;
  }
  // The first span that ends at or after `begin` (ends rise with begins), and the spans from it that start at or
  // before `end`: all of them merge with the interval.
  auto first = std::lower_bound(s.begin(), s.end(), begin,
                                [](const std::pair<double, double>& x, double b) { return x.second < b; });
  auto last = first;
  while (last != s.end() && last->first <= end) ++last;
  if (first == last) {
    s.insert(first, {begin, end});
    return;
  }
  const double b = std::min(begin, first->first), e = std::max(end, std::prev(last)->second);
  *first = {b, e};
  s.erase(std::next(first), last);
}

double OpSpans::within(int32_t op, double from, double to) const {
  if (op < 0 || static_cast<size_t>(op) >= m_spans.size()) return 0;
  double total = 0;
  for (const auto& [b, e] : m_spans[static_cast<size_t>(op)]) {
    const double lo = std::max(b, from), hi = std::min(e, to);
    if (hi > lo) total += hi - lo;
  }
  return total;
}

const std::vector<std::pair<double, double>>& OpSpans::spans(int32_t op) const {
  static const std::vector<std::pair<double, double>> none;
  return op >= 0 && static_cast<size_t>(op) < m_spans.size() ? m_spans[static_cast<size_t>(op)] : none;
}

}  // namespace podsim

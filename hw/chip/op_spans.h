// Per op, the union of the intervals its units worked for it (MXU, VPU, HBM, links, host link), kept as disjoint
// spans while the models log them. summary.json's busy time of an op is that union within the op's own span
// (sim/engine/busy_time.h); folding it as the intervals come keeps a few spans per op instead of every interval.
//
//   OpSpans s;  s.add(op, begin, end);  ...;  double busy = s.within(op, start, end);
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace podsim {

class OpSpans {
 public:
  // Adds [begin, end] to op's union (nothing for op < 0 or an empty interval). Intervals that overlap or touch
  // merge.
  void add(int32_t op, double begin, double end);
  // The length of op's union within [from, to]: its spans clipped to it, summed in time order (the sum the
  // intervals' own union, clipped one by one, gives: the same spans, hence the same bits).
  double within(int32_t op, double from, double to) const;
  // Op's spans, in time order.
  const std::vector<std::pair<double, double>>& spans(int32_t op) const;

 private:
  std::vector<std::vector<std::pair<double, double>>> m_spans;  // per op, disjoint and sorted, gaps between
};

}  // namespace podsim

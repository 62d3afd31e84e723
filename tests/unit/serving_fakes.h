// The serving engine's tests' fake iteration time and request streams: a prefill iteration takes 10 s, a decode
// 1 s, a mixed one 5 s, so that every timestamp of a hand-counted schedule is a small sum.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/serving/engine.h"

namespace podsim::serving::fakes {

inline IterationCost by_kind(const Iteration& it, const std::vector<Sequence>&) {
  IterationCost c;
  c.seconds = it.kind() == IterationKind::Prefill ? 10 : it.kind() == IterationKind::Decode ? 1 : 5;
  return c;
}

// n requests of `in` prompt and `out` output tokens, all sent at time 0.
inline std::vector<Request> at_once(int n, int64_t in, int64_t out) {
  std::vector<Request> r;
  for (int i = 0; i < n; ++i) r.push_back({i, 0.0, in, out});
  return r;
}

}  // namespace podsim::serving::fakes

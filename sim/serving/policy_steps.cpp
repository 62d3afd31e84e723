#include "sim/serving/policy_steps.h"

#include <algorithm>

namespace podsim::serving {

int64_t add_decodes(EngineState& s, Iteration& it, int64_t budget) {
  int64_t n = 0;
  const std::vector<int64_t> running = s.running();  // preemption changes the list
  for (int64_t i : running) {
    if (n >= budget) break;
    Sequence& q = s.seq(i);
    if (!q.admitted || q.prefilling() || q.done()) continue;
    if (!s.reserve_preempting(i, q.kv + 1)) {
      s.preempt(i);
      continue;
    }
    it.work.push_back({i, 1, q.kv, true});
    ++n;
  }
  drop_preempted(s, it);
  return static_cast<int64_t>(std::count_if(it.work.begin(), it.work.end(), [](const Work& w) { return w.decode; }));
}

void drop_preempted(EngineState& s, Iteration& it) {
  it.work.erase(std::remove_if(it.work.begin(), it.work.end(), [&](const Work& w) { return !s.seq(w.seq).admitted; }),
                it.work.end());
}

}  // namespace podsim::serving

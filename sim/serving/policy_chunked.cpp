// Chunked prefill (vLLM): an iteration has a budget of max_batched_tokens tokens. The running sequences take it
// first, oldest admitted first: one token each for those decoding, the next chunk of the prompt for those still
// prefilling; what is left goes to waiting requests, admitted (a slot free, pages for their chunk) while it lasts.
// Decodes and chunks run in one iteration, packed along one row.
#include <algorithm>

#include "sim/serving/policy_steps.h"

namespace podsim::serving {
namespace {

class ChunkedPrefill : public IServingPolicy {
 public:
  Iteration next(EngineState& s) override {
    Iteration it;
    int64_t budget = s.config().max_batched_tokens;
    const std::vector<int64_t> running = s.running();
    for (int64_t i : running) {
      if (budget <= 0) break;
      Sequence& q = s.seq(i);
      if (!q.admitted || q.done()) continue;
      const int64_t n = q.prefilling() ? std::min(q.prompt - q.prefilled, budget) : 1;
      if (!s.reserve_preempting(i, q.kv + n)) {
        s.preempt(i);
        continue;
      }
      it.work.push_back({i, n, q.kv, !q.prefilling()});
      budget -= n;
    }
    drop_preempted(s, it);
    while (budget > 0 && !s.waiting().empty() && s.slot_free()) {
      const int64_t i = s.waiting().front();
      if (!s.seq(i).prefilling()) break;  // it came with its cache: the engine inserts it
      const int64_t n = std::min(s.seq(i).prompt, budget);
      if (!s.admit_front(n)) break;
      it.work.push_back({i, n, 0, false});
      budget -= n;
    }
    return it;
  }
};

PODSIM_REGISTER_SERVING_POLICY(ChunkedPrefill, "chunked",
                               "vLLM: decodes and chunks of prompts in one iteration, up to max_batched_tokens");

}  // namespace
}  // namespace podsim::serving

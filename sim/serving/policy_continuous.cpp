// Continuous batching into decode slots (JetStream): while a slot is free and a request waits, that request is
// prefilled alone (its whole prompt) and its cache inserted into the slot; otherwise one generate step advances
// every occupied slot by a token. Prefill goes first, as JetStream's prefill thread keeps the slots full. The
// generate step computes every slot, occupied or not (batch padding).
#include <algorithm>

#include "sim/serving/policy_steps.h"

namespace podsim::serving {
namespace {

class ContinuousBatching : public IServingPolicy {
 public:
  Iteration next(EngineState& s) override {
    Iteration it;
    if (!s.waiting().empty() && s.slot_free()) {
      const int64_t i = s.waiting().front();
      if (s.seq(i).prefilling() && s.admit_front(s.seq(i).prompt)) {
        it.work.push_back({i, s.seq(i).prompt, 0, false});
        return it;
      }
    }
    add_decodes(s, it);
    return it;
  }

  // JetStream's generate step is one program compiled for the engine's batch, every decode slot (its decode state
  // holds max_concurrent_decodes slots): an empty slot's row goes through every layer and its token is discarded;
  // the decode attention reads nothing of it (a length of 0).
  void pad(Iteration& it, const EngineState& s) const override {
    if (it.kind() != IterationKind::Decode) return;
    const int64_t empty = std::max<int64_t>(0, s.config().slots - static_cast<int64_t>(it.work.size()));
    it.pad_sequences = it.pad_tokens = empty;
  }
};

PODSIM_REGISTER_SERVING_POLICY(ContinuousBatching, "continuous",
                               "JetStream: prefill a request alone, insert it into a free slot; else one generate "
                               "step over every occupied slot");

}  // namespace
}  // namespace podsim::serving

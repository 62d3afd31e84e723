// Static batching (Pope et al. 2023): up to `slots` waiting requests are prefilled together in one iteration, then
// the batch decodes until its last sequence has its last token; only then is the next batch formed. The finished
// sequences' rows stay in the batch until then (batch padding).
#include <algorithm>

#include "sim/serving/policy_steps.h"

namespace podsim::serving {
namespace {

class StaticBatching : public IServingPolicy {
 public:
  Iteration next(EngineState& s) override {
    Iteration it;
    if (s.running().empty()) {
      while (!s.waiting().empty() && s.seq(s.waiting().front()).prefilling() &&
             s.admit_front(s.seq(s.waiting().front()).prompt)) {
      }
      for (int64_t i : s.running())
        if (s.seq(i).prefilling()) it.work.push_back({i, s.seq(i).prompt, 0, false});
      m_batch = static_cast<int64_t>(s.running().size());
      return it;
    }
    add_decodes(s, it);
    return it;
  }

  // A static batch is one program of the batch's shape from its prefill to its last token: a sequence that has
  // finished keeps its row, computed and discarded, until the batch ends (request-level scheduling, as Yu et al.,
  // OSDI 2022, "Orca", describe it), its attention reading nothing (a length of 0).
  void pad(Iteration& it, const EngineState&) const override {
    if (it.kind() != IterationKind::Decode) return;
    const int64_t done = std::max<int64_t>(0, m_batch - static_cast<int64_t>(it.work.size()));
    it.pad_sequences = it.pad_tokens = done;
  }

 private:
  int64_t m_batch = 0;  // the sequences of the batch at its prefill
};

PODSIM_REGISTER_SERVING_POLICY(StaticBatching, "static",
                               "Pope et al.: a batch prefilled together, then decoded to its end before the next");

}  // namespace
}  // namespace podsim::serving

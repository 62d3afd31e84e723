// Static batching (Pope et al. 2023): up to `slots` waiting requests are prefilled together in one iteration, then
// the batch decodes until its last sequence has its last token; only then is the next batch formed.
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
      return it;
    }
    add_decodes(s, it);
    return it;
  }
};

PODSIM_REGISTER_SERVING_POLICY(StaticBatching, "static",
                               "Pope et al.: a batch prefilled together, then decoded to its end before the next");

}  // namespace
}  // namespace podsim::serving

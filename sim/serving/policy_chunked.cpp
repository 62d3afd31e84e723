// Chunked prefill (vLLM): an iteration has a budget of max_batched_tokens tokens. The running sequences take it
// first, oldest admitted first: one token each for those decoding, the next chunk of the prompt for those still
// prefilling; what is left goes to waiting requests, admitted (a slot free, pages for their chunk) while it lasts.
// Decodes and chunks run in one iteration, packed along one row, padded to vLLM TPU's request and token buckets.
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

  // vLLM TPU's model runner (vllm/v1/worker/tpu_model_runner.py) runs the model compiled for few shapes: the
  // iteration's tokens padded to the next of its token buckets (_get_token_paddings: 16 doubling up to the first
  // at or past max-num-batched-tokens, VLLM_TPU_BUCKET_PADDING_GAP 0), the requests, whose last tokens' logits it
  // computes, to a power of two of at least MIN_NUM_SEQS = 8 and at most max(max-num-seqs, 8)
  // (_get_padded_num_reqs_with_upper_limit). The ragged paged attention kernel runs over the real requests only.
  void pad(Iteration& it, const EngineState& s) const override {
    const int64_t reqs = static_cast<int64_t>(it.work.size());
    int64_t tokens = 0;
    for (const Work& w : it.work) tokens += w.fresh;
    int64_t padded_reqs = 8;
    while (padded_reqs < reqs) padded_reqs *= 2;
    padded_reqs = std::min(padded_reqs, std::max<int64_t>(s.config().slots, 8));
    int64_t padded_tokens = 16;
    while (padded_tokens < tokens) padded_tokens *= 2;
    it.pad_sequences = std::max<int64_t>(0, padded_reqs - reqs);
    it.pad_tokens = padded_tokens - tokens;
  }
};

PODSIM_REGISTER_SERVING_POLICY(ChunkedPrefill, "chunked",
                               "vLLM: decodes and chunks of prompts in one iteration, up to max_batched_tokens");

}  // namespace
}  // namespace podsim::serving

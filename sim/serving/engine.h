// The serving engine (docs/serving.md, "The serving engine"): a discrete-event loop over inference iterations.
// Requests are sent as they arrive (or, with a concurrency cap, when an earlier one finishes); a policy, a plugin as
// strategies are, chooses what each iteration computes (which prompts prefill, how many of their tokens, which
// sequences decode) over the KV cache the engine keeps (contiguous slots or pages); the iteration's time comes from
// a function (the SystemC models' iteration times, sim/serving/iteration_time.h, or a test's count), and each
// iteration's end samples a token for every sequence it completed or decoded.
//
//   Engine e(config, time_of);            // time_of(Iteration) -> IterationCost
//   EngineResult r = e.run(requests);     // one record per request and per iteration
//
// A policy:
//   class Mine : public IServingPolicy { Iteration next(EngineState& s) override; };
//   PODSIM_REGISTER_SERVING_POLICY(Mine, "mine", "what it does");
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "base/registry.h"
#include "sim/serving/request_stream.h"

namespace podsim::serving {

struct EngineConfig {
  int64_t slots = 64;                // sequences in flight at most
  int64_t max_batched_tokens = 512;  // chunked: tokens an iteration processes at most
  bool paged = false;                // KV cache in pages (else a contiguous slot of slot_tokens per sequence)
  int64_t page_tokens = 128;
  int64_t slot_tokens = 0;           // places per sequence (contiguous), the longest a sequence may grow (paged)
  int64_t pages = 0;                 // paged: pages in the cache
  int64_t max_concurrency = 0;       // requests in flight from the client (0: open loop)
  bool batch_padding = true;         // iterations padded as the policy's engine pads them (else the work alone)
};

// A sequence the engine serves: one request, with what of it is cached and generated.
struct Sequence {
  Request req;
  double sent = 0;         // when the client sent it (its latencies count from here)
  int64_t prompt = 0;      // tokens to prefill: the input, or after a preemption the input and the tokens generated
  int64_t prefilled = 0;   // of them, cached
  int64_t generated = 0;   // output tokens sampled
  int64_t kv = 0;          // tokens in its cache (the last sampled token is fed by the next decode)
  int64_t pages = 0;       // paged: pages held
  bool admitted = false;   // holds a slot (running)
  int64_t preemptions = 0;
  double first = -1, finish = -1;  // first and last token
  double last = -1;                // the latest token
  std::vector<double> gaps;        // between consecutive tokens
  bool prefilling() const { return prefilled < prompt; }
  bool done() const { return generated >= req.output; }
};

// One piece of an iteration: `fresh` tokens of sequence `seq` after `cached` ones already in its cache. A decode is
// one fresh token after the sequence's whole context.
struct Work {
  int64_t seq = 0;
  int64_t fresh = 0;
  int64_t cached = 0;
  bool decode = false;
};

enum class IterationKind { Prefill, Decode, Mixed };
const char* kind_name(IterationKind k);

struct Iteration {
  std::vector<Work> work;
  // The engine's batch padding (IServingPolicy::pad): empty sequences and places computed beside the work.
  int64_t pad_sequences = 0, pad_tokens = 0;
  IterationKind kind() const;  // decodes only, prefill chunks only, or both
  bool empty() const { return work.empty(); }
};

// What an iteration cost on the slice: its time, the model FLOPs it did (for MFU) and the bytes one chip had to
// stream (weights and the KV cache its attention read, for the memory-bandwidth utilization).
struct IterationCost {
  double seconds = 0;
  double model_flops = 0;
  double stream_bytes_per_chip = 0;
  double peak_bytes_per_chip = 0;  // the memory plan's peak on the fullest chip (0: not known)
};
using IterationTimeFn = std::function<IterationCost(const Iteration&, const std::vector<Sequence>&)>;

// The engine's state as a policy sees it: the sequences, which wait and which run, and the cache.
class EngineState {
 public:
  EngineState(const EngineConfig& c, std::vector<Sequence>& seqs) : m_config(c), m_seqs(seqs) {}
  const EngineConfig& config() const { return m_config; }
  Sequence& seq(int64_t i) { return m_seqs[static_cast<size_t>(i)]; }
  // Sent and not admitted, oldest first (a preempted sequence goes back to the front).
  std::deque<int64_t>& waiting() { return m_waiting; }
  // Admitted, in the order they were admitted (the last is the first preempted).
  std::vector<int64_t>& running() { return m_running; }
  bool slot_free() const { return static_cast<int64_t>(m_running.size()) < m_config.slots; }
  int64_t free_pages() const { return m_config.pages - m_used_pages; }
  // Takes a slot for the front waiting sequence when one is free and (paged) pages for `tokens` of it; false if not.
  bool admit_front(int64_t tokens);
  // Makes sequence i hold places for `tokens` tokens (paged: pages); false when the pages ran out.
  bool reserve(int64_t i, int64_t tokens);
  // Gives sequence i room for `tokens`, preempting the latest admitted others until it fits (vLLM's recompute
  // preemption); false when even alone it does not fit (then the caller preempts it).
  bool reserve_preempting(int64_t i, int64_t tokens);
  // Frees sequence i's slot and pages; its cache is dropped and it waits at the front to be prefilled again.
  void preempt(int64_t i);
  // Frees a finished sequence's slot and pages.
  void release(int64_t i);
  int64_t preemptions() const { return m_preemptions; }
  int64_t cached_tokens() const;  // in the running sequences' caches

 private:
  const EngineConfig& m_config;
  std::vector<Sequence>& m_seqs;
  std::deque<int64_t> m_waiting;
  std::vector<int64_t> m_running;
  int64_t m_used_pages = 0;
  int64_t m_preemptions = 0;
};

class IServingPolicy {
 public:
  virtual ~IServingPolicy() = default;
  // What the next iteration computes; an empty one when nothing can run until a request arrives. The policy admits
  // sequences (EngineState::admit_front) and reserves their cache for the tokens the iteration adds.
  virtual Iteration next(EngineState& s) = 0;
  // The batch padding the policy's engine computes around `it` (serving.engine.batch_padding: engine): sets
  // it.pad_sequences and it.pad_tokens. Default: none.
  virtual void pad(Iteration& it, const EngineState& s) const {
    (void)it;
    (void)s;
  }
};
using ServingPolicyRegistry = Registry<IServingPolicy>;

// One iteration as it ran.
struct IterationRecord {
  double start = 0, seconds = 0;
  IterationKind kind = IterationKind::Decode;
  int64_t sequences = 0;    // in the iteration
  int64_t pad_sequences = 0, pad_tokens = 0;  // the engine's batch padding beside them
  int64_t new_tokens = 0;   // it processed
  int64_t running = 0;      // sequences holding a slot at its end
  int64_t kv_tokens = 0;    // in the caches at its end
  int64_t kv_pages = 0;     // paged: pages held at its end
  double model_flops = 0, stream_bytes_per_chip = 0;
};

struct EngineResult {
  std::vector<Sequence> sequences;  // by request id
  std::vector<IterationRecord> iterations;
  double duration = 0;              // the last token's time
  int64_t preemptions = 0;
};

class Engine {
 public:
  Engine(EngineConfig c, std::unique_ptr<IServingPolicy> policy, IterationTimeFn time_of);
  EngineResult run(const std::vector<Request>& requests);

 private:
  EngineConfig m_config;
  std::unique_ptr<IServingPolicy> m_policy;
  IterationTimeFn m_time_of;
};

// Percentiles as numpy computes them (linear between the closest ranks), which benchmark_serving reports.
double percentile(std::vector<double> v, double pct);

}  // namespace podsim::serving

#define PODSIM_REGISTER_SERVING_POLICY(Impl, name, description) \
  PODSIM_REGISTER(::podsim::serving::IServingPolicy, Impl, name, description)

// Disaggregated serving (docs/serving.md, "Disaggregated serving"): prefill and decode on separate slices, as
// JetStream's disaggregated mode and vLLM's prefill-decode disaggregation run them. The prefill slice's engine
// prefills every request (its first token sampled there); each finished prefill's KV cache then crosses the link
// between the slices, one transfer after another at the link's bandwidth; the request joins the decode slice's engine
// when its cache has arrived and is decoded there to its last token.
//
//   DisaggregatedEngine d(prefill_engine, decode_engine, transfer_seconds);   // transfer_seconds(Request) -> s
//   DisaggregatedResult r = d.run(requests);   // r.sequences: per request, latencies from its arrival
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "sim/serving/engine.h"

namespace podsim::serving {

// Seconds the request's prompt cache takes to cross the link (its bytes over the link's bandwidth).
using TransferTimeFn = std::function<double(const Request&)>;

struct Transfer {
  double start = -1, seconds = 0;  // -1: none (the request ended with its first token)
};

struct DisaggregatedResult {
  std::vector<Sequence> sequences;  // by request id: sent at its arrival, first token from the prefill slice
  std::vector<Transfer> transfers;  // by request id
  EngineResult prefill, decode;     // each slice's iterations
  double duration = 0;
};

class DisaggregatedEngine {
 public:
  DisaggregatedEngine(std::unique_ptr<Engine> prefill, std::unique_ptr<Engine> decode, TransferTimeFn transfer);
  // Open loop only: the requests are sent as they arrive.
  DisaggregatedResult run(const std::vector<Request>& requests);

 private:
  std::unique_ptr<Engine> m_prefill, m_decode;
  TransferTimeFn m_transfer;
};

}  // namespace podsim::serving

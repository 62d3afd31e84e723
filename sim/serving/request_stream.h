// The requests of a serving run (docs/serving.md, "Request streams"): synthetic (serving.requests.count requests of
// fixed or uniformly drawn lengths, arriving all at once, at a constant rate or as a Poisson process) or read from a
// CSV trace (arrival_s, input_tokens, output_tokens), checked against the model's context.
//
//   std::vector<Request> rs = request_stream(exp.params);   // sorted by arrival, ids 0, 1, ...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/params/param.h"

namespace podsim::serving {

struct Request {
  int64_t id = 0;
  double arrival = 0;  // seconds from the start of the run
  int64_t input = 0;   // prompt tokens
  int64_t output = 0;  // output tokens, the first sampled by the prefill
  // Disaggregated serving's decode slice: the request arrives with its prompt's KV cache and its first token,
  // sampled on the prefill slice at `first` (docs/serving.md, "Disaggregated serving").
  bool prefilled = false;
  double first = -1;
};

// Whether the experiment is a serving run: a request count or a trace given.
bool serving_run(const ParamSet& p);

// The stream the serving section poses (throws Error: PODSIM-SRV-001 for a request past workload.max_context,
// PODSIM-SRV-003 for a malformed or unordered trace, PODSIM-SRV-004 for a missing count or rate).
std::vector<Request> request_stream(const ParamSet& p);

// A trace's requests, read from `path` (errors name it and the line).
std::vector<Request> read_trace(const std::string& path);

}  // namespace podsim::serving

// The KV cache moved from the prefill layout to the decode layout (docs/serving.md, "Per-phase layouts"). A prefill
// under serving.prefill's layout writes its prompts' caches split as that layout splits them; the decode layout
// splits them otherwise (heads over the model axis against sequences over every chip, say), so after the prefill
// every chip fetches the part of the prompts' caches its decode shard holds and its prefill shard did not.
//
//   Held from = ..., to = ...;   // per chip, [begin, end) of [sequences, capacity, kv_heads, head_dim]
//   RelayoutCount c = relayout_count(from, to, {700}, kv);   // one prompt of 700 tokens into row 0
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace podsim::serving {

// Per chip, the part of one layer's key (or value) cache it holds, a [begin, end) per dimension of [sequences,
// capacity, kv_heads, head_dim]; empty: nothing (an idle chip).
using Held = std::vector<std::vector<std::pair<int64_t, int64_t>>>;

struct KvBytes {
  int64_t layers = 1;
  double element_bytes = 2;  // of workload.kv_dtype
  double scale_bytes = 0;    // per token and head (int8, fp8: an fp32 scale)
};

struct RelayoutCount {
  std::vector<double> received;  // bytes per chip
  double total = 0;              // bytes over all chips
  double max_per_chip = 0;
  int64_t chips = 0;             // chips that receive anything
};

// Prompt i of the iteration (tokens[i] of them cached) is row i of both layouts' caches. A chip receives the
// elements its decode part holds of those rows' tokens less those its prefill part already holds; every layer's key
// and value alike (2 x layers), with their scales.
RelayoutCount relayout_count(const Held& from, const Held& to, const std::vector<int64_t>& tokens, const KvBytes& kv);

// The relayout's time: every chip receives its bytes over its ICI links at once (links x link_bandwidth), after a
// hop's latency; a lower bound (a formula: the move is not simulated on the torus model).
double relayout_seconds(const RelayoutCount& c, double chip_bandwidth, double latency);

}  // namespace podsim::serving

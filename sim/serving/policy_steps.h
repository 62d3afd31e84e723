// Pieces the engine policies share (sim/serving/policy_*.cpp).
#pragma once

#include "sim/serving/engine.h"

namespace podsim::serving {

// One decode for every running sequence whose prompt is cached and which has tokens left, oldest admitted first,
// at most `budget` of them; each gets the place of the token it feeds, preempting the latest admitted when the
// pages ran out (a sequence that does not fit even alone is preempted itself). Appends to `it`; returns the decodes.
int64_t add_decodes(EngineState& s, Iteration& it, int64_t budget = INT64_MAX);

// Drops the work of sequences preempted after it was added.
void drop_preempted(EngineState& s, Iteration& it);

}  // namespace podsim::serving

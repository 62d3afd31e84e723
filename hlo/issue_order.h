// The order an imported module's ops are issued in, apart from translating them (hlo/importer.h).
#pragma once

#include <vector>

#include "hlo/import.h"

namespace podsim::hlo {

// An unscheduled module (before XLA's optimizations): the module's order with its cheap producers issued right
// before their readers, elementwise consumers right after their producers (for the fusion pass) and ops that free
// more than they allocate as soon as they are ready (XLA's memory-aware list scheduler). Details in the .cpp.
std::vector<OpId> unscheduled_order(const ModelGraph& g);

// A scheduled module: control edges so that its kernels run one after another in `out.order`, a synchronous
// collective holding the next kernel until it is done and an asynchronous one running from its start to its done.
void add_schedule_edges(Imported& out);

// An unscheduled module: each collective waits for the one of its kind before it in `out.order`, so collectives of
// one kind run one at a time in issue order, as XLA's latency-hiding scheduler overlaps at most one asynchronous
// collective of each kind with compute (SchedulerConfig's *_overlap_limit, 1 by default). Details in the .cpp.
void add_overlap_limits(Imported& out);

}  // namespace podsim::hlo

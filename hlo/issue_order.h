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

}  // namespace podsim::hlo

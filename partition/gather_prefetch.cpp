// Fully sharded parameters (partitioner_impl.h): the pass a gathered copy serves, and each cell's gathers issued one
// cell ahead.
#include <map>

#include "base/error.h"
#include "partition/partitioner_impl.h"

namespace podsim::partition_detail {

int Partitioner::gather_pass(const Op& op) const {
  const bool forward = op.phase == Phase::Forward || op.phase == Phase::Loss;
  if (forward && !op.recompute) return 0;
  if (forward || op.phase == Phase::Backward) return m_in.keep_gathered ? 0 : 1;
  return -1;
}

void Partitioner::prefetch_gathers() {
  std::vector<OpId>& order = m_res.program.order;
  ModelGraph& pg = m_res.program.graph;
  std::vector<int> chain_of(pg.num_ops(), -1);
  for (size_t c = 0; c < m_chains.size(); ++c)
    for (OpId o : m_chains[c].ops) chain_of[o] = static_cast<int>(c);
  // The first compute op of each cell in each pass (not a host transfer: an offloaded value's reload is issued a
  // cell ahead of the ops that read it, as the gathers are, and anchoring them there would issue them two ahead).
  std::map<std::pair<int, int32_t>, OpId> first_op;
  for (OpId o : order) {
    const Op& op = pg.op(o);
    const bool host = op.kind == OpKind::ToHost || op.kind == OpKind::FromHost;
    if (chain_of[o] >= 0 || is_communication(op.kind) || host || op.cell < 0 || gather_pass(op) < 0) continue;
    first_op.emplace(std::make_pair(gather_pass(op), op.cell), o);
  }
  // Before each anchor (an op of the original order), the chains to issue there.
  std::map<OpId, std::vector<int>> before;
  for (int pass : {0, 1}) {
    std::vector<int32_t> cells;                 // in order of first gather
    std::map<int32_t, std::vector<int>> chains;  // per cell
    for (size_t c = 0; c < m_chains.size(); ++c) {
      const GatherChain& ch = m_chains[c];
      if (ch.pass != pass) continue;
      if (!chains.count(ch.cell)) cells.push_back(ch.cell);
      chains[ch.cell].push_back(static_cast<int>(c));
    }
    for (size_t k = 0; k < cells.size(); ++k) {
      auto anchor = first_op.find({pass, cells[k]});
      // A cell without ops of its own in the pass (cannot happen: a gather is made for an op of the cell).
      if (anchor == first_op.end()) return;
      std::vector<int>& here = before[anchor->second];
      if (k == 0) here.insert(here.end(), chains[cells[0]].begin(), chains[cells[0]].end());
      if (k + 1 < cells.size()) here.insert(here.end(), chains[cells[k + 1]].begin(), chains[cells[k + 1]].end());
    }
  }
  std::vector<OpId> out;
  out.reserve(order.size());
  OpId last_compute = -1;
  for (OpId o : order) {
    if (chain_of[o] >= 0) continue;
    auto it = before.find(o);
    if (it != before.end())
      for (int c : it->second) {
        const std::vector<OpId>& ops = m_chains[static_cast<size_t>(c)].ops;
        if (last_compute >= 0) pg.add_control(last_compute, ops.front());
        out.insert(out.end(), ops.begin(), ops.end());
      }
    out.push_back(o);
    if (!is_communication(pg.op(o).kind)) last_compute = o;
  }
  if (out.size() != order.size()) throw Error(Err::Internal, "partitioner: prefetching the gathers lost ops");
  order = std::move(out);
}

}  // namespace podsim::partition_detail

#include "sim/serving/disaggregated.h"

#include <algorithm>
#include <numeric>

namespace podsim::serving {

DisaggregatedEngine::DisaggregatedEngine(std::unique_ptr<Engine> prefill, std::unique_ptr<Engine> decode,
                                         TransferTimeFn transfer)
    : m_prefill(std::move(prefill)), m_decode(std::move(decode)), m_transfer(std::move(transfer)) {}

DisaggregatedResult DisaggregatedEngine::run(const std::vector<Request>& requests) {
  DisaggregatedResult r;
  // The prefill slice computes each prompt and samples its first token: to it, every request ends there.
  std::vector<Request> prefills = requests;
  for (Request& q : prefills) q.output = 1;
  r.prefill = m_prefill->run(prefills);
  r.sequences = r.prefill.sequences;
  r.transfers.assign(requests.size(), Transfer{});
  for (size_t i = 0; i < requests.size(); ++i) r.sequences[i].req = requests[i];

  // The caches cross the link in the order their prefills finished, one at a time (each takes the link's whole
  // bandwidth), so a transfer starts when its prefill has ended and the one before it has arrived.
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return r.prefill.sequences[a].first < r.prefill.sequences[b].first; });
  std::vector<Request> decodes;
  std::vector<size_t> of;  // the request each decode is
  double link_free = 0;
  for (size_t i : order) {
    const Sequence& p = r.prefill.sequences[i];
    if (requests[i].output <= 1) continue;
    Transfer& x = r.transfers[i];
    x.start = std::max(p.first, link_free);
    x.seconds = m_transfer(requests[i]);
    link_free = x.start + x.seconds;
    Request q = requests[i];
    q.id = static_cast<int64_t>(decodes.size());
    q.arrival = link_free;
    q.prefilled = true;
    q.first = p.first;
    decodes.push_back(q);
    of.push_back(i);
  }
  r.decode = m_decode->run(decodes);
  r.duration = r.prefill.duration;
  for (size_t k = 0; k < of.size(); ++k) {
    const Sequence& d = r.decode.sequences[k];
    Sequence& s = r.sequences[of[k]];
    const double sent = s.sent;
    const int64_t preempted = s.preemptions;
    s = d;
    s.req = requests[of[k]];
    s.sent = sent;
    s.preemptions += preempted;
    r.duration = std::max(r.duration, d.finish);
  }
  return r;
}

}  // namespace podsim::serving

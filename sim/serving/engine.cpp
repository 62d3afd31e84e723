#include "sim/serving/engine.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace podsim::serving {

const char* kind_name(IterationKind k) {
  switch (k) {
    case IterationKind::Prefill: return "prefill";
    case IterationKind::Decode: return "decode";
    case IterationKind::Mixed: return "mixed";
  }
  return "decode";
}

IterationKind Iteration::kind() const {
  bool dec = false, pre = false;
  for (const Work& w : work) (w.decode ? dec : pre) = true;
  return dec && pre ? IterationKind::Mixed : dec ? IterationKind::Decode : IterationKind::Prefill;
}

namespace {

int64_t pages_for(const EngineConfig& c, int64_t tokens) {
  return c.paged ? (tokens + c.page_tokens - 1) / c.page_tokens : 0;
}

}  // namespace

bool EngineState::reserve(int64_t i, int64_t tokens) {
  Sequence& s = seq(i);
  const int64_t need = pages_for(m_config, tokens) - s.pages;
  if (need <= 0) return true;
  if (need > free_pages()) return false;
  s.pages += need;
  m_used_pages += need;
  return true;
}

bool EngineState::admit_front(int64_t tokens) {
  if (m_waiting.empty() || !slot_free()) return false;
  const int64_t i = m_waiting.front();
  if (!reserve(i, tokens)) return false;
  m_waiting.pop_front();
  seq(i).admitted = true;
  m_running.push_back(i);
  return true;
}

bool EngineState::reserve_preempting(int64_t i, int64_t tokens) {
  while (!reserve(i, tokens)) {
    // The latest admitted other than i gives its pages back.
    int64_t victim = -1;
    for (auto it = m_running.rbegin(); it != m_running.rend(); ++it)
      if (*it != i) {
        victim = *it;
        break;
      }
    if (victim < 0) return false;
    preempt(victim);
  }
  return true;
}

void EngineState::preempt(int64_t i) {
  Sequence& s = seq(i);
  release(i);
  s.prompt = s.req.input + s.generated;  // recomputed: the prompt and the tokens generated so far
  s.prefilled = 0;
  s.kv = 0;
  ++s.preemptions;
  ++m_preemptions;
  m_waiting.push_front(i);
}

void EngineState::release(int64_t i) {
  Sequence& s = seq(i);
  m_used_pages -= s.pages;
  s.pages = 0;
  s.admitted = false;
  m_running.erase(std::remove(m_running.begin(), m_running.end(), i), m_running.end());
}

int64_t EngineState::cached_tokens() const {
  int64_t n = 0;
  for (int64_t i : m_running) n += m_seqs[static_cast<size_t>(i)].kv;
  return n;
}

Engine::Engine(EngineConfig c, std::unique_ptr<IServingPolicy> policy, IterationTimeFn time_of)
    : m_config(c), m_policy(std::move(policy)), m_time_of(std::move(time_of)) {}

EngineResult Engine::run(const std::vector<Request>& requests) {
  EngineResult r;
  std::vector<Sequence>& seqs = r.sequences;
  for (const Request& q : requests) {
    Sequence s;
    s.req = q;
    s.prompt = q.input;
    if (q.prefilled) {  // its cache came from a prefill elsewhere, with the first token
      s.prefilled = s.kv = q.input;
      s.generated = 1;
      s.first = s.last = q.first;
    }
    seqs.push_back(s);
  }
  // Send order: by arrival, then id (a trace is in order already; a synthetic stream too).
  std::vector<int64_t> order(seqs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return seqs[a].req.arrival < seqs[b].req.arrival; });
  EngineState st(m_config, seqs);
  const int64_t cap = m_config.max_concurrency > 0 ? m_config.max_concurrency : std::numeric_limits<int64_t>::max();
  size_t next = 0;       // the next request to send
  int64_t in_flight = 0;  // sent, not finished
  double free_since = 0;  // since when the client may send (a closed loop waits for a finish)
  size_t finished = 0;
  double t = 0;
  while (finished < seqs.size()) {
    while (next < order.size() && in_flight < cap && seqs[order[next]].req.arrival <= t) {
      Sequence& s = seqs[order[next]];
      s.sent = std::max(s.req.arrival, free_since);
      st.waiting().push_back(order[next]);
      ++next;
      if (++in_flight == cap) free_since = std::numeric_limits<double>::infinity();
    }
    // A sequence that arrived with its cache is inserted into a free slot as it comes (JetStream's insert); the
    // policy only decodes it.
    while (!st.waiting().empty() && !seqs[static_cast<size_t>(st.waiting().front())].prefilling() &&
           st.admit_front(seqs[static_cast<size_t>(st.waiting().front())].kv + 1)) {
    }
    Iteration it = m_policy->next(st);
    if (it.empty()) {
      if (next < order.size() && in_flight < cap) {
        t = std::max(t, seqs[order[next]].req.arrival);  // idle until the next arrival
        continue;
      }
      throw Error(Err::Internal, "the serving engine is stuck: " + std::to_string(st.waiting().size()) +
                                     " sequences wait and the policy schedules none");
    }
    if (m_config.batch_padding) m_policy->pad(it, st);
    const IterationCost cost = m_time_of(it, seqs);
    IterationRecord rec;
    rec.start = t;
    rec.seconds = cost.seconds;
    rec.kind = it.kind();
    rec.sequences = static_cast<int64_t>(it.work.size());
    rec.pad_sequences = it.pad_sequences;
    rec.pad_tokens = it.pad_tokens;
    rec.model_flops = cost.model_flops;
    rec.stream_bytes_per_chip = cost.stream_bytes_per_chip;
    t += cost.seconds;
    for (const Work& w : it.work) {
      Sequence& s = seqs[static_cast<size_t>(w.seq)];
      rec.new_tokens += w.fresh;
      s.kv += w.fresh;
      if (!w.decode) {
        s.prefilled += w.fresh;
        if (s.prefilling()) continue;  // a chunk short of the prompt's end samples nothing
      }
      // A token: the prompt's last position or the decode samples the next one.
      if (s.last >= 0) s.gaps.push_back(t - s.last);
      if (s.first < 0) s.first = t;
      s.last = t;
      ++s.generated;
      if (s.done()) {
        s.finish = t;
        st.release(w.seq);
        ++finished;
        if (in_flight-- == cap) free_since = t;
      }
    }
    rec.running = static_cast<int64_t>(st.running().size());
    rec.kv_tokens = st.cached_tokens();
    rec.kv_pages = m_config.pages - st.free_pages();
    r.iterations.push_back(rec);
  }
  r.duration = t;
  r.preemptions = st.preemptions();
  return r;
}

double percentile(std::vector<double> v, double pct) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = pct / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace podsim::serving

#include "sim/serving/run/serving_trace.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "sim/trace/trace_writer.h"

namespace podsim::serving {

namespace {

uint64_t ns(double s) { return static_cast<uint64_t>(std::llround(std::max(0.0, s) * 1e9)); }

}  // namespace

ServingTrace write_serving_trace(const std::string& dir, const TraceOptions& opt, const EngineResult& r,
                                 const std::vector<bool>& on_prefill, const std::vector<Transfer>& transfers) {
  ServingTrace out;
  if (opt.format == "off") return out;
  const bool json = opt.format == "json";
  out.file = std::string("trace.") + (json ? "json" : "pftrace") + (opt.compress ? ".gz" : "");
  auto w = TraceWriter::create(dir + "/" + out.file, json ? TraceFormat::Json : TraceFormat::Pftrace, opt.compress);
  const bool disaggregated = std::find(on_prefill.begin(), on_prefill.end(), true) != on_prefill.end();

  const TraceWriter::Track engine = w->process("engine", 1, 0);
  const TraceWriter::Track decode = w->child(engine, disaggregated ? "decode slice" : "iterations", 0);
  const TraceWriter::Track prefill = disaggregated ? w->child(engine, "prefill slice", 1) : 0;
  const TraceWriter::Track batch = w->counter(engine, "sequences in the iteration", "", 3, "sequences");
  const TraceWriter::Track running = w->counter(engine, "sequences holding a slot", "", 4, "sequences");
  const TraceWriter::Track cache = w->counter(engine, "KV cache", "tokens", 5);
  // Each slice's counters at its iterations' starts (the counters of a slice's own iterations: disaggregated, the
  // decode slice's).
  for (size_t i = 0; i < r.iterations.size(); ++i) {
    const IterationRecord& it = r.iterations[i];
    const bool pre = i < on_prefill.size() && on_prefill[i];
    w->slice(pre ? prefill : decode, ns(it.start), ns(it.start + it.seconds), kind_name(it.kind),
             {{"sequences", it.sequences}, {"new_tokens", it.new_tokens}, {"running", it.running},
              {"kv_tokens", it.kv_tokens}});
    if (!pre) {
      w->counter_value(batch, ns(it.start), static_cast<double>(it.sequences));
      w->counter_value(running, ns(it.start + it.seconds), static_cast<double>(it.running));
      w->counter_value(cache, ns(it.start + it.seconds), static_cast<double>(it.kv_tokens));
    }
  }
  // KV caches crossing between the slices, one after another (docs/serving.md, "Disaggregated serving").
  if (!transfers.empty()) {
    const TraceWriter::Track link = w->child(engine, "KV cache transfers", 2);
    std::vector<std::pair<double, size_t>> order;
    for (size_t id = 0; id < transfers.size(); ++id)
      if (transfers[id].start >= 0) order.push_back({transfers[id].start, id});
    std::sort(order.begin(), order.end());
    for (const auto& [start, id] : order)
      w->slice(link, ns(start), ns(start + transfers[id].seconds), "request " + std::to_string(id));
  }

  const TraceWriter::Track requests = w->process("requests", 2, 1);
  std::vector<const Sequence*> by_sent;
  for (const Sequence& s : r.sequences) by_sent.push_back(&s);
  std::stable_sort(by_sent.begin(), by_sent.end(), [](const Sequence* a, const Sequence* b) { return a->sent < b->sent; });
  for (const Sequence* s : by_sent) {
    const uint64_t sent = ns(s->sent), first = ns(s->first), finish = ns(std::max(s->finish, s->first));
    const TraceWriter::Track lane = w->lane(requests, "in flight", sent, finish, 0);
    w->slice(lane, sent, finish, "request " + std::to_string(s->req.id),
             {{"input_tokens", s->req.input},
              {"output_tokens", s->req.output},
              {"arrival_s", s->req.arrival},
              {"ttft_s", s->first - s->sent},
              {"preemptions", s->preemptions}});
    w->slice(lane, sent, first, "to first token");
    if (finish > first) w->slice(lane, first, finish, "decoding");
  }
  const TraceWriter::Tally t = w->tally();
  w->close();
  out.events = static_cast<int64_t>(t.slices + t.counter_values);
  return out;
}

}  // namespace podsim::serving

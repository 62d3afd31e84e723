#include "sim/serving/run/serving_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/text.h"
#include "sim/config/loader.h"
#include "sim/engine/output_dir.h"
#include "sim/serving/disaggregated.h"
#include "sim/serving/engine.h"
#include "sim/serving/iteration_time.h"
#include "sim/serving/request_stream.h"
#include "sim/serving/run/serving_phases.h"
#include "sim/serving/run/serving_trace.h"
#include "sim/serving/run/shape_simulator.h"
#include "workloads/models/transformer_layer.h"

namespace podsim::serving {
namespace {

using J = nlohmann::ordered_json;

std::string ll(int64_t v) { return std::to_string(v); }
double r9(double x) { return std::isfinite(x) ? std::round(x * 1e9) / 1e9 : 0; }

J stats(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return {{"mean", r9(v.empty() ? 0 : sum / static_cast<double>(v.size()))},
          {"p50", r9(percentile(v, 50))},
          {"p90", r9(percentile(v, 90))},
          {"p99", r9(percentile(v, 99))}};
}

EngineConfig engine_config(const ParamSet& p, const std::vector<Request>& rs) {
  EngineConfig c;
  c.slots = p.i("serving.engine.slots");
  c.max_batched_tokens = p.i("serving.engine.max_batched_tokens");
  c.paged = p.s("serving.engine.kv") == "paged";
  c.page_tokens = p.i("serving.engine.page_tokens");
  c.batch_padding = p.s("serving.engine.batch_padding") == "engine";
  if (p.has("serving.requests.max_concurrency")) c.max_concurrency = p.i("serving.requests.max_concurrency");
  int64_t longest = 0;
  for (const Request& r : rs) longest = std::max(longest, r.input + r.output);
  c.slot_tokens = p.has("serving.engine.slot_tokens") ? p.i("serving.engine.slot_tokens")
                  : p.has("workload.max_context") ? p.i("workload.max_context")
                                                  : longest;
  c.pages = p.has("serving.engine.pages") ? p.i("serving.engine.pages")
                                          : c.slots * ((c.slot_tokens + c.page_tokens - 1) / c.page_tokens);
  // Every request must fit the cache alone: at its end it holds its input and output but the last token.
  for (const Request& r : rs) {
    const int64_t need = r.input + r.output - 1;
    if (need > c.slot_tokens)
      throw Error(Err::ServingCache,
                  p.where(p.has("serving.engine.slot_tokens") ? "serving.engine.slot_tokens" : "workload.max_context"),
                  "request " + ll(r.id) + " holds " + ll(need) + " tokens at its end (" + ll(r.input) + " input, " +
                      ll(r.output) + " output, the last never cached), more than a sequence's " + ll(c.slot_tokens) +
                      " places of KV cache (serving.engine.slot_tokens); give at least " + ll(need),
                  "serving.engine.slot_tokens");
    const int64_t pages = (need + c.page_tokens - 1) / c.page_tokens;
    if (c.paged && pages > c.pages)
      throw Error(Err::ServingCache, p.where("serving.engine.pages"),
                  "request " + ll(r.id) + " needs " + ll(pages) + " pages of " + ll(c.page_tokens) + " tokens (" +
                      ll(need) + " tokens at its end), more than the cache's " + ll(c.pages) +
                      " (serving.engine.pages); give at least " + ll(pages),
                  "serving.engine.pages");
  }
  return c;
}

void check_section(const ParamSet& p) {
  if (p.where("workload.step").origin != "default" && p.s("workload.step") != "train")
    throw Error(Err::ServingPolicy, p.where("workload.step"),
                "a serving run chooses each iteration's step itself; drop workload.step (it is " +
                    p.s("workload.step") + ") or the serving section",
                "workload.step");
  const std::string policy = p.s("serving.engine.policy");
  if (!ServingPolicyRegistry::instance().find(policy))
    throw Error(Err::ServingPolicy, p.where("serving.engine.policy"),
                "unknown serving policy '" + policy +
                    "'; one of: " + join(ServingPolicyRegistry::instance().names(), ", "),
                "serving.engine.policy");
}

// Disaggregated serving (docs/serving.md, "Disaggregated serving"): the prefill slice and the link between it and
// the decode slice (hardware.pod).
struct Disaggregation {
  bool on = false;
  std::vector<int64_t> dims;  // the prefill slice
  int64_t chips = 0;
  int64_t batch = 1;
  std::string link;
  double bandwidth = 0;        // bytes/s the link carries one cache at
  double latency = 0;          // seconds before its first byte arrives
  double bytes_per_token = 0;  // of a prompt's cache: every layer's keys and values (and scales)
  int64_t hosts_prefill = 0, hosts_decode = 0, links = 0;
};

std::string dims_text(const std::vector<int64_t>& v) {
  std::vector<std::string> parts;
  for (int64_t x : v) parts.push_back(std::to_string(x));
  std::string t = "[";
  t.append(join(parts, ",")).append("]");
  return t;
}

Disaggregation disaggregation(const Experiment& e) {
  const ParamSet& p = e.params;
  Disaggregation d;
  if (!p.has("serving.disaggregated.prefill_pod")) return d;
  d.on = true;
  d.dims = p.ints("serving.disaggregated.prefill_pod");
  d.batch = p.i("serving.disaggregated.prefill_batch");
  d.link = p.s("serving.disaggregated.link");
  const std::vector<int64_t>& decode = e.hardware.pod.dims;
  if (d.dims.size() != decode.size())
    throw Error(Err::ServingPolicy, p.where("serving.disaggregated.prefill_pod"),
                "the prefill slice " + dims_text(d.dims) + " has " + ll(static_cast<int64_t>(d.dims.size())) +
                    " torus dimensions, the decode slice (hardware.pod.dims " + dims_text(decode) + ") " +
                    ll(static_cast<int64_t>(decode.size())) + "; give the prefill slice as many",
                "serving.disaggregated.prefill_pod");
  if (e.hardware.pod.slices > 1)
    throw Error(Err::ServingPolicy, p.where("hardware.slices"),
                "disaggregated serving runs the decode slice as one slice (hardware.slices is " +
                    ll(e.hardware.pod.slices) + "); drop hardware.slices or serving.disaggregated",
                "hardware.slices");
  if (p.has("serving.requests.max_concurrency"))
    throw Error(Err::ServingPolicy, p.where("serving.requests.max_concurrency"),
                "disaggregated serving sends every request when it arrives (an open loop); drop "
                "serving.requests.max_concurrency or serving.disaggregated",
                "serving.requests.max_concurrency");
  d.chips = 1;
  for (int64_t x : d.dims) d.chips *= x;
  const int64_t per_host = std::max<int64_t>(1, e.hardware.host.chips);
  d.hosts_prefill = (d.chips + per_host - 1) / per_host;
  d.hosts_decode = (e.hardware.pod.slice_chips() + per_host - 1) / per_host;
  if (d.link == "dcn") {
    if (e.hardware.dcn.bandwidth <= 0)
      throw Error(Err::ServingPolicy, p.where("serving.disaggregated.link"),
                  "the KV caches cross the DCN, but hardware " + e.hardware.preset +
                      " gives it no bandwidth (hardware.dcn.bandwidth is 0B/s); set hardware.dcn.bandwidth or "
                      "link: ici",
                  "serving.disaggregated.link");
    // Every host of the smaller slice sends (or receives) its chips' part of the cache through its NICs.
    d.bandwidth = static_cast<double>(std::min(d.hosts_prefill, d.hosts_decode)) * e.hardware.dcn.bandwidth;
    d.latency = e.hardware.dcn.latency;
  } else {
    // Side by side along the first torus dimension: one link per chip of the face they share, one hop.
    d.links = 1;
    for (size_t k = 1; k < d.dims.size(); ++k) d.links *= std::min(d.dims[k], decode[k]);
    d.bandwidth = static_cast<double>(d.links) * e.hardware.ici.link_bandwidth;
    d.latency = e.hardware.ici.hop_latency;
  }
  // The cache as the memory plan holds it (workloads/models/transformer_inference.cpp): per layer a key and a
  // value of kv_heads x head_dim per token, in workload.kv_dtype, with an f32 scale per token and head if int8/fp8.
  const TransformerShape t = transformer_shape(p, 1);
  const std::string kv = p.has("workload.kv_dtype") ? p.s("workload.kv_dtype") : p.s("workload.dtype");
  const bool quantized = kv == "int8" || kv == "fp8";
  const double elem = quantized ? 1 : kv == "fp32" ? 4 : 2;
  d.bytes_per_token = static_cast<double>(t.L * 2 * t.KV) * (static_cast<double>(t.dh) * elem + (quantized ? 4 : 0));
  return d;
}

void write(const OutputDir& od, const std::string& name, const std::string& text) {
  std::ofstream f(od.file(name));
  f << text;
  if (!f) throw Error(Err::OutputUnwritable, "cannot write into '" + od.path() + "'");
}

}  // namespace

RunOutcome run_serving(const Experiment& e, const RunOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  const ParamSet& p = e.params;
  check_section(p);
  const Disaggregation dis = disaggregation(e);
  const std::vector<Request> requests = request_stream(p);
  const EngineConfig config = engine_config(p, requests);
  RunOutcome out;
  const std::string dir = opts.out_dir.empty() ? "results/" + e.run.name : opts.out_dir;
  OutputDir od(dir, opts.force);

  ShapeFrame frame;
  frame.yaml = resolved_yaml(e, false);
  frame.label = e.run.name + " (an iteration of its serving run)";
  frame.kv_capacity = config.slot_tokens;
  frame.resident = config.paged ? (config.pages * config.page_tokens + config.slot_tokens - 1) / config.slot_tokens
                                : config.slots;
  frame.jobs = p.i("serving.jobs");
  TimerOptions to;
  to.exact = p.b("serving.exact");
  to.context_bucket = p.i("serving.context_bucket");
  to.padding = p.s("workload.prefill_padding");
  to.kv_block = p.i("workload.kv_block");
  // serving.prefill: the prefill iterations under a layout of their own (docs/serving.md, "Per-phase layouts").
  std::unique_ptr<PrefillPhase> phase = PrefillPhase::make(e, frame, config, requests.size(), to);
  IterationTimer timer(to, [&](const std::vector<Shape>& s) {
    std::vector<IterationCost> c = simulate_shapes(frame, s);
    if (phase) phase->check_decode(c, s);
    return c;
  });
  auto decode_engine = std::make_unique<Engine>(
      config, ServingPolicyRegistry::instance().make(p.s("serving.engine.policy")),
      [&](const Iteration& it, const std::vector<Sequence>& seqs) {
        return phase && it.kind() == IterationKind::Prefill ? phase->cost(it) : timer.cost(it, seqs);
      });
  EngineResult r;
  std::vector<Transfer> transfers;
  std::vector<bool> on_prefill;  // per iteration of r: on the prefill slice (disaggregated)
  std::unique_ptr<IterationTimer> prefill_timer;
  if (!dis.on) {
    r = decode_engine->run(requests);
    on_prefill.assign(r.iterations.size(), false);
  } else {
    // The prefill slice: the experiment on its own pod, prefilling batches of prefill_batch prompts (the static
    // policy, every request ending with its first token there).
    ShapeFrame pf = frame;
    pf.label = e.run.name + " (an iteration of its serving run's prefill slice)";
    pf.overrides = {"hardware.pod.dims=" + dims_text(dis.dims)};
    pf.resident = dis.batch;
    prefill_timer = std::make_unique<IterationTimer>(
        to, [pf](const std::vector<Shape>& s) { return simulate_shapes(pf, s); });
    EngineConfig pc = config;
    pc.slots = dis.batch;
    pc.paged = false;
    pc.max_concurrency = 0;
    IterationTimer& pt = *prefill_timer;
    auto prefill_engine = std::make_unique<Engine>(
        pc, ServingPolicyRegistry::instance().make("static"),
        [&pt](const Iteration& it, const std::vector<Sequence>& seqs) { return pt.cost(it, seqs); });
    DisaggregatedEngine de(std::move(prefill_engine), std::move(decode_engine), [&dis](const Request& q) {
      return dis.latency + static_cast<double>(q.input) * dis.bytes_per_token / dis.bandwidth;
    });
    DisaggregatedResult dr = de.run(requests);
    r.sequences = std::move(dr.sequences);
    r.iterations = dr.prefill.iterations;
    r.iterations.insert(r.iterations.end(), dr.decode.iterations.begin(), dr.decode.iterations.end());
    on_prefill.assign(dr.prefill.iterations.size(), true);
    on_prefill.resize(r.iterations.size(), false);
    r.duration = dr.duration;
    r.preemptions = dr.decode.preemptions;
    transfers = std::move(dr.transfers);
  }

  // Figures as benchmark_serving computes them.
  const double T = r.duration;
  const int64_t decode_chips = e.hardware.pod.chips();
  const int64_t chips = decode_chips + (dis.on ? dis.chips : 0);
  std::vector<double> ttft, tpot, itl, e2e;
  int64_t in_tokens = 0, out_tokens = 0;
  std::string csv = "id,arrival_s,sent_s,first_token_s,finish_s,input_tokens,output_tokens,ttft_s,tpot_s,e2e_s,"
                    "preemptions";
  csv += dis.on ? ",kv_transfer_start_s,kv_transfer_s\n" : "\n";
  std::vector<double> transfer_s;
  double transfer_bytes = 0;
  for (const Sequence& s : r.sequences) {
    ttft.push_back(s.first - s.sent);
    e2e.push_back(s.finish - s.sent);
    const double tp = s.req.output > 1 ? (s.finish - s.first) / static_cast<double>(s.req.output - 1) : 0;
    if (s.req.output > 1) tpot.push_back(tp);
    itl.insert(itl.end(), s.gaps.begin(), s.gaps.end());
    in_tokens += s.req.input;
    out_tokens += s.req.output;
    csv += strprintf("%lld,%.9f,%.9f,%.9f,%.9f,%lld,%lld,%.9f,%.9f,%.9f,%lld\n", static_cast<long long>(s.req.id),
                     s.req.arrival, s.sent, s.first, s.finish, static_cast<long long>(s.req.input),
                     static_cast<long long>(s.req.output), s.first - s.sent, tp, s.finish - s.sent,
                     static_cast<long long>(s.preemptions));
    if (dis.on) {
      const Transfer& x = transfers[static_cast<size_t>(s.req.id)];
      csv.pop_back();
      csv += strprintf(",%.9f,%.9f\n", x.start, x.seconds);
      if (x.start >= 0) {
        transfer_s.push_back(x.seconds);
        transfer_bytes += static_cast<double>(s.req.input) * dis.bytes_per_token;
      }
    }
  }
  // An iteration's MFU is against the peak of the slice it ran on.
  const double chip_peak = e.hardware.chip.peak_flops();
  auto peak_of = [&](size_t i) {
    return chip_peak * static_cast<double>(on_prefill[i] ? dis.chips : decode_chips);
  };
  const double bw = e.hardware.chip.hbm.bandwidth;
  J kinds = J::object();
  std::string iter_csv =
      "start_s,duration_s,kind,sequences,new_tokens,running,kv_tokens,kv_pages,pad_sequences,pad_tokens";
  iter_csv += dis.on ? ",slice\n" : "\n";
  double peak_kv = 0, kv_time = 0;
  int64_t peak_batch = 0, peak_computed = 0;  // sequences in an iteration, and with its batch padding
  for (IterationKind k : {IterationKind::Prefill, IterationKind::Decode, IterationKind::Mixed}) {
    int64_t n = 0;
    double time = 0, peak_time = 0, bytes = 0, tokens = 0;  // peak_time: FLOPs over the slice's peak
    for (size_t i = 0; i < r.iterations.size(); ++i) {
      const IterationRecord& it = r.iterations[i];
      if (it.kind == k) {
        ++n;
        time += it.seconds;
        peak_time += it.model_flops / peak_of(i);
        bytes += it.stream_bytes_per_chip;
        tokens += static_cast<double>(it.new_tokens);
      }
    }
    kinds[kind_name(k)] = {{"count", n},
                           {"time_s", r9(time)},
                           {"tokens", tokens},
                           {"mfu", time > 0 ? r9(peak_time / time) : 0.0},
                           {"mbu", time > 0 && bw > 0 ? r9(bytes / (bw * time)) : 0.0}};
  }
  for (size_t i = 0; i < r.iterations.size(); ++i) {
    const IterationRecord& it = r.iterations[i];
    iter_csv += strprintf("%.9f,%.9f,%s,%lld,%lld,%lld,%lld,%lld,%lld,%lld", it.start, it.seconds,
                          kind_name(it.kind),
                          static_cast<long long>(it.sequences), static_cast<long long>(it.new_tokens),
                          static_cast<long long>(it.running), static_cast<long long>(it.kv_tokens),
                          static_cast<long long>(it.kv_pages), static_cast<long long>(it.pad_sequences),
                          static_cast<long long>(it.pad_tokens));
    iter_csv += dis.on ? (on_prefill[i] ? ",prefill\n" : ",decode\n") : "\n";
    if (on_prefill[i]) continue;  // the decode slice's cache
    peak_kv = std::max(peak_kv, static_cast<double>(it.kv_tokens));
    kv_time += static_cast<double>(it.kv_tokens) * it.seconds;
    peak_batch = std::max(peak_batch, it.sequences);
    peak_computed = std::max(peak_computed, it.sequences + it.pad_sequences);
  }
  const double capacity = config.paged ? static_cast<double>(config.pages * config.page_tokens)
                                       : static_cast<double>(config.slots * config.slot_tokens);
  J s;
  s["policy"] = p.s("serving.engine.policy");
  s["requests"] = static_cast<int64_t>(requests.size());
  s["input_tokens"] = in_tokens;
  s["output_tokens"] = out_tokens;
  s["duration_s"] = r9(T);
  s["ttft_s"] = stats(ttft);
  s["tpot_s"] = stats(tpot);
  s["itl_s"] = stats(itl);
  s["e2e_s"] = stats(e2e);
  s["requests_per_s"] = T > 0 ? r9(static_cast<double>(requests.size()) / T) : 0.0;
  s["output_tokens_per_s"] = T > 0 ? r9(static_cast<double>(out_tokens) / T) : 0.0;
  s["total_tokens_per_s"] = T > 0 ? r9(static_cast<double>(in_tokens + out_tokens) / T) : 0.0;
  s["per_chip"] = {{"requests_per_s", r9(s["requests_per_s"].get<double>() / static_cast<double>(chips))},
                   {"output_tokens_per_s", r9(s["output_tokens_per_s"].get<double>() / static_cast<double>(chips))},
                   {"total_tokens_per_s", r9(s["total_tokens_per_s"].get<double>() / static_cast<double>(chips))}};
  s["iterations"] = kinds;
  s["batch"] = {{"max_sequences", peak_batch},
                {"slots", config.slots},
                {"padding", p.s("serving.engine.batch_padding")},
                {"max_computed_sequences", peak_computed}};
  s["kv_cache"] = {{"kind", config.paged ? "paged" : "contiguous"},
                   {"capacity_tokens", capacity},
                   {"peak_tokens", peak_kv},
                   {"mean_occupancy", T > 0 && capacity > 0 ? r9(kv_time / T / capacity) : 0.0},
                   {"preemptions", r.preemptions}};
  if (dis.on) {
    s["disaggregated"] = {{"prefill_pod", dis.dims},
                          {"prefill_chips", dis.chips},
                          {"decode_chips", decode_chips},
                          {"prefill_batch", dis.batch},
                          {"link", dis.link},
                          {"link_bandwidth_bytes_per_s", dis.bandwidth},
                          {"link_latency_s", dis.latency},
                          {"kv_bytes_per_token", dis.bytes_per_token},
                          {"kv_transfers", static_cast<int64_t>(transfer_s.size())},
                          {"kv_transfer_bytes", transfer_bytes},
                          {"kv_transfer_s", stats(transfer_s)}};
  }
  if (phase) s["phases"] = phase->summary(frame.label);
  s["shapes_simulated"] =
      timer.simulated() + (prefill_timer ? prefill_timer->simulated() : 0) + (phase ? phase->simulated() : 0);
  s["exact"] = to.exact;

  J j;
  j["podsim_version"] = PODSIM_VERSION;
  j["experiment"] = e.run.name;
  j["hardware"] = e.hardware.preset;
  j["workload"] = e.workload;
  j["strategy"] = e.strategy;
  j["numeric"] = false;
  j["seed"] = e.run.seed;
  j["pod_dims"] = e.hardware.pod.dims;
  j["chips"] = chips;
  j["simulated"] = true;
  // A serving run's "step" is the whole stream: from the first request sent to the last token.
  j["step_time_s"] = r9(T);
  j["serving"] = s;
  out.summary = j.dump(2) + "\n";
  write(od, "summary.json", out.summary);
  write(od, "config.resolved.yaml", resolved_yaml(e));
  write(od, "requests.csv", csv);
  write(od, "iterations.csv", iter_csv);
  const ServingTrace trace = write_serving_trace(od.path(), e.run.trace, r, on_prefill, transfers);
  const ShapeStats& st = shape_stats();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  J h;
  h["simulated"] = true;
  h["wall_s"] = r9(wall);
  h["iterations"] = static_cast<int64_t>(r.iterations.size());
  h["shapes_simulated"] = st.shapes;
  h["shapes_wall_s"] = r9(st.wall);
  h["activations"] = st.activations;
  h["trace"] = {{"file", trace.file.empty() ? J() : J(trace.file)}, {"events", trace.events}};
  write(od, "host.json", h.dump(2) + "\n");
  od.commit();
  out.out_dir = od.final_path();
  return out;
}

}  // namespace podsim::serving

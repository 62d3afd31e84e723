#include "sim/engine/engine.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <systemc>
#include <thread>

#include "hw/chip/sim_time.h"
#include "hw/compiler/issue_order.h"
#include "hw/compiler/lower.h"
#include "hw/pod/pod.h"
#include "base/error.h"
#include "base/text.h"
#include "sim/config/loader.h"
#include "sim/engine/hlo_stats.h"
#include "sim/engine/memory_summary.h"
#include "sim/engine/output_dir.h"
#include "sim/engine/run_progress.h"
#include "sim/engine/tensor_output.h"
#include "sim/engine/trace_export.h"
#include "strategies/planner.h"
#include "workloads/i_workload.h"

namespace podsim {

Prepared::Prepared() = default;
Prepared::~Prepared() = default;
Simulation::Simulation() = default;
Simulation::Simulation(Simulation&&) noexcept = default;
Simulation::~Simulation() = default;

namespace {

double physical_memory() {
  return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
}

void check_memory(Prepared& p) {
  const Experiment& e = p.exp;
  const double capacity = e.hardware.chip.hbm.capacity;
  for (size_t r = 0; r < p.plan.programs.size(); ++r) {
    const MemoryPlan& m = p.ctx->programs[r].memory;
    if (m.peak_bytes <= capacity) continue;
    const ExecProgram& ep = p.ctx->programs[r];
    std::string at = m.peak_op >= 0 ? "at op '" + ep.ops[m.peak_op].name + "'" : "at the start of the step";
    std::vector<std::string> largest;
    for (const auto& t : m.largest_at_peak)
      largest.push_back("'" + t.name + "' " + format_bytes(t.bytes) + " (" + t.role + ")");
    std::string msg = "the step does not fit in HBM: role '" + p.plan.programs[r].role + "' peaks at " +
                      format_bytes(m.peak_bytes) + " " + at + ", " + format_bytes(m.peak_bytes - capacity) +
                      " more than the " + format_bytes(capacity) + " of " + e.hardware.preset + " HBM. Live then: " +
                      "weights " + format_bytes(m.at_peak.weights) + ", gradients " +
                      format_bytes(m.at_peak.gradients) + ", optimizer state " +
                      format_bytes(m.at_peak.optimizer_state) + ", activations " +
                      format_bytes(m.at_peak.activations) + ", temporaries " + format_bytes(m.at_peak.temporaries) +
                      (m.at_peak.weight_copies > 0 ? ", weight copies " + format_bytes(m.at_peak.weight_copies) : "") +
                      (m.at_peak.kv_cache > 0 ? ", KV cache " + format_bytes(m.at_peak.kv_cache) : "") +
                      "; largest: " + join(largest, ", ");
    // The advice to set run.allow_oom goes only to a run that has not set it.
    if (!e.run.allow_oom)
      throw Error(Err::OutOfMemory, e.params.where("workload.model"),
                  msg + ". Shrink the workload, or set run.allow_oom: true to report and continue", "workload.model");
    p.notes.push_back("out of memory (allowed by run.allow_oom): " + msg);
  }
  if (e.run.numeric) {
    double need = 0;
    std::vector<int64_t> per_role(p.plan.programs.size(), 0);
    for (int32_t role : p.plan.role_of_chip)
      if (role >= 0) ++per_role[role];
    for (size_t r = 0; r < p.plan.programs.size(); ++r) {
      double bytes = 0;
      for (const auto& t : p.plan.programs[r].graph.tensors()) bytes += static_cast<double>(t.elements()) * 4.0;
      need += 3.0 * bytes * static_cast<double>(per_role[r]);  // tensors, collective buffers, messages
    }
    double have = physical_memory();
    if (have > 0 && need > 0.5 * have)
      throw Error(Err::HostMemory, e.params.where("run.numeric"),
                  "numeric mode would need about " + format_bytes(need) + " of this machine's memory (it has " +
                      format_bytes(have) + "); run without run.numeric, or shrink the workload or the pod",
                  "run.numeric");
  }
}

void choose_traced_chips(Prepared& p) {
  const TraceOptions& t = p.exp.run.trace;
  const int64_t chips = p.exp.hardware.pod.chips();
  p.ctx->traced.assign(static_cast<size_t>(chips), false);
  if (t.format == "off") return;
  if (!t.chips.empty()) {
    for (int64_t c : t.chips) {
      if (c >= chips)
        throw Error(Err::OutOfRange, p.exp.params.where("run.trace.chips"),
                    "run.trace.chips names chip " + std::to_string(c) + " but the pod has chips 0 to " +
                        std::to_string(chips - 1),
                    "run.trace.chips");
      p.ctx->traced[c] = true;
    }
    return;
  }
  if (chips > t.max_chips) {
    p.notes.push_back("no trace: the pod has " + std::to_string(chips) + " chips, more than run.trace.max_chips = " +
                      std::to_string(t.max_chips) + "; pick chips with run.trace.chips or raise the limit");
    return;
  }
  std::fill(p.ctx->traced.begin(), p.ctx->traced.end(), true);
}

// Wall-clock watchdog (run.max_wall) over the whole run: planning, lowering and simulation. A simulation that hangs
// or runs away cannot be stopped from inside SystemC safely, so on expiry the watchdog reports, removes the partial
// output folder and ends the process.
class Watchdog {
 public:
  explicit Watchdog(double seconds) {
    m_thread = std::thread([this, seconds] {
      std::unique_lock<std::mutex> lock(m_mutex);
      if (m_cv.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return m_stop; })) return;
      const PodContext* ctx = m_ctx.load();
      const std::string when = ctx ? "after " + std::to_string(ctx->ops_completed.load()) + " ops had completed"
                                   : std::string("while the step was being planned (nothing simulated yet)");
      if (isatty(fileno(stderr))) std::fputs("\r\033[K", stderr);  // over a progress line, if there is one
      std::fprintf(stderr, "error %s: the run exceeded run.max_wall = %s of real time and was stopped %s; raise "
                           "run.max_wall, or shrink the experiment\n",
                   std::string(error_info(Err::WallLimit).id).c_str(), format_time(seconds).c_str(), when.c_str());
      abandon_partial_output();
      std::fflush(stderr);
      _exit(error_info(Err::WallLimit).exit_code);
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_stop = true;
    }
    m_cv.notify_all();
    m_thread.join();
  }
  // From here on the report counts the simulation's completed ops.
  void simulating(const PodContext& ctx) { m_ctx.store(&ctx); }

 private:
  std::atomic<const PodContext*> m_ctx{nullptr};
  std::mutex m_mutex;
  std::condition_variable m_cv;
  bool m_stop = false;
  std::thread m_thread;
};

// Whether glibc backs the heap with transparent huge pages (the podsim command asks for it: sim/cli/main.cpp).
bool malloc_huge_pages() {
  const char* t = std::getenv("GLIBC_TUNABLES");
  return t && std::string(t).find("glibc.malloc.hugetlb=1") != std::string::npos;
}

// GLIBC_TUNABLES as this process has it, for a JSON string.
std::string glibc_tunables() {
  const char* t = std::getenv("GLIBC_TUNABLES");
  std::string out;
  for (const char* c = t ? t : ""; *c; ++c) {
    if (*c == '"' || *c == '\\') out += '\\';
    if (static_cast<unsigned char>(*c) >= 0x20) out += *c;
  }
  return out;
}

long peak_rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6);
  return 0;
}

void write_summary_and_config(const OutputDir& od, const std::string& summary, const Experiment& exp) {
  std::ofstream f(od.file("summary.json"));
  f << summary;
  std::ofstream c(od.file("config.resolved.yaml"));
  c << resolved_yaml(exp);
  if (!f || !c) throw Error(Err::OutputUnwritable, "cannot write into '" + od.path() + "'");
}

}  // namespace

std::unique_ptr<Prepared> prepare(const Experiment& exp) {
  auto p = std::make_unique<Prepared>();
  p->exp = exp;
  p->ctx = std::make_unique<PodContext>();
  std::unique_ptr<IWorkload> w = WorkloadRegistry::instance().make(exp.workload);
  if (!w) throw Error(Err::Internal, "workload vanished from the registry");
  p->graph = w->build(exp.params);
  p->plan = make_plan(p->graph, p->exp);
  w->release(exp.params);  // the graph and the plan hold copies of what it kept
  for (const std::string& n : p->plan.notes) p->notes.push_back(n);
  validate_plan(p->plan, p->graph, exp.hardware.pod.chips());
  PodContext& ctx = *p->ctx;
  ctx.exp = &p->exp;
  ctx.plan = &p->plan;
  ctx.numeric = exp.run.numeric;
  ctx.latency_hiding = exp.run.scheduler == "latency_hiding";
  ctx.logical = &p->graph;
  ctx.torus = Torus(exp.hardware.pod.dims, exp.hardware.pod.wrap, exp.hardware.pod.slices);
  ctx.result_chip = p->plan.result_chip;
  for (const Program& prog : p->plan.programs) {
    for (const Op& op : prog.graph.ops())
      if (op.kind == OpKind::Traffic) ctx.traffic_window = std::max(ctx.traffic_window, op.attrs.duration);
    LowerOptions lo = lower_options(p->exp.run);
    lo.kernels = &prog.kernels;
    // An imported module's cheap producers are recomputed at each reader by the importer (hlo/import.cpp), the one
    // mechanism for them there. The compiler's producer duplication would also recompute elementwise groups that
    // read large operands, keeping those operands live longer: XLA's 405B module plans at 63.12 GiB with it and
    // 57.89 GiB without, for the same planning time.
    if (!prog.sources.empty()) lo.fusion.duplicate = false;
    lo.devices_per_chip = p->plan.devices_per_chip;
    ctx.programs.push_back(lower(prog.graph, prog.order, p->exp.hardware.chip, lo));
    const ExecProgram& ep = ctx.programs.back();
    std::vector<std::vector<int32_t>> deps(ep.ops.size());
    for (size_t i = 0; i < ep.ops.size(); ++i)
      for (int32_t d : ep.ops[i].deps) deps[d].push_back(static_cast<int32_t>(i));
    IssueOrder order = issue_order(ep, deps, p->exp.hardware.chip, p->exp.hardware.ici.link_bandwidth,
                                   p->exp.run.scheduler == "latency_hiding");
    ctx.issue_rank.push_back(std::move(order.rank));
    ctx.op_at_rank.push_back(std::move(order.op_at_rank));
    ctx.dependents.push_back(std::move(deps));
  }
  check_memory(*p);
  choose_traced_chips(*p);
  return p;
}

Simulation simulate(Prepared& p, bool progress) {
  Simulation s;
  auto t0 = std::chrono::steady_clock::now();
  s.pod = std::make_unique<Pod>(*p.ctx);
  if (p.exp.hardware.faults.any() && !s.pod->symmetry().reduced(p.ctx->torus))
    p.notes.push_back("simulated " + s.pod->symmetry().describe(p.ctx->torus));
  if (s.pod->symmetry().reduced(p.ctx->torus))
    p.notes.push_back("simulated " + s.pod->symmetry().describe(p.ctx->torus) +
                      "; every other chip does the same as the one that stands for it (run.symmetry: off simulates "
                      "each)");
  {
    int64_t ops = 0;
    for (const auto& chip : s.pod->simulated()) ops += static_cast<int64_t>(chip->ops_total());
    RunProgress line(progress, ops, p.ctx->ops_completed);
    sc_core::sc_start();
  }
  if (p.ctx->failure) std::rethrow_exception(p.ctx->failure);
  s.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.activations = g_model_activations;
  double now = sc_core::sc_time_stamp().to_seconds();
  std::vector<std::string> stuck;
  size_t stuck_chips = 0;
  for (const Chip* chip : s.pod->chips()) {  // every torus position (a box's chip stands for several)
    s.step_time = std::max({s.step_time, chip->last_end(), chip->log().last_delivery});
    if (!chip->finished()) ++stuck_chips;
  }
  for (const auto& chip : s.pod->simulated()) {
    if (chip->finished()) continue;
    if (stuck.size() < 8) {
      std::vector<std::string> why = chip->stuck_ops();
      stuck.push_back(p.ctx->torus.chip_label(chip->id()) + " (" + std::to_string(chip->ops_done()) + " of " +
                      std::to_string(chip->ops_total()) + " ops done): " + (why.empty() ? "?" : join(why, "; ")));
    }
  }
  if (stuck_chips > 0) {
    std::string more = stuck_chips > stuck.size()
                           ? " (and " + std::to_string(stuck_chips - stuck.size()) + " more chips)"
                           : "";
    // Point at the strategy when the experiment chose one (it made the programs), else at the workload.
    std::string key = p.exp.params.where("strategy.name").file.empty() ? "workload.model" : "strategy.name";
    throw Error(Err::Deadlock, p.exp.params.where(key),
                "deadlock at simulated time " + format_time(now) + ": " + std::to_string(stuck_chips) +
                    (stuck_chips == 1 ? " chip waits" : " chips wait") + " forever. " + join(stuck, " | ") + more,
                key);
  }
  return s;
}

RunOutcome run_experiment(const Experiment& exp, const RunOptions& opts) {
  RunOutcome out;
  std::string dir = opts.out_dir.empty() ? "results/" + exp.run.name : opts.out_dir;
  OutputDir od(dir, opts.force);
  Watchdog dog(exp.run.max_wall);
  auto t_plan = std::chrono::steady_clock::now();
  std::unique_ptr<Prepared> p = prepare(exp);
  const double plan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_plan).count();
  if (opts.memory_only) {
    out.summary = memory_summary_json(*p);
    write_summary_and_config(od, out.summary, exp);
    std::ofstream h(od.file("host.json"));
    h << "{\n  \"simulated\": false,\n  \"plan_s\": " << strprintf("%.6f", plan_s)
      << ",\n  \"peak_rss_kib\": " << peak_rss_kib() << ",\n  \"programs\": " << p->ctx->programs.size() << "\n}\n";
    if (!h) throw Error(Err::OutputUnwritable, "cannot write into '" + od.path() + "'");
    od.commit();
    out.out_dir = od.final_path();
    out.notes = p->notes;
    return out;
  }
  if (exp.run.numeric) check_tensor_output(*p);  // before simulating, so a run that would write too much costs nothing
  dog.simulating(*p->ctx);
  Simulation s = simulate(*p, opts.progress);
  out.summary = summary_json(*p, s);
  write_summary_and_config(od, out.summary, exp);
  if (exp.run.numeric) write_tensors(*p, s, od.file("tensors"));
  if (const HloOpStats* st = hlo_op_stats(*p, s)) {
    std::ofstream f(od.file("hlo_op_stats.csv")), c(od.file("hlo_category_stats.csv"));
    f << hlo_op_stats_csv(*st);
    c << hlo_category_stats_csv(*st);
    if (!f || !c) throw Error(Err::OutputUnwritable, "cannot write into '" + od.path() + "'");
  }
  TraceStats ts = export_trace(*p, s, od.path());
  for (const auto& n : ts.notes) p->notes.push_back(n);
  {
    std::ofstream h(od.file("host.json"));
    h << "{\n  \"simulated\": true,\n  \"wall_s\": " << strprintf("%.6f", s.wall)
      << ",\n  \"peak_rss_kib\": " << peak_rss_kib()
      << ",\n  \"activations\": " << s.activations << ",\n  \"activations_per_s\": "
      << strprintf("%.0f", s.wall > 0 ? static_cast<double>(s.activations) / s.wall : 0.0)
      << ",\n  \"plan_s\": " << strprintf("%.6f", plan_s) << ",\n  \"programs\": " << p->ctx->programs.size()
      << ",\n  \"schedules_built\": " << p->ctx->schedules.built()
      << ",\n  \"simulated_chips\": " << s.pod->simulated().size()
      << ",\n  \"malloc_huge_pages\": " << (malloc_huge_pages() ? "true" : "false")
      << ",\n  \"glibc_tunables\": \"" << glibc_tunables() << "\""
      << ",\n  \"trace\": {\"file\": \"" << ts.file << "\", \"events\": " << ts.events << ", \"slices\": " << ts.slices
      << ", \"counter_values\": " << ts.counter_values << ", \"flows\": " << ts.flows << ", \"tracks\": " << ts.tracks
      << ", \"bytes\": " << ts.bytes << "}\n}\n";
  }
  od.commit();
  out.out_dir = od.final_path();
  out.notes = p->notes;
  return out;
}

}  // namespace podsim

// The run's trace, drawn from the chips' logs (hw/chip/chip_log.h) after the simulation. Layout after XProf's TPU
// trace viewer; docs/trace.md describes it. Everything to draw is first collected as plain records (so the
// trace's own tally can be checked against them), then written through TraceWriter.
#include "sim/engine/trace_export.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "hw/pod/pod.h"
#include "hw/timing/mxu_timing.h"
#include "base/error.h"
#include "base/text.h"
#include "sim/engine/engine.h"
#include "sim/trace/trace_writer.h"

namespace podsim {
namespace {

enum class Detail { Ops = 0, Units = 1, Links = 2 };

constexpr int kCounterBins = 200;

struct Window {
  double from = 0, to = 0;
  // Clips [b, e] to the window; false when it lies outside.
  bool clip(double& b, double& e) const {
    if (e < from || b > to) return false;
    b = std::max(b, from);
    e = std::min(e, to);
    return true;
  }
};

uint64_t ns(double s) { return static_cast<uint64_t>(std::llround(std::max(0.0, s) * 1e9)); }

// One slice to draw. `track` names a track of its chip (resolved when writing); lanes spread overlapping slices.
struct SliceRec {
  int64_t chip;
  std::string track;
  bool lanes = false;  // overlapping slices possible: use lanes named after the track
  double begin, end;
  std::string name;
  std::vector<TraceArg> args;
  uint64_t flow_out = 0, flow_in = 0;
  int rank = 0;
};

struct CounterRec {
  int64_t chip;
  std::string track, unit, share;
  int rank;
  std::vector<std::pair<double, double>> points;  // (time, value)
};

struct TracePlan {
  std::vector<SliceRec> slices;
  std::vector<CounterRec> counters;
  std::vector<int64_t> chips;
  uint64_t flows = 0;
};

// Busy fraction (or rate) of intervals in kCounterBins equal bins over [0, T].
std::vector<std::pair<double, double>> binned(const std::vector<std::pair<double, double>>& iv,
                                              const std::vector<double>& weight, double T, const Window& w) {
  std::vector<double> acc(kCounterBins, 0.0);
  const double width = T / kCounterBins;
  for (size_t i = 0; i < iv.size(); ++i) {
    double b = iv[i].first, e = iv[i].second;
    for (int k = std::max(0, static_cast<int>(b / width)); k < kCounterBins && k * width < e; ++k) {
      double lo = std::max(b, k * width), hi = std::min(e, (k + 1) * width);
      if (hi > lo) acc[k] += (hi - lo) * weight[i];
    }
  }
  std::vector<std::pair<double, double>> pts;
  for (int k = 0; k < kCounterBins; ++k) {
    double t = k * width;
    if (t + width < w.from || t > w.to) continue;
    pts.push_back({std::max(t, w.from), acc[k] / width});
  }
  if (!pts.empty()) pts.push_back({std::min(T, w.to), 0.0});  // back to zero at the end
  return pts;
}

TracePlan collect(const Prepared& p, const Simulation& s, Detail detail, const Window& win) {
  TracePlan plan;
  const auto& chips = s.pod->simulated();  // traced chips are always simulated (hw/pod/symmetry.h)
  const ChipConfig& cfg = p.exp.hardware.chip;
  const Torus& torus = p.ctx->torus;
  for (const auto& chip_ptr : chips) {
    if (!p.ctx->traced[chip_ptr->id()]) continue;
    const Chip& chip = *chip_ptr;
    const int64_t c = chip.id();
    plan.chips.push_back(c);
    const ChipLog& log = chip.log();
    // Steps: the chip's program, from the start to its last op.
    if (chip.role() >= 0) {
      double b = 0, e = chip.last_end();
      if (win.clip(b, e)) plan.slices.push_back({c, "Steps", false, b, e, "step", {}, 0, 0, 0});
    }
    // Ops, one group of lanes per TensorCore; communication ops under Collectives, one track per op.
    if (chip.role() >= 0) {
      const ExecProgram& ep = p.ctx->programs[chip.role()];
      for (size_t i = 0; i < ep.ops.size(); ++i) {
        const ExecOp& e = ep.ops[i];
        const OpRecord& r = log.ops[i];
        if (r.start < 0) continue;
        double b = r.start, en = r.end;
        if (!win.clip(b, en)) continue;
        std::vector<TraceArg> args = {{"kind", std::string(op_kind_name(e.kind))},
                                      {"unit", std::string(unit_name(e.unit))},
                                      {"flops", static_cast<int64_t>(e.flops)},
                                      {"hbm_bytes", static_cast<int64_t>(r.hbm_read + r.hbm_write)},
                                      {"cycles", r.busy_cycles}};
        if (e.members.size() > 1) {
          const ModelGraph& g = p.plan.programs[chip.role()].graph;
          std::string names;
          for (OpId id : e.members) names += (names.empty() ? "" : ", ") + g.op(id).name;
          args.push_back({"fusion", std::string(fusion_kind_name(e.fusion))});
          args.push_back({"members", names});
        }
        if (e.unit == Unit::Mxu)
          args.push_back({"shape", std::to_string(e.gemm.batch) + "x" + std::to_string(e.gemm.m) + "x" +
                                       std::to_string(e.gemm.k) + "x" + std::to_string(e.gemm.n)});
        if (e.unit == Unit::Ici) {
          plan.slices.push_back({c, "Collectives/" + e.name, false, b, en, e.name, args, 0, 0, 0});
        } else if (e.unit == Unit::Host) {
          plan.slices.push_back({c, "Host transfers", true, b, en, e.name, args, 0, 0, 2});
        } else {
          for (int core = 0; core < e.cores; ++core)
            plan.slices.push_back({c, "TensorCore " + std::to_string(core) + " ops", true, b, en, e.name, args, 0, 0,
                                   1 + core});
        }
      }
    }
    if (detail >= Detail::Units) {
      for (const Interval& iv : log.compute) {
        double b = iv.begin, e = iv.end;
        if (!win.clip(b, e)) continue;
        bool mxu = iv.lane < 16;
        int core = mxu ? iv.lane : iv.lane - 16;
        std::string name = chip.role() >= 0 && iv.op >= 0 ? p.ctx->programs[chip.role()].ops[iv.op].name : "work";
        // A VPU may run an op and a matmul's epilogue (output fusion) at once: its slices take lanes.
        plan.slices.push_back({c, std::string(mxu ? "MXU" : "VPU") + " (TensorCore " + std::to_string(core) + ")",
                               !mxu, b, e, name, {}, 0, 0, 10 + 2 * core + (mxu ? 0 : 1)});
      }
      static const char* clients[] = {"HBM (MXU feed)", "HBM (VPU)", "HBM (DMA)"};
      for (const Interval& iv : log.hbm) {
        double b = iv.begin, e = iv.end;
        if (!win.clip(b, e)) continue;
        plan.slices.push_back({c, clients[iv.lane], true, b, e, iv.lane == 2 ? "dma" : "load/store",
                               {{"bytes", static_cast<int64_t>(iv.bytes)}}, 0, 0, 30 + iv.lane});
      }
      // Counters: MXU utilization and HBM bandwidth.
      std::vector<std::pair<double, double>> iv;
      std::vector<double> wt;
      for (const Interval& x : log.compute)
        if (x.lane < 16) {
          iv.push_back({x.begin, x.end});
          wt.push_back(100.0 / static_cast<double>(cfg.tensorcores));
        }
      plan.counters.push_back({c, "MXU utilization", "%", "mxu_util", 5, binned(iv, wt, s.step_time, win)});
      iv.clear();
      wt.clear();
      for (const Interval& x : log.hbm)
        if (x.end > x.begin) {
          iv.push_back({x.begin, x.end});
          wt.push_back(x.bytes / (x.end - x.begin) / 1e9);
        }
      plan.counters.push_back({c, "HBM bandwidth", "GB/s", "hbm_bw", 6, binned(iv, wt, s.step_time, win)});
      // The host link's chunks, per way (hw/chip/host_link.h).
      static const char* ways[] = {"Host link (to host)", "Host link (from host)"};
      for (const Interval& x : log.host) {
        double b = x.begin, e = x.end;
        if (!win.clip(b, e)) continue;
        std::string name = chip.role() >= 0 && x.op >= 0 ? p.ctx->programs[chip.role()].ops[x.op].name : "chunk";
        plan.slices.push_back({c, ways[x.lane & 1], false, b, e, name, {{"bytes", static_cast<int64_t>(x.bytes)}}, 0,
                               0, 36 + (x.lane & 1)});
      }
      // Messages to and from other slices over the data-center network (hw/dcn/dcn.h): to the host, from it.
      static const char* dcn[] = {"DCN out (to the host)", "DCN in (from the host)"};
      for (const Interval& x : log.dcn) {
        double b = x.begin, e = x.end;
        if (!win.clip(b, e)) continue;
        std::string name = chip.role() >= 0 && x.op >= 0 ? p.ctx->programs[chip.role()].ops[x.op].name : "message";
        plan.slices.push_back({c, dcn[x.lane & 1], true, b, e, name, {{"bytes", static_cast<int64_t>(x.bytes)}}, 0,
                               0, 38 + (x.lane & 1)});
      }
    }
    if (detail >= Detail::Links) {
      std::map<int, std::vector<std::pair<double, double>>> per_dir;
      std::map<int, std::vector<double>> per_dir_w;
      for (const Interval& iv : log.links) {
        double b = iv.begin, e = iv.end;
        per_dir[iv.lane].push_back({b, e});
        per_dir_w[iv.lane].push_back(e > b ? iv.bytes / (e - b) / 1e9 : 0.0);
        if (!win.clip(b, e)) continue;
        plan.slices.push_back({c, "ICI " + Torus::direction_name(iv.lane), false, b, e, "chunk",
                               {{"bytes", static_cast<int64_t>(iv.bytes)}}, 0, 0, 40 + iv.lane});
      }
      for (int d = 0; d < torus.directions(); ++d)
        if (torus.neighbor(c, d) >= 0)
          plan.counters.push_back({c, "ICI " + Torus::direction_name(d) + " bandwidth", "GB/s", "ici_bw", 50 + d,
                                   binned(per_dir[d], per_dir_w[d], s.step_time, win)});
      // Transfers of each communication op, with flows from send to receive.
      for (const MessageSlice& m : log.messages) {
        double b = m.begin, e = m.end;
        if (!win.clip(b, e)) continue;
        std::string op = chip.role() >= 0 && m.op >= 0 ? p.ctx->programs[chip.role()].ops[m.op].name : "transfer";
        plan.slices.push_back({c, "Collectives/" + op + "/transfers", true, b, e, m.label,
                               {{"bytes", static_cast<int64_t>(m.bytes)}, {"peer_chip", m.peer}},
                               m.send ? m.flow : 0, m.send ? 0 : m.flow, 0});
      }
    }
  }
  // Keep only flows whose both ends are drawn.
  std::map<uint64_t, int> ends;
  for (const SliceRec& r : plan.slices) {
    if (r.flow_out) ends[r.flow_out] |= 1;
    if (r.flow_in) ends[r.flow_in] |= 2;
  }
  for (SliceRec& r : plan.slices) {
    if (r.flow_out && ends[r.flow_out] != 3) r.flow_out = 0;
    if (r.flow_in && ends[r.flow_in] != 3) r.flow_in = 0;
  }
  for (const auto& [id, both] : ends) plan.flows += both == 3;
  // Writing order: by begin time; at equal times flow sources first (the importer reads ties in file order).
  std::stable_sort(plan.slices.begin(), plan.slices.end(), [](const SliceRec& a, const SliceRec& b) {
    uint64_t ba = ns(a.begin), bb = ns(b.begin);
    if (ba != bb) return ba < bb;
    return (a.flow_out != 0) > (b.flow_out != 0);
  });
  return plan;
}

Detail detail_of(const std::string& d) { return d == "ops" ? Detail::Ops : d == "units" ? Detail::Units : Detail::Links; }

Window window_of(const Prepared& p, const Simulation& s) {
  Window w;
  w.from = p.exp.run.trace.from;
  w.to = p.exp.run.trace.to >= 0 ? p.exp.run.trace.to : s.step_time;
  return w;
}

TraceStats stats_of(const TracePlan& plan) {
  TraceStats t;
  t.slices = plan.slices.size();
  for (const auto& c : plan.counters) t.counter_values += c.points.size();
  t.flows = plan.flows;
  t.events = t.slices + t.counter_values;
  return t;
}

}  // namespace

TraceStats count_trace(const Prepared& p, const Simulation& s) {
  if (p.exp.run.trace.format == "off") return {};
  return stats_of(collect(p, s, detail_of(p.exp.run.trace.detail), window_of(p, s)));
}

TraceStats export_trace(const Prepared& p, const Simulation& s, const std::string& dir) {
  const TraceOptions& opt = p.exp.run.trace;
  TraceStats out;
  if (opt.format == "off") return out;
  TracePlan plan = collect(p, s, detail_of(opt.detail), window_of(p, s));
  if (plan.chips.empty()) return out;
  out = stats_of(plan);
  if (static_cast<int64_t>(out.events) > opt.warn_events) {
    // Said now, before the (long) write, and repeated in the run's notes.
    std::cerr << strprintf("podsim: warning: writing a trace of %llu events (%llu slices, %llu counter values, "
                           "%llu flows); this may take a while\n",
                           static_cast<unsigned long long>(out.events), static_cast<unsigned long long>(out.slices),
                           static_cast<unsigned long long>(out.counter_values),
                           static_cast<unsigned long long>(out.flows))
              << std::flush;
    out.notes.push_back(strprintf("the trace holds %llu events (more than run.trace.warn_events = %lld); the "
                                  "Perfetto UI struggles above about 4 million: narrow it with run.trace.chips, "
                                  "run.trace.from/to or run.trace.detail",
                                  static_cast<unsigned long long>(out.events), static_cast<long long>(opt.warn_events)));
  }
  const bool json = opt.format == "json";
  std::string name = std::string("trace.") + (json ? "json" : "pftrace") + (opt.compress ? ".gz" : "");
  std::string path = dir + "/" + name;
  auto w = TraceWriter::create(path, json ? TraceFormat::Json : TraceFormat::Pftrace, opt.compress);
  const Torus& torus = p.ctx->torus;
  // Tracks per chip, created in a fixed order so the layout is the same in every run.
  std::map<std::pair<int64_t, std::string>, TraceWriter::Track> tracks;
  std::map<int64_t, TraceWriter::Track> proc;
  for (int64_t c : plan.chips) proc[c] = w->process(torus.chip_label(c), static_cast<int>(c) + 1, static_cast<int>(c));
  auto track = [&](int64_t chip, const std::string& path, int rank) {
    auto key = std::make_pair(chip, path);
    auto it = tracks.find(key);
    if (it != tracks.end()) return it->second;
    // "A/B/C": nested children.
    TraceWriter::Track parent = proc[chip];
    std::string sofar;
    size_t start = 0;
    while (true) {
      size_t slash = path.find('/', start);
      std::string part = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
      sofar += (sofar.empty() ? "" : "/") + part;
      auto k = std::make_pair(chip, sofar);
      auto f = tracks.find(k);
      if (f == tracks.end()) {
        int r = sofar == path ? rank : (sofar == "Collectives" ? 60 : 0);
        f = tracks.emplace(k, w->child(parent, part, r)).first;
      }
      parent = f->second;
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    return parent;
  };
  for (const CounterRec& cr : plan.counters) {
    auto t = w->counter(proc[cr.chip], cr.track, cr.unit, cr.rank, cr.share);
    for (const auto& [ts, v] : cr.points) w->counter_value(t, ns(ts), v);
  }
  for (const SliceRec& r : plan.slices) {
    uint64_t b = ns(r.begin), e = std::max(ns(r.end), b);
    TraceWriter::Track t;
    if (r.lanes) {
      // Lanes live under the parent of the named track.
      size_t slash = r.track.rfind('/');
      TraceWriter::Track parent = slash == std::string::npos ? proc[r.chip] : track(r.chip, r.track.substr(0, slash), 0);
      t = w->lane(parent, slash == std::string::npos ? r.track : r.track.substr(slash + 1), b, e, r.rank);
    } else {
      t = track(r.chip, r.track, r.rank);
    }
    std::vector<uint64_t> fo, fi;
    if (r.flow_out) fo.push_back(r.flow_out);
    if (r.flow_in) fi.push_back(r.flow_in);
    w->slice(t, b, e, r.name, r.args, fo, fi);
  }
  w->close();
  TraceWriter::Tally tally = w->tally();
  out.tracks = tally.tracks;
  out.file = name;
  std::error_code ec;
  out.bytes = std::filesystem::file_size(path, ec);
  return out;
}

}  // namespace podsim

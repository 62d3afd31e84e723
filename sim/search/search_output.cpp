#include "sim/search/search_output.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "base/text.h"
#include "sim/sweep/command.h"
#include "sim/sweep/driver.h"
#include "sim/sweep/export.h"
#include "sim/sweep/folder.h"
#include "sim/sweep/plot_script.h"
#include "sim/sweep/results_db.h"

namespace podsim {
namespace fs = std::filesystem;

namespace {

std::string ms(double s) { return strprintf("%.3f", s * 1e3); }
std::string gib(double b) { return strprintf("%.2f", b / (1024.0 * 1024 * 1024)); }
std::string pct(double f) { return strprintf("%.1f", f * 100); }

std::optional<double> number(const ColumnValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return std::nullopt;
}

// Better first by the objective.
bool better(const SearchRow& a, const SearchRow& b, const std::string& objective) {
  if (objective == "mfu") return a.mfu > b.mfu;
  return a.step_time_s < b.step_time_s;
}

void pad(std::ostringstream& o, const std::string& s, size_t w, bool right = false) {
  if (right && s.size() < w) o << std::string(w - s.size(), ' ');
  o << s;
  if (!right && s.size() < w) o << std::string(w - s.size(), ' ');
}

std::string table(const std::vector<const SearchRow*>& ranked) {
  const std::vector<std::string> head = {"#",         "candidate", "strategies", "mesh",    "options",
                                         "step ms",   "est. ms",   "est. #",     "MFU %",   "HFU %",
                                         "peak memory",  "exposed %", "bubble %"};
  std::vector<std::vector<std::string>> cells;
  for (size_t i = 0; i < ranked.size(); ++i) {
    const SearchRow& r = *ranked[i];
    cells.push_back({std::to_string(i + 1), r.name, join(r.candidate.strategies, "+"), r.candidate.mesh_text(),
                     r.candidate.options_text(), ms(r.step_time_s), ms(r.eval.estimate_s),
                     std::to_string(r.estimate_rank), pct(r.mfu), pct(r.hfu), format_bytes(r.peak_memory_bytes),
                     pct(r.exposed_comm_fraction), r.bubble_fraction ? pct(*r.bubble_fraction) : "-"});
  }
  std::vector<size_t> w(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    w[c] = head[c].size();
    for (const auto& row : cells) w[c] = std::max(w[c], row[c].size());
  }
  std::ostringstream o;
  for (size_t c = 0; c < head.size(); ++c) {
    pad(o, head[c], w[c], c >= 5);
    o << (c + 1 < head.size() ? "  " : "\n");
  }
  for (const auto& row : cells)
    for (size_t c = 0; c < head.size(); ++c) {
      pad(o, row[c], w[c], c >= 5);
      o << (c + 1 < head.size() ? "  " : "\n");
    }
  return o.str();
}

nlohmann::json read_summary(const std::string& path) {
  std::ifstream f(path);
  if (!f) return nlohmann::json();
  try {
    return nlohmann::json::parse(f);
  } catch (const std::exception&) {
    return nlohmann::json();
  }
}

double at(const nlohmann::json& j, const std::string& pointer) {
  const nlohmann::json::json_pointer p(pointer);
  return j.contains(p) && j.at(p).is_number() ? j.at(p).get<double>() : 0.0;
}

// --explain: the winner's time beside the runner-up's, and the largest differences.
void explain(const std::string& sweep_dir, const SearchRow& a, const SearchRow* b) {
  const nlohmann::json ja = read_summary(sweep_dir + "/runs/" + a.name + "/summary.json");
  const nlohmann::json jb = b ? read_summary(sweep_dir + "/runs/" + b->name + "/summary.json") : nlohmann::json();
  struct Line {
    const char* label;
    const char* pointer;
    bool time;
  };
  const std::vector<Line> lines = {
      {"step time", "/step_time_s", true},
      {"compute (busy)", "/time_breakdown/compute_s", true},
      {"communication", "/time_breakdown/communication_s", true},
      {"exposed communication", "/time_breakdown/exposed_communication_s", true},
      {"idle (waiting, bubble)", "/time_breakdown/idle_s", true},
      {"recomputation", "/recompute_s", true},
      {"pipeline bubble fraction", "/pipeline/bubble_fraction", false},
      {"MFU", "/mfu", false},
      {"HFU", "/hfu", false},
      {"MXU busy", "/busy_fraction/mxu", false},
      {"HBM busy", "/busy_fraction/hbm", false},
      {"ICI busy", "/busy_fraction/ici", false},
      {"peak memory (GiB)", "/peak_memory_bytes", false},
  };
  std::printf("\nwhy %s wins%s\n", a.name.c_str(), b ? (" over the runner-up " + b->name).c_str() : "");
  std::printf("  %-26s %14s %14s %12s\n", "", "winner", b ? "runner-up" : "", b ? "difference" : "");
  std::vector<std::pair<double, std::string>> deltas;
  for (const Line& l : lines) {
    const double va = at(ja, l.pointer), vb = b ? at(jb, l.pointer) : 0;
    auto shown = [&](double v) {
      if (l.time) return ms(v) + " ms";
      if (std::string(l.pointer) == "/peak_memory_bytes") return gib(v);
      return pct(v) + " %";
    };
    std::printf("  %-26s %14s %14s %12s\n", l.label, shown(va).c_str(), b ? shown(vb).c_str() : "",
                b ? (l.time ? ms(va - vb) + " ms" : "").c_str() : "");
    if (b && l.time && std::string(l.pointer) != "/step_time_s" && std::string(l.pointer) != "/time_breakdown/communication_s")
      deltas.push_back({va - vb, l.label});
  }
  if (!b) return;
  std::sort(deltas.begin(), deltas.end());
  std::printf("  %s is %s ms faster (%s vs %s); it saves most in %s (%s ms)", a.name.c_str(),
              ms(b->step_time_s - a.step_time_s).c_str(), a.candidate.mesh_text().c_str(),
              b->candidate.mesh_text().c_str(), deltas.front().second.c_str(), ms(-deltas.front().first).c_str());
  if (deltas.back().first > 0)
    std::printf(" and pays most in %s (+%s ms)", deltas.back().second.c_str(), ms(deltas.back().first).c_str());
  std::printf(".\n");
}

void pareto_plot(const std::string& out, const std::vector<const SearchRow*>& done, const SearchRow& best) {
  std::vector<const SearchRow*> by_mem = done;
  std::sort(by_mem.begin(), by_mem.end(), [](auto* a, auto* b) {
    return a->peak_memory_bytes != b->peak_memory_bytes ? a->peak_memory_bytes < b->peak_memory_bytes
                                                        : a->step_time_s < b->step_time_s;
  });
  nlohmann::json front{{"label", "Pareto front"}, {"x", nlohmann::json::array()}, {"y", nlohmann::json::array()}};
  double fastest = 1e300;
  for (const auto* r : by_mem)
    if (r->step_time_s < fastest) {
      fastest = r->step_time_s;
      front["x"].push_back(r->peak_memory_bytes / (1024.0 * 1024 * 1024));
      front["y"].push_back(r->step_time_s * 1e3);
    }
  nlohmann::json pts{{"label", "candidates"}, {"x", nlohmann::json::array()}, {"y", nlohmann::json::array()},
                     {"markers_only", true}};
  for (const auto* r : done) {
    pts["x"].push_back(r->peak_memory_bytes / (1024.0 * 1024 * 1024));
    pts["y"].push_back(r->step_time_s * 1e3);
  }
  nlohmann::json win{{"label", "best: " + best.name},
                     {"x", {best.peak_memory_bytes / (1024.0 * 1024 * 1024)}},
                     {"y", {best.step_time_s * 1e3}},
                     {"markers_only", true}};
  nlohmann::json p{{"out", out + "/pareto.png"},
                   {"title", "podsim search: step time against peak memory (" + std::to_string(done.size()) +
                                 " candidates simulated)"},
                   {"x_label", "peak HBM use per chip (GiB)"},
                   {"y_label", "step time (ms)"},
                   {"legend_title", "candidates"},
                   {"categorical", false},
                   {"categories", nlohmann::json::array()},
                   {"logx", false},
                   {"logy", false},
                   {"series", {pts, front, win}}};
  const char* python = "/usr/bin/python3";
  if (access(python, X_OK) != 0) {
    std::printf("no pareto.png: plots need /usr/bin/python3 with matplotlib\n");
    return;
  }
  const std::string stem = out + "/.pareto_" + std::to_string(getpid());
  std::ofstream(stem + ".py") << kSweepPlotScript;
  std::ofstream(stem + ".json") << p.dump();
  CommandResult res = run_command({python, stem + ".py", stem + ".json"});
  std::error_code ec;
  fs::remove(stem + ".py", ec);
  fs::remove(stem + ".json", ec);
  if (res.code != 0) std::printf("no pareto.png: %s\n", res.output.c_str());
  else std::printf("wrote %s/pareto.png\n", out.c_str());
}

}  // namespace

void write_candidates_tsv(const std::string& path, const std::vector<SearchRow>& rows) {
  std::ostringstream o;
  o << "candidate\tstrategies\tmesh\toptions\tfate\testimate_rank\tpeak_memory_bytes\testimate_s\testimate_compute_s\t"
       "estimate_comm_s\testimate_bubble_s\twhy\n";
  for (const SearchRow& r : rows) {
    std::string why = r.why;
    std::replace(why.begin(), why.end(), '\t', ' ');
    std::replace(why.begin(), why.end(), '\n', ' ');
    o << r.name << "\t" << join(r.candidate.strategies, "+") << "\t" << r.candidate.mesh_text() << "\t"
      << r.candidate.options_text() << "\t" << r.fate << "\t" << r.estimate_rank << "\t"
      << strprintf("%.0f", r.eval.peak_bytes) << "\t" << strprintf("%.9g", r.eval.estimate_s) << "\t"
      << strprintf("%.9g", r.eval.compute_s) << "\t" << strprintf("%.9g", r.eval.comm_s) << "\t"
      << strprintf("%.9g", r.eval.bubble_s) << "\t" << why << "\n";
  }
  write_file_atomic(path, o.str());
}

void print_estimates(const std::vector<SearchRow>& rows, const std::vector<size_t>& order, size_t simulate) {
  std::printf("%-6s %-44s %12s %10s %s\n", "est. #", "candidate", "estimate ms", "peak", "");
  for (size_t k = 0; k < order.size(); ++k) {
    const SearchRow& r = rows[order[k]];
    std::printf("%-6zu %-44s %12s %10s %s\n", k + 1, r.name.c_str(), ms(r.eval.estimate_s).c_str(),
                format_bytes(r.eval.peak_bytes).c_str(), k < simulate ? "" : "(beyond the budget)");
  }
}

void read_simulated(const std::string& sweep_dir, std::vector<SearchRow>& rows) {
  const ResultsTable t = read_results(sweep_dir + "/results.db");
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < t.columns.size(); ++i) col[t.columns[i]] = i;
  std::map<std::string, SearchRow*> by_name;
  for (SearchRow& r : rows) by_name[r.name] = &r;
  auto num = [&](const std::vector<ColumnValue>& row, const std::string& c) -> std::optional<double> {
    auto it = col.find(c);
    return it == col.end() ? std::nullopt : number(row[it->second]);
  };
  for (const auto& row : t.rows) {
    auto it = by_name.find(cell_text(row[col.at("name")]));
    if (it == by_name.end()) continue;
    SearchRow& r = *it->second;
    r.status = cell_text(row[col.at("status")]);
    r.step_time_s = num(row, "step_time_s").value_or(0);
    r.mfu = num(row, "mfu").value_or(0);
    r.hfu = num(row, "hfu").value_or(0);
    r.peak_memory_bytes = num(row, "peak_memory_bytes").value_or(0);
    r.exposed_comm_fraction = num(row, "exposed_comm_fraction").value_or(0);
    r.bubble_fraction = num(row, "bubble_fraction");
    if (col.count("error")) r.error = cell_text(row[col.at("error")]);
  }
}

YAML::Node search_base(const std::string& experiment, const std::vector<std::string>& overrides) {
  YAML::Node root = YAML::Clone(YAML::LoadFile(experiment));
  for (const char* sec : {"strategy", "mesh", "search"}) root.remove(sec);
  for (const std::string& o : overrides) {
    const size_t eq = o.find('=');
    const std::string path = o.substr(0, eq);
    if (path.rfind("search.", 0) == 0 || path.rfind("strategy.", 0) == 0 || path.rfind("mesh.", 0) == 0) continue;
    set_yaml_path(root, path, o.substr(eq + 1));
  }
  return root;
}

std::string emit_yaml(const YAML::Node& n) {
  YAML::Emitter em;
  em << n;
  return std::string(em.c_str()) + "\n";
}

int run_candidates(const std::string& out, const std::string& experiment, const std::string& what,
                   const std::vector<std::pair<std::string, std::vector<std::string>>>& runs,
                   const SearchOptions& opts) {
  std::string sweep = "# Written by podsim search " + experiment + ": " + what + ".\nname: " +
                      fs::path(experiment).stem().string() +
                      "-search\nbase: base.yaml\nset:\n  run.trace.format: \"off\"\nrun_name: \"{run.name}\"\nruns:\n";
  for (const auto& [name, overrides] : runs) {
    // A flow-style YAML value for the runs list (the overrides' values are YAML already).
    sweep += "  - {run.name: \"" + name + "\"";
    for (const auto& o : overrides) {
      const size_t eq = o.find('=');
      sweep += ", " + o.substr(0, eq) + ": " + o.substr(eq + 1);
    }
    sweep += "}\n";
  }
  write_file_atomic(out + "/search.yaml", sweep);
  SweepOptions so = opts.sweep;
  so.out = out + "/sweep";
  std::fflush(stdout);
  try {
    return run_sweep(out + "/search.yaml", so);
  } catch (const Error& e) {
    if (e.err() != Err::RunsFailed) throw;
    std::fprintf(stderr, "%s\n", e.what());  // the failed ones are shown as such; the others are ranked
  }
  return 0;
}

void set_yaml_path(YAML::Node& root, const std::string& path, const std::string& yaml_value) {
  std::vector<std::string> parts;
  std::stringstream ss(path);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  YAML::Node n = root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node child = n[parts[i]];
    n.reset(child);
  }
  n[parts.back()] = YAML::Load(yaml_value);
}

std::string best_yaml(const YAML::Node& base, const Candidate& c, const std::string& comment) {
  YAML::Node root = YAML::Clone(base);
  for (const std::string& o : c.overrides()) {
    const size_t eq = o.find('=');
    set_yaml_path(root, o.substr(0, eq), o.substr(eq + 1));
  }
  YAML::Emitter em;
  em << root;
  return comment + em.c_str() + "\n";
}

int report_search(const std::string& out, const std::string& experiment, const YAML::Node& base,
                  const SearchSpace& space, std::vector<SearchRow>& rows, const SearchOptions& opts) {
  std::vector<const SearchRow*> done;
  for (const SearchRow& r : rows) {
    if (r.status == "done" && r.step_time_s > 0) done.push_back(&r);
    else if (r.status == "failed") std::printf("failed: %s: %s\n", r.name.c_str(), r.error.c_str());
  }
  if (done.empty()) {
    std::printf("no candidate was simulated to the end; results in %s/sweep\n", out.c_str());
    return 1;
  }
  std::stable_sort(done.begin(), done.end(), [&](auto* a, auto* b) { return better(*a, *b, space.objective); });
  const std::string text = table(done);
  std::printf("\n%s", text.c_str());
  std::vector<double> est, sim;
  for (const auto* r : done) {
    est.push_back(r->eval.estimate_s);
    sim.push_back(r->step_time_s);
  }
  const double rho = spearman(est, sim);
  const SearchRow& best = *done.front();
  std::printf("\nbest by %s: %s (%s; %s): step time %s ms, MFU %s %%, peak %s\n", space.objective.c_str(),
              best.name.c_str(), best.candidate.mesh_text().c_str(), best.candidate.options_text().c_str(),
              ms(best.step_time_s).c_str(), pct(best.mfu).c_str(), format_bytes(best.peak_memory_bytes).c_str());
  std::printf("the estimate's rank correlation with the simulated step times (Spearman, %zu candidates): %.3f\n",
              done.size(), rho);

  std::ostringstream tsv;
  tsv << "rank\tcandidate\tstrategies\tmesh\toptions\tstep_time_s\testimate_s\testimate_rank\tmfu\thfu\t"
         "peak_memory_bytes\texposed_comm_fraction\tbubble_fraction\n";
  for (size_t i = 0; i < done.size(); ++i) {
    const SearchRow& r = *done[i];
    tsv << i + 1 << "\t" << r.name << "\t" << join(r.candidate.strategies, "+") << "\t" << r.candidate.mesh_text()
        << "\t" << r.candidate.options_text() << "\t" << strprintf("%.9g", r.step_time_s) << "\t"
        << strprintf("%.9g", r.eval.estimate_s) << "\t" << r.estimate_rank << "\t" << strprintf("%.6g", r.mfu)
        << "\t" << strprintf("%.6g", r.hfu) << "\t" << strprintf("%.0f", r.peak_memory_bytes) << "\t"
        << strprintf("%.6g", r.exposed_comm_fraction) << "\t"
        << (r.bubble_fraction ? strprintf("%.6g", *r.bubble_fraction) : "") << "\n";
  }
  tsv << "# spearman_estimate_vs_simulated\t" << strprintf("%.4f", rho) << "\n";
  write_file_atomic(out + "/ranking.tsv", tsv.str());

  const std::string comment =
      "# Found by `podsim search " + experiment + "`: the best of " + std::to_string(done.size()) +
      " simulated candidates by " + space.objective + ".\n# " + best.candidate.mesh_text() + "; " +
      best.candidate.options_text() + ". Simulated step time " + ms(best.step_time_s) + " ms, MFU " +
      pct(best.mfu) + " %, peak memory " + format_bytes(best.peak_memory_bytes) + ".\n#   podsim run best.yaml\n";
  write_file_atomic(out + "/best.yaml", best_yaml(base, best.candidate, comment));
  std::printf("wrote %s/best.yaml, %s/ranking.tsv\n", out.c_str(), out.c_str());
  if (opts.plot) pareto_plot(out, done, best);
  if (opts.explain) explain(out + "/sweep", best, done.size() > 1 ? done[1] : nullptr);
  return 0;
}

}  // namespace podsim

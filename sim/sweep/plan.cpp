#include "sim/sweep/plan.h"

#include <algorithm>
#include <map>

#include "base/text.h"
#include "sim/config/loader.h"
#include "sim/serving/request_stream.h"
#include "sim/sweep/run_name.h"

namespace podsim {
namespace {

ColumnValue column_value(const ParamValue& v) {
  if (!v.set) return std::monostate{};
  if (const auto* i = std::get_if<int64_t>(&v.data)) return *i;
  if (const auto* d = std::get_if<double>(&v.data)) return *d;
  if (const auto* b = std::get_if<bool>(&v.data)) return static_cast<int64_t>(*b);
  if (const auto* s = std::get_if<std::string>(&v.data)) return *s;
  return value_text(v.spec, v.data);  // lists: "[4, 4]"
}

std::string describe(const SweepPoint& values) {
  std::vector<std::string> parts;
  for (const auto& v : values) parts.push_back(v.path + "=" + v.text);
  return join(parts, ", ");
}

// Loads one run's experiment; an Error is moved to where the sweep file wrote the value that caused it.
Experiment load_run(const SweepFile& f, const SweepPoint& values, const std::string& label) {
  LoadOptions opts;
  std::map<std::string, const SweepValue*> by_origin;
  for (const auto& v : values) {
    opts.overrides.push_back(v.path + "=" + v.text);
    by_origin["--set " + opts.overrides.back()] = &v;
  }
  try {
    return f.base_path.empty() ? load_experiment_text(f.base_text, f.path, opts)
                               : load_experiment(f.base_path, opts);
  } catch (const Error& e) {
    SourceLocation where = e.where();
    auto it = by_origin.find(where.origin);
    if (it != by_origin.end()) {
      where = e.err() == Err::UnknownKey || e.err() == Err::BadOverride ? it->second->key_where
                                                                         : it->second->value_where;
    } else if (e.err() == Err::FileUnreadable && where.file == f.base_path) {
      where = f.base_where;
    }
    throw Error(e.err(), where, label + ": " + e.message(), e.key_path());
  }
}

}  // namespace

std::string config_digest(const std::string& text) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64 offset basis
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return strprintf("%016llx", static_cast<unsigned long long>(h));
}

SweepPlan plan_sweep(const SweepFile& f) {
  SweepPlan plan;
  plan.name = f.name;
  plan.file = f.path;
  size_t total = 1;
  for (const auto& axis : f.axes) {
    for (const auto& p : axis.points)
      for (const auto& v : p)
        if (std::find(plan.param_columns.begin(), plan.param_columns.end(), v.path) == plan.param_columns.end())
          plan.param_columns.push_back(v.path);
    if (total > kMaxSweepRuns / axis.points.size())
      throw Error(Err::OutOfRange, axis.where,
                  strprintf("the sweep expands to more than %zu runs; split it into several sweeps", kMaxSweepRuns));
    total *= axis.points.size();
  }

  bool serving = false;  // a run with a serving section: the serving figures join the defaults
  std::map<std::string, size_t> names;
  std::vector<size_t> digit(f.axes.size(), 0);  // mixed-radix counter, first axis most significant
  for (size_t index = 0; index < total; ++index) {
    SweepPoint values = f.set, swept;
    for (size_t a = 0; a < f.axes.size(); ++a)
      for (const auto& v : f.axes[a].points[digit[a]]) swept.push_back(v);
    values.insert(values.end(), swept.begin(), swept.end());
    std::string label = strprintf("run %zu of %zu", index, total) + (swept.empty() ? "" : " (" + describe(swept) + ")");

    Experiment e = load_run(f, values, label);
    serving = serving || serving::serving_run(e.params);
    std::vector<std::string> swept_paths;
    for (const auto& v : swept) swept_paths.push_back(v.path);
    std::string name = render_run_name({f.run_name, f.run_name_where, e, index, total, f.name, swept_paths, label});
    auto [it, fresh] = names.emplace(name, index);
    if (!fresh) {
      SourceLocation w = f.run_name_where;
      if (w.empty()) w.file = f.path;
      throw Error(Err::SweepDuplicateName, w,
                  strprintf("runs %zu and %zu are both named '%s'; ", it->second, index, name.c_str()) +
                      (f.run_name.empty() ? "write a run_name template that tells them apart"
                                          : "use every swept key in run_name, or {index}"));
    }
    ParamValue rn = e.params.at("run.name");
    rn.data = name;
    rn.set = true;
    e.params.put(rn);
    e.run.name = name;

    PlannedRun r;
    r.index = index;
    r.name = name;
    // A key of serving.prefill's layout is no parameter of the experiment's own (sim/config/loader.cpp): its text.
    for (const auto& v : swept)
      r.swept.emplace_back(v.path, e.params.has(v.path) ? value_text(e.params.at(v.path).spec, e.params.at(v.path).data)
                                                        : v.text);
    for (const auto& col : plan.param_columns) {
      auto pv = e.params.values().find(col);
      r.params.push_back(pv == e.params.values().end() ? ColumnValue{} : column_value(pv->second));
    }
    r.config = resolved_yaml(e, false);
    r.config_digest = config_digest(r.config);
    plan.runs.push_back(std::move(r));

    for (size_t a = f.axes.size(); a-- > 0;) {
      if (++digit[a] < f.axes[a].points.size()) break;
      digit[a] = 0;
    }
  }
  plan.figures = default_sweep_figures();
  if (serving)
    plan.figures.insert(plan.figures.end(), serving_sweep_figures().begin(), serving_sweep_figures().end());
  for (const auto& fig : f.figures) {
    auto it = std::find_if(plan.figures.begin(), plan.figures.end(),
                           [&](const SweepFigure& d) { return d.column == fig.column; });
    if (it != plan.figures.end()) *it = fig;
    else plan.figures.push_back(fig);
  }
  return plan;
}

}  // namespace podsim

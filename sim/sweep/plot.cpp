#include "sim/sweep/plot.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <map>
#include <nlohmann/json.hpp>

#include "sim/common/text.h"
#include "sim/sweep/command.h"
#include "sim/sweep/export.h"
#include "sim/sweep/plot_script.h"

namespace podsim {
namespace fs = std::filesystem;

namespace {

size_t column_index(const ResultsTable& t, const std::string& name, const std::string& option) {
  for (size_t i = 0; i < t.columns.size(); ++i)
    if (t.columns[i] == name) return i;
  std::vector<size_t> hits;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    const std::string& c = t.columns[i];
    if (c.size() > name.size() && c.compare(c.size() - name.size(), name.size(), name) == 0 &&
        c[c.size() - name.size() - 1] == '.')
      hits.push_back(i);
  }
  if (hits.size() == 1) return hits[0];
  throw Error(Err::SweepQuery, option + " '" + name + "' is " + (hits.empty() ? "no column" : "ambiguous") +
                                   " of results.db (" + suggestion(name, t.columns) + ")");
}

std::optional<double> number(const ColumnValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return std::nullopt;
}

bool matches(const ColumnValue& cell, const std::string& value) {
  if (cell_text(cell) == value) return true;
  char* end = nullptr;
  double want = std::strtod(value.c_str(), &end);
  auto have = number(cell);
  return have && end && *end == 0 && end != value.c_str() && *have == want;
}

std::string file_part(const std::string& s) {
  std::string o;
  for (char c : s) o += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_';
  return o;
}

}  // namespace

std::string plot_sweep(const PlotRequest& r) {
  ResultsTable t = read_results(r.db);
  const size_t xi = column_index(t, r.x, "--x"), yi = column_index(t, r.y, "--y");
  const size_t si = column_index(t, "status", "status");
  // --by a,b: one line per combination of values of the columns listed.
  std::vector<size_t> by;
  if (!r.by.empty()) {
    size_t start = 0;
    while (start <= r.by.size()) {
      size_t comma = r.by.find(',', start);
      if (comma == std::string::npos) comma = r.by.size();
      by.push_back(column_index(t, r.by.substr(start, comma - start), "--by"));
      start = comma + 1;
    }
  }
  const bool bi = !by.empty();
  auto is_by = [&](size_t c) { return std::find(by.begin(), by.end(), c) != by.end(); };
  std::vector<std::string> by_columns;
  for (size_t c : by) by_columns.push_back(t.columns[c]);
  const std::string by_label = join(by_columns, ", ");
  // A row's line: its values of the --by columns (NULL, for a run without that parameter, shown as -).
  auto line_of = [&](const std::vector<ColumnValue>& row) {
    std::vector<std::string> values;
    for (size_t c : by) {
      std::string v = cell_text(row[c]);
      values.push_back(v.empty() && by.size() > 1 ? "-" : v);
    }
    return join(values, ", ");
  };
  std::vector<std::pair<size_t, std::string>> filters;
  for (const auto& w : r.where) {
    size_t eq = w.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(Err::SweepQuery, "--where '" + w + "' must read column=value, e.g. --where workload.op=all_reduce");
    filters.emplace_back(column_index(t, w.substr(0, eq), "--where"), w.substr(eq + 1));
  }
  // The swept parameters: the columns between name and status.
  std::vector<size_t> params;
  for (size_t i = 2; i < si; ++i) params.push_back(i);

  std::vector<const std::vector<ColumnValue>*> rows;
  for (const auto& row : t.rows) {
    if (cell_text(row[si]) != "done" || std::holds_alternative<std::monostate>(row[yi])) continue;
    bool keep = true;
    for (const auto& [c, v] : filters) keep = keep && matches(row[c], v);
    if (keep) rows.push_back(&row);
  }
  if (rows.empty())
    throw Error(Err::SweepQuery, "no done run with a value of '" + t.columns[yi] + "'" +
                                     (filters.empty() ? std::string() : " matches the --where filters"));
  bool categorical = false;
  for (const auto* row : rows) categorical = categorical || !number((*row)[xi]);
  if (!number((*rows.front())[yi]) && !std::holds_alternative<std::monostate>((*rows.front())[yi]))
    throw Error(Err::SweepQuery, "'" + t.columns[yi] + "' holds text, not numbers; --y needs a figure");

  // Points per line, checked for ambiguity.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const std::vector<ColumnValue>*>> lines;
  for (const auto* row : rows) {
    std::string key = line_of(*row);
    if (!lines.count(key)) order.push_back(key);
    for (const auto* other : lines[key]) {
      if (cell_text((*other)[xi]) != cell_text((*row)[xi])) continue;
      std::vector<std::string> differ;
      std::string first;  // the first column they differ in
      for (size_t p : params)
        if (p != xi && !is_by(p) && cell_text((*other)[p]) != cell_text((*row)[p])) {
          differ.push_back(t.columns[p] + " (" + cell_text((*other)[p]) + ", " + cell_text((*row)[p]) + ")");
          if (first.empty()) first = t.columns[p];
        }
      const std::string by_fix = (r.by.empty() ? "" : r.by + ",") + first;
      const std::string fix = first.empty() ? "" : ": pick one with --where or draw lines --by " + by_fix;
      throw Error(Err::SweepQuery,
                  "runs '" + cell_text((*other)[1]) + "' and '" + cell_text((*row)[1]) + "' are both at " +
                      t.columns[xi] + " = " + cell_text((*row)[xi]) +
                      (bi ? " on the line " + by_label + " = " + key : "") +
                      "; they differ in " + (differ.empty() ? std::string("nothing swept") : join(differ, ", ")) + fix);
    }
    lines[key].push_back(row);
  }
  if (by.size() == 1 && !categorical) {
    // Numeric line labels in numeric order.
    bool numeric = std::all_of(order.begin(), order.end(), [](const std::string& s) {
      char* e = nullptr;
      std::strtod(s.c_str(), &e);
      return !s.empty() && e && *e == 0;
    });
    if (numeric)
      std::sort(order.begin(), order.end(), [](const std::string& a, const std::string& b) { return std::stod(a) < std::stod(b); });
  }

  nlohmann::json p;
  std::string out = r.out;
  if (out.empty()) {
    out = (fs::path(r.db).parent_path() / ("plot_" + file_part(t.columns[yi]) + "_vs_" + file_part(t.columns[xi]) +
                                           (bi ? "_by_" + file_part(join(by_columns, "+")) : "") + ".png")).string();
  }
  p["out"] = out;
  std::vector<std::string> wt;
  for (const auto& w : r.where) wt.push_back(w);
  p["title"] = t.columns[yi] + " vs " + t.columns[xi] + (wt.empty() ? "" : " (" + join(wt, ", ") + ")");
  p["x_label"] = t.columns[xi];
  p["y_label"] = t.columns[yi];
  p["by_label"] = by_label;
  p["categorical"] = categorical;
  p["logx"] = r.logx;
  p["logy"] = r.logy;
  p["series"] = nlohmann::json::array();
  for (const auto& key : order) {
    auto pts = lines[key];
    if (!categorical)
      std::stable_sort(pts.begin(), pts.end(), [&](auto* a, auto* b) { return *number((*a)[xi]) < *number((*b)[xi]); });
    nlohmann::json s{{"label", key}, {"x", nlohmann::json::array()}, {"y", nlohmann::json::array()}};
    for (const auto* row : pts) {
      if (categorical) s["x"].push_back(cell_text((*row)[xi]));
      else s["x"].push_back(*number((*row)[xi]));
      s["y"].push_back(*number((*row)[yi]));
    }
    p["series"].push_back(s);
  }

  const char* python = "/usr/bin/python3";
  if (access(python, X_OK) != 0)
    throw Error(Err::FileUnreadable, "plots need /usr/bin/python3 with matplotlib (Debian: apt-get install python3-matplotlib)");
  fs::path tmp = fs::temp_directory_path();
  std::string stem = "podsim_sweep_plot_" + std::to_string(getpid());
  fs::path script = tmp / (stem + ".py"), points = tmp / (stem + ".json");
  std::ofstream(script) << kSweepPlotScript;
  std::ofstream(points) << p.dump();
  CommandResult res = run_command({python, script.string(), points.string()});
  std::error_code ec;
  fs::remove(script, ec);
  fs::remove(points, ec);
  if (res.code != 0) {
    if (res.output.find("No module named 'matplotlib'") != std::string::npos)
      throw Error(Err::FileUnreadable, "plots need matplotlib (Debian: apt-get install python3-matplotlib)");
    throw Error(Err::Internal, "plotting failed: " + res.output);
  }
  return out;
}

}  // namespace podsim

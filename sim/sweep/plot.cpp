#include "sim/sweep/plot.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "base/text.h"
#include "sim/sweep/command.h"
#include "sim/sweep/export.h"
#include "sim/sweep/plot_axis.h"
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

bool absent(const ColumnValue& v) { return std::holds_alternative<std::monostate>(v); }

// A cell as the plot names it: its text, or "absent" for a run without that parameter (NULL).
std::string shown(const ColumnValue& v) { return absent(v) ? "absent" : cell_text(v); }

// `value` "" selects runs without the column (NULL); otherwise the cell's text, or the same number.
bool matches(const ColumnValue& cell, const std::string& value) {
  if (value.empty()) return absent(cell);
  if (absent(cell)) return false;
  if (cell_text(cell) == value) return true;
  char* end = nullptr;
  double want = std::strtod(value.c_str(), &end);
  auto have = number(cell);
  return have && end && *end == 0 && end != value.c_str() && *have == want;
}

bool is_number(const std::string& s) {
  char* e = nullptr;
  std::strtod(s.c_str(), &e);
  return !s.empty() && e && *e == 0;
}

// The values a column holds in `rows`, numbers in numeric order, then text, then "absent".
std::vector<std::string> values_of(const std::vector<const std::vector<ColumnValue>*>& rows, size_t c) {
  std::vector<std::string> v;
  bool none = false;
  for (const auto* row : rows) {
    if (absent((*row)[c])) none = true;
    else if (std::find(v.begin(), v.end(), cell_text((*row)[c])) == v.end()) v.push_back(cell_text((*row)[c]));
  }
  std::stable_sort(v.begin(), v.end(), [](const std::string& a, const std::string& b) {
    if (is_number(a) != is_number(b)) return is_number(a);
    return is_number(a) ? std::stod(a) < std::stod(b) : false;
  });
  if (none) v.push_back("absent");
  return v;
}

std::string file_part(const std::string& s) {
  std::string o;
  for (char c : s) o += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_';
  return o;
}

// --where COLUMN=VALUE: rows whose column holds one of the values given for it (a repeated column: any of them;
// an empty value: no value). Filters on different columns must all hold.
struct Filter {
  size_t column = 0;
  std::vector<std::string> values;
  std::vector<std::string> written;  // as the user wrote them, for messages
};

std::vector<Filter> parse_filters(const ResultsTable& t, const std::vector<std::string>& where) {
  std::vector<Filter> filters;
  for (const auto& w : where) {
    size_t eq = w.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(Err::SweepQuery, "--where '" + w + "' must read column=value (e.g. --where workload.op=all_reduce), "
                                       "or column= for the runs without that column");
    const size_t c = column_index(t, w.substr(0, eq), "--where");
    auto f = std::find_if(filters.begin(), filters.end(), [&](const Filter& x) { return x.column == c; });
    if (f == filters.end()) f = filters.insert(filters.end(), Filter{c, {}, {}});
    f->values.push_back(w.substr(eq + 1));
    f->written.push_back("--where " + w);
  }
  return filters;
}

bool keeps(const Filter& f, const std::vector<ColumnValue>& row) {
  return std::any_of(f.values.begin(), f.values.end(), [&](const std::string& v) { return matches(row[f.column], v); });
}

}  // namespace

std::string plot_sweep(const PlotRequest& r) {
  ResultsTable t = read_results(r.db);
  const size_t xi = column_index(t, r.x, "--x"), yi = column_index(t, r.y, "--y");
  const size_t si = column_index(t, "status", "status");
  std::vector<size_t> by;
  for (const auto& b : r.by) {
    size_t c = column_index(t, b, "--by");
    if (std::find(by.begin(), by.end(), c) == by.end()) by.push_back(c);
  }
  const std::vector<Filter> filters = parse_filters(t, r.where);
  // The swept parameters: the columns between name and status.
  std::vector<size_t> params;
  for (size_t i = 2; i < si; ++i) params.push_back(i);

  std::vector<const std::vector<ColumnValue>*> done;
  for (const auto& row : t.rows)
    if (cell_text(row[si]) == "done" && !absent(row[yi])) done.push_back(&row);
  if (done.empty()) throw Error(Err::SweepQuery, "no done run has a value of '" + t.columns[yi] + "'");
  // A filter that keeps nothing is a mistake (a value misspelt, a parameter some runs lack): say what there is.
  for (const Filter& f : filters) {
    if (std::any_of(done.begin(), done.end(), [&](const auto* row) { return keeps(f, *row); })) continue;
    std::vector<std::string> have = values_of(done, f.column);
    throw Error(Err::SweepQuery, join(f.written, " ") + " matches no done run with a value of '" + t.columns[yi] +
                                     "'; " + t.columns[f.column] + " holds " + join(have, ", ") +
                                     (std::find(have.begin(), have.end(), "absent") != have.end()
                                          ? " (absent: --where " + t.columns[f.column] + "=)"
                                          : std::string()));
  }
  std::vector<const std::vector<ColumnValue>*> rows;
  for (const auto* row : done)
    if (std::all_of(filters.begin(), filters.end(), [&](const Filter& f) { return keeps(f, *row); }))
      rows.push_back(row);
  if (rows.empty())
    throw Error(Err::SweepQuery, "no done run matches all the --where filters together, though each matches some");
  bool categorical = false;
  for (const auto* row : rows) categorical = categorical || !number((*row)[xi]);
  if (!number((*rows.front())[yi]))
    throw Error(Err::SweepQuery, "'" + t.columns[yi] + "' holds text, not numbers; --y needs a figure");

  // Points per line (one line per combination of the --by columns), checked for ambiguity.
  auto key_of = [&](const std::vector<ColumnValue>& row) {
    std::vector<std::string> k;
    for (size_t c : by) k.push_back(shown(row[c]));
    return k;
  };
  std::vector<std::vector<std::string>> order;
  std::map<std::vector<std::string>, std::vector<const std::vector<ColumnValue>*>> lines;
  for (const auto* row : rows) {
    const std::vector<std::string> key = key_of(*row);
    if (!lines.count(key)) order.push_back(key);
    for (const auto* other : lines[key]) {
      if (shown((*other)[xi]) != shown((*row)[xi])) continue;
      std::vector<std::string> differ;
      std::string first;  // the first column they differ in: the --by that tells them apart
      for (size_t p : params)
        if (p != xi && std::find(by.begin(), by.end(), p) == by.end() && shown((*other)[p]) != shown((*row)[p])) {
          differ.push_back(t.columns[p] + " (" + shown((*other)[p]) + ", " + shown((*row)[p]) + ")");
          if (first.empty()) first = t.columns[p];
        }
      std::string line;
      for (size_t i = 0; i < by.size(); ++i) line += (i ? ", " : "") + t.columns[by[i]] + " = " + key[i];
      std::vector<std::string> by_fix = r.by;
      by_fix.push_back(first);
      throw Error(Err::SweepQuery,
                  "runs '" + cell_text((*other)[1]) + "' and '" + cell_text((*row)[1]) + "' are both at " +
                      t.columns[xi] + " = " + shown((*row)[xi]) + (by.empty() ? "" : " on the line " + line) +
                      "; they differ in " + (differ.empty() ? std::string("nothing swept") : join(differ, ", ")) +
                      (first.empty() ? "" : ": pick one with --where or draw lines --by " + join(by_fix, ",")));
    }
    lines[key].push_back(row);
  }
  // Lines in the order of their values: numbers numerically, other columns as the sweep ran them.
  for (size_t i = by.size(); i-- > 0;) {
    const bool numeric = std::all_of(order.begin(), order.end(), [&](const auto& k) { return is_number(k[i]); });
    if (numeric)
      std::stable_sort(order.begin(), order.end(),
                       [&](const auto& a, const auto& b) { return std::stod(a[i]) < std::stod(b[i]); });
  }

  std::vector<double> xs, ys;
  for (const auto* row : rows) {
    ys.push_back(*number((*row)[yi]));
    if (!categorical) xs.push_back(*number((*row)[xi]));
  }
  const AxisScale ax = categorical ? AxisScale{t.columns[xi], 1, t.columns[xi]} : axis_scale(t.columns[xi], xs);
  const AxisScale ay = axis_scale(t.columns[yi], ys);

  nlohmann::json p;
  std::string out = r.out;
  if (out.empty()) {
    std::string by_part;
    for (size_t c : by) by_part += (by_part.empty() ? "_by_" : "_") + file_part(t.columns[c]);
    out = (fs::path(r.db).parent_path() /
           ("plot_" + file_part(t.columns[yi]) + "_vs_" + file_part(t.columns[xi]) + by_part + ".png"))
              .string();
  }
  p["out"] = out;
  std::vector<std::string> wt;
  for (const Filter& f : filters) {
    std::vector<std::string> v;
    for (const auto& x : f.values) v.push_back(x.empty() ? "absent" : x);
    wt.push_back(t.columns[f.column] + " = " + join(v, " or "));
  }
  p["title"] = ay.name + " against " + ax.name + (wt.empty() ? "" : " (" + join(wt, ", ") + ")");
  p["x_label"] = ax.label;
  p["y_label"] = ay.label;
  std::vector<std::string> by_names;
  for (size_t c : by) by_names.push_back(t.columns[c]);
  p["legend_title"] = join(by_names, ", ");
  p["categorical"] = categorical;
  p["logx"] = r.logx;
  p["logy"] = r.logy;
  p["categories"] = nlohmann::json::array();
  if (categorical)
    for (const auto* row : rows)
      if (std::find(p["categories"].begin(), p["categories"].end(), shown((*row)[xi])) == p["categories"].end())
        p["categories"].push_back(shown((*row)[xi]));
  p["series"] = nlohmann::json::array();
  for (const auto& key : order) {
    auto pts = lines[key];
    if (!categorical)
      std::stable_sort(pts.begin(), pts.end(), [&](auto* a, auto* b) { return *number((*a)[xi]) < *number((*b)[xi]); });
    nlohmann::json s{{"label", join(key, ", ")}, {"x", nlohmann::json::array()}, {"y", nlohmann::json::array()}};
    for (const auto* row : pts) {
      if (categorical) s["x"].push_back(shown((*row)[xi]));
      else s["x"].push_back(*number((*row)[xi]) * ax.factor);
      s["y"].push_back(*number((*row)[yi]) * ay.factor);
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

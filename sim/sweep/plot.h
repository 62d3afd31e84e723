// `podsim sweep plot`: one figure of results.db against one column, one line per combination of the values of
// others (--by), as a PNG drawn by matplotlib (tools/plot_sweep.py, compiled into the binary). A numeric x gives
// lines, a text x (strategy names) grouped bars. Axes are labelled in units a person reads (sim/sweep/plot_axis.h).
//
//   podsim sweep plot results/scaling --x chips --y step_time_s --by workload.algorithm --where workload.op=all_reduce
//   podsim sweep plot results/strategies --x strategy.name --y step_time_s --by workload.batch
//
// Columns may be named by their last part when that is unique (batch for workload.batch). Only done runs with a
// value of the figure are drawn. --where COLUMN=VALUE keeps the runs with that value, COLUMN= the runs without the
// column (a strategy that has no such parameter); several values of one column are alternatives, filters on
// different columns all apply; a filter that keeps no run is an error that lists the values there are. Points must
// be unambiguous: two runs at the same x on the same line are refused with the columns that still vary between
// them, to be fixed with --where or --by.
#pragma once

#include <string>
#include <vector>

namespace podsim {

struct PlotRequest {
  std::string db;                  // results.db
  std::string x, y;
  std::vector<std::string> by;     // one line per combination of their values; none: one line
  std::vector<std::string> where;  // column=value, or column= (no value)
  std::string out;                 // "" = <sweep folder>/plot_<y>_vs_<x>[_by_<by>[_<by>...]].png
  bool logx = false, logy = false;
};

// Returns the PNG's path.
std::string plot_sweep(const PlotRequest& r);

}  // namespace podsim

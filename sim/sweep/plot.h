// `podsim sweep plot`: one figure of results.db against one column, one line per value of a third (or per
// combination of values of several, --by a,b), as a PNG drawn by matplotlib (tools/plot_sweep.py, compiled into the
// binary).
//
//   podsim sweep plot results/scaling --x chips --y step_time_s --by workload.algorithm --where workload.op=all_reduce
//
// Columns may be named by their last part when that is unique (batch for workload.batch). Only done runs are
// drawn. Points must be unambiguous: two runs at the same x on the same line are refused with the columns that
// still vary between them, to be fixed with --where or by adding one of them to --by.
#pragma once

#include <string>
#include <vector>

namespace podsim {

struct PlotRequest {
  std::string db;                  // results.db
  std::string x, y, by;            // by: "" = one line; "a,b": a line per combination of values of a and b
  std::vector<std::string> where;  // column=value
  std::string out;                 // "" = <sweep folder>/plot_<y>_vs_<x>[_by_<by>].png
  bool logx = false, logy = false;
};

// Returns the PNG's path.
std::string plot_sweep(const PlotRequest& r);

}  // namespace podsim

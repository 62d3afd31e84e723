#include <iostream>

#include "sim/cli/commands.h"
#include "sim/report/plots.h"
#include "sim/report/report.h"

namespace podsim::cli {

int cmd_report(const ReportArgs& a) {
  print_report(a.run_dir, std::cout);
  if (!a.no_plots) {
    PlotOutcome o = write_plots(a.run_dir, {a.fit_colors});
    for (const auto& f : o.files) std::cout << "wrote " << f << "\n";
    for (const auto& n : o.notes) std::cout << "note: " << n << "\n";
  }
  return 0;
}

}  // namespace podsim::cli

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "sim/cli/commands.h"
#include "sim/common/error.h"
#include "sim/report/report.h"

namespace podsim::cli {

int cmd_report(const ReportArgs& a) {
  print_report(a.run_dir, std::cout);
  if (!a.no_plots) {
    for (const auto& f : write_plots(a.run_dir)) std::cout << "wrote " << f << "\n";
  }
  return 0;
}

}  // namespace podsim::cli

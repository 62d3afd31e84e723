#include <iostream>

#include "sim/cli/commands.h"
#include "sim/config/loader.h"

namespace podsim::cli {

int cmd_validate(const ValidateArgs& a) {
  Experiment e = load_experiment(a.experiment, {a.overrides});
  std::cout << resolved_yaml(e, !a.no_origins);
  return 0;
}

int report_failure(const std::exception& e) {
  if (const auto* err = dynamic_cast<const Error*>(&e)) {
    for (const Error* each : err->all()) std::cerr << each->what() << "\n";
    return err->exit_code();
  }
  std::cerr << "error " << error_info(Err::Internal).id << ": internal failure: " << e.what() << "\n";
  return error_info(Err::Internal).exit_code;
}

}  // namespace podsim::cli

// The check the experiment fuzzer (tests/fuzz/fuzz_experiment.cpp) runs on every input, shared with the regression
// test (tests/unit/fuzz_regression_test.cpp) so the two cannot drift.
//
//   podsim::fuzz::CheckResult r = podsim::fuzz::check_experiment(bytes);
//
// Contract of the config loader under arbitrary bytes:
//   - load_experiment_text either returns an Experiment or throws podsim::Error (bad input, with a stable id).
//     Any other exception propagates out of check_experiment: the fuzzer then crashes (a finding), the test fails.
//   - When loading succeeds, the resolved YAML (without origins: those name lines of the file) loads back to an
//     experiment whose resolved YAML is the same text. A reload that throws, or different text, is reported in
//     CheckResult::problem; the fuzzer aborts on it.
// Sanitizer reports, stack overflows and timeouts are findings too; nothing here can catch those.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/error.h"
#include "sim/config/loader.h"

namespace podsim::fuzz {

// Stands in for the file name: locations read "fuzz.yaml:line:col" and the default run name is "fuzz".
inline constexpr const char* kLabel = "fuzz.yaml";

struct CheckResult {
  bool loaded = false;      // the input was a valid experiment
  std::string error_id;     // when rejected: the podsim::Error id (PODSIM-CFG-...)
  std::string problem;      // empty unless the round trip failed
};

inline CheckResult check_experiment(const std::string& text) {
  CheckResult r;
  Experiment e;
  try {
    e = load_experiment_text(text, kLabel);
  } catch (const Error& err) {
    r.error_id = std::string(err.id());
    return r;
  }
  r.loaded = true;
  const std::string first = resolved_yaml(e, /*with_origins=*/false);
  std::string second;
  try {
    second = resolved_yaml(load_experiment_text(first, kLabel), false);
  } catch (const Error& err) {
    r.problem = std::string("the resolved YAML does not load back: ") + err.what() + "\n--- resolved YAML ---\n" + first;
    return r;
  }
  if (second != first)
    r.problem = "the resolved YAML changes when loaded back\n--- first ---\n" + first + "--- second ---\n" + second;
  return r;
}

inline CheckResult check_experiment(const uint8_t* data, size_t size) {
  return check_experiment(std::string(reinterpret_cast<const char*>(data), size));
}

}  // namespace podsim::fuzz

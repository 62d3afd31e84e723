// libFuzzer entry for the experiment parser and validator: the bytes are an experiment file.
//
//   tools/fuzz 600                                        (or: cmake --build build-fuzz --target fuzz)
//   build-fuzz/bin/fuzz_experiment -dict=tests/fuzz/dict/yaml.dict CORPUS_DIR
//
// podsim::Error is the expected answer to bad input. Anything else is a finding: another exception (uncaught, so
// libFuzzer reports a crash), a sanitizer report, a timeout, or a resolved YAML that does not load back to itself
// (abort). The check itself lives in tests/fuzz/fuzz_check.h, shared with tests/unit/fuzz_regression_test.cpp.
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  podsim::fuzz::CheckResult r = podsim::fuzz::check_experiment(data, size);
  if (!r.problem.empty()) {
    std::fprintf(stderr, "fuzz_experiment: round trip failed: %s\n", r.problem.c_str());
    std::abort();
  }
  return 0;
}

// libFuzzer entry for the HLO importer: the bytes are an HLO module's text.
//
//   tools/fuzz 600 --hlo                                  (or: cmake --build build-fuzz --target fuzz-hlo)
//   build-fuzz/bin/fuzz_hlo -dict=tests/fuzz/dict/hlo.dict CORPUS_DIR
//
// podsim::Error is the expected answer to bad input; any other exception is uncaught (libFuzzer reports a crash).
// The check lives in tests/fuzz/fuzz_hlo_check.h, shared with tests/unit/fuzz_regression_test.cpp.
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_hlo_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  podsim::fuzz::check_hlo(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}

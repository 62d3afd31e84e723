// The check the HLO fuzzer (tests/fuzz/fuzz_hlo.cpp) runs on every input, shared with the regression test
// (tests/unit/fuzz_regression_test.cpp) so the two cannot drift.
//
// Contract of the HLO importer under arbitrary bytes: parse_module, import_module and the lowering of what it
// imports either return or throw podsim::Error (bad input, with a stable id: PODSIM-HLO-...). Any other exception
// propagates: the fuzzer then crashes (a finding), the test fails. Sanitizer reports and timeouts are findings too.
#pragma once

#include <string>

#include "base/error.h"
#include "hlo/import.h"
#include "hlo/parser.h"
#include "hw/compiler/lower.h"

namespace podsim::fuzz {

struct HloCheckResult {
  bool imported = false;  // the input was a module podsim runs
  std::string error_id;   // when rejected: the podsim::Error id
};

inline HloCheckResult check_hlo(const std::string& text) {
  HloCheckResult r;
  try {
    hlo::Module m = hlo::parse_module(text, "fuzz.hlo");
    hlo::Imported im = hlo::import_module(m, {});
    ChipConfig chip;
    chip.clock = 1e9;
    chip.tensorcores = 2;
    chip.vmem = 16 << 20;
    chip.hbm.bandwidth = 1e12;
    chip.hbm.capacity = 1e10;
    LowerOptions lo;
    lo.kernels = &im.fusions;
    lower(im.graph, im.order, chip, lo);
    r.imported = true;
  } catch (const Error& e) {
    r.error_id = std::string(e.id());
  }
  return r;
}

}  // namespace podsim::fuzz

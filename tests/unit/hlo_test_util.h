// What the HLO importer's tests share (hlo_import_test.cpp, hlo_compiled_modules_test.cpp): the data folder, a
// module imported from text, op counts by kind, an op by name, an error as "where id message", a TPU v4 chip.
#pragma once

#include <functional>
#include <map>
#include <stdexcept>
#include <string>

#include "base/error.h"
#include "hlo/import.h"
#include "hlo/parser.h"
#include "hw/compiler/lower.h"
#include "tests/test_paths.h"

namespace podsim::hlo_test {

using namespace podsim::hlo;

inline std::string data(const std::string& f) { return std::string(PODSIM_SOURCE_DIR) + "/tests/data/hlo/" + f; }

inline Imported import_text(const std::string& text, ImportOptions o = {}) { return import_module(parse_module(text, "t.hlo"), o); }

inline std::map<std::string, int> kinds(const Imported& im) {
  std::map<std::string, int> n;
  for (const Op& op : im.graph.ops()) ++n[op_kind_name(op.kind)];
  return n;
}

inline const Op& op_named(const Imported& im, const std::string& name) {
  for (const Op& op : im.graph.ops())
    if (op.name == name) return op;
  throw std::runtime_error("no op " + name);
}

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.where().str() + " " + std::string(e.id()) + " " + e.message();
  }
  return "no error";
}

// A TPU v4 chip as the tests' hand counts take it.
inline ChipConfig v4() {
  ChipConfig c;
  c.clock = 1.05e9;
  c.tensorcores = 2;
  c.mxu.count = 4;
  c.vmem = 16 << 20;
  c.cmem = 128 << 20;
  c.hbm.capacity = 32.0 * (1 << 30);
  c.hbm.bandwidth = 1.2e12;
  return c;
}

}  // namespace podsim::hlo_test

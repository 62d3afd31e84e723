// The checks the error tests share: the Error a piece of code throws, the Error loading an experiment throws, and
// that an Error has the id, place and message expected.
//
//   expect_load_error(resnet("  bn_batch: 3\n"), Err::NotDivisible, 6, "does not divide workload.batch");
//   expect_at(load_failure(text, {"hardware.pod.dims=[4]"}), Err::PodShape, 3, 9, "has 1 entries");
//   const Error e = error_of([&] { search_space(load_experiment_text(text, "s.yaml")); });
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "sim/config/loader.h"

namespace podsim {

// The Error `f` throws. When it throws none, the test fails and the result is an Internal error ("no error").
template <class F>
Error error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error was thrown";
  return Error(Err::Internal, "no error");
}

// The Error loading `yaml` (named `label`, with --set overrides `sets`) throws; the test fails when it loads.
inline Error load_failure(const std::string& yaml, std::vector<std::string> sets = {},
                          const std::string& label = "exp.yaml") {
  try {
    load_experiment_text(yaml, label, {std::move(sets)});
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "loading succeeded but should have failed:\n" << yaml;
  return Error(Err::Internal, "no error");
}

// `e` has error `err`, is located in exp.yaml at `line` (and `col`, unless 0) and its message contains `needle`.
inline void expect_at(const Error& e, Err err, int line, int col, const std::string& needle) {
  EXPECT_EQ(e.id(), error_info(err).id) << e.what();
  EXPECT_EQ(e.where().file, "exp.yaml") << e.what();
  EXPECT_EQ(e.where().line, line) << e.what();
  if (col > 0) {
    EXPECT_EQ(e.where().column, col) << e.what();
  }
  EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "missing '" << needle << "' in: " << e.what();
}
inline void expect_at(const Error& e, Err err, int line, const std::string& needle) {
  expect_at(e, err, line, 0, needle);
}

// Loading `yaml` fails with error `err` at line `line` of the experiment, and the message contains `needle`.
inline void expect_load_error(const std::string& yaml, Err err, int line, const std::string& needle) {
  expect_at(load_failure(yaml), err, line, needle);
}

}  // namespace podsim

// The check the configuration-error tests share: loading `yaml` fails with error `err` at line `line` of the
// experiment, and the message contains `needle`.
//
//   expect_load_error(resnet("  bn_batch: 3\n"), Err::NotDivisible, 6, "does not divide workload.batch");
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "sim/config/loader.h"

namespace podsim {

inline void expect_load_error(const std::string& yaml, Err err, int line, const std::string& needle) {
  try {
    load_experiment_text(yaml, "exp.yaml", {});
    ADD_FAILURE() << "accepted:\n" << yaml;
  } catch (const Error& e) {
    EXPECT_EQ(e.id(), error_info(err).id) << e.what();
    EXPECT_EQ(e.where().line, line) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace podsim

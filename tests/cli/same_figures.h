// The figures a pod reduced to one box of chips and the same pod with every chip simulated share, compared
// exactly: they must agree to the last digit (hw/chip/action_queue.h says why). Used by symmetry_test.cpp and
// faults_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace podsim::test {

inline void expect_same_figures(const nlohmann::json& reduced, const nlohmann::json& full) {
  for (const char* key : {"step_time_s", "cycles", "busy_fraction", "per_chip", "ici", "hbm", "collectives", "faults"})
    EXPECT_EQ(reduced.value(key, nlohmann::json()), full.value(key, nlohmann::json())) << key;
}

}  // namespace podsim::test

// Test and numeric-check helpers for collective schedules, without any timing:
//  - expected_result(): what each rank must hold after the collective (exact, in double precision);
//  - execute_schedules(): runs every rank's schedule in memory, matching sends to receives, in dependency order,
//    reducing in the order the schedule says (fp32), and reports mismatched or dangling transfers.
#pragma once

#include <string>
#include <vector>

#include "collectives/i_algorithm.h"

namespace podsim {

std::vector<std::vector<double>> expected_result(const CollectiveRequest& req,
                                                 const std::vector<std::vector<float>>& inputs);

struct ExecutionResult {
  std::vector<std::vector<float>> outputs;  // per rank
  std::string problem;                      // empty when every transfer matched and every task ran
  int64_t messages = 0;
  double bytes = 0;
};

ExecutionResult execute_schedules(const ICollectiveAlgorithm& algo, const CollectiveRequest& req,
                                  const std::vector<std::vector<float>>& inputs);
// Same, picking ready tasks in reverse (ranks from the last, newest ready task first): a result that differs from
// the forward order reveals a missing dependency.
ExecutionResult execute_schedules(const ICollectiveAlgorithm& algo, const CollectiveRequest& req,
                                  const std::vector<std::vector<float>>& inputs, bool reverse_order);

}  // namespace podsim

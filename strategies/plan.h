// A Plan: how one logical training step runs on a pod. A logical device Mesh (named axes) maps onto the physical
// torus, and each distinct role (e.g. a pipeline stage) gets one SPMD Program that every chip of that role runs:
// planning grows with the number of roles, never with the number of chips.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workloads/graph.h"

namespace podsim {

struct Mesh {
  std::vector<std::string> axis_names;  // e.g. {"x", "y"} or {"data", "model"}
  std::vector<int64_t> axis_sizes;
  std::vector<int> axis_dim;            // the torus dimension each axis runs along

  int64_t devices() const;
  int axis_index(const std::string& name) const;  // -1 when absent
};

struct Program {
  std::string role;
  ModelGraph graph;         // the per-device step: local shapes and communication ops
  std::vector<OpId> order;  // issue order, a topological order of `graph`
};

struct Plan {
  std::string strategy;
  Mesh mesh;
  std::vector<Program> programs;
  std::vector<int32_t> role_of_chip;  // index into programs for each physical chip; -1 = idle
  // The program whose tensors are the step's results (written to tensors/ in numeric mode), and its chip.
  int32_t result_role = 0;
  int32_t result_chip = 0;
};

// Checks a strategy's plan against the contract (one role per chip or idle, valid issue orders, communication over
// mesh axes that exist, a result chip that runs a program); throws Error(Internal) naming the strategy and the
// broken rule.
void validate_plan(const Plan& plan, int64_t chips);

}  // namespace podsim

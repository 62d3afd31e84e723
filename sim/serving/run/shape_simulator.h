// Iteration shapes simulated by the SystemC models (docs/serving.md, "Iteration times"). A shape is posed as an
// ordinary inference step of the serving experiment's model, slice and layout (decode when every chunk is one token
// after a cache, prefill when none has a cache, mixed otherwise), and simulated in a child process of its own, since
// SystemC elaborates once per process; the child sends back the step's time, model FLOPs and streamed bytes.
//
//   ShapeFrame f{resolved_yaml(e), e.run.name, 2048, 64, 2};
//   std::vector<IterationCost> c = simulate_shapes(f, shapes);     // several children at once (f.jobs)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/serving/iteration_time.h"

namespace podsim::serving {

struct ShapeFrame {
  std::string yaml;         // the experiment, fully resolved
  std::string label;        // its name in errors
  int64_t kv_capacity = 0;  // places per sequence (the engine's slot)
  int64_t resident = 0;     // sequences whose caches are resident (the slots, or what the pages hold)
  int64_t jobs = 1;         // children at once
  std::vector<std::string> overrides;  // --set overrides of the slice it runs on (disaggregated prefill)
};

// The --set overrides that pose a shape as an inference step.
std::vector<std::string> shape_overrides(const Shape& s, const ShapeFrame& f);

// Each shape's cost, in order. A shape that fails (its memory does not fit, ...) throws that error, its message
// prefixed with the iteration.
std::vector<IterationCost> simulate_shapes(const ShapeFrame& f, const std::vector<Shape>& shapes);

// What the children did in all: shapes simulated, model activations, wall seconds.
struct ShapeStats {
  int64_t shapes = 0;
  double activations = 0;
  double wall = 0;
};
const ShapeStats& shape_stats();

}  // namespace podsim::serving

// Iteration shapes simulated by the SystemC models (docs/serving.md, "Iteration times"). A shape is posed as an
// ordinary inference step of the serving experiment's model, slice and layout (decode when every chunk is one token
// after a cache, prefill when none has a cache, mixed otherwise), and simulated in a child process of its own, since
// SystemC elaborates once per process; the child sends back the step's time, model FLOPs and streamed bytes.
//
//   ShapeFrame f{resolved_yaml(e), e.run.name, 2048, 64, 2};
//   std::vector<IterationCost> c = simulate_shapes(f, shapes);     // several children at once (f.jobs)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
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

// A layout as the partitioner lays out an iteration (planned in a child, not simulated): per chip the part of the
// iteration's KV cache it holds (layer0.attn.k_cache [sequences, capacity, kv_heads, head_dim], a [begin, end) per
// dimension; empty for an idle chip), and per weight, per chip, the part it stores (a digest of its index ranges)
// and that part's bytes.
struct LayoutProbe {
  std::vector<int64_t> kv_shape;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> kv_held;
  std::map<std::string, std::vector<std::pair<std::string, double>>> weights;
  double peak_bytes_per_chip = 0;
};
LayoutProbe probe_layout(const ShapeFrame& f, const Shape& s);

// What the children did in all: shapes simulated, model activations, wall seconds.
struct ShapeStats {
  int64_t shapes = 0;
  double activations = 0;
  double wall = 0;
};
const ShapeStats& shape_stats();
// The collectives of the first shape simulated under frame label `label` (its result chip's, by kind: count and
// bytes a chip moves), or none.
std::map<std::string, std::pair<int64_t, double>> first_collectives(const std::string& label);

}  // namespace podsim::serving

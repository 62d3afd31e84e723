// Iteration times for the serving engine (docs/serving.md, "Iteration times"). An iteration is posed to the
// simulator as a shape: its chunks (new tokens after cached ones), which sim/serving/run/ builds as an ordinary
// inference step (decode, prefill or mixed) and simulates. Shapes are simulated once and kept.
//
// Exact mode simulates each distinct shape as it is. The default mode stands an iteration for a few shapes on a
// grid and interpolates between them (multilinearly): a decode of d sequences of mean context c between the grid's
// batch sizes and context lengths around (d, c), a grid shape's d contexts spread over one block of the decode
// kernel (workload.kv_block keys) around its point, so that the blocks they read are on average those of differing
// contexts; a prefill of n prompts of differing lengths between n prompts of the grid's lengths around their mean;
// a mixed iteration by its decodes (d, c) and its prefill chunks taken as one chunk of their N new tokens after
// their mean cached length, between the grid points of all four. The grid has two points an octave (1, 2, 3, 4, 6,
// 8, 12, ...) for counts, and for lengths the same up to context_bucket, then multiples of it. A prefill of prompts
// of one length is simulated as it is; with padding (bucket, max) its prompts stand in as the lengths they are
// padded to, which the step computes (only their caching and sampling differ). A shape keeps its batch padding
// (the engine's padded totals of sequences and computed places): a stand-in carries the padding that brings its
// own sequences and places to the same totals, so that it is timed at the shape the engine compiles.
//
//   IterationTimer t(opts, simulate_shapes);      // simulate_shapes: shapes -> their costs, in order
//   IterationCost c = t.cost(iteration, sequences);
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/serving/engine.h"

namespace podsim::serving {

struct Chunk {
  int64_t fresh = 0, cached = 0;
  bool operator<(const Chunk& o) const { return fresh != o.fresh ? fresh < o.fresh : cached < o.cached; }
  bool operator==(const Chunk& o) const { return fresh == o.fresh && cached == o.cached; }
};
// An iteration as the engine computes it: its chunks (sorted) and the engine's batch padding beside them
// (serving.engine.batch_padding; workload.pad_sequences and pad_tokens of the step it is posed as).
struct Shape {
  std::vector<Chunk> chunks;
  int64_t pad_sequences = 0;  // empty sequences (slots, padded requests): a discarded row of logits each
  int64_t pad_tokens = 0;     // places computed through every layer that belong to no real sequence
  Shape() = default;
  Shape(std::initializer_list<Chunk> c) : chunks(c) {}
  Shape(size_t n, Chunk c) : chunks(n, c) {}
  auto begin() { return chunks.begin(); }
  auto end() { return chunks.end(); }
  auto begin() const { return chunks.begin(); }
  auto end() const { return chunks.end(); }
  size_t size() const { return chunks.size(); }
  bool empty() const { return chunks.empty(); }
  void push_back(Chunk c) { chunks.push_back(c); }
  Chunk& operator[](size_t i) { return chunks[i]; }
  const Chunk& operator[](size_t i) const { return chunks[i]; }
  const Chunk& front() const { return chunks.front(); }
  const Chunk& back() const { return chunks.back(); }
  bool operator<(const Shape& o) const {
    return std::tie(chunks, pad_sequences, pad_tokens) < std::tie(o.chunks, o.pad_sequences, o.pad_tokens);
  }
  bool operator==(const Shape& o) const {
    return chunks == o.chunks && pad_sequences == o.pad_sequences && pad_tokens == o.pad_tokens;
  }
};

// "NEW+CACHED" per chunk, joined by commas (a run of more than 4 alike as "N x NEW+CACHED"), then the padding as
// " + P padded sequences, Q padded tokens".
std::string shape_text(const Shape& s);

struct TimerOptions {
  bool exact = false;
  int64_t context_bucket = 256;
  std::string padding = "none";  // workload.prefill_padding
  int64_t kv_block = 128;         // workload.kv_block: keys per block of the decode attention kernel
};

// Simulates shapes (in any order, several at once) and returns their costs in the order given.
using ShapeSimulator = std::function<std::vector<IterationCost>(const std::vector<Shape>&)>;

class IterationTimer {
 public:
  IterationTimer(TimerOptions o, ShapeSimulator simulate) : m_opts(o), m_simulate(std::move(simulate)) {}
  IterationCost cost(const Iteration& it, const std::vector<Sequence>& seqs);
  IterationCost cost(const Shape& exact);
  // The shapes (with weights summing to 1) that stand for an exact one.
  std::vector<std::pair<Shape, double>> stand_ins(const Shape& exact) const;
  int64_t simulated() const { return static_cast<int64_t>(m_cache.size()); }
  const std::map<Shape, IterationCost>& simulated_shapes() const { return m_cache; }

 private:
  std::vector<std::pair<Shape, double>> grid_stand_ins(const Shape& exact) const;  // before their padding
  TimerOptions m_opts;
  ShapeSimulator m_simulate;
  std::map<Shape, IterationCost> m_cache;
};

// The grid points around x (lo <= x <= hi; lo == hi on a point): counts (from 1) or lengths (from 0), two points an
// octave up to `bucket`, multiples of it above (counts: bucket 0, octaves throughout).
std::pair<int64_t, int64_t> grid_bracket(double x, int64_t bucket, bool from_zero);

}  // namespace podsim::serving

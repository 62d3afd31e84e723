// Per-phase layouts of a serving run (docs/serving.md, "Per-phase layouts"): serving.prefill gives the prefill
// iterations a strategy and mesh of their own on the decode's slice. Their shapes are simulated under that layout;
// after each prefill its prompts' KV caches are re-laid out into the decode layout (sim/serving/relayout.h: the
// bytes every chip fetches, from the two layouts' cache splits as the partitioner makes them); a weight both layouts
// store split alike is stored once, any other twice (each layout's part), and the other layout's copies must fit
// beside each phase's step.
//
//   std::unique_ptr<PrefillPhase> ph = PrefillPhase::make(e, frame, config, requests, timer_options);
//   if (ph) cost = ph->cost(iteration);                // prefill iterations
//   if (ph) ph->check_decode(costs, shapes);           // the decode layout's memory with both weight copies
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/params/experiment.h"
#include "sim/serving/engine.h"
#include "sim/serving/iteration_time.h"
#include "sim/serving/relayout.h"
#include "sim/serving/run/shape_simulator.h"

namespace podsim::serving {

class PrefillPhase {
 public:
  // nullptr when the experiment has no serving.prefill; throws PODSIM-SRV-005 for a combination it cannot run.
  static std::unique_ptr<PrefillPhase> make(const Experiment& e, const ShapeFrame& decode, const EngineConfig& c,
                                            size_t requests, const TimerOptions& to);
  // A prefill iteration's cost: its shape under the prefill layout and the relayout of its prompts' caches.
  IterationCost cost(const Iteration& it);
  // Decode shapes simulated: with two weight copies, each must fit beside the prefill layout's.
  void check_decode(const std::vector<IterationCost>& costs, const std::vector<Shape>& shapes) const;
  int64_t simulated() const { return m_timer->simulated(); }
  nlohmann::ordered_json summary(const std::string& decode_label) const;

 private:
  PrefillPhase() = default;
  void check_memory(const std::vector<IterationCost>& costs, const std::vector<Shape>& shapes, double other,
                    const char* phase) const;
  const LayoutProbe& probe(int64_t prompts);

  const Experiment* m_exp = nullptr;
  ShapeFrame m_frame;
  std::string m_prefill_layout, m_decode_layout;  // as the summary names them
  std::unique_ptr<IterationTimer> m_timer;
  LayoutProbe m_decode;
  std::map<int64_t, LayoutProbe> m_prefill;  // by the prefill's prompts
  int64_t m_alike = 0, m_twice = 0;           // weights both layouts store split alike, and the others
  std::vector<std::string> m_twice_kinds;     // the others' names, layer<N>. as layer*.
  double m_prefill_weights = 0, m_decode_weights = 0;  // the most bytes of weights a chip stores under each layout
  double m_extra_prefill = 0, m_extra_decode = 0;      // the other layout's copies beside each phase's step
  KvBytes m_kv;
  double m_bandwidth = 0, m_latency = 0;
  int64_t m_relayouts = 0;
  double m_bytes = 0, m_max_per_chip = 0, m_seconds = 0;
  int64_t m_max_chips = 0;
};

}  // namespace podsim::serving

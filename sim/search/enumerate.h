// `podsim search`, stage 1: the candidates of an experiment's `search` section (docs/search.md). Each candidate is
// a set of parameter overrides on the experiment (strategy.name, mesh, workload.remat, strategy options); the
// experiment loader validates it like any `--set`, so a candidate it refuses is dropped with the loader's reason.
//
//   SearchSpace space = search_space(exp);                       // the `search` section, checked
//   std::vector<Candidate> all = enumerate_candidates(space, exp);
//   for (const Candidate& c : all) c.overrides();                // "mesh.shape=[64, 4]", ...
//
// The space: every non-empty set of the allowed strategies of at most search.max_strategies, each owning one mesh
// axis; every ordered factorisation of the chip count into those axes, every axis at least 2 (an axis of 1 is the
// composition without that strategy); for the model and pipe axes, the placements that keep them on neighbouring
// chips (automatic, or each torus dimension that holds the axis whole, one per kind of dimension); the remat
// policies, sequence parallelism (with spmd), micro-batches (with pipeline) and collective algorithms (with
// data_parallel or fsdp). Over several slices (hardware.slices), the chip count is every slice's, and each mesh
// takes one of its data, fsdp or pipe axes over the slices (mesh.dcn_axes) where that axis's size is a multiple of
// the slice count: one candidate per such axis; placements then concern what each axis has inside a slice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/params/experiment.h"

namespace podsim {

struct SearchSpace {
  std::vector<std::string> strategies;  // allowed, in mesh order (pipeline, data_parallel, fsdp, moe, spmd)
  int64_t max_strategies = 3;
  bool all_placements = true;
  std::vector<int64_t> micro_batches;
  std::vector<std::string> remat;  // none | dots | full | stage
  std::vector<bool> sequence_parallel;
  std::vector<std::string> algorithms;  // "" = the library's default
  std::string objective = "step_time";  // step_time | mfu
  double memory_cap = 0;                // bytes
  int64_t budget = 0;                   // 0: all
};

// The experiment's `search` section, resolved (defaults: docs/config.md). Throws Error at the section's file:line
// for an unknown collective algorithm or a strategy the workload cannot use.
SearchSpace search_space(const Experiment& e);

struct Candidate {
  std::vector<std::string> strategies;  // strategy.name, in mesh order
  std::vector<std::string> axes;
  std::vector<int64_t> shape;
  std::vector<std::string> placement;  // empty: automatic; else one entry per axis ("" automatic)
  std::string remat = "none";          // none | dots | full | stage
  bool sequence_parallel = false;      // with spmd
  int64_t micro_batches = 0;           // with pipeline
  std::string algorithm;               // with data_parallel or fsdp; "" the default
  std::string dcn_axis;                // over several slices: the mesh axis that spans them

  // The parameter overrides that make the experiment this candidate ("path=value", YAML values).
  std::vector<std::string> overrides() const;
  // A short name usable as a run (folder) name, only letters, digits and _ - . : "fsdp64-model4_x.4-full-sp".
  std::string name() const;
  std::string mesh_text() const;     // "fsdp 64 x model 4 (model: x)"
  std::string options_text() const;  // "remat full, sp, M 8, ring"
};

// Ordered factorisations of n into `parts` factors, each at least 2, lexicographic: (16, 2) -> [2 8] [4 4] [8 2].
std::vector<std::vector<int64_t>> factorisations(int64_t n, size_t parts);

// The explicit placements of an axis of `size` chips kept on neighbouring chips: one per kind (size, wrap) of torus
// dimension that holds it whole ("x" when it takes the dimension, "y:4" when part of it). Dimensions named x, y, z.
std::vector<std::string> axis_placements(int64_t size, const std::vector<int64_t>& dims,
                                         const std::vector<bool>& wrap);

// Every candidate of the space, in a fixed order (strategy sets by size, then factorisation, placement, options).
std::vector<Candidate> enumerate_candidates(const SearchSpace& s, const Experiment& e);

// The mesh axis a strategy owns ("data" for data_parallel), "" for none.
std::string strategy_axis(const std::string& strategy);

}  // namespace podsim

// `podsim search`, stage 2: a candidate checked without simulating it. The experiment loader validates it (the
// candidate's overrides on the search's base experiment), the strategies plan it and the compiler lowers every
// role's program, which gives each role's peak HBM use exactly as `podsim run --memory-only` reports it. From the
// same programs comes a cheap analytic estimate of the step time, used only to order the candidates:
//
//   compute    = sum over the role's ops of max(MXU FLOPs / peak FLOPs, vector work / VPU rate, HBM bytes / HBM
//                bandwidth)
//   comm       = sum over its collectives of the bytes a bidirectional ring moves per chip / (2 x link bandwidth x
//                torus dimensions the group spans) + (steps x hop latency); sends to the next stage: bytes / link
//   pipeline   = (compute + comm) x (M + K - 1) / M (GPipe's bubble)
//   estimate   = the largest role's; nothing overlaps.
//
//   Evaluation ev = evaluate_candidate(base_yaml, "exp.yaml", c.overrides());
//   if (!ev.ok) std::cout << ev.problem;   // the loader's or planner's error
#pragma once

#include <string>
#include <vector>

namespace podsim {

struct Evaluation {
  bool ok = false;
  std::string problem;   // why the candidate is invalid (an error's text), when !ok
  double peak_bytes = 0;  // the largest role's peak HBM use
  std::string peak_role;  // that role
  double estimate_s = 0;  // the estimate of the step time
  double compute_s = 0, comm_s = 0, bubble_s = 0;  // of the role that sets the estimate
  std::string layout;    // the mesh as laid out on the torus (two candidates with one layout are one)
};

// `base_yaml` is the experiment without strategy, mesh and search sections, `label` its name in errors.
Evaluation evaluate_candidate(const std::string& base_yaml, const std::string& label,
                              const std::vector<std::string>& overrides);

}  // namespace podsim

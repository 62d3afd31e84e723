// podsim compare REFERENCE CANDIDATE: the tensors two numeric runs wrote, side by side. For every tensors/*.npy of
// the reference (e.g. the single-device run) it judges the candidate's tensor of the same name and exits 0 when
// every tensor is within its bound, 1 when one is not (or is missing or has another shape), 2 when a folder is not
// a numeric run.
//
// By default each tensor has its own bound (workloads/compare_rules.h, docs/strategies.md "Tolerances"): the step
// is rebuilt from the reference's config.resolved.yaml to learn what each tensor was computed in (fp32 or bf16)
// and which optimizer updated it with which learning rate. --tolerance X judges every tensor by its relative norm
// error against X instead.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>

#include "sim/cli/commands.h"
#include "base/error.h"
#include "base/npy.h"
#include "base/text.h"
#include "sim/config/loader.h"
#include "workloads/compare_rules.h"
#include "workloads/i_workload.h"

namespace podsim::cli {
namespace fs = std::filesystem;

namespace {

std::vector<std::string> tensor_names(const std::string& run) {
  const fs::path dir = fs::path(run) / "tensors";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    SourceLocation w;
    w.file = run;
    throw Error(Err::NotARunDir, w,
                "'" + run + "' has no tensors/ folder: compare needs two folders written by `podsim run` with "
                "run.numeric: true");
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".npy") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool has_tensor(const std::string& run, const std::string& name) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(run) / "tensors" / (name + ".npy"), ec);
}

Tensor load(const std::string& run, const std::string& name) {
  Tensor t;
  read_npy((fs::path(run) / "tensors" / (name + ".npy")).string(), t.shape, t.data);
  return t;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::vector<std::string> p;
  for (int64_t d : s) p.push_back(std::to_string(d));
  std::string out = "[";  // appended rather than "[" + ...: GCC 12 warns falsely (-Wrestrict) on the latter
  out += join(p, ", ");
  return out + "]";
}

// The rules of the step a run simulated, by tensor file, rebuilt from its config.resolved.yaml. Empty, with `why`
// saying what failed, when the step cannot be rebuilt.
std::map<std::string, TensorRule> rules_of(const std::string& run, std::string& why) {
  std::map<std::string, TensorRule> out;
  const std::string cfg = (fs::path(run) / "config.resolved.yaml").string();
  std::error_code ec;
  if (!fs::is_regular_file(cfg, ec)) {
    why = "'" + run + "' has no config.resolved.yaml";
    return out;
  }
  try {
    const Experiment e = load_experiment(cfg);
    std::unique_ptr<IWorkload> w = WorkloadRegistry::instance().make(e.workload);
    if (!w) throw Error(Err::Internal, "workload '" + e.workload + "' is not registered");
    for (TensorRule& r : compare_rules(w->build(e.params))) out[r.file] = r;
  } catch (const std::exception& e) {
    why = "the step of '" + run + "' could not be rebuilt from its config.resolved.yaml (" + e.what() +
          "; a workload from a plugin needs --plugin)";
  }
  return out;
}

// Tolerances of the step: the rules of the reference's step, each at the narrower precision of the two runs (a
// bf16 candidate against an fp32 reference differs by bf16's rounding).
struct Rules {
  std::map<std::string, TensorRule> by_file;
  DType fallback = DType::F32;  // for a tensor the step does not name
  std::string note;             // why the rules are not the step's
};

Rules step_rules(const std::string& reference, const std::string& candidate) {
  Rules r;
  std::string why_ref, why_cand;
  r.by_file = rules_of(reference, why_ref);
  const std::map<std::string, TensorRule> cand = rules_of(candidate, why_cand);
  if (r.by_file.empty()) {
    r.note = why_ref + ": every tensor judged at fp32's bound";
    return r;
  }
  for (auto& [file, rule] : r.by_file) {
    auto it = cand.find(file);
    if (it != cand.end() && it->second.precision == DType::BF16) rule.precision = DType::BF16;
    if (rule.precision == DType::BF16) r.fallback = DType::BF16;
  }
  return r;
}

}  // namespace

int cmd_compare(const CompareArgs& a) {
  const std::vector<std::string> ref = tensor_names(a.reference);
  const std::vector<std::string> got = tensor_names(a.candidate);
  if (ref.empty()) {
    SourceLocation w;
    w.file = a.reference;
    throw Error(Err::NotARunDir, w, "'" + a.reference + "/tensors' holds no .npy files");
  }
  const bool uniform = a.tolerance.has_value();
  Rules rules;
  if (!uniform) rules = step_rules(a.reference, a.candidate);

  std::cout << "podsim compare\n  reference: " << a.reference << "\n  candidate: " << a.candidate << "\n";
  if (uniform) {
    std::cout << strprintf("  tolerance: %g on every tensor's relative norm error ||candidate - reference|| / "
                           "||reference||\n",
                           *a.tolerance);
  } else {
    std::cout << strprintf("  tolerance: each tensor's own (docs/strategies.md): relative norm error within %g "
                           "(fp32) or %g (bf16), by the precision it was computed in; a parameter updated by Adam "
                           "against a full step lr*sqrt(n), by SGD against lr*||gradient||\n",
                           precision_tolerance(DType::F32), precision_tolerance(DType::BF16));
    if (!rules.note.empty()) std::cout << "  note: " << rules.note << "\n";
  }
  if (!a.brief)
    std::cout << strprintf("  %-40s %-16s %-5s %-10s %11s %11s\n", "tensor", "shape", "prec.", "measure", "error",
                           "bound");
  int above = 0, missing = 0;
  double worst = -1;  // error / bound
  std::string worst_text = "-";
  for (const std::string& name : ref) {
    if (!std::binary_search(got.begin(), got.end(), name)) {
      ++missing;
      std::cout << strprintf("  %-40s missing from %s\n", name.c_str(), a.candidate.c_str());
      continue;
    }
    TensorRule rule;
    rule.file = name;
    if (uniform) {
      rule.precision = DType::F32;
    } else if (auto it = rules.by_file.find(name); it != rules.by_file.end()) {
      rule = it->second;
    } else {
      rule.precision = rules.fallback;
    }
    const Tensor x = load(a.candidate, name), y = load(a.reference, name);
    std::unique_ptr<Tensor> grad;
    if (rule.measure == Measure::SgdStep && has_tensor(a.reference, rule.gradient))
      grad = std::make_unique<Tensor>(load(a.reference, rule.gradient));
    Judgement j = judge(rule, x, y, grad.get());
    if (uniform) {
      j.bound = *a.tolerance;
      j.pass = j.error <= j.bound;
    }
    const bool shape_differs = x.shape != y.shape || x.data.size() != y.data.size();
    above += !j.pass;
    const double ratio = j.bound > 0 ? j.error / j.bound : (j.error > 0 ? INFINITY : 0);
    if (!shape_differs && ratio > worst) {
      worst = ratio;
      worst_text = uniform ? strprintf("%s, %.3e", name.c_str(), j.error)
                           : strprintf("%s, %.3e of %.3e", name.c_str(), j.error, j.bound);
    }
    if (shape_differs) {
      std::cout << strprintf("  %-40s shape %s, reference %s\n", name.c_str(), shape_text(x.shape).c_str(),
                             shape_text(y.shape).c_str());
    } else if (!a.brief || !j.pass) {
      std::cout << strprintf("  %-40s %-16s %-5s %-10s %11.3e %11.3e%s\n", name.c_str(), shape_text(y.shape).c_str(),
                             dtype_name(rule.precision), measure_name(j.measure), j.error, j.bound,
                             j.pass ? "" : "  ABOVE");
    }
  }
  const size_t n = ref.size();
  if (above == 0 && missing == 0) {
    if (uniform)
      std::cout << strprintf("  equal within %g: %zu tensors (worst %s)\n", *a.tolerance, n, worst_text.c_str());
    else
      std::cout << strprintf("  equal: %zu tensors within their bounds (closest to its bound: %s)\n", n,
                             worst_text.c_str());
    return 0;
  }
  if (uniform)
    std::cout << strprintf("  DIFFERENT: %d of %zu tensors above %g", above, n, *a.tolerance);
  else
    std::cout << strprintf("  DIFFERENT: %d of %zu tensors above their bounds", above, n);
  if (missing) std::cout << strprintf(", %d missing", missing);
  std::cout << "\n";
  return 1;
}

}  // namespace podsim::cli

// podsim compare RUN_A RUN_B: the tensors two numeric runs wrote, side by side. For every tensors/*.npy of
// RUN_B (the reference, e.g. the single-device run) it prints the relative norm error and the max relative error
// of RUN_A's tensor of the same name (workloads/tensor_compare.h), and exits 0 when every tensor is within the
// tolerance, 1 when one is not (or is missing or has another shape), 2 when a folder is not a numeric run.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "sim/cli/commands.h"
#include "sim/common/error.h"
#include "sim/common/npy.h"
#include "sim/common/text.h"
#include "workloads/tensor_compare.h"

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

Tensor load(const std::string& run, const std::string& name) {
  Tensor t;
  read_npy((fs::path(run) / "tensors" / (name + ".npy")).string(), t.shape, t.data);
  return t;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::vector<std::string> p;
  for (int64_t d : s) p.push_back(std::to_string(d));
  return "[" + join(p, ", ") + "]";
}

}  // namespace

int cmd_compare(const CompareArgs& a) {
  const std::vector<std::string> ref = tensor_names(a.run_b);
  const std::vector<std::string> got = tensor_names(a.run_a);
  if (ref.empty()) {
    SourceLocation w;
    w.file = a.run_b;
    throw Error(Err::NotARunDir, w, "'" + a.run_b + "/tensors' holds no .npy files");
  }
  std::cout << "podsim compare: " << a.run_a << " against " << a.run_b << " (tolerance " << strprintf("%g", a.tolerance)
            << ", relative norm error)\n";
  if (!a.brief) std::cout << strprintf("  %-40s %-16s %14s %14s\n", "tensor", "shape", "rel. norm err", "max rel. err");
  int above = 0, missing = 0;
  double worst = 0;
  std::string worst_name;
  for (const std::string& name : ref) {
    if (!std::binary_search(got.begin(), got.end(), name)) {
      ++missing;
      std::cout << strprintf("  %-40s missing from %s\n", name.c_str(), a.run_a.c_str());
      continue;
    }
    Tensor x = load(a.run_a, name), y = load(a.run_b, name);
    TensorDiff d = compare_tensors(x, y);
    const bool bad = d.shape_differs || !(d.rel_norm <= a.tolerance);
    above += bad;
    if (!d.shape_differs && d.rel_norm > worst) {
      worst = d.rel_norm;
      worst_name = name;
    }
    if (d.shape_differs) {
      std::cout << strprintf("  %-40s shape %s, reference %s\n", name.c_str(), shape_text(x.shape).c_str(),
                             shape_text(y.shape).c_str());
    } else if (!a.brief || bad) {
      std::cout << strprintf("  %-40s %-16s %14.3e %14.3e%s\n", name.c_str(), shape_text(y.shape).c_str(), d.rel_norm,
                             d.max_rel, bad ? "  ABOVE" : "");
    }
  }
  const size_t n = ref.size();
  if (above == 0 && missing == 0) {
    std::cout << strprintf("  equal within %g: %zu tensors (worst %s, %.3e)\n", a.tolerance, n,
                           worst_name.empty() ? "-" : worst_name.c_str(), worst);
    return 0;
  }
  std::cout << strprintf("  DIFFERENT: %d of %zu tensors above %g", above, n, a.tolerance);
  if (missing) std::cout << strprintf(", %d missing", missing);
  std::cout << "\n";
  return 1;
}

}  // namespace podsim::cli

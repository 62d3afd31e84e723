#include "sim/search/enumerate.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>

#include "collectives/i_algorithm.h"
#include "base/error.h"
#include "base/text.h"

namespace podsim {
namespace {

// Mesh order, outermost first: a pipeline's stages outermost, the model axis innermost (neighbouring chips), as the
// compositions of docs/strategies.md write them.
const std::vector<std::string> kMeshOrder = {"pipeline", "data_parallel", "fsdp", "moe", "spmd"};

const char* kDimNames = "xyz";

std::string list_text(const std::vector<std::string>& v, bool quote) {
  std::vector<std::string> q;
  for (const auto& s : v) q.push_back(quote ? "\"" + s + "\"" : s);
  return bracketed(q);
}

std::string ints_text(const std::vector<int64_t>& v) {
  std::vector<std::string> q;
  for (int64_t i : v) q.push_back(std::to_string(i));
  return "[" + join(q, ", ") + "]";
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

// The other axes of a placement that fixes some (model, pipe) written out: each takes, innermost first, what is left
// of x, then y, then z, as the automatic layout would around the fixed ones. Empty when they do not fit.
std::vector<std::string> complete_placement(const std::vector<std::string>& fixed, const std::vector<int64_t>& shape,
                                            const std::vector<int64_t>& dims) {
  std::vector<int64_t> left = dims;
  for (size_t a = 0; a < fixed.size(); ++a) {
    if (fixed[a].empty()) continue;
    const int d = static_cast<int>(fixed[a][0] - 'x');
    const int64_t take = fixed[a].find(':') == std::string::npos ? dims[d] : shape[a];
    if (left[d] % take != 0) return {};
    left[d] /= take;
  }
  std::vector<std::string> out = fixed;
  for (size_t a = fixed.size(); a-- > 0;) {
    if (!fixed[a].empty()) continue;
    int64_t need = shape[a];
    std::vector<std::string> pieces;
    for (size_t d = 0; d < left.size() && need > 1; ++d) {
      const int64_t g = std::gcd(need, left[d]);
      if (g <= 1) continue;
      pieces.push_back(std::string(1, kDimNames[d]) + ":" + std::to_string(g));
      left[d] /= g;
      need /= g;
    }
    if (need != 1) return {};
    out[a] = join(pieces, ",");
  }
  return out;
}

}  // namespace

std::string strategy_axis(const std::string& s) {
  if (s == "data_parallel") return "data";
  if (s == "fsdp") return "fsdp";
  if (s == "spmd") return "model";
  if (s == "pipeline") return "pipe";
  if (s == "moe") return "expert";
  return "";
}

SearchSpace search_space(const Experiment& e) {
  const ParamSet& p = e.params;
  SearchSpace s;
  std::vector<std::string> allowed = p.strings("search.strategies");
  const bool moe_model = p.has("workload.moe.experts") && p.i("workload.moe.experts") > 0;
  if (allowed.empty()) {
    allowed = {"data_parallel", "fsdp", "spmd", "pipeline"};
    if (moe_model) allowed.push_back("moe");
  } else if (has(allowed, "moe") && !moe_model) {
    throw Error(Err::StrategyMismatch, p.where("search.strategies"),
                "search.strategies lists moe, but the workload has no experts (workload.moe.experts is 0); leave moe "
                "out",
                "search.strategies");
  }
  for (const auto& name : kMeshOrder)
    if (has(allowed, name)) s.strategies.push_back(name);
  s.max_strategies = p.i("search.max_strategies");
  s.all_placements = p.s("search.placements") == "all";
  s.micro_batches = p.ints("search.micro_batches");
  s.remat = p.strings("search.remat");
  s.sequence_parallel = p.bools("search.sequence_parallel");
  s.algorithms = p.strings("search.algorithms");
  const std::vector<std::string> known = CollectiveRegistry::instance().names();
  for (const auto& a : s.algorithms)
    if (!has(known, a))
      throw Error(Err::UnknownAlgorithm, p.where("search.algorithms"),
                  "search.algorithms names '" + a + "', which is no collective algorithm (" + suggestion(a, known) +
                      ")",
                  "search.algorithms");
  if (s.algorithms.empty()) s.algorithms = {""};
  // Repeated values would only repeat candidates.
  auto unique = [](auto& v) {
    std::vector<typename std::decay_t<decltype(v)>::value_type> out;
    for (const auto& x : v)
      if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
    v = out;
  };
  unique(s.micro_batches);
  unique(s.remat);
  unique(s.sequence_parallel);
  unique(s.algorithms);
  s.objective = p.s("search.objective");
  s.memory_cap = p.has("search.memory_cap") ? p.f("search.memory_cap") : e.hardware.chip.hbm.capacity;
  s.budget = p.i("search.budget");
  return s;
}

std::vector<std::vector<int64_t>> factorisations(int64_t n, size_t parts) {
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> cur;
  std::function<void(int64_t)> rec = [&](int64_t rest) {
    if (cur.size() + 1 == parts) {
      if (rest >= 2) {
        cur.push_back(rest);
        out.push_back(cur);
        cur.pop_back();
      }
      return;
    }
    for (int64_t f = 2; f <= rest; ++f) {
      if (rest % f) continue;
      cur.push_back(f);
      rec(rest / f);
      cur.pop_back();
    }
  };
  if (parts > 0 && n >= 2) rec(n);
  return out;
}

std::vector<std::string> axis_placements(int64_t size, const std::vector<int64_t>& dims,
                                         const std::vector<bool>& wrap) {
  std::vector<std::string> out;
  std::set<std::pair<int64_t, bool>> seen;
  for (size_t d = 0; d < dims.size() && d < 3; ++d) {
    const bool w = wrap.empty() ? true : wrap[d];
    if (dims[d] < size || dims[d] % size != 0) continue;
    if (!seen.insert({dims[d], w}).second) continue;  // another dimension of the same kind: the same layout
    std::string name(1, kDimNames[d]);
    out.push_back(dims[d] == size ? name : name + ":" + std::to_string(size));
  }
  return out;
}

std::vector<Candidate> enumerate_candidates(const SearchSpace& s, const Experiment& e) {
  const int64_t chips = e.hardware.pod.chips();  // every slice's
  const int64_t slices = e.hardware.pod.slices;
  const std::vector<int64_t>& dims = e.hardware.pod.dims;
  const std::vector<bool>& wrap = e.hardware.pod.wrap;
  std::vector<Candidate> out;
  const size_t n = s.strategies.size();
  // Strategy sets by size, then in mesh order (a bit mask over s.strategies, lowest bits first).
  for (size_t k = 1; k <= std::min<size_t>(n, static_cast<size_t>(s.max_strategies)); ++k) {
    for (uint32_t mask = 1; mask < (1u << n); ++mask) {
      if (static_cast<size_t>(__builtin_popcount(mask)) != k) continue;
      std::vector<std::string> strategies, axes;
      for (size_t i = 0; i < n; ++i)
        if (mask & (1u << i)) {
          strategies.push_back(s.strategies[i]);
          axes.push_back(strategy_axis(s.strategies[i]));
        }
      const bool pipe = has(strategies, "pipeline"), spmd = has(strategies, "spmd");
      const bool gathers = has(strategies, "fsdp") || has(strategies, "data_parallel");
      for (const auto& shape : factorisations(chips, k)) {
        // Over several slices: which axis spans them (data, fsdp or pipe, whole multiples of the slices).
        std::vector<int> dcn_choices;
        if (slices <= 1) dcn_choices = {-1};
        for (size_t a = 0; a < axes.size() && slices > 1; ++a)
          if ((axes[a] == "data" || axes[a] == "fsdp" || axes[a] == "pipe") && shape[a] % slices == 0)
            dcn_choices.push_back(static_cast<int>(a));
        for (int dcn : dcn_choices) {
          std::vector<int64_t> local = shape;  // what each axis has inside a slice
          if (dcn >= 0) local[static_cast<size_t>(dcn)] /= slices;
          // Placements: automatic, and (search.placements: all) each neighbouring layout of the model and pipe axes.
          std::vector<std::vector<std::string>> placements = {{}};
          if (s.all_placements) {
            std::vector<std::vector<std::string>> per_axis;
            bool any = false;
            for (size_t a = 0; a < axes.size(); ++a) {
              std::vector<std::string> opts = {""};
              // The model axis is laid out first (innermost), so any dimension that holds it keeps it on neighbouring
              // chips; the pipe axis only when it takes a whole dimension (no other axis between its stages).
              if ((axes[a] == "model" || axes[a] == "pipe") && local[a] > 1)
                for (const auto& pl : axis_placements(local[a], dims, wrap))
                  if (axes[a] == "model" || pl.find(':') == std::string::npos) {
                    opts.push_back(pl);
                    any = true;
                  }
              per_axis.push_back(opts);
            }
            if (any) {
              std::vector<std::vector<std::string>> combos = {{}};
              for (const auto& opts : per_axis) {
                std::vector<std::vector<std::string>> next;
                for (const auto& c : combos)
                  for (const auto& o : opts) {
                    auto d = c;
                    d.push_back(o);
                    next.push_back(d);
                  }
                combos = next;
              }
              for (const auto& c : combos) {
                if (std::all_of(c.begin(), c.end(), [](const std::string& x) { return x.empty(); })) continue;
                std::vector<std::string> full = complete_placement(c, local, dims);
                if (!full.empty()) placements.push_back(full);
              }
            }
          }
          for (const auto& placement : placements)
            for (const auto& remat : s.remat) {
              if (remat == "stage" && !pipe) continue;
              for (bool sp : spmd ? s.sequence_parallel : std::vector<bool>{false}) {
                const std::vector<int64_t> mbs = pipe ? s.micro_batches : std::vector<int64_t>{0};
                for (int64_t mb : mbs)
                  for (const auto& alg : gathers ? s.algorithms : std::vector<std::string>{""}) {
                    Candidate c;
                    c.strategies = strategies;
                    c.axes = axes;
                    c.shape = shape;
                    c.placement = placement;
                    c.remat = remat;
                    c.sequence_parallel = sp;
                    c.micro_batches = mb;
                    c.algorithm = alg;
                    if (dcn >= 0) c.dcn_axis = axes[static_cast<size_t>(dcn)];
                    out.push_back(c);
                  }
              }
            }
        }
      }
    }
  }
  return out;
}

std::vector<std::string> Candidate::overrides() const {
  std::vector<std::string> o;
  o.push_back("strategy.name=" + list_text(strategies, false));
  o.push_back("mesh.axes=" + list_text(axes, false));
  o.push_back("mesh.shape=" + ints_text(shape));
  if (!placement.empty()) o.push_back("mesh.placement=" + list_text(placement, true));
  if (!dcn_axis.empty()) o.push_back("mesh.dcn_axes=[" + dcn_axis + "]");
  o.push_back("workload.remat=" + std::string(remat == "stage" ? "none" : remat));
  if (remat == "stage") o.push_back("strategy.remat=true");
  if (has(strategies, "spmd")) o.push_back(std::string("strategy.sequence_parallel=") + (sequence_parallel ? "true" : "false"));
  if (micro_batches > 0) o.push_back("strategy.micro_batches=" + std::to_string(micro_batches));
  if (!algorithm.empty()) {
    if (has(strategies, "fsdp")) o.push_back("strategy.fsdp_algorithm=" + algorithm);
    if (has(strategies, "data_parallel")) o.push_back("strategy.gradient_algorithm=" + algorithm);
  }
  return o;
}

std::string Candidate::name() const {
  std::string n;
  for (size_t a = 0; a < axes.size(); ++a) {
    if (a) n += "-";
    n += axes[a] + std::to_string(shape[a]);
    if (axes[a] == dcn_axis) n += ".dcn";
    if (!placement.empty() && !placement[a].empty()) {
      std::string p = placement[a];  // a folder name: "x:8,y:4" -> "x.8_y.4"
      std::replace(p.begin(), p.end(), ':', '.');
      std::replace(p.begin(), p.end(), ',', '_');
      n += "_" + p;
    }
  }
  n += "-" + remat;
  if (sequence_parallel) n += "-sp";
  if (micro_batches > 0) n += "-mb" + std::to_string(micro_batches);
  if (!algorithm.empty()) n += "-" + algorithm;
  return n;
}

std::string Candidate::mesh_text() const {
  std::vector<std::string> parts;
  for (size_t a = 0; a < axes.size(); ++a)
    parts.push_back(axes[a] + " " + std::to_string(shape[a]) + (axes[a] == dcn_axis ? " (DCN)" : "") +
                    (!placement.empty() && !placement[a].empty() ? " (" + placement[a] + ")" : ""));
  return join(parts, " x ");
}

std::string Candidate::options_text() const {
  std::vector<std::string> parts = {"remat " + remat};
  if (sequence_parallel) parts.push_back("sp");
  if (micro_batches > 0) parts.push_back("M " + std::to_string(micro_batches));
  if (!algorithm.empty()) parts.push_back(algorithm);
  return join(parts, ", ");
}

}  // namespace podsim

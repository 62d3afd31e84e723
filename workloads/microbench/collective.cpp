// workload.model: collective — one collective on every chip of the pod, for studying a collective alone on any pod
// shape: workload.op, workload.bytes (each chip's input), optional workload.algorithm and workload.axes (torus
// axes the groups span, `slice` for the slices of a multi-slice pod; several groups run concurrently). summary.json
// reports its time and algorithm bandwidth.
#include <algorithm>
#include <cmath>
#include <set>

#include "collectives/i_algorithm.h"
#include "base/text.h"
#include "workloads/i_workload.h"

namespace podsim {
namespace {

const std::vector<std::string> kOps = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all",
                                       "collective_permute", "broadcast"};

OpKind kind_of(const std::string& op) {
  if (op == "all_reduce") return OpKind::AllReduce;
  if (op == "reduce_scatter") return OpKind::ReduceScatter;
  if (op == "all_gather") return OpKind::AllGather;
  if (op == "all_to_all") return OpKind::AllToAll;
  if (op == "collective_permute") return OpKind::CollectivePermute;
  return OpKind::Broadcast;
}

// Chips in one group: product of the pod's sizes along the chosen axes.
int64_t group_size(const ParamSet& p) {
  const auto& dims = p.ints("hardware.pod.dims");
  std::vector<std::string> axes = p.strings("workload.axes");
  int64_t n = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    std::string name(1, "xyz"[d]);
    if (axes.empty() || std::find(axes.begin(), axes.end(), name) != axes.end()) n *= dims[d];
  }
  if (axes.empty() || std::find(axes.begin(), axes.end(), "slice") != axes.end()) n *= p.i("hardware.slices");
  return n;
}

class CollectiveWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    return {
        ParamSpec::choice("workload.op", kOps, "The collective to run."),
        ParamSpec::quantity("workload.bytes", Quantity::Size, "Bytes of each chip's input.").positive(1e13),
        ParamSpec::text("workload.algorithm", "Collective algorithm (`podsim list collectives`); empty: the default "
                                              "for the collective.")
            .def("\"\""),
        ParamSpec::choice_list("workload.axes", {"x", "y", "z", "slice"},
                               "Torus axes each group spans (slice: across the slices of hardware.slices, over the "
                               "data-center network); [] spans every axis (one group of all chips).")
            .length(0, 4)
            .def("[]"),
        ParamSpec::choice("workload.dtype", {"fp32", "bf16"}, "Element type of the data.").def("fp32"),
        ParamSpec::integer("workload.shift", "collective_permute: each chip sends to the chip this many ranks further "
                                             "round its group (ranks follow chip ids, x fastest: a shift along one "
                                             "axis when the group spans one).")
            .range(-1e6, 1e6)
            .def("1"),
        ParamSpec::integer("workload.root", "broadcast: group rank whose data is broadcast.").range(0, 1e6).def("0"),
    };
  }

  void validate(const ParamSet& p) const override {
    const auto& dims = p.ints("hardware.pod.dims");
    std::vector<std::string> axes = p.strings("workload.axes");
    std::set<std::string> seen;
    for (const auto& a : axes) {
      if (a == "slice" && p.i("hardware.slices") < 2)
        throw Error(Err::BadAxes, p.where("workload.axes"),
                    "workload.axes names 'slice' but the pod has one slice (hardware.slices)", "workload.axes");
      int d = a == "x" ? 0 : a == "y" ? 1 : a == "z" ? 2 : -1;
      if (d >= static_cast<int>(dims.size()))
        throw Error(Err::BadAxes, p.where("workload.axes"),
                    "workload.axes names axis '" + a + "' but the pod is " + std::to_string(dims.size()) +
                        "-D (axes x, y" + (dims.size() == 3 ? ", z" : "") + ")",
                    "workload.axes");
      if (!seen.insert(a).second)
        throw Error(Err::BadAxes, p.where("workload.axes"), "workload.axes names axis '" + a + "' twice",
                    "workload.axes");
    }
    CollectiveKind kind;
    parse_collective(p.s("workload.op"), kind);
    std::string algo = p.s("workload.algorithm");
    if (!algo.empty()) {
      const auto* entry = CollectiveRegistry::instance().find(algo);
      std::vector<std::string> valid;
      for (const auto* e : CollectiveRegistry::instance().entries()) {
        auto k = e->make()->supports();
        if (std::find(k.begin(), k.end(), kind) != k.end()) valid.push_back(e->name);
      }
      bool ok = entry && std::find(valid.begin(), valid.end(), algo) != valid.end();
      if (!ok)
        throw Error(Err::UnknownAlgorithm, p.where("workload.algorithm"),
                    "no collective algorithm '" + algo + "' for " + p.s("workload.op") + " (" +
                        suggestion(algo, valid) + ")",
                    "workload.algorithm");
    }
    int elem = p.s("workload.dtype") == "bf16" ? 2 : 4;
    double bytes = p.f("workload.bytes");
    if (std::fmod(bytes, elem) != 0)
      throw Error(Err::NotDivisible, p.where("workload.bytes"),
                  strprintf("workload.bytes = %.0f is not a whole number of %d-byte elements", bytes, elem),
                  "workload.bytes");
    int64_t n = static_cast<int64_t>(bytes / elem), g = group_size(p);
    // all_reduce too: every algorithm reduces one block per chip of the group (the torus scheme reduce-scatters).
    bool split = kind == CollectiveKind::ReduceScatter || kind == CollectiveKind::AllToAll ||
                 kind == CollectiveKind::AllReduce;
    if (split && n % g != 0)
      throw Error(Err::NotDivisible, p.where("workload.bytes"),
                  strprintf("%s splits each chip's %lld elements into %lld blocks (one per chip of the group); "
                            "choose workload.bytes divisible by %lld",
                            p.s("workload.op").c_str(), static_cast<long long>(n), static_cast<long long>(g),
                            static_cast<long long>(g * elem)),
                  "workload.bytes");
    if (kind == CollectiveKind::Broadcast && p.i("workload.root") >= g)
      throw Error(Err::OutOfRange, p.where("workload.root"),
                  strprintf("workload.root = %lld but a group has only %lld chips", static_cast<long long>(p.i("workload.root")),
                            static_cast<long long>(g)),
                  "workload.root");
  }

  ModelGraph build(const ParamSet& p) const override {
    DType dt = p.s("workload.dtype") == "bf16" ? DType::BF16 : DType::F32;
    int64_t n = static_cast<int64_t>(p.f("workload.bytes")) / dtype_bytes(dt);
    int64_t g = group_size(p);
    OpKind kind = kind_of(p.s("workload.op"));
    int64_t out = kind == OpKind::ReduceScatter ? n / g : kind == OpKind::AllGather ? n * g : n;
    ModelGraph graph("collective");
    TensorId x = graph.add_tensor({"x", {n}, dt, TensorRole::Input});
    TensorId y = graph.add_tensor({"y", {out}, dt, TensorRole::Activation});
    Op op;
    op.name = p.s("workload.op");
    op.kind = kind;
    op.phase = Phase::Communication;
    op.inputs = {x};
    op.outputs = {y};
    op.attrs.axes = p.strings("workload.axes");
    // Mesh order, outermost first (slice, z, y, x): group ranks then follow chip ids, x fastest.
    auto outer = [](const std::string& a) { return a == "slice" ? 3 : a[0] - 'x'; };
    std::sort(op.attrs.axes.begin(), op.attrs.axes.end(),
              [&](const std::string& a, const std::string& b) { return outer(a) > outer(b); });
    op.attrs.algorithm = p.s("workload.algorithm");
    op.attrs.shift = p.i("workload.shift");
    op.attrs.root = p.i("workload.root");
    graph.add_op(op);
    return graph;
  }

  std::string default_strategy() const override { return "replicate"; }
};

PODSIM_REGISTER_WORKLOAD(CollectiveWorkload, "collective",
                         "One collective on every chip (all_reduce, all_gather, ...): time and algorithm bandwidth");

}  // namespace
}  // namespace podsim

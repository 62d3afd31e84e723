// workload.model: memory — the HBM microbenchmark, as `collective` is for the ICI. One chip streams
// workload.bytes through HBM with workload.pattern (read, write, copy = 50 % reads and 50 % writes, gather = random
// reads of workload.request bytes), then issues two single requests on an idle memory: one that continues an open
// row (row hit) and one that opens a row (row miss). summary.json's memory_benchmark gives the achieved bandwidth,
// its share of the peak and both idle latencies, all measured from the simulated ops (docs/validation.md compares
// them with DRAM simulators).
#include <cmath>

#include "base/text.h"
#include "workloads/i_workload.h"

namespace podsim {
namespace {

class MemoryWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    return {
        ParamSpec::choice("workload.pattern", {"read", "write", "copy", "gather"},
                          "Access pattern: sequential reads, sequential writes, a copy (reads and writes "
                          "interleaved, half each) or random reads of workload.request bytes."),
        ParamSpec::quantity("workload.bytes", Quantity::Size, "Bytes the stream reads (or writes).")
            .positive(1e13)
            .def("64MiB"),
        ParamSpec::quantity("workload.request", Quantity::Size, "Request size: the run length of a gather, and the "
                                                                "size of the latency probes.")
            .range(4, 1 << 30)
            .def("64B"),
    };
  }

  void validate(const ParamSet& p) const override {
    for (const char* key : {"workload.bytes", "workload.request"})
      if (std::fmod(p.f(key), 4) != 0)
        throw Error(Err::NotDivisible, p.where(key),
                    strprintf("%s = %.0f is not a whole number of 4-byte elements", key, p.f(key)), key);
    if (p.f("workload.request") > p.f("workload.bytes"))
      throw Error(Err::OutOfRange, p.where("workload.request"),
                  "workload.request is larger than workload.bytes; choose a request of at most the stream's size",
                  "workload.request");
  }

  ModelGraph build(const ParamSet& p) const override {
    const int64_t n = static_cast<int64_t>(p.f("workload.bytes")) / 4;
    const int64_t r = static_cast<int64_t>(p.f("workload.request")) / 4;
    ModelGraph g("memory");
    TensorId x = g.add_tensor({"x", {n}, DType::F32, TensorRole::Input});
    TensorId y = g.add_tensor({"y", {n}, DType::F32, TensorRole::Activation});
    auto stream = [&](const std::string& name, const std::string& pattern, std::vector<TensorId> in, TensorId out) {
      Op op;
      op.name = name;
      op.kind = OpKind::MemoryStream;
      op.phase = Phase::Forward;
      op.inputs = std::move(in);
      op.outputs = {out};
      op.attrs.pattern = pattern;
      op.attrs.message_bytes = p.f("workload.request");
      g.add_op(op);
    };
    stream("stream", p.s("workload.pattern"), {x}, y);
    // Latency probes, one request each, after the stream (they read its output only to be ordered after it).
    TensorId hit_in = g.add_tensor({"probe.hit.x", {r}, DType::F32, TensorRole::Input});
    TensorId hit = g.add_tensor({"probe.hit.y", {r}, DType::F32, TensorRole::Activation});
    stream("probe.row_hit", "read", {hit_in, y}, hit);
    TensorId miss_in = g.add_tensor({"probe.miss.x", {r}, DType::F32, TensorRole::Input});
    TensorId miss = g.add_tensor({"probe.miss.y", {r}, DType::F32, TensorRole::Activation});
    stream("probe.row_miss", "gather", {miss_in, hit}, miss);
    return g;
  }
};

PODSIM_REGISTER_WORKLOAD(MemoryWorkload, "memory",
                         "HBM microbenchmark: read, write, copy or gather streams; bandwidth and idle latency");

}  // namespace
}  // namespace podsim

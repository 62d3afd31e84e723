// workload.model: traffic — synthetic network load for latency–load curves. Every chip injects packets of
// workload.message bytes as a Poisson process at workload.rate (a fraction of one link's bandwidth) for
// workload.duration, to destinations drawn from workload.pattern:
//   uniform    any other chip, equally likely;
//   transpose  chip (x, y) sends to (y, x) (square pods; chips on the diagonal stay silent);
//   neighbor   one of its torus neighbours, equally likely.
// summary.json reports the accepted throughput and the average packet latency (from generation to arrival of the
// tail, source queueing included). Packets do not touch HBM: this measures the network alone.
#include "workloads/i_workload.h"

namespace podsim {
namespace {

class TrafficWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    return {
        ParamSpec::choice("workload.pattern", {"uniform", "transpose", "neighbor"}, "Destination pattern."),
        ParamSpec::real("workload.rate", "Offered load per chip, as a fraction of one link's bandwidth.")
            .positive(16),
        ParamSpec::quantity("workload.message", Quantity::Size, "Bytes per packet.").range(1, 1e9).def("4KiB"),
        ParamSpec::quantity("workload.duration", Quantity::Time, "How long chips inject packets.")
            .positive(1)
            .def("20us"),
    };
  }

  void validate(const ParamSet& p) const override {
    const auto& dims = p.ints("hardware.pod.dims");
    if (p.s("workload.pattern") == "transpose" && dims[0] != dims[1])
      throw Error(Err::PodShape, p.where("workload.pattern"),
                  "the transpose pattern needs as many chips along x as along y; hardware.pod.dims is " +
                      std::to_string(dims[0]) + " x " + std::to_string(dims[1]),
                  "workload.pattern");
  }

  ModelGraph build(const ParamSet& p) const override {
    ModelGraph g("traffic");
    Op op;
    op.name = "traffic";
    op.kind = OpKind::Traffic;
    op.phase = Phase::Communication;
    op.attrs.pattern = p.s("workload.pattern");
    op.attrs.rate = p.f("workload.rate");
    op.attrs.message_bytes = p.f("workload.message");
    op.attrs.duration = p.f("workload.duration");
    g.add_op(op);
    return g;
  }

  std::string default_strategy() const override { return "replicate"; }
};

PODSIM_REGISTER_WORKLOAD(TrafficWorkload, "traffic",
                         "Synthetic ICI load (uniform, transpose, neighbor) for latency-load curves");

}  // namespace
}  // namespace podsim

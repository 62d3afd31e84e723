// An out-of-tree plugin for tests (loaded with --plugin): strategies that build broken or deadlocking plans on
// purpose, to check that podsim reports them instead of hanging or producing a wrong step time.
#include "strategies/i_strategy.h"

namespace podsim {
namespace {

Plan torus_plan(const Experiment& exp, const std::string& name) {
  Plan p;
  p.strategy = name;
  p.mesh = Mesh::torus_axes(Torus(exp.hardware.pod.dims, exp.hardware.pod.wrap, exp.hardware.pod.slices));
  p.role_of_chip.assign(static_cast<size_t>(exp.hardware.pod.chips()), -1);
  return p;
}

Program single_op(const std::string& role, OpKind kind, int64_t peer, int64_t tag, int64_t elements = 256) {
  Program prog;
  prog.role = role;
  TensorId x = prog.graph.add_tensor({"x", {elements}, DType::F32, TensorRole::Input});
  TensorId y = prog.graph.add_tensor({"y", {elements}, DType::F32, TensorRole::Activation});
  Op op;
  op.name = role;
  op.kind = kind;
  op.phase = Phase::Communication;
  op.inputs = {x};
  op.outputs = {y};
  op.attrs.peer = peer;
  op.attrs.tag = tag;
  prog.graph.add_op(op);
  prog.order = {0};
  return prog;
}

// Chip 0 receives from chip 1, which never sends.
class RecvWithoutSend : public IStrategy {
 public:
  std::optional<Plan> place(const ModelGraph&, const Experiment& exp) const override {
    Plan p = torus_plan(exp, "test_recv_without_send");
    p.programs.push_back(single_op("recv", OpKind::Recv, 1, 7));
    p.role_of_chip[0] = 0;
    return p;
  }
};

// Every chip but the last joins an all-reduce over all chips; the last never does.
class MissingMember : public IStrategy {
 public:
  std::optional<Plan> place(const ModelGraph&, const Experiment& exp) const override {
    Plan p = torus_plan(exp, "test_missing_member");
    p.programs.push_back(single_op("all_reduce", OpKind::AllReduce, -1, 0));
    std::fill(p.role_of_chip.begin(), p.role_of_chip.end() - 1, 0);
    return p;
  }
};

// A plan whose role table is the wrong size: the engine must refuse it as an internal error.
class BrokenPlan : public IStrategy {
 public:
  std::optional<Plan> place(const ModelGraph& g, const Experiment& exp) const override {
    Plan p = torus_plan(exp, "test_broken_plan");
    Program prog;
    prog.role = "device";
    prog.graph = g;
    prog.order = g.topological_order();
    p.programs.push_back(prog);
    p.role_of_chip.assign(p.role_of_chip.size() + 3, 0);
    return p;
  }
};

// Chip 0 sends the workload's input (its element count) to chip 2, which receives it.
class SendRecv : public IStrategy {
 public:
  std::optional<Plan> place(const ModelGraph& g, const Experiment& exp) const override {
    Plan p = torus_plan(exp, "test_send_recv");
    const int64_t n = g.tensor(0).elements();
    p.programs.push_back(single_op("send", OpKind::Send, 2, 5, n));
    p.programs.push_back(single_op("recv", OpKind::Recv, 0, 5, n));
    p.role_of_chip[0] = 0;
    p.role_of_chip[2] = 1;
    p.result_chip = 2;
    return p;
  }
};

PODSIM_REGISTER_STRATEGY(SendRecv, "test_send_recv", "Test: chip 0 sends its input to chip 2");
PODSIM_REGISTER_STRATEGY(RecvWithoutSend, "test_recv_without_send", "Test: a receive with no matching send");
PODSIM_REGISTER_STRATEGY(MissingMember, "test_missing_member", "Test: a collective one chip never joins");
PODSIM_REGISTER_STRATEGY(BrokenPlan, "test_broken_plan", "Test: a plan that breaks the contract");

}  // namespace
}  // namespace podsim

// A partitioned step that is wrong in one collective, for the tests of `podsim compare` (tests/cli/compare_test.cpp):
// data_parallel's plan with the all-reduce of one tensor (strategy.drop, e.g. "layer1.ln1.beta.grad") replaced by a
// local copy, so each chip keeps its own partial sum of that tensor.
#include "strategies/planner.h"

namespace podsim {
namespace {

class DropAllReduce : public IStrategy {
 public:
  std::vector<ParamSpec> params() const override {
    std::vector<ParamSpec> p = StrategyRegistry::instance().make("data_parallel")->params();
    p.push_back(ParamSpec::text("strategy.drop", "test_drop_all_reduce: the tensor whose all-reduce is left out"));
    return p;
  }

  std::optional<Plan> place(const ModelGraph& g, const Experiment& exp) const override {
    Experiment dp = exp;
    dp.strategy = "data_parallel";
    dp.strategies = {"data_parallel"};
    dp.run.combine_threshold = 0;  // one all-reduce per gradient, so that one can be left out
    Plan plan = make_plan(g, dp);
    const std::string prefix = exp.params.s("strategy.drop") + "/all_reduce";
    int dropped = 0;
    for (Program& prog : plan.programs)
      for (OpId id = 0; id < static_cast<OpId>(prog.graph.num_ops()); ++id) {
        Op& op = prog.graph.op(id);
        if (op.kind != OpKind::AllReduce || op.name.rfind(prefix, 0) != 0) continue;
        op.kind = OpKind::Scale;  // out = 1 * in: the chip's own partial sum
        op.phase = Phase::Backward;
        op.attrs = OpAttrs{};
        op.attrs.alpha = 1.0;
        ++dropped;
      }
    if (dropped == 0) throw Error(Err::Internal, "test_drop_all_reduce: no all-reduce of '" + prefix + "'");
    plan.strategy = "test_drop_all_reduce";
    return plan;
  }
};

PODSIM_REGISTER_STRATEGY(DropAllReduce, "test_drop_all_reduce",
                         "Test: data_parallel without the all-reduce of one tensor (strategy.drop)");

}  // namespace
}  // namespace podsim

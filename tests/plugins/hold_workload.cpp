// workload.model: test_hold — a one-matmul workload whose build waits for the test that started the run, so that a
// test can act on a run it knows to be in progress (interrupt it, kill its sweep driver, let its timeout fire)
// without guessing how long a run takes. `workload.hold` names a FIFO the test made (mkfifo): build() opens it for
// reading, which returns once the test opens it for writing (the test then knows the run is held), and reads until
// the test closes it (the release). A path that does not exist holds nothing.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "workloads/i_workload.h"

namespace podsim {
namespace {

void wait_for_release(const std::string& path) {
  if (path.empty() || access(path.c_str(), F_OK) != 0) return;
  int fd = -1;
  while ((fd = open(path.c_str(), O_RDONLY)) < 0 && errno == EINTR) {
  }
  if (fd < 0) throw Error(Err::FileUnreadable, "test_hold: cannot open '" + path + "': " + std::strerror(errno));
  char buf[64];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  close(fd);
}

class HoldWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    return {ParamSpec::text("workload.hold", "FIFO to wait on before building the step (unset: none)").optional()};
  }
  ModelGraph build(const ParamSet& p) const override {
    if (p.has("workload.hold")) wait_for_release(p.s("workload.hold"));
    ModelGraph g("test_hold");
    TensorId a = g.add_tensor({"a", {64, 64}, DType::BF16, TensorRole::Input});
    TensorId b = g.add_tensor({"b", {64, 64}, DType::BF16, TensorRole::Parameter});
    TensorId c = g.add_tensor({"c", {64, 64}, DType::BF16, TensorRole::Activation});
    Op op;
    op.name = "matmul";
    op.kind = OpKind::MatMul;
    op.phase = Phase::Forward;
    op.cell = 0;
    op.inputs = {a, b};
    op.outputs = {c};
    op.attrs.equation = "mk,kn->mn";
    g.add_op(op);
    return g;
  }
};

PODSIM_REGISTER_WORKLOAD(HoldWorkload, "test_hold", "Test: one matmul, built once the test releases workload.hold");

}  // namespace
}  // namespace podsim

// The numeric matmul kernel (workloads/ops/matmul.cpp) against Eigen's own GEMM on the same machine: GFLOP/s of
// each for square fp32 and bf16 GEMMs, and their ratio. Run by tools/bench.
//
//   bench_gemm [size ...]     -> one JSON object per line: {"m": ..., "dtype": ..., "kernel_gflops": ..., ...}
#include <Eigen/Core>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "workloads/builder.h"
#include "workloads/ops/op_kind.h"
#include "workloads/reference.h"

using namespace podsim;

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Best of `reps` timings of f (seconds).
template <class F>
double best_of(int reps, F f) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

void run(int64_t n, DType dtype) {
  ModelGraph g("gemm");
  GraphBuilder b(g, dtype);
  TensorId x = b.input("x", {n, n}, dtype);
  TensorId w = b.param("w", {n, n});
  b.matmul(x, w, "mm");
  TensorStore store(g.tensors().size());
  init_step_inputs(g, store, 1);
  const Op* mm = nullptr;
  for (const Op& op : g.ops())
    if (op.kind == OpKind::MatMul) mm = &op;
  const OpKindDef* def = find_op_kind(OpKind::MatMul);
  const int reps = 3;
  const double kernel_s = best_of(reps, [&] { def->kernel(g, *mm, store); });
  RowMat A = RowMat::Random(n, n), B = RowMat::Random(n, n), C(n, n);
  const double eigen_s = best_of(reps, [&] { C.noalias() = A * B; });
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  std::printf("{\"m\": %lld, \"k\": %lld, \"n\": %lld, \"dtype\": \"%s\", \"kernel_s\": %.6f, \"eigen_s\": %.6f, "
              "\"kernel_gflops\": %.2f, \"eigen_gflops\": %.2f, \"ratio\": %.3f, \"check\": %.3g}\n",
              static_cast<long long>(n), static_cast<long long>(n), static_cast<long long>(n), dtype_name(dtype),
              kernel_s, eigen_s, flops / kernel_s * 1e-9, flops / eigen_s * 1e-9, eigen_s / kernel_s,
              static_cast<double>(C(0, 0)));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
  if (sizes.empty()) sizes = {512, 1024};
  for (int64_t n : sizes)
    for (DType d : {DType::F32, DType::BF16}) run(n, d);
  return 0;
}

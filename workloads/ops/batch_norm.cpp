// Batch normalization in training mode over NHWC activations: each channel is normalized by the mean and variance
// of its batch group (attrs.count consecutive examples, 0: the whole batch) over the examples and positions, then
// scaled and offset by learned gamma and beta. Moving averages of the mean and variance are state, updated in the
// optimizer phase (attrs.alpha the momentum). Statistics are stored per example row ([B, C], the example's
// group's): they split with the batch, so a replica keeps the statistics and the moving averages of its own group,
// as replicas do on TPUs.
//
// Fusion as XLA does it: the statistics are a reduction fusion (one pass over x); normalization, scale and offset
// are elementwise (BatchNormApply, fusible: ReLU and the residual add join it). The gradient is a reduction (two
// passes over dy and x: the group sums, then dx).
//
// Partitioning (Ying et al. 2018's distributed batch normalization): the batch may be split over axes A. When each
// device's examples hold whole groups, everything is local; when a group spans k devices, each computes its sums
// over its rows, an all-reduce over the k consecutive devices of A sums them (group_block), and each finishes its
// rows' statistics from the group's sums. The gradient does the same with the sums of dy and dy * xhat; dgamma and
// dbeta are partial over A (the data-parallel gradient reduction sums them). With the rows (H) split too (spatial
// partitioning), every device holds part of each of its examples: the sums are all-reduced over the rows' axes as
// well (with the group's devices along A), and dgamma and dbeta, whole on every device of a row split, stay partial
// over A only. Rows split unevenly (attrs.padded) pad the last devices' shards: their rows past the map count for
// nothing in the sums and stay zero in y and dx.
#include <algorithm>

#include "base/error.h"
#include "base/text.h"
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

struct Dims {
  int64_t b, pos, c;  // examples, positions per example (H * W), channels
  int64_t valid = pos;  // positions of the map's rows: a device's shard of unevenly split rows is padded past them
};
Dims dims_of(const TensorInfo& x) { return {x.shape[0], x.shape[1] * x.shape[2], x.shape[3]}; }
// The dimensions of a device's shard: with its rows split unevenly (attrs.padded on dimension 1), the rows past the
// map's hold zeros and count for nothing.
Dims dims_on(const TensorInfo& x, const Op& op, const TensorStore& s) {
  Dims d = dims_of(x);
  for (const OpAttrs::Padded& p : op.attrs.padded) {
    if (p.dim != 1) continue;
    const int64_t real = p.global - s.device_index(p.axes) * x.shape[1];
    d.valid = std::clamp<int64_t>(real, 0, x.shape[1]) * x.shape[2];
  }
  return d;
}
int64_t group_of(const Op& op, int64_t batch) { return op.attrs.count > 0 ? op.attrs.count : batch; }

// Sums over rows [r0, r1) of x, in double; with `mean`, of (x - mean)^2 (two passes: the variance without the
// cancellation of E[x^2] - mean^2).
void sums_of(const float* x, const Dims& d, int64_t r0, int64_t r1, const double* mean, double* out) {
  std::vector<double> s(static_cast<size_t>(d.c), 0.0);
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t p = 0; p < d.valid; ++p) {
      const float* xr = x + (r * d.pos + p) * d.c;
      for (int64_t c = 0; c < d.c; ++c) {
        const double v = mean ? xr[c] - mean[c] : xr[c];
        s[c] += mean ? v * v : v;
      }
    }
  for (int64_t i = 0; i < d.c; ++i) out[i] = s[i];
}

// A device's sums as fp32 pairs (hi, lo = the rounding error of hi): the all-reduce adds each part, and groups of
// devices whose partial sums cancel keep the precision of one device's double sums (hi parts that nearly cancel add
// exactly). Layout [2 * n]: the hi parts, then the lo parts.
// hi keeps 12 significant bits, so that the hi parts of a few devices add exactly in fp32 (Dekker's split).
void split(const double* s, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    int e = 0;
    std::frexp(s[i], &e);
    const double hi = std::ldexp(std::nearbyint(std::ldexp(s[i], 12 - e)), e - 12);
    out[i] = static_cast<float>(hi);
    out[n + i] = static_cast<float>(s[i] - hi);
  }
}
void join(const float* in, int64_t n, double* s) {
  for (int64_t i = 0; i < n; ++i) s[i] = static_cast<double>(in[i]) + in[n + i];
}

// Mean and reciprocal standard deviation from a group's sum and sum of squared deviations over n values, written to
// rows [r0, r1).
void finish(const double* sum, const double* m2, int64_t c, double n, double eps, int64_t r0, int64_t r1, Tensor& mean,
            Tensor& rstd) {
  for (int64_t ch = 0; ch < c; ++ch) {
    const double m = sum[ch] / n;
    const double var = m2[ch] / n;
    const float rs = static_cast<float>(1.0 / std::sqrt(var + eps));
    for (int64_t r = r0; r < r1; ++r) {
      mean.data[r * c + ch] = static_cast<float>(m);
      rstd.data[r * c + ch] = rs;
    }
  }
}

// Sums of dy and dy * xhat over rows [r0, r1).
void grad_sums(const float* dy, const float* x, const Tensor& mean, const Tensor& rstd, const Dims& d, int64_t r0,
               int64_t r1, double* out) {
  std::vector<double> s(static_cast<size_t>(2 * d.c), 0.0);
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t p = 0; p < d.valid; ++p) {
      const int64_t o = (r * d.pos + p) * d.c;
      for (int64_t c = 0; c < d.c; ++c) {
        const double xhat = (x[o + c] - mean.data[r * d.c + c]) * static_cast<double>(rstd.data[r * d.c + c]);
        s[c] += dy[o + c];
        s[d.c + c] += dy[o + c] * xhat;
      }
    }
  for (int64_t i = 0; i < 2 * d.c; ++i) out[i] = s[i];
}

// dx for rows [r0, r1) from the group's sums over n values.
void grad_dx(const float* dy, const float* x, const Tensor& mean, const Tensor& rstd, const Tensor& gamma,
             const double* sums, double n, const Dims& d, int64_t r0, int64_t r1, Tensor& dx) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t p = 0; p < d.valid; ++p) {
      const int64_t o = (r * d.pos + p) * d.c;
      for (int64_t c = 0; c < d.c; ++c) {
        const double rs = rstd.data[r * d.c + c];
        const double xhat = (x[o + c] - mean.data[r * d.c + c]) * rs;
        dx.data[o + c] = static_cast<float>(gamma.data[c] * rs * (dy[o + c] - sums[c] / n - xhat * sums[d.c + c] / n));
      }
    }
}

// ---- costs: the tensors in the tiled layout ----
OpCost whole(OpCost c) {
  c.whole_tensor = true;
  return c;
}
OpCost tiled(const ModelGraph& g, const Op& op, OpCost c, double read_passes = 1) {
  c.bytes_read = 0;
  for (TensorId t : op.inputs) c.bytes_read += read_passes * g.tensor(t).stored_bytes();
  c.bytes_written = 0;
  for (TensorId t : op.outputs) c.bytes_written += g.tensor(t).stored_bytes();
  return c;
}
OpCost stats_cost(const ModelGraph& g, const Op& op) { return whole(ops::reduction(tiled(g, op, ops::vpu_cost(g, op, 3, 0, 0, 2)))); }
OpCost apply_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(tiled(g, op, ops::vpu_cost(g, op, 3))); }
// Two passes over dy and x: the sums, then dx.
// The gradient: the sums of dy and dy * xhat (a whole-tensor reduction: 4 operations and 2 reduction steps per
// element), then dx from them (6 operations); two passes over dy and x when they run in one kernel.
OpCost grad_cost(const ModelGraph& g, const Op& op) {
  OpCost c = whole(ops::reduction(tiled(g, op, ops::vpu_cost(g, op, 10, 0, 0, 2), 2)));
  c.two_pass = true;
  c.first_pass = c.vector;
  c.first_pass.simple = 4;
  return c;
}
OpCost moving_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(tiled(g, op, ops::vpu_cost(g, op, 6, 0, 1))); }
OpCost sums_cost(const ModelGraph& g, const Op& op) { return whole(ops::reduction(tiled(g, op, ops::vpu_cost(g, op, 3, 0, 0, 2)))); }
OpCost finish_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(tiled(g, op, ops::vpu_cost(g, op, 4, 1))); }
OpCost grad_sums_cost(const ModelGraph& g, const Op& op) { return whole(ops::reduction(tiled(g, op, ops::vpu_cost(g, op, 5, 0, 0, 2)))); }
OpCost grad_finish_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(tiled(g, op, ops::vpu_cost(g, op, 6))); }

// ---- kernels ----
void stats_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Dims d = dims_of(g.tensor(op.inputs[0]));
  const int64_t e = group_of(op, d.b);
  ops::check(d.b % e == 0, op, "the batch is not a multiple of the batch-norm group");
  const Tensor& x = in(s, op, 0);
  Tensor mean = ops::out_like(g, op, 0), rstd = ops::out_like(g, op, 1);
  std::vector<double> sum(static_cast<size_t>(d.c)), mu(sum.size()), m2(sum.size());
  const double n = static_cast<double>(e * d.pos);
  for (int64_t r = 0; r < d.b; r += e) {
    sums_of(x.data.data(), d, r, r + e, nullptr, sum.data());
    for (int64_t c = 0; c < d.c; ++c) mu[c] = sum[c] / n;
    sums_of(x.data.data(), d, r, r + e, mu.data(), m2.data());
    finish(sum.data(), m2.data(), d.c, n, op.attrs.eps, r, r + e, mean, rstd);
  }
  ops::put(g, op, s, std::move(mean), 0);
  ops::put(g, op, s, std::move(rstd), 1);
}

void apply_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Dims d = dims_on(g.tensor(op.inputs[0]), op, s);
  const Tensor& x = in(s, op, 0);
  const Tensor& mean = in(s, op, 1);
  const Tensor& rstd = in(s, op, 2);
  const Tensor& gamma = in(s, op, 3);
  const Tensor& beta = in(s, op, 4);
  Tensor y = ops::out_like(g, op);
  for (int64_t r = 0; r < d.b; ++r)
    for (int64_t p = 0; p < d.valid; ++p) {
      const int64_t o = (r * d.pos + p) * d.c;
      for (int64_t c = 0; c < d.c; ++c)
        y.data[o + c] = (x.data[o + c] - mean.data[r * d.c + c]) * rstd.data[r * d.c + c] * gamma.data[c] + beta.data[c];
    }
  ops::put(g, op, s, std::move(y));
}

void grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Dims d = dims_of(g.tensor(op.inputs[1]));
  const int64_t e = group_of(op, d.b);
  const Tensor& dy = in(s, op, 0);
  const Tensor& x = in(s, op, 1);
  const Tensor& mean = in(s, op, 2);
  const Tensor& rstd = in(s, op, 3);
  const Tensor& gamma = in(s, op, 4);
  Tensor dx = ops::out_like(g, op, 0), dgamma = ops::out_like(g, op, 1), dbeta = ops::out_like(g, op, 2);
  std::vector<double> sums(static_cast<size_t>(2 * d.c));
  for (int64_t r = 0; r < d.b; r += e) {
    grad_sums(dy.data.data(), x.data.data(), mean, rstd, d, r, r + e, sums.data());
    grad_dx(dy.data.data(), x.data.data(), mean, rstd, gamma, sums.data(), static_cast<double>(e * d.pos), d, r, r + e, dx);
    for (int64_t c = 0; c < d.c; ++c) {  // each group's sums in fp32, as a device holding the group has them
      dbeta.data[c] += static_cast<float>(sums[c]);
      dgamma.data[c] += static_cast<float>(sums[d.c + c]);
    }
  }
  ops::put(g, op, s, std::move(dx), 0);
  ops::put(g, op, s, std::move(dgamma), 1);
  ops::put(g, op, s, std::move(dbeta), 2);
}

void moving_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& mm = in(s, op, 0);
  const Tensor& mv = in(s, op, 1);
  const Tensor& mean = in(s, op, 2);
  const Tensor& rstd = in(s, op, 3);
  Tensor nm = ops::out_like(g, op, 0), nv = ops::out_like(g, op, 1);
  const double a = op.attrs.alpha;
  for (size_t i = 0; i < mm.data.size(); ++i) {
    const double var = 1.0 / (static_cast<double>(rstd.data[i]) * rstd.data[i]) - op.attrs.eps;
    nm.data[i] = static_cast<float>(a * mm.data[i] + (1 - a) * mean.data[i]);
    nv.data[i] = static_cast<float>(a * mv.data[i] + (1 - a) * var);
  }
  ops::put(g, op, s, std::move(nm), 0);
  ops::put(g, op, s, std::move(nv), 1);
}

// Local steps: every local row is in the one group whose sums are all-reduced.
void sums_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Dims d = dims_on(g.tensor(op.inputs[0]), op, s);
  Tensor out = ops::out_like(g, op);
  std::vector<double> sums(static_cast<size_t>(d.c)), mu;
  if (op.inputs.size() > 1) {  // the second pass: deviations from the group's mean
    mu.resize(sums.size());
    join(in(s, op, 1).data.data(), d.c, mu.data());
    for (double& m : mu) m /= static_cast<double>(op.attrs.count);
  }
  sums_of(in(s, op, 0).data.data(), d, 0, d.b, mu.empty() ? nullptr : mu.data(), sums.data());
  split(sums.data(), d.c, out.data.data());
  ops::put(g, op, s, std::move(out));
}

void finish_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const TensorInfo& m = g.tensor(op.outputs[0]);
  Tensor mean = ops::out_like(g, op, 0), rstd = ops::out_like(g, op, 1);
  std::vector<double> sum(static_cast<size_t>(m.shape[1])), m2(sum.size());
  join(in(s, op, 0).data.data(), m.shape[1], sum.data());
  join(in(s, op, 1).data.data(), m.shape[1], m2.data());
  finish(sum.data(), m2.data(), m.shape[1], static_cast<double>(op.attrs.count), op.attrs.eps, 0, m.shape[0], mean, rstd);
  ops::put(g, op, s, std::move(mean), 0);
  ops::put(g, op, s, std::move(rstd), 1);
}

void grad_sums_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Dims d = dims_on(g.tensor(op.inputs[1]), op, s);
  Tensor out = ops::out_like(g, op);
  std::vector<double> sums(static_cast<size_t>(2 * d.c));
  grad_sums(in(s, op, 0).data.data(), in(s, op, 1).data.data(), in(s, op, 2), in(s, op, 3), d, 0, d.b, sums.data());
  split(sums.data(), 2 * d.c, out.data.data());
  ops::put(g, op, s, std::move(out));
}

void grad_finish_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Dims d = dims_on(g.tensor(op.inputs[1]), op, s);
  std::vector<double> group(static_cast<size_t>(2 * d.c));
  join(in(s, op, 5).data.data(), 2 * d.c, group.data());
  Tensor dx = ops::out_like(g, op, 0), dgamma = ops::out_like(g, op, 1), dbeta = ops::out_like(g, op, 2);
  grad_dx(in(s, op, 0).data.data(), in(s, op, 1).data.data(), in(s, op, 2), in(s, op, 3), in(s, op, 4),
          group.data(), static_cast<double>(op.attrs.count), d, 0, d.b, dx);
  // The group's sums in fp32, a 1/k share from each of its k devices (attrs.dim = k, a power of two divides
  // exactly): the gradient all-reduce adds each group's once, as the single-device step does.
  const double k = static_cast<double>(op.attrs.dim);
  for (int64_t c = 0; c < d.c; ++c) {
    dbeta.data[c] = static_cast<float>(static_cast<float>(group[c]) / k);
    dgamma.data[c] = static_cast<float>(static_cast<float>(group[d.c + c]) / k);
  }
  ops::put(g, op, s, std::move(dx), 0);
  ops::put(g, op, s, std::move(dgamma), 1);
  ops::put(g, op, s, std::move(dbeta), 2);
}

// ---- gradient ----
std::vector<TensorId> stats_grad(GraphBuilder&, const Op&, const std::vector<TensorId>&) {
  return {-1};  // the statistics' gradient flows through BatchNormApply's rule (BatchNormGrad)
}

// d/dx of the whole normalization: BatchNormGrad takes dy of the apply and reads the statistics' input.
std::vector<TensorId> apply_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  if (dy[0] < 0) return {-1, -1, -1, -1, -1};
  ModelGraph& g = b.graph();
  const OpId stats = g.producer(op.inputs[1]);
  ops::check(stats >= 0 && g.op(stats).kind == OpKind::BatchNormStats, op, "batch_norm_apply without its statistics");
  const TensorId x = g.op(stats).inputs[0];
  const TensorInfo xi = g.tensor(x), gi = g.tensor(op.inputs[3]), bi = g.tensor(op.inputs[4]);
  Op grad;
  grad.name = op.name + ".grad";
  grad.kind = OpKind::BatchNormGrad;
  grad.phase = Phase::Backward;
  grad.attrs = g.op(stats).attrs;
  grad.inputs = {dy[0], x, op.inputs[1], op.inputs[2], op.inputs[3]};
  const TensorId dx = g.add_tensor({op.name + ".dx", xi.shape, xi.dtype, TensorRole::Gradient});
  const TensorId dgamma = g.add_tensor({op.name + ".dgamma", gi.shape, gi.dtype, TensorRole::Gradient});
  const TensorId dbeta = g.add_tensor({op.name + ".dbeta", bi.shape, bi.dtype, TensorRole::Gradient});
  grad.outputs = {dx, dgamma, dbeta};
  g.add_op(grad);
  // x's gradient comes through here: the apply's own input x (the same tensor) gets none a second time.
  return {op.inputs[0] == x ? dx : -1, -1, -1, dgamma, dbeta};
}

// ---- partitioning ----
struct Split {
  ShardSpec x, rows;
  std::vector<std::string> axes, spatial;  // the batch's axes; the rows' (H) axes
  int64_t devices = 1, local = 0, group = 0, spatial_devices = 1;
  std::vector<OpAttrs::Padded> padded;  // the rows, when the spatial axes split them unevenly
  // Whether a group's sums come from several devices (its examples span replicas, or its rows are split).
  bool reduces() const { return local % group != 0 || !spatial.empty(); }
};

Split split_of(const OpShardingQuery& q, TensorId xt, const ShardSpec& in) {
  Split s;
  const TensorInfo& x = q.g.tensor(xt);
  const ShardSpec settled = sharding::settled(in);
  s.x = ShardSpec::replicated(4);
  s.x.dims[0] = settled.dims[0];
  s.x.dims[1] = settled.dims[1];
  s.rows = ShardSpec::replicated(2);
  s.rows.dims[0] = s.x.dims[0];
  s.axes = s.x.dims[0];
  s.spatial = s.x.dims[1];
  s.devices = q.mesh.size(s.axes);
  s.spatial_devices = q.mesh.size(s.spatial);
  s.group = group_of(q.op, x.shape[0]);
  if (x.shape[0] % s.devices != 0)
    throw Error(Err::BadSharding, strprintf("batch norm '%s': the batch of %lld is not a multiple of the %lld devices "
                                            "splitting it; choose a batch the data axis divides",
                                            q.op.name.c_str(), static_cast<long long>(x.shape[0]),
                                            static_cast<long long>(s.devices)));
  s.local = x.shape[0] / s.devices;
  if (s.local % s.group != 0 && s.group % s.local != 0)
    throw Error(Err::BadSharding,
                strprintf("batch norm '%s': groups of %lld examples do not align with the %lld examples each device "
                          "holds; choose a group that divides or is a multiple of it",
                          q.op.name.c_str(), static_cast<long long>(s.group), static_cast<long long>(s.local)));
  if (s.spatial.empty()) return s;
  s.padded = sharding::padding(x.shape, s.x, q.mesh, 2);
  if (s.local > s.group)
    throw Error(Err::BadSharding,
                strprintf("batch norm '%s': with its rows split, a device's %lld examples must be one group or part "
                          "of one, not %lld groups of %lld; choose workload.bn_batch of at least %lld",
                          q.op.name.c_str(), static_cast<long long>(s.local),
                          static_cast<long long>(s.local / s.group), static_cast<long long>(s.group),
                          static_cast<long long>(s.local)));
  return s;
}

// The all-reduce over the devices of one group: the first `block` consecutive devices along the batch's axes, and
// every device along the rows' axes (the fastest ranks).
OpAttrs group_reduce(const Split& s) {
  OpAttrs a;
  a.axes = s.axes;
  a.axes.insert(a.axes.end(), s.spatial.begin(), s.spatial.end());
  const int64_t k = s.group / s.local;
  a.group_block = k >= s.devices ? 0 : k * s.spatial_devices;
  return a;
}

OpSharding stats_rule(const OpShardingQuery& q) {
  const Split s = split_of(q, q.op.inputs[0], q.in[0]);
  OpSharding r;
  r.attrs = q.op.attrs;
  r.in = {s.x};
  r.out = {s.rows, s.rows};
  if (!s.reduces()) return r;
  const TensorInfo& x = q.g.tensor(q.op.inputs[0]);
  const int64_t c = x.shape[3];
  // Two passes, each summed over the group's devices: the mean, then the squared deviations from it. Slots: 0 x,
  // 1 mean, 2 rstd, 3 and 4 the sums of x (the device's, the group's), 5 and 6 those of the squared deviations.
  r.scratch = {{q.op.name + ".sum", {2, c}, DType::F32},
               {q.op.name + ".sum.group", {2, c}, DType::F32},
               {q.op.name + ".m2", {2, c}, DType::F32},
               {q.op.name + ".m2.group", {2, c}, DType::F32}};
  OpAttrs fin = q.op.attrs;
  fin.count = s.group * x.shape[1] * x.shape[2];
  fin.padded = s.padded;
  r.steps = {{"sum", OpKind::BatchNormSums, {0}, {3}, fin},
             {"", OpKind::AllReduce, {3}, {4}, group_reduce(s)},
             {"m2", OpKind::BatchNormSums, {0, 4}, {5}, fin},
             {"", OpKind::AllReduce, {5}, {6}, group_reduce(s)},
             {"finish", OpKind::BatchNormFinish, {4, 6}, {1, 2}, fin}};
  return r;
}

OpSharding apply_rule(const OpShardingQuery& q) {
  const Split s = split_of(q, q.op.inputs[0], q.in[0]);
  OpSharding r;
  r.attrs = q.op.attrs;
  r.in = {s.x, s.rows, s.rows, ShardSpec::replicated(1), ShardSpec::replicated(1)};
  r.out = {s.x};
  r.attrs.padded = s.padded;  // the padded rows stay zero
  return r;
}

OpSharding grad_rule(const OpShardingQuery& q) {
  const Split s = split_of(q, q.op.inputs[1], q.in[1]);
  OpSharding r;
  r.attrs = q.op.attrs;
  r.in = {s.x, s.x, s.rows, s.rows, ShardSpec::replicated(1)};
  ShardSpec p = ShardSpec::replicated(1);
  p.partial = sharding::reduced_axes(s.x, {0});
  r.out = {s.x, p, p};
  if (!s.reduces()) return r;
  const TensorInfo& x = q.g.tensor(q.op.inputs[1]);
  const int64_t c = x.shape[3];
  // Slots: 0 dy, 1 x, 2 mean, 3 rstd, 4 gamma, 5 dx, 6 dgamma, 7 dbeta, 8 local sums, 9 group sums.
  r.scratch = {{q.op.name + ".sums", {4, c}, DType::F32}, {q.op.name + ".sums.group", {4, c}, DType::F32}};
  OpAttrs fin = q.op.attrs;
  fin.count = s.group * x.shape[1] * x.shape[2];
  fin.dim = s.group / s.local;
  fin.padded = s.padded;
  OpAttrs sums = q.op.attrs;
  sums.padded = s.padded;
  r.steps = {{"sums", OpKind::BatchNormGradSums, {0, 1, 2, 3}, {8}, sums},
             {"", OpKind::AllReduce, {8}, {9}, group_reduce(s)},
             {"finish", OpKind::BatchNormGradFinish, {0, 1, 2, 3, 4, 9}, {5, 6, 7}, fin}};
  return r;
}

OpSharding moving_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec rows = ShardSpec::replicated(2);
  rows.dims[0] = sharding::settled(q.in[2]).dims[0];
  r.in = {rows, rows, rows, rows};
  r.out = {rows, rows};
  return r;
}

const bool registered =
    register_op_kind({OpKind::BatchNormStats, "batch_norm_stats", Unit::Vpu, stats_cost, stats_kernel, stats_grad,
                      stats_rule}) &&
    register_op_kind({OpKind::BatchNormApply, "batch_norm_apply", Unit::Vpu, apply_cost, apply_kernel, apply_grad,
                      apply_rule}) &&
    register_op_kind({OpKind::BatchNormGrad, "batch_norm_grad", Unit::Vpu, grad_cost, grad_kernel, nullptr, grad_rule}) &&
    register_op_kind({OpKind::BatchNormMoving, "batch_norm_moving", Unit::Vpu, moving_cost, moving_kernel, nullptr,
                      moving_rule}) &&
    register_op_kind({OpKind::BatchNormSums, "batch_norm_sums", Unit::Vpu, sums_cost, sums_kernel, nullptr, nullptr}) &&
    register_op_kind({OpKind::BatchNormFinish, "batch_norm_finish", Unit::Vpu, finish_cost, finish_kernel, nullptr,
                      nullptr}) &&
    register_op_kind({OpKind::BatchNormGradSums, "batch_norm_grad_sums", Unit::Vpu, grad_sums_cost, grad_sums_kernel,
                      nullptr, nullptr}) &&
    register_op_kind({OpKind::BatchNormGradFinish, "batch_norm_grad_finish", Unit::Vpu, grad_finish_cost,
                      grad_finish_kernel, nullptr, nullptr});

}  // namespace
}  // namespace podsim

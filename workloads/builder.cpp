#include "workloads/builder.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "workloads/einsum.h"
#include "workloads/ops/op_kind.h"

namespace podsim {

namespace {

[[noreturn]] void shape_error(const std::string& op, const std::string& what) {
  throw Error(Err::Internal, "building op '" + op + "': " + what);
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

}  // namespace

GraphBuilder::GraphBuilder(ModelGraph& g, DType dtype) : m_g(g), m_dtype(dtype), m_weight_dtype(dtype) {}

GraphBuilder::GraphBuilder(ModelGraph& g, DType dtype, DType weight_dtype)
    : m_g(g), m_dtype(dtype), m_weight_dtype(weight_dtype) {}

TensorId GraphBuilder::compute_copy(TensorId t) {
  const TensorInfo& info = m_g.tensor(t);
  if (m_phase != Phase::Forward || info.role != TensorRole::Parameter || info.dtype == m_dtype) return t;
  auto it = m_copies.find({t, m_cell});
  if (it != m_copies.end()) return it->second;
  // One copy per cell that reads the parameter (a tied embedding is read by the first and the last), so a pipeline
  // stage casts its own and no copy crosses stages.
  std::string name = info.name + "." + dtype_name(m_dtype);
  for (const auto& [key, copy] : m_copies)
    if (key.first == t) {
      name += ".cell" + std::to_string(m_cell);
      break;
    }
  const std::vector<int64_t> shape = info.shape;
  TensorId copy = emit(name, OpKind::Convert, Phase::Forward, {t}, shape, m_dtype, TensorRole::WeightCopy);
  m_copies[{t, m_cell}] = copy;
  return copy;
}

TensorId GraphBuilder::emit(const std::string& name, OpKind kind, Phase phase, std::vector<TensorId> inputs,
                            std::vector<int64_t> out_shape, DType out_dtype, TensorRole role, OpAttrs attrs) {
  TensorInfo t;
  t.name = name;
  t.shape = std::move(out_shape);
  t.dtype = out_dtype;
  t.role = role;
  TensorId out = m_g.add_tensor(std::move(t));
  Op op;
  op.name = name;
  op.kind = kind;
  op.phase = phase;
  op.inputs = std::move(inputs);
  op.outputs = {out};
  op.attrs = std::move(attrs);
  op.cell = m_cell;
  m_g.add_op(std::move(op));
  return out;
}

TensorId GraphBuilder::forward(const std::string& name, OpKind kind, std::vector<TensorId> inputs,
                               std::vector<int64_t> shape, DType dtype, OpAttrs attrs) {
  for (TensorId& t : inputs) t = compute_copy(t);
  TensorRole role = m_phase == Phase::Backward ? TensorRole::Gradient : TensorRole::Activation;
  return emit(name, kind, m_phase, std::move(inputs), std::move(shape), dtype, role, std::move(attrs));
}

TensorId GraphBuilder::param(const std::string& name, std::vector<int64_t> shape) {
  return param(name, std::move(shape), m_weight_dtype);
}

TensorId GraphBuilder::param(const std::string& name, std::vector<int64_t> shape, DType dtype) {
  if (auto it = m_param_names.find(name); it != m_param_names.end()) {
    if (m_g.tensor(it->second).shape != shape || m_g.tensor(it->second).dtype != dtype)
      shape_error(name, "parameter asked for again as " + shape_text(shape) + " " + dtype_name(dtype) + ", made as " +
                            m_g.tensor(it->second).shape_text() + " " + dtype_name(m_g.tensor(it->second).dtype));
    return it->second;
  }
  TensorId id = m_g.add_tensor({name, std::move(shape), dtype, TensorRole::Parameter});
  m_params.push_back(id);
  m_param_names[name] = id;
  return id;
}

TensorId GraphBuilder::input(const std::string& name, std::vector<int64_t> shape, DType dtype) {
  return m_g.add_tensor({name, std::move(shape), dtype, TensorRole::Input});
}

TensorId GraphBuilder::label(const std::string& name, std::vector<int64_t> shape) {
  return m_g.add_tensor({name, std::move(shape), DType::I32, TensorRole::Label});
}

TensorId GraphBuilder::einsum(TensorId a, TensorId b, const std::string& equation, const std::string& name) {
  a = compute_copy(a);
  b = compute_copy(b);
  Einsum e = Einsum::parse(equation);
  const auto& sa = m_g.tensor(a).shape;
  const auto& sb = m_g.tensor(b).shape;
  if (sa.size() != e.lhs.size() || sb.size() != e.rhs.size())
    shape_error(name, "einsum '" + equation + "' of " + shape_text(sa) + " and " + shape_text(sb));
  OpAttrs at;
  at.equation = equation;
  return forward(name, OpKind::MatMul, {a, b}, e.out_shape(sa, sb), m_g.tensor(a).dtype, at);
}

TensorId GraphBuilder::matmul(TensorId a, TensorId b, const std::string& name, bool trans_a, bool trans_b) {
  if (m_g.tensor(a).shape.size() != 2 || m_g.tensor(b).shape.size() != 2)
    shape_error(name, "matmul takes rank-2 operands");
  std::string eq = std::string(trans_a ? "km" : "mk") + "," + (trans_b ? "nk" : "kn") + "->mn";
  return einsum(a, b, eq, name);
}

TensorId GraphBuilder::add(TensorId a, TensorId b, const std::string& name) {
  if (m_g.tensor(a).shape != m_g.tensor(b).shape)
    shape_error(name, "add of " + shape_text(m_g.tensor(a).shape) + " and " + shape_text(m_g.tensor(b).shape));
  return forward(name, OpKind::Add, {a, b}, m_g.tensor(a).shape, m_g.tensor(a).dtype);
}

TensorId GraphBuilder::scale(TensorId a, double alpha, const std::string& name) {
  OpAttrs at;
  at.alpha = alpha;
  return forward(name, OpKind::Scale, {a}, m_g.tensor(a).shape, m_g.tensor(a).dtype, at);
}

void GraphBuilder::set_param_kind(TensorId p, ParamKind kind) {
  if (m_g.tensor(p).role == TensorRole::Parameter) m_g.tensor(p).param_kind = kind;
}

TensorId GraphBuilder::bias_add(TensorId x, TensorId bias, const std::string& name) {
  set_param_kind(bias, ParamKind::Bias);
  const auto& sx = m_g.tensor(x).shape;
  const auto& sb = m_g.tensor(bias).shape;
  if (sb.empty() || sb.size() > sx.size() || !std::equal(sb.begin(), sb.end(), sx.end() - static_cast<ptrdiff_t>(sb.size())))
    shape_error(name, "bias " + shape_text(sb) + " for " + shape_text(sx));
  return forward(name, OpKind::BiasAdd, {x, bias}, sx, m_g.tensor(x).dtype);
}

TensorId GraphBuilder::relu(TensorId x, const std::string& name) {
  return forward(name, OpKind::Relu, {x}, m_g.tensor(x).shape, m_g.tensor(x).dtype);
}

TensorId GraphBuilder::gelu(TensorId x, const std::string& name) {
  return forward(name, OpKind::Gelu, {x}, m_g.tensor(x).shape, m_g.tensor(x).dtype);
}

TensorId GraphBuilder::mul(TensorId a, TensorId b, const std::string& name) {
  if (m_g.tensor(a).shape != m_g.tensor(b).shape)
    shape_error(name, "mul of " + shape_text(m_g.tensor(a).shape) + " and " + shape_text(m_g.tensor(b).shape));
  return forward(name, OpKind::Mul, {a, b}, m_g.tensor(a).shape, m_g.tensor(a).dtype);
}

TensorId GraphBuilder::silu(TensorId x, const std::string& name) {
  return forward(name, OpKind::Silu, {x}, m_g.tensor(x).shape, m_g.tensor(x).dtype);
}

TensorId GraphBuilder::rope(TensorId x, const std::string& name) {
  const auto& sx = m_g.tensor(x).shape;
  if (sx.size() < 3 || sx.back() % 2 != 0) shape_error(name, "rope of " + shape_text(sx) + " (needs [B, S, ..., E], E even)");
  return forward(name, OpKind::Rope, {x}, sx, m_g.tensor(x).dtype);
}

TensorId GraphBuilder::layer_norm(TensorId x, TensorId gamma, TensorId beta, const std::string& name, double eps) {
  set_param_kind(gamma, ParamKind::Norm);
  set_param_kind(beta, ParamKind::Norm);
  gamma = compute_copy(gamma);
  beta = compute_copy(beta);
  const TensorInfo xi = m_g.tensor(x);
  int64_t d = xi.shape.back();
  if (m_g.tensor(gamma).shape != std::vector<int64_t>{d} || m_g.tensor(beta).shape != std::vector<int64_t>{d})
    shape_error(name, "gamma and beta must be [" + std::to_string(d) + "]");
  // Per-row statistics, shaped like x without its last dimension.
  std::vector<int64_t> rows(xi.shape.begin(), xi.shape.end() - 1);
  if (rows.empty()) rows = {1};
  TensorRole role = m_phase == Phase::Backward ? TensorRole::Gradient : TensorRole::Activation;
  TensorId y = m_g.add_tensor({name, xi.shape, xi.dtype, role});
  TensorId mean = m_g.add_tensor({name + ".mean", rows, DType::F32, role});
  TensorId rstd = m_g.add_tensor({name + ".rstd", rows, DType::F32, role});
  Op op;
  op.name = name;
  op.kind = OpKind::LayerNorm;
  op.phase = m_phase;
  op.inputs = {x, gamma, beta};
  op.outputs = {y, mean, rstd};
  op.attrs.eps = eps;
  op.cell = m_cell;
  m_g.add_op(op);
  return y;
}

TensorId GraphBuilder::rms_norm(TensorId x, TensorId gamma, const std::string& name, double eps) {
  set_param_kind(gamma, ParamKind::Norm);
  gamma = compute_copy(gamma);
  const TensorInfo xi = m_g.tensor(x);
  int64_t d = xi.shape.back();
  if (m_g.tensor(gamma).shape != std::vector<int64_t>{d}) shape_error(name, "gamma must be [" + std::to_string(d) + "]");
  std::vector<int64_t> rows(xi.shape.begin(), xi.shape.end() - 1);
  if (rows.empty()) rows = {1};
  TensorRole role = m_phase == Phase::Backward ? TensorRole::Gradient : TensorRole::Activation;
  TensorId y = m_g.add_tensor({name, xi.shape, xi.dtype, role});
  TensorId rstd = m_g.add_tensor({name + ".rstd", rows, DType::F32, role});
  Op op;
  op.name = name;
  op.kind = OpKind::RmsNorm;
  op.phase = m_phase;
  op.inputs = {x, gamma};
  op.outputs = {y, rstd};
  op.attrs.eps = eps;
  op.cell = m_cell;
  m_g.add_op(op);
  return y;
}

TensorId GraphBuilder::softmax(TensorId scores, double scale_by, bool causal, const std::string& name) {
  const auto& s = m_g.tensor(scores).shape;
  if (causal && (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2]))
    shape_error(name, "a causal softmax needs square [.., S, S] scores, got " + shape_text(s));
  OpAttrs at;
  at.alpha = scale_by;
  at.causal = causal;
  return forward(name, OpKind::Softmax, {scores}, s, m_g.tensor(scores).dtype, at);
}

TensorId GraphBuilder::flash_attention(TensorId q, TensorId k, TensorId v, double scale, bool causal,
                                       const OpAttrs::Blocks& blocks, const std::string& name) {
  const TensorInfo qi = m_g.tensor(q), ki = m_g.tensor(k);
  const bool grouped = qi.shape.size() == 5;
  const bool ok = (qi.shape.size() == 4 || grouped) && ki.shape.size() == 4 && m_g.tensor(v).shape == ki.shape &&
                  ki.shape[0] == qi.shape[0] && ki.shape[2] == qi.shape[2] && ki.shape[3] == qi.shape.back() &&
                  (!causal || ki.shape[1] == qi.shape[1]);
  if (!ok)
    shape_error(name, "flash attention takes q [B, S, H, E] (or [B, S, KV, G, E]) and k, v [B, T, H or KV, E] (T = S "
                      "when causal), got q " + shape_text(qi.shape) + ", k " + shape_text(ki.shape));
  std::vector<int64_t> rows(qi.shape.begin(), qi.shape.end() - 1);  // [B, S, heads...] -> [B, heads..., S]
  rows.erase(rows.begin() + 1);
  rows.push_back(qi.shape[1]);
  TensorRole role = m_phase == Phase::Backward ? TensorRole::Gradient : TensorRole::Activation;
  TensorId o = m_g.add_tensor({name, qi.shape, qi.dtype, role});
  TensorId lse = m_g.add_tensor({name + ".lse", rows, DType::F32, role});
  Op op;
  op.name = name;
  op.kind = OpKind::FlashAttention;
  op.phase = m_phase;
  op.inputs = {q, k, v};
  op.outputs = {o, lse};
  op.attrs.alpha = scale;
  op.attrs.causal = causal;
  op.attrs.blocks = blocks;
  op.cell = m_cell;
  m_g.add_op(op);
  return o;
}

TensorId GraphBuilder::embedding(TensorId table, TensorId ids, const std::string& name) {
  const auto& st = m_g.tensor(table).shape;
  const auto& si = m_g.tensor(ids).shape;
  if (st.size() != 2 || si.empty() || m_g.tensor(ids).dtype != DType::I32)
    shape_error(name, "embedding takes a [V, D] table and int32 ids of any shape");
  std::vector<int64_t> out = si;
  out.push_back(st[1]);
  const TensorInfo& info = m_g.tensor(table);
  if (m_phase != Phase::Forward || info.role != TensorRole::Parameter || info.dtype == m_dtype)
    return emit(name, OpKind::Embedding, m_phase, {table, ids}, out, info.dtype,
                m_phase == Phase::Backward ? TensorRole::Gradient : TensorRole::Activation);
  // Mixed precision: the rows are looked up in the master table and the rows cast, not the whole table (V x D
  // converts for B x S rows read); the table's gradient is then the master's own, in its type and sharding.
  const DType master = info.dtype;
  TensorId rows = emit(name + "." + dtype_name(master), OpKind::Embedding, m_phase, {table, ids}, out, master,
                       TensorRole::Activation);
  return emit(name, OpKind::Convert, m_phase, {rows}, out, m_dtype, TensorRole::Activation);
}

TensorId GraphBuilder::softmax_cross_entropy(TensorId logits, TensorId labels, const std::string& name) {
  const TensorInfo li = m_g.tensor(logits);
  if (li.shape.size() < 2 ||
      m_g.tensor(labels).shape != std::vector<int64_t>(li.shape.begin(), li.shape.end() - 1))
    shape_error(name, "cross-entropy takes [..., V] logits and labels of the leading shape");
  TensorId loss = m_g.add_tensor({name, {1}, DType::F32, TensorRole::Loss});
  // Each row's log-sum-exp, as its max and its sum of exponentials (fp32), is all the gradient needs beside the
  // logits (docs/model.md).
  const std::vector<int64_t> rows(li.shape.begin(), li.shape.end() - 1);
  TensorId row_max = m_g.add_tensor({name + ".row_max", rows, DType::F32, TensorRole::Activation});
  TensorId row_sum = m_g.add_tensor({name + ".row_sum", rows, DType::F32, TensorRole::Activation});
  Op op;
  op.name = name;
  op.kind = OpKind::SoftmaxCrossEntropy;
  op.phase = Phase::Loss;
  op.attrs.count = li.elements() / li.shape.back();  // the mean's denominator: every row of the step
  op.inputs = {logits, labels};
  op.outputs = {loss, row_max, row_sum};
  op.cell = m_cell;
  m_g.add_op(op);
  return loss;
}

TensorId GraphBuilder::crop(TensorId x, size_t dim, int64_t size, const std::string& name) {
  std::vector<int64_t> shape = m_g.tensor(x).shape;
  if (dim >= shape.size() || size < 1 || size > shape[dim])
    shape_error(name, "crop of dimension " + std::to_string(dim) + " of " + shape_text(shape) + " to " + std::to_string(size));
  shape[dim] = size;
  OpAttrs at;
  at.dim = static_cast<int64_t>(dim);
  return forward(name, OpKind::Slice, {x}, shape, m_g.tensor(x).dtype, at);
}

TensorId GraphBuilder::timing_signal(TensorId x, const std::string& name, int64_t grid_width) {
  const auto& sx = m_g.tensor(x).shape;
  if (sx.size() != 3) shape_error(name, "the timing signal is added to [B, S, D], got " + shape_text(sx));
  if (grid_width > 0 && (sx[1] % grid_width != 0 || sx[2] % 4 != 0))
    shape_error(name, "a 2-D signal needs S a multiple of the grid width " + std::to_string(grid_width) +
                          " and D a multiple of 4, got " + shape_text(sx));
  OpAttrs at;
  at.count = grid_width;
  return forward(name, OpKind::TimingSignal, {x}, sx, m_g.tensor(x).dtype, at);
}

TensorId GraphBuilder::tanh(TensorId x, const std::string& name) {
  return forward(name, OpKind::Tanh, {x}, m_g.tensor(x).shape, m_g.tensor(x).dtype);
}

TensorId GraphBuilder::sigmoid(TensorId x, const std::string& name) {
  return forward(name, OpKind::Sigmoid, {x}, m_g.tensor(x).shape, m_g.tensor(x).dtype);
}

TensorId GraphBuilder::channel_scale(TensorId x, TensorId s, const std::string& name) {
  const auto& xs = m_g.tensor(x).shape;
  const auto& ss = m_g.tensor(s).shape;
  if (xs.size() != 4 || ss.size() != 2 || ss[0] != xs[0] || ss[1] != xs[3])
    shape_error(name, "channel_scale of " + shape_text(xs) + " by " + shape_text(ss) + " (needs [B, H, W, C] and [B, C])");
  return forward(name, OpKind::ChannelScale, {x, s}, xs, m_g.tensor(x).dtype);
}

TensorId GraphBuilder::gather_positions(TensorId x, TensorId positions, const std::string& name) {
  const auto& sx = m_g.tensor(x).shape;
  const auto& sp = m_g.tensor(positions).shape;
  if (sx.size() != 3 || sp.size() != 2 || sp[0] != sx[0] || m_g.tensor(positions).dtype != DType::I32)
    shape_error(name, "gather_positions takes x [B, S, D] and int32 positions [B, P], got " + shape_text(sx) + " and " +
                          shape_text(sp));
  return forward(name, OpKind::GatherPositions, {x, positions}, {sx[0], sp[1], sx[2]}, m_g.tensor(x).dtype);
}

TensorId GraphBuilder::lstm(TensorId xw, TensorId wh, bool reverse, const std::string& name) {
  wh = compute_copy(wh);
  const TensorInfo xi = m_g.tensor(xw);
  const auto& sw = m_g.tensor(wh).shape;
  const bool ok = xi.shape.size() == 4 && xi.shape[2] == 4 && sw.size() == 3 && sw[0] == xi.shape[3] && sw[1] == 4 &&
                  sw[2] == xi.shape[3];
  if (!ok)
    shape_error(name, "an LSTM takes xw [B, T, 4, H] and wh [H, 4, H], got " + shape_text(xi.shape) + " and " +
                          shape_text(sw));
  const std::vector<int64_t> rows = {xi.shape[0], xi.shape[1], xi.shape[3]};
  TensorRole role = m_phase == Phase::Backward ? TensorRole::Gradient : TensorRole::Activation;
  Op op;
  op.name = name;
  op.kind = OpKind::LstmScan;
  op.phase = m_phase;
  op.inputs = {xw, wh};
  op.outputs = {m_g.add_tensor({name, rows, xi.dtype, role}), m_g.add_tensor({name + ".c", rows, xi.dtype, role}),
                m_g.add_tensor({name + ".gates", xi.shape, xi.dtype, role})};
  op.attrs.shift = reverse ? -1 : 1;
  op.cell = m_cell;
  m_g.add_op(op);
  return op.outputs[0];
}

TensorId GraphBuilder::additive_attention(TensorId q, TensorId k, TensorId bias, TensorId v, TensorId g,
                                          const std::string& name) {
  set_param_kind(bias, ParamKind::Bias);
  bias = compute_copy(bias);
  v = compute_copy(v);
  g = compute_copy(g);
  const auto& sq = m_g.tensor(q).shape;
  const auto& sk = m_g.tensor(k).shape;
  auto vector_of = [&](TensorId t, int64_t n) { return m_g.tensor(t).shape.size() == 1 && m_g.tensor(t).shape[0] == n; };
  if (sq.size() != 3 || sk.size() != 3 || sq[0] != sk[0] || sq[2] != sk[2] || !vector_of(bias, sq[2]) ||
      !vector_of(v, sq[2]) || !vector_of(g, 1))
    shape_error(name, "additive attention takes q [B, T, H], k [B, S, H], bias and v [H] and g [1], got q " +
                          shape_text(sq) + ", k " + shape_text(sk));
  return forward(name, OpKind::AdditiveAttention, {q, k, bias, v, g}, {sq[0], sq[1], sk[1]}, m_g.tensor(q).dtype);
}

TensorId GraphBuilder::reshape(TensorId x, std::vector<int64_t> shape, const std::string& name) {
  const TensorInfo xi = m_g.tensor(x);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n != xi.elements()) shape_error(name, "reshape of " + shape_text(xi.shape) + " into " + shape_text(shape));
  return forward(name, OpKind::Reshape, {x}, std::move(shape), xi.dtype);
}

GraphBuilder::Gating GraphBuilder::top2_gating(TensorId logits, int64_t capacity, double aux_coefficient,
                                               bool sample_second, uint64_t seed, const std::string& name) {
  const TensorInfo li = m_g.tensor(logits);
  if (li.shape.size() != 3 || li.shape[2] < 2 || capacity < 1)
    shape_error(name, "top-2 gating takes [G, S, E] logits with E >= 2 and a capacity >= 1, got " +
                          shape_text(li.shape) + " and capacity " + std::to_string(capacity));
  const int64_t G = li.shape[0], S = li.shape[1], E = li.shape[2];
  TensorRole role = m_phase == Phase::Backward ? TensorRole::Gradient : TensorRole::Activation;
  Gating out;
  out.combine = m_g.add_tensor({name + ".combine", {G, S, E, capacity}, li.dtype, role});
  out.dispatch = m_g.add_tensor({name + ".dispatch", {G, S, E, capacity}, li.dtype, role});
  out.aux_loss = m_g.add_tensor({name + ".aux_loss", {1}, DType::F32, role});
  out.routes = m_g.add_tensor({name + ".routes", {G, S, 4}, DType::I32, role});
  m_g.tensor(out.dispatch).stop_gradient = true;
  m_g.tensor(out.routes).stop_gradient = true;
  Op op;
  op.name = name;
  op.kind = OpKind::Top2Gating;
  op.phase = m_phase;
  op.inputs = {logits};
  op.outputs = {out.combine, out.dispatch, out.aux_loss, out.routes};
  op.attrs.alpha = aux_coefficient;
  op.attrs.count = G;
  op.attrs.sample_second = sample_second;
  op.attrs.seed = seed;
  m_g.add_op(op);
  return out;
}

bool GraphBuilder::wants_grad(TensorId t) const {
  const TensorInfo& i = m_g.tensor(t);
  return i.role != TensorRole::Input && i.role != TensorRole::Label && i.dtype != DType::I32 && !i.stop_gradient;
}

TensorId GraphBuilder::accumulate(const std::vector<TensorId>& parts, const std::string& name) {
  TensorId acc = parts.front();
  for (size_t i = 1; i < parts.size(); ++i)
    acc = emit(name + ".sum" + std::to_string(i), OpKind::Add, Phase::Backward, {acc, parts[i]},
               m_g.tensor(parts[i]).shape, m_g.tensor(parts[i]).dtype, TensorRole::Gradient);
  return acc;
}

void GraphBuilder::backward(TensorId loss) {
  const std::vector<OpId> order = m_g.topological_order();
  std::map<TensorId, std::vector<TensorId>> parts;
  parts[loss] = {loss};  // d(loss)/d(loss) = 1: the rules of the loss op do not read it
  Phase saved = m_phase;
  m_phase = Phase::Backward;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Op op = m_g.op(*it);  // copy: rules add ops, which may move the op table
    if (op.phase != Phase::Forward && op.phase != Phase::Loss) continue;
    m_cell = op.cell;  // its gradient ops belong to its cell
    std::vector<TensorId> out_grads;
    bool any = false;
    for (TensorId t : op.outputs) {
      auto p = parts.find(t);
      TensorId gsum = -1;
      if (p != parts.end() && !p->second.empty()) gsum = t == loss ? loss : accumulate(p->second, m_g.tensor(t).name + ".grad");
      out_grads.push_back(gsum);
      any = any || gsum >= 0;
    }
    if (!any) continue;
    const OpKindDef* def = find_op_kind(op.kind);
    if (!def || !def->grad) throw Error(Err::Internal, std::string("no gradient rule for op '") + op.name + "'");
    const size_t before = m_g.num_ops();
    std::vector<TensorId> in_grads = def->grad(*this, op, out_grads);
    for (size_t i = before; i < m_g.num_ops(); ++i)  // rules that add ops themselves: their ops join the cell too
      if (m_g.op(static_cast<OpId>(i)).cell < 0) m_g.op(static_cast<OpId>(i)).cell = op.cell;
    for (size_t i = 0; i < op.inputs.size() && i < in_grads.size(); ++i) {
      TensorId x = op.inputs[i];
      if (in_grads[i] < 0 || !wants_grad(x)) continue;  // no gradient for the batch, ids, stop-gradient values
      parts[x].push_back(in_grads[i]);
    }
  }
  for (TensorId p : m_params) {
    auto it = parts.find(p);
    if (it == parts.end() || it->second.empty()) continue;
    m_cell = m_g.consumers(p).empty() ? -1 : m_g.op(m_g.consumers(p).front()).cell;
    TensorId gsum = accumulate(it->second, m_g.tensor(p).name + ".grad");
    m_grad[p] = gsum;
  }
  // Give parameter gradients their parameter's name, for tensors/*.npy and the op table.
  for (auto& [p, gid] : m_grad) {
    if (m_g.producer(gid) >= 0 && m_g.consumers(gid).empty()) m_g.tensor(gid).name = m_g.tensor(p).name + ".grad";
  }
  m_phase = saved;
}

int32_t GraphBuilder::param_cell(TensorId p) const {
  return m_g.consumers(p).empty() ? -1 : m_g.op(m_g.consumers(p).front()).cell;
}

TensorId GraphBuilder::grad_of(TensorId t) const {
  auto it = m_grad.find(t);
  return it == m_grad.end() ? -1 : it->second;
}

}  // namespace podsim

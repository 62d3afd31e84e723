// The optimizer step of a built graph (GraphBuilder::optimizer, workloads/builder.h): the batch norms' moving
// averages, global-norm clipping and one update op per parameter (the update rules: workloads/ops/optimizer.cpp).
#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"
#include "workloads/builder.h"
#include "workloads/ops/op_kind.h"

namespace podsim {

void GraphBuilder::optimizer(const OptimizerConfig& cfg) {
  for (OpId id : m_bn_stats) {  // batch-norm moving averages: state of the step, updated with the weights
    const Op stats = m_g.op(id);
    const TensorInfo mean = m_g.tensor(stats.outputs[0]);
    const std::string n = stats.name.substr(0, stats.name.size() - std::string(".stats").size());
    Op op;
    op.name = n + ".moving";
    op.kind = OpKind::BatchNormMoving;
    op.phase = Phase::Optimizer;
    op.cell = stats.cell;
    op.attrs = stats.attrs;
    const TensorId mm = m_g.add_tensor({n + ".moving_mean", mean.shape, DType::F32, TensorRole::OptimizerState});
    const TensorId mv = m_g.add_tensor({n + ".moving_var", mean.shape, DType::F32, TensorRole::OptimizerState});
    op.inputs = {mm, mv, stats.outputs[0], stats.outputs[1]};
    op.outputs = {m_g.add_tensor({n + ".moving_mean.new", mean.shape, DType::F32, TensorRole::Updated, mm}),
                  m_g.add_tensor({n + ".moving_var.new", mean.shape, DType::F32, TensorRole::Updated, mv})};
    m_g.add_op(op);
  }
  // Global-norm clipping: each gradient's squared norm, then the factor every update reads.
  TensorId clip = -1;
  if (cfg.clip_norm > 0) {
    Op factor;
    for (TensorId p : m_params) {
      auto it = m_grad.find(p);
      if (it == m_grad.end()) continue;
      const std::string n = m_g.tensor(p).name + ".grad.sq";
      Op op;
      op.name = n;
      op.kind = OpKind::GradSquaredNorm;
      op.phase = Phase::Optimizer;
      op.cell = param_cell(p);
      op.inputs = {it->second};
      op.outputs = {m_g.add_tensor({n, {1}, DType::F32, TensorRole::Activation})};
      factor.inputs.push_back(op.outputs.front());
      m_g.add_op(op);
    }
    factor.name = "grad_clip.factor";
    factor.kind = OpKind::ClipFactor;
    factor.phase = Phase::Optimizer;
    factor.attrs.alpha = cfg.clip_norm;
    factor.outputs = {m_g.add_tensor({factor.name, {1}, DType::F32, TensorRole::Activation})};
    clip = factor.outputs.front();
    if (!factor.inputs.empty()) m_g.add_op(factor);
  }
  auto with_clip = [&](std::vector<TensorId> inputs) {
    if (clip >= 0) inputs.push_back(clip);
    return inputs;
  };
  OpAttrs at;
  at.alpha = cfg.learning_rate;
  const bool adam = cfg.kind == Optimizer::Adam || cfg.kind == Optimizer::Lamb || cfg.kind == Optimizer::AdamW;
  at.beta1 = adam ? cfg.beta1 : cfg.momentum;
  at.beta2 = cfg.kind == Optimizer::RmsProp ? cfg.rmsprop_decay : cfg.beta2;
  at.eps = cfg.eps;
  at.step = cfg.step;
  at.eta = cfg.lars_eta;
  at.weight_decay = cfg.weight_decay;
  // LARS and LAMB: the squared norms of every weight (and its gradient, or its update) first, then the updates, so
  // that with the weights sharded the small all-reduces of the norms are all ready before the first update needs
  // one and the gradient combiner (partition/combine.h) can issue them as one collective. LAMB's first kernel also
  // writes the new moments, which its update reads.
  std::map<TensorId, TensorId> norms;
  std::map<TensorId, std::pair<TensorId, TensorId>> moments;
  if (cfg.kind == Optimizer::Lars || cfg.kind == Optimizer::Lamb)
    for (TensorId p : m_params) {
      auto it = m_grad.find(p);
      if (it == m_grad.end() || m_g.tensor(p).param_kind != ParamKind::Weight) continue;
      const TensorInfo w = m_g.tensor(p);
      Op op;
      op.name = w.name + (cfg.kind == Optimizer::Lars ? ".norms" : ".moments");
      op.kind = cfg.kind == Optimizer::Lars ? OpKind::LarsNorms : OpKind::LambMoments;
      op.phase = Phase::Optimizer;
      op.cell = param_cell(p);
      op.attrs = at;
      op.inputs = {p, it->second};
      if (cfg.kind == Optimizer::Lamb) {
        for (const char* x : {".m", ".v"}) {
          const TensorId st = m_g.add_tensor({w.name + x, w.shape, DType::F32, TensorRole::OptimizerState});
          op.inputs.push_back(st);
          op.outputs.push_back(
              m_g.add_tensor({w.name + x + ".new", w.shape, DType::F32, TensorRole::Updated, st}));
        }
        moments[p] = {op.outputs[0], op.outputs[1]};
      }
      op.inputs = with_clip(op.inputs);
      op.outputs.push_back(m_g.add_tensor({w.name + ".norms", {2}, DType::F32, TensorRole::Activation}));
      norms[p] = op.outputs.back();
      m_g.add_op(op);
    }
  for (TensorId p : m_params) {
    auto it = m_grad.find(p);
    if (it == m_grad.end()) continue;
    const TensorInfo w = m_g.tensor(p);
    Op op;
    op.name = w.name + ".update";
    op.phase = Phase::Optimizer;
    op.cell = param_cell(p);
    op.attrs = at;
    if (moments.count(p)) {  // LAMB's update of a weight: from the new moments and the norms
      op.kind = OpKind::LambUpdate;
      op.inputs = {p, moments.at(p).first, moments.at(p).second, norms.at(p)};
      op.outputs = {m_g.add_tensor({w.name + ".new", w.shape, w.dtype, TensorRole::Updated, p})};
      m_g.add_op(op);
      continue;
    }
    std::vector<const char*> suffixes;  // its state tensors, fp32
    switch (cfg.kind) {
      case Optimizer::Sgd: op.kind = OpKind::SgdUpdate; break;
      // LAMB's excluded parameters (biases, normalization): no decay, no trust ratio, which is Adam's update.
      case Optimizer::Adam: case Optimizer::Lamb:
        op.kind = OpKind::AdamUpdate, suffixes = {".m", ".v"}, op.attrs.weight_decay = 0;
        break;
      // AdamW: Adam with the weights' decoupled decay; biases and normalization parameters take Adam's update.
      case Optimizer::AdamW:
        op.kind = OpKind::AdamUpdate, suffixes = {".m", ".v"};
        if (w.param_kind != ParamKind::Weight) op.attrs.weight_decay = 0;
        break;
      // LARS's excluded parameters (biases, normalization): momentum at the base rate, without weight decay.
      case Optimizer::Momentum: case Optimizer::Lars:
        op.kind = norms.count(p) ? OpKind::LarsUpdate : OpKind::MomentumUpdate, suffixes = {".momentum"};
        if (cfg.kind == Optimizer::Lars && !norms.count(p)) op.attrs.weight_decay = 0;  // LARS's skip list
        break;
      case Optimizer::RmsProp: op.kind = OpKind::RmsPropUpdate, suffixes = {".ms", ".momentum"}; break;
    }
    std::vector<TensorId> states;
    for (const char* x : suffixes)
      states.push_back(m_g.add_tensor({w.name + x, w.shape, DType::F32, TensorRole::OptimizerState}));
    op.inputs = {p, it->second};
    op.inputs.insert(op.inputs.end(), states.begin(), states.end());
    if (op.kind == OpKind::LarsUpdate) op.inputs.push_back(norms.at(p));
    op.inputs = with_clip(op.inputs);
    op.outputs = {m_g.add_tensor({w.name + ".new", w.shape, w.dtype, TensorRole::Updated, p})};
    for (TensorId st : states)
      op.outputs.push_back(
          m_g.add_tensor({m_g.tensor(st).name + ".new", w.shape, DType::F32, TensorRole::Updated, st}));
    m_g.add_op(op);
  }
}

}  // namespace podsim

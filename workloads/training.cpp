#include "workloads/training.h"

#include "base/error.h"
#include "base/text.h"
#include "workloads/remat.h"

namespace podsim {

namespace {

// What each of MaxText's checkpoint names tags in podsim's layers (docs/model.md).
std::string remat_custom_what(const std::string& name) {
  if (name == "decoder_layer_input") return "each layer's input (the residual stream the layer before made)";
  if (name == "query_proj") return "the queries (after their rotary embedding)";
  if (name == "key_proj") return "the keys (after their rotary embedding)";
  if (name == "value_proj") return "the values";
  if (name == "context") return "the attention's output (with a fused kernel's row statistics)";
  if (name == "out_proj") return "the attention's output projection";
  if (name == "mlpwi_0") return "a gated FFN's gate projection (ffn.gate)";
  if (name == "mlpwi_1") return "a gated FFN's up projection (ffn.up)";
  if (name == "mlpwi") return "an ungated FFN's input projection before its bias";
  return "the FFN's output projection";  // mlpwo
}

}  // namespace

std::vector<ParamSpec> training_param_specs(const std::string& default_optimizer, const std::string& default_lr) {
  std::vector<ParamSpec> specs = {
      ParamSpec::choice("workload.dtype", {"bf16", "fp32"},
                        "Storage type of weights and activations; the MXU takes bf16 inputs and accumulates in fp32.")
          .def("bf16"),
      ParamSpec::choice("workload.weight_dtype", {"bf16", "fp32", "int8", "fp8"},
                        "Storage type of the weights, their gradients and updates (default workload.dtype). fp32 with "
                        "dtype bf16 is mixed precision: fp32 master weights, each cast to a bf16 copy where the step "
                        "reads it, the copy's gradient cast back to fp32 (docs/model.md). int8 and fp8 (inference "
                        "steps only, workload.step): the layers' matmul weights quantized with one scale per output "
                        "channel, as AQT serves them (docs/serving.md).")
          .optional(),
      ParamSpec::choice("workload.optimizer", {"sgd", "adam", "momentum", "lars", "rmsprop", "lamb", "adamw"},
                        "Optimizer (docs/model.md): sgd (no state); adam (two fp32 states per weight); momentum (SGD "
                        "with momentum, one fp32 state); lars (You et al. 2017: momentum with a per-weight trust "
                        "ratio from the norms of the weight and its gradient; biases and normalization parameters "
                        "excluded; one fp32 state); rmsprop (with momentum, GPipe's AmoebaNet: two fp32 states, 12 "
                        "bytes per parameter with fp32 weights); lamb (You et al. 2019, as MLPerf's BERT: Adam's "
                        "bias-corrected direction plus weight decay, scaled per weight by the trust ratio "
                        "||w|| / ||update||; biases and normalization parameters excluded from both; two fp32 "
                        "states); adamw (Loshchilov and Hutter 2019, as big_vision trains its Vision Transformers: "
                        "Adam plus the decoupled decay weight_decay x w of each weight, not scaled by the learning "
                        "rate; biases, normalization parameters and position tables take Adam's update).")
          .def(default_optimizer),
      ParamSpec::real("workload.learning_rate", "Learning rate.").positive(100).def(default_lr),
      ParamSpec::real("workload.beta1", "Adam and LAMB first-moment decay.").range(0, 0.999999).def("0.9"),
      ParamSpec::real("workload.beta2", "Adam and LAMB second-moment decay.").range(0, 0.999999999).def("0.999"),
      ParamSpec::real("workload.eps",
                      "Adam, LAMB and RMSProp epsilon (GPipe's AmoebaNet RMSProp: 1; MLPerf's BERT LAMB: 1e-6).")
          .positive(1)
          .def("1e-8"),
      ParamSpec::real("workload.momentum", "Momentum of the momentum, lars and rmsprop optimizers.")
          .range(0, 0.999999)
          .def("0.9"),
      ParamSpec::real("workload.lars_eta", "LARS trust coefficient eta.").positive(1).def("0.001"),
      ParamSpec::real("workload.weight_decay",
                      "LARS, LAMB and AdamW weight decay (LARS: its gradient term and in the trust ratio; LAMB: "
                      "decoupled, added to the update before the trust ratio; MLPerf's BERT: 0.01; AdamW: decoupled, "
                      "w' = w - lr adam(g) - weight_decay w, big_vision's ViT: 1e-4); not on biases and "
                      "normalization parameters; momentum: an L2 term weight_decay/2 ||w||^2 of the loss on every "
                      "variable, biases and normalization parameters included (MLPerf's TPU SSD: 5e-4), its gradient "
                      "weight_decay x w added to g. Only with optimizer: momentum, lars, lamb or adamw.")
          .range(0, 1)
          .def("0"),
      ParamSpec::real("workload.clip_norm",
                      "Global-norm gradient clipping before the update (tf.clip_by_global_norm): every gradient "
                      "scaled by clip_norm / max(clip_norm, the norm of all gradients together); MLPerf's BERT 1.0, "
                      "GNMT 5.0. 0: no clipping. Every update then waits for the last gradient (docs/model.md).")
          .range(0, 1e6)
          .def("0"),
      ParamSpec::real("workload.rmsprop_decay", "RMSProp decay of the mean square.").range(0, 0.999999).def("0.9"),
      ParamSpec::choice("workload.remat",
                        {"none", "full", "dots", "names", "minimal", "save_qkv_proj", "save_out_proj",
                         "save_dot_except_mlp", "qkv_proj_offloaded", "minimal_offloaded", "custom"},
                        "Re-materialization (activation checkpointing) of every layer, as JAX's checkpoint policies: "
                        "none keeps every activation (everything_saveable); full keeps only each layer's input and "
                        "recomputes the layer's forward just before its backward (nothing_saveable); dots keeps the "
                        "outputs of matmuls without a batch dimension (projections, FFN; not attention's scores) and "
                        "recomputes the rest (dots_with_no_batch_dims_saveable); names "
                        "keeps the activations workload.remat_keep names (save_only_these_names). MaxText's "
                        "remat_policy names (Transformer): minimal (= dots), save_qkv_proj (the queries, keys and "
                        "values), save_out_proj (the attention's output projection), save_dot_except_mlp (both); "
                        "qkv_proj_offloaded and minimal_offloaded keep the queries, keys and values, or minimal's "
                        "values, in host memory "
                        "(moved over the host link after the forward makes them and back before the backward); "
                        "custom is MaxText's custom policy: workload.remat_custom.NAME gives each named value's place. "
                        "The layer holding the loss is not recomputed. Works with every strategy (docs/model.md).")
          .def("none"),
      ParamSpec::text_list("workload.remat_keep",
                           "With workload.remat: names, glob patterns (*, ?, [..]) of the activations kept, e.g. "
                           "['*.attn.o', '*.ffn.down']; every other activation of a layer is recomputed.")
          .length(0, 1024)
          .def("[]"),
  };
  for (const std::string& name : remat_custom_names()) {
    const bool input = name == "decoder_layer_input";
    specs.push_back(
        ParamSpec::choice("workload.remat_custom." + name, {"device", "offload", "remat"},
                          "With workload.remat: custom (MaxText's remat_policy: custom and its option of the same "
                          "name), where the backward pass finds " + remat_custom_what(name) +
                              ": device (kept in HBM), offload (kept in host memory: moved over the host link after "
                              "the forward makes it, back ahead of the backward) or remat (recomputed). " +
                              (input ? "Not given: device; remat is device too (a layer's input is where its "
                                       "recomputation starts, as a scanned layer's carry)."
                                     : "Not given: remat."))
            .optional());
  }
  return specs;
}

DType training_dtype(const ParamSet& p) { return p.s("workload.dtype") == "bf16" ? DType::BF16 : DType::F32; }

void validate_bn_batch(const ParamSet& p) {
  auto ll = [](int64_t v) { return static_cast<long long>(v); };
  const int64_t batch = p.i("workload.batch"), group = p.i("workload.bn_batch");
  if (group > 0 && batch % group != 0)
    throw Error(Err::NotDivisible, p.where("workload.bn_batch"),
                strprintf("workload.bn_batch = %lld does not divide workload.batch = %lld; choose a divisor of the "
                          "batch (or 0 for each data-parallel replica's examples)",
                          ll(group), ll(batch)),
                "workload.bn_batch");
  // With a data axis, a group must be whole replicas' batches, or whole groups within each replica's batch.
  const auto axes = p.strings("mesh.axes");
  const auto shape = p.ints("mesh.shape");
  for (size_t i = 0; i < axes.size() && i < shape.size() && group > 0; ++i) {
    if (axes[i] != "data" || shape[i] <= 1 || batch % shape[i] != 0) continue;
    const int64_t local = batch / shape[i];
    const bool within = local % group == 0;
    const bool spans = group % local == 0 && shape[i] % (group / local) == 0;
    if (!within && !spans)
      throw Error(Err::NotDivisible, p.where("workload.bn_batch"),
                  strprintf("workload.bn_batch = %lld examples per batch-norm group does not fit the %lld examples "
                            "of each of the %lld data-parallel replicas: a group is a divisor of %lld, or %lld x N "
                            "replicas with N dividing %lld",
                            ll(group), ll(local), ll(shape[i]), ll(local), ll(local), ll(shape[i])),
                  "workload.bn_batch");
  }
}

void validate_training(const ParamSet& p) {
  // An inference step, or a serving run (its iterations are inference steps: sim/serving/).
  const bool serving = (p.has("workload.step") && p.s("workload.step") != "train") ||
                       p.has("serving.requests.count") || p.has("serving.requests.trace");
  if (p.has("workload.weight_dtype") && !serving &&
      (p.s("workload.weight_dtype") == "int8" || p.s("workload.weight_dtype") == "fp8"))
    throw Error(Err::NumberFormat, p.where("workload.weight_dtype"),
                "workload.weight_dtype = " + p.s("workload.weight_dtype") + " quantizes a served model's weights; a "
                "training step updates its weights in bf16 or fp32 (use one of those, or an inference "
                "workload.step)",
                "workload.weight_dtype");
  const std::string opt = p.s("workload.optimizer");
  if (p.f("workload.weight_decay") != 0 && opt != "lars" && opt != "lamb" && opt != "adamw" && opt != "momentum")
    throw Error(Err::BadChoice, p.where("workload.weight_decay"),
                "workload.weight_decay is the weight decay of momentum, LARS, LAMB and AdamW, but "
                "workload.optimizer is " + opt + "; set optimizer: momentum, lars, lamb or adamw, or drop weight_decay",
                "workload.weight_decay");
  const bool names = p.s("workload.remat") == "names";
  if (names && p.strings("workload.remat_keep").empty())
    throw Error(Err::MissingKey, p.where("workload.remat"),
                "workload.remat: names keeps the activations workload.remat_keep names; give it glob patterns, e.g. "
                "remat_keep: ['*.attn.o'] (or use remat: full to keep none)",
                "workload.remat_keep");
  if (p.s("workload.remat") != "custom")
    for (const std::string& name : remat_custom_names())
      if (p.has("workload.remat_custom." + name))
        throw Error(Err::BadChoice, p.where("workload.remat_custom." + name),
                    "workload.remat_custom." + name + " is a place of MaxText's custom policy, but workload.remat is " +
                        p.s("workload.remat") + "; set remat: custom or drop remat_custom",
                    "workload.remat_custom." + name);
  if (!names && !p.strings("workload.remat_keep").empty())
    throw Error(Err::BadChoice, p.where("workload.remat_keep"),
                "workload.remat_keep applies to workload.remat: names, but workload.remat is " + p.s("workload.remat") +
                    "; set remat: names or drop remat_keep",
                "workload.remat_keep");
}

TensorId add_loss_terms(GraphBuilder& b, TensorId first, const std::vector<TensorId>& terms) {
  ModelGraph& g = b.graph();
  auto add = [&](TensorId x, TensorId y, const std::string& name) {
    TensorId z = b.add(x, y, name);
    g.op(g.producer(z)).phase = Phase::Loss;
    return z;
  };
  TensorId sum = terms.front();
  for (size_t i = 1; i < terms.size(); ++i) sum = add(sum, terms[i], "loss.aux" + std::to_string(i));
  TensorId loss = add(first, sum, "loss");
  g.tensor(first).role = TensorRole::Activation;
  for (TensorId t : terms) g.tensor(t).role = TensorRole::Activation;
  g.tensor(loss).role = TensorRole::Loss;
  return loss;
}

ModelGraph training_remat(const ModelGraph& g, const ParamSet& p) {
  RematOptions o;
  o.policy = remat_policy(p.s("workload.remat"));
  o.keep = p.strings("workload.remat_keep");
  if (o.policy == RematPolicy::Custom)
    for (const std::string& name : remat_custom_names())
      if (p.has("workload.remat_custom." + name))
        o.custom.emplace_back(name, remat_place(p.s("workload.remat_custom." + name)));
  return rematerialize_layers(g, o);
}

TensorId cross_entropy_loss(GraphBuilder& b, TensorId logits, TensorId labels, const std::vector<TensorId>& terms) {
  const TensorId nll = b.softmax_cross_entropy(logits, labels, terms.empty() ? "loss" : "loss.nll");
  return terms.empty() ? nll : add_loss_terms(b, nll, terms);
}

ModelGraph finish_training_step(GraphBuilder& b, TensorId loss, const ParamSet& p) {
  b.backward(loss);
  b.optimizer(training_optimizer(p));
  return training_remat(b.graph(), p);
}

DType training_weight_dtype(const ParamSet& p) {
  if (!p.has("workload.weight_dtype")) return training_dtype(p);
  const std::string& w = p.s("workload.weight_dtype");
  if (w == "int8" || w == "fp8") return training_dtype(p);  // the weights that stay unquantized (norms, embedding)
  return w == "bf16" ? DType::BF16 : DType::F32;
}

OptimizerConfig training_optimizer(const ParamSet& p) {
  OptimizerConfig c;
  const std::string o = p.s("workload.optimizer");
  c.kind = o == "adam"       ? Optimizer::Adam
           : o == "momentum" ? Optimizer::Momentum
           : o == "lars"     ? Optimizer::Lars
           : o == "rmsprop"  ? Optimizer::RmsProp
           : o == "lamb"     ? Optimizer::Lamb
           : o == "adamw"    ? Optimizer::AdamW
                             : Optimizer::Sgd;
  c.learning_rate = p.f("workload.learning_rate");
  c.beta1 = p.f("workload.beta1");
  c.beta2 = p.f("workload.beta2");
  c.eps = p.f("workload.eps");
  c.momentum = p.f("workload.momentum");
  c.lars_eta = p.f("workload.lars_eta");
  c.weight_decay = p.f("workload.weight_decay");
  c.rmsprop_decay = p.f("workload.rmsprop_decay");
  c.clip_norm = p.f("workload.clip_norm");
  return c;
}

}  // namespace podsim

#include "strategies/planner.h"

#include <algorithm>
#include <map>
#include <memory>
#include <queue>

#include "partition/combine.h"
#include "partition/partitioner.h"
#include "base/error.h"
#include "base/text.h"
#include "workloads/op_def.h"

namespace podsim {
namespace {

std::vector<std::unique_ptr<IStrategy>> make_strategies(const Experiment& exp) {
  std::vector<std::unique_ptr<IStrategy>> strategies;
  for (const auto& name : exp.strategies) {
    strategies.push_back(StrategyRegistry::instance().make(name));
    if (!strategies.back()) throw Error(Err::Internal, "strategy '" + name + "' vanished from the registry");
  }
  return strategies;
}

Mesh layout_mesh(const Experiment& exp, const std::vector<std::unique_ptr<IStrategy>>& strategies) {
  const ParamSet& p = exp.params;
  const Torus torus(exp.hardware.pod.dims, exp.hardware.pod.wrap, exp.hardware.pod.slices);
  std::vector<std::string> owned, contiguous;
  for (const auto& s : strategies)
    for (const auto& a : s->contiguous_axes(p)) contiguous.push_back(a);
  for (const auto& s : strategies)
    for (const auto& a : s->axes(p)) {
      if (std::find(owned.begin(), owned.end(), a) != owned.end())
        throw Error(Err::BadMesh, p.where("strategy.name"),
                    "mesh axis '" + a + "' is owned by two of the composed strategies (" + exp.strategy +
                        "); give them different axes",
                    "strategy.name");
      owned.push_back(a);
    }
  std::vector<std::string> names = p.strings("mesh.axes");
  std::vector<int64_t> sizes = p.ints("mesh.shape");
  if (owned.empty()) {  // strategies that place the step themselves
    if (!names.empty() || !sizes.empty())
      throw Error(Err::BadMesh, p.where(names.empty() ? "mesh.shape" : "mesh.axes"),
                  "strategy '" + exp.strategy + "' places the step by itself and uses no mesh; drop the mesh section",
                  names.empty() ? "mesh.shape" : "mesh.axes");
    return Mesh::torus_axes(torus);
  }
  if (names.empty() && sizes.empty()) {
    if (owned.size() != 1)
      throw Error(Err::BadMesh, p.where("strategy.name"),
                  "the strategies " + exp.strategy + " use the mesh axes " + join(owned, ", ") +
                      "; say how the chips split between them with mesh.axes and mesh.shape, e.g. mesh: {axes: [" +
                      join(owned, ", ") + "], shape: [...]}",
                  "strategy.name");
    names = owned;
    sizes = {torus.chips()};
  }
  if (names.size() != sizes.size())
    throw Error(Err::LengthMismatch, p.where("mesh.shape"),
                "mesh.shape has " + std::to_string(sizes.size()) + " entries but mesh.axes names " +
                    std::to_string(names.size()) + " axes",
                "mesh.shape");
  for (const auto& a : owned)
    if (std::find(names.begin(), names.end(), a) == names.end())
      throw Error(Err::BadMesh, p.where("mesh.axes"),
                  "the strategies (" + exp.strategy + ") need mesh axis '" + a + "', which mesh.axes [" +
                      join(names, ", ") + "] does not name",
                  "mesh.axes");
  for (size_t i = 0; i < names.size(); ++i)
    if (sizes[i] > 1 && std::find(owned.begin(), owned.end(), names[i]) == owned.end())
      throw Error(Err::BadMesh, p.where("mesh.axes"),
                  "mesh axis '" + names[i] + "' (size " + std::to_string(sizes[i]) + ") is owned by none of the " +
                      "strategies (" + exp.strategy + ", which use " + join(owned, ", ") +
                      "); its chips would repeat each other's work",
                  "mesh.axes");
  // Over several slices: the axes that span them (data by default, as MaxText's dcn_data_parallelism), and only
  // those whose traffic does not cross the DCN in every layer unless the user asks (mesh.dcn_allow).
  std::vector<std::string> dcn = p.strings("mesh.dcn_axes");
  if (torus.slices() > 1) {
    if (dcn.empty() && std::find(names.begin(), names.end(), "data") != names.end()) dcn = {"data"};
    const std::vector<std::string> allowed = p.strings("mesh.dcn_allow");
    for (const std::string& a : dcn) {
      if (a == "data" || a == "fsdp" || a == "pipe" ||
          std::find(allowed.begin(), allowed.end(), a) != allowed.end())
        continue;
      throw Error(Err::BadMesh, p.where(p.strings("mesh.dcn_axes").empty() ? "mesh.axes" : "mesh.dcn_axes"),
                  "mesh axis '" + a + "' would span slices over the data-center network: its collectives (" +
                      (a == "model" ? std::string("the tensor-parallel all-reduces") :
                       a == "expert" ? std::string("the experts' all-to-alls") : std::string("those of its strategy")) +
                      ") would cross the DCN in every layer, ~100x slower than ICI (MaxText: never recommended). "
                      "Span the slices with data, fsdp or pipe, or name '" + a + "' in mesh.dcn_allow to do it anyway",
                  "mesh.dcn_axes");
    }
  }
  try {
    return Mesh::layout(names, sizes, torus, p.strings("mesh.placement"), contiguous, dcn);
  } catch (const Error& e) {
    const std::string key = p.strings("mesh.placement").empty() ? "mesh.shape" : "mesh.placement";
    throw Error(Err::BadMesh, p.where(key), e.message(), key);
  }
}

// Parameters annotated over an axis some strategy gathers before use (gathered_axes), with the spec their
// forward and backward ops read them in: the annotation without those axes.
std::map<TensorId, ShardSpec> gathered_for_use(const ModelGraph& g, const Experiment& exp,
                                               const std::vector<std::unique_ptr<IStrategy>>& strategies,
                                               const Annotations& specs) {
  std::vector<std::string> axes;
  for (const auto& s : strategies)
    for (const auto& a : s->gathered_axes(exp.params)) axes.push_back(a);
  std::map<TensorId, ShardSpec> out;
  if (axes.empty()) return out;
  for (const auto& [t, spec] : specs) {
    if (g.tensor(t).role != TensorRole::Parameter) continue;
    ShardSpec use = spec;
    bool gathered = false;
    for (auto& d : use.dims)
      for (const auto& a : axes) {
        auto it = std::find(d.begin(), d.end(), a);
        if (it == d.end()) continue;
        d.erase(it);
        gathered = true;
      }
    if (gathered) out[t] = use;
  }
  // Mixed precision: a parameter read through compute copies (converts; workloads/builder.h) is cast on its shard
  // and the bf16 copy is gathered instead (half the bytes of the fp32 master, as FSDP's and MaxText's mixed
  // precision do). The master stays gathered for any other reader (the embedding's lookup).
  std::map<TensorId, ShardSpec> copies;
  for (const Op& op : g.ops()) {
    if (op.kind != OpKind::Convert || op.inputs.size() != 1 || op.outputs.size() != 1) continue;
    auto it = out.find(op.inputs[0]);
    if (it != out.end() && g.tensor(op.outputs[0]).role == TensorRole::WeightCopy) copies[op.outputs[0]] = it->second;
  }
  for (auto it = out.begin(); it != out.end();) {
    bool other_reader = false;
    for (OpId c : g.consumers(it->first)) {
      const Op& op = g.op(c);
      other_reader = other_reader || (op.phase != Phase::Optimizer &&
                                      !(op.kind == OpKind::Convert && copies.count(op.outputs.front())));
    }
    it = other_reader ? std::next(it) : out.erase(it);
  }
  out.insert(copies.begin(), copies.end());
  return out;
}

// A quantized weight's per-channel scale ("<w>.scale": the weight's shape with 1 on its contracted dimensions) takes
// its weight's split on the dimensions it keeps, so that each device holds the scales of its own channels and the
// product's rescale needs no slice (workloads/models/transformer_layer.h). A scale annotated on its own keeps that.
void scales_like_their_weights(const ModelGraph& g, Annotations& specs) {
  for (size_t t = 0; t < g.num_tensors(); ++t) {
    const TensorInfo& w = g.tensor(static_cast<TensorId>(t));
    if (w.role != TensorRole::Parameter || (w.dtype != DType::I8 && w.dtype != DType::F8)) continue;
    const TensorId scale = g.find_tensor(w.name + ".scale");
    auto it = specs.find(static_cast<TensorId>(t));
    if (scale < 0 || it == specs.end() || specs.count(scale)) continue;
    ShardSpec s = it->second;
    for (size_t d = 0; d < s.rank(); ++d)
      if (g.tensor(scale).shape[d] == 1) s.dims[d].clear();
    specs[scale] = s;
  }
}

// Re-materialized values (workloads/remat.h: "<tensor>/remat", made by a recomputed op) take the spec a strategy
// gave the value they recompute, so that the recomputation is partitioned like the original (an MoE layer's
// dispatch recomputed with its all-to-all).
void recomputed_like_originals(const ModelGraph& g, Annotations& specs) {
  std::map<std::string, TensorId> by_name;
  for (size_t t = 0; t < g.num_tensors(); ++t) {
    const OpId p = g.producer(static_cast<TensorId>(t));
    if (p < 0 || !g.op(p).recompute) by_name.emplace(g.tensor(static_cast<TensorId>(t)).name, static_cast<TensorId>(t));
  }
  const std::string suffix = "/remat";
  for (size_t t = 0; t < g.num_tensors(); ++t) {
    const TensorId id = static_cast<TensorId>(t);
    const OpId p = g.producer(id);
    const std::string& name = g.tensor(id).name;
    if (p < 0 || !g.op(p).recompute || specs.count(id) || name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    auto it = by_name.find(name.substr(0, name.size() - suffix.size()));
    if (it == by_name.end()) continue;
    auto spec = specs.find(it->second);
    if (spec != specs.end()) specs[id] = spec->second;
  }
}

}  // namespace

void add_spec(Annotations& specs, const ModelGraph& g, TensorId t, const ShardSpec& spec) {
  const TensorInfo& info = g.tensor(t);
  if (spec.rank() != info.shape.size())
    throw Error(Err::BadSharding, "the sharding " + spec.text() + " of '" + info.name + "' has " +
                                      std::to_string(spec.rank()) + " entries but the tensor is " + info.shape_text());
  auto it = specs.find(t);
  if (it == specs.end()) {
    specs[t] = spec;
    return;
  }
  ShardSpec merged = it->second;
  for (size_t d = 0; d < spec.rank(); ++d)
    for (const auto& a : spec.dims[d]) {
      if (merged.uses(a))
        throw Error(Err::BadSharding, "mesh axis '" + a + "' would split '" + info.name + "' twice (" +
                                          merged.text() + " and " + spec.text() + ")");
      merged.dims[d].push_back(a);
    }
  it->second = merged;
}

int batch_dim(const ModelGraph& g, TensorId t) {
  const TensorInfo& info = g.tensor(t);
  if (info.shape.empty() || g.producer(t) >= 0) return -1;
  if (info.role == TensorRole::Input || info.role == TensorRole::Label) return 0;
  if (info.role != TensorRole::KvCache) return -1;
  return info.name.rfind("kv_cache.resident", 0) == 0 ? 2 : 0;
}

void refuse_packed_batch(const ModelGraph& g, const Experiment& exp, const std::string& strategy) {
  const TensorId k = g.find_tensor("layer0.attn.k_cache"), tokens = g.find_tensor("tokens");
  if (k < 0 || tokens < 0 || g.tensor(tokens).shape[0] != 1 || g.tensor(k).shape[0] == 1) return;
  throw Error(Err::StrategyMismatch, exp.params.where("strategy.name"),
              "strategy " + strategy + " splits the batch, but this inference iteration packs its " +
                  std::to_string(g.tensor(k).shape[0]) + " sequences of unequal lengths into one row (ragged "
                  "prompts or chunks); split it with spmd, or give its sequences equal lengths "
                  "(workload.prefill_padding: max, chunks of one length)",
              "strategy.name");
}

namespace {

// Gradient bucketing over every program of a partitioned plan (partition/combine.h), noted in the plan.
void combine_reductions(Plan& plan, const Experiment& exp) {
  const double threshold = exp.run.combine_threshold;
  CombineStats total;
  for (size_t k = 0; k < plan.programs.size(); ++k) {
    std::vector<int32_t>* units = k < plan.pipeline.unit_of_op.size() ? &plan.pipeline.unit_of_op[k] : nullptr;
    CombineStats s = combine_gradient_reductions(plan.programs[k], threshold, units);
    total.collectives += s.collectives;
    total.members += s.members;
  }
  if (total.collectives > 0)
    plan.notes.push_back(strprintf("gradient reductions: %lld combined into %lld collectives of at most %s "
                                   "(run.combine_threshold)",
                                   static_cast<long long>(total.members), static_cast<long long>(total.collectives),
                                   format_bytes(threshold).c_str()));
}

}  // namespace

Mesh plan_mesh(const Experiment& exp) { return layout_mesh(exp, make_strategies(exp)); }

Plan make_plan(const ModelGraph& g, const Experiment& exp) {
  std::vector<std::unique_ptr<IStrategy>> strategies = make_strategies(exp);
  Mesh mesh = layout_mesh(exp, strategies);
  if (strategies.size() == 1)
    if (std::optional<Plan> placed = strategies.front()->place(g, exp)) return std::move(*placed);
  Plan plan;
  plan.strategy = exp.strategy;
  plan.mesh = mesh;
  Annotations specs;
  PartitionInput in{g, plan.mesh};
  for (const auto& s : strategies) s->annotate(g, exp, plan.mesh, specs);
  for (const auto& s : strategies) s->refine(g, exp, plan.mesh, specs);
  recomputed_like_originals(g, specs);
  scales_like_their_weights(g, specs);
  for (const auto& s : strategies)
    for (const auto& [k, v] : s->algorithms(exp.params)) in.algorithms[k] = v;
  in.annotations = specs;
  in.gathered_for_use = gathered_for_use(g, exp, strategies, specs);
  in.prefetch = !in.gathered_for_use.empty();
  for (const auto& s : strategies) in.keep_gathered = in.keep_gathered || s->keep_gathered(exp.params);
  in.role = "spmd";
  const HardwareConfig& hw = exp.hardware;
  const double links = 2.0 * static_cast<double>(hw.pod.dims.size());
  if (hw.ici.link_bandwidth > 0) in.flops_per_comm_byte = hw.chip.peak_flops() / (hw.ici.link_bandwidth * links);
  const int64_t chips = exp.hardware.pod.chips();
  for (const auto& s : strategies) {
    std::optional<PipelineOptions> po = s->pipeline(exp.params);
    if (!po) continue;
    PipelineInput pi{g, plan.mesh, specs, in.algorithms, in.flops_per_comm_byte, *po, {}, in.gathered_for_use,
                     in.keep_gathered};
    // Balanced on a roofline estimate of each op on one chip: its FLOPs at peak or its bytes at HBM bandwidth.
    pi.op_seconds = [&hw](const ModelGraph& graph, const Op& op) {
      OpCost c = op_cost(graph, op);
      return std::max(c.flops / hw.chip.peak_flops(), (c.bytes_read + c.bytes_written) / hw.chip.hbm.bandwidth);
    };
    PipelineResult r = pipeline_step(pi);
    plan.programs = std::move(r.programs);
    const int axis = plan.mesh.axis_index(po->axis);
    plan.role_of_chip.assign(static_cast<size_t>(chips), 0);
    for (int64_t c = 0; c < chips; ++c) plan.role_of_chip[c] = static_cast<int32_t>(plan.mesh.coordinate(c, axis));
    plan.notes = r.notes;
    plan.notes.insert(plan.notes.begin(), "mesh: " + plan.mesh.describe());
    // Re-materialized: by the pipeline (strategy.remat) or by the step's layers (workload.remat).
    bool remat = po->remat;
    for (const auto& units : r.units)
      for (const PipelineUnit& u : units) remat = remat || u.pass == PipelinePass::Recompute;
    plan.pipeline = {plan.mesh.axis_size(po->axis), po->micro_batches, po->schedule, remat, r.cells,
                     r.stage_seconds, r.units, r.unit_of_op};
    combine_reductions(plan, exp);
    if (!exp.run.dcn_overlap) dcn_reductions_after_backward(plan);
    return plan;
  }
  PartitionResult r = partition_step(in);
  plan.programs.push_back(std::move(r.program));
  plan.role_of_chip.assign(static_cast<size_t>(chips), 0);
  plan.notes = r.notes;
  plan.notes.insert(plan.notes.begin(), "mesh: " + plan.mesh.describe());
  combine_reductions(plan, exp);
  if (!exp.run.dcn_overlap) dcn_reductions_after_backward(plan);
  return plan;
}

void dcn_reductions_after_backward(Plan& plan) {
  std::vector<bool> dcn_axis(plan.mesh.axes().size());
  for (size_t a = 0; a < dcn_axis.size(); ++a) dcn_axis[a] = plan.mesh.spans_slices(static_cast<int>(a));
  for (Program& prog : plan.programs) {
    ModelGraph& g = prog.graph;
    OpId last_backward = -1;
    for (OpId o : prog.order)
      if (g.op(o).phase == Phase::Backward && !is_communication(g.op(o).kind)) last_backward = o;
    if (last_backward < 0) continue;
    int held = 0;
    for (OpId o : prog.order) {
      const Op& op = g.op(o);
      if ((op.kind != OpKind::AllReduce && op.kind != OpKind::ReduceScatter) || op.inputs.empty() ||
          g.tensor(op.inputs.front()).role != TensorRole::Gradient)
        continue;
      bool over_dcn = false;
      for (const std::string& a : op.attrs.axes) {
        const int i = plan.mesh.axis_index(a);
        over_dcn = over_dcn || (i >= 0 && dcn_axis[static_cast<size_t>(i)]);
      }
      if (!over_dcn) continue;
      g.add_control(last_backward, o);
      ++held;
    }
    if (held == 0) continue;
    // The issue order again, keeping every op as early as it was while the held reductions (and what reads them)
    // move behind the backward pass: a topological order that takes the earliest ready op of the old one first.
    std::vector<int32_t> position(g.num_ops(), 0), waiting(g.num_ops(), 0);
    for (size_t i = 0; i < prog.order.size(); ++i) position[static_cast<size_t>(prog.order[i])] = static_cast<int32_t>(i);
    std::priority_queue<std::pair<int32_t, OpId>, std::vector<std::pair<int32_t, OpId>>, std::greater<>> ready;
    for (OpId o : prog.order) {
      waiting[static_cast<size_t>(o)] = static_cast<int32_t>(g.predecessors(o).size());
      if (waiting[static_cast<size_t>(o)] == 0) ready.push({position[static_cast<size_t>(o)], o});
    }
    std::vector<OpId> order;
    while (!ready.empty()) {
      const OpId o = ready.top().second;
      ready.pop();
      order.push_back(o);
      for (OpId next : g.successors(o))
        if (--waiting[static_cast<size_t>(next)] == 0) ready.push({position[static_cast<size_t>(next)], next});
    }
    if (order.size() != prog.order.size())
      throw Error(Err::Internal, "holding the DCN reductions after the backward pass left a cycle in role " + prog.role);
    prog.order = std::move(order);
    if (held > 0)
      plan.notes.push_back("run.dcn_overlap is off: the " + std::to_string(held) + " gradient reductions over the " +
                           "data-center network of role " + prog.role + " wait for the end of the backward pass");
  }
}

}  // namespace podsim

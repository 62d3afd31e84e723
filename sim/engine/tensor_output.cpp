#include "sim/engine/tensor_output.h"

#include <cmath>
#include <filesystem>
#include <set>

#include "hw/pod/pod.h"
#include "plan/shard_data.h"
#include "base/error.h"
#include "base/npy.h"
#include "base/text.h"
#include "sim/engine/engine.h"
#include "workloads/tensor_info.h"

namespace podsim {
namespace {

// Tensors written to tensors/: the step's inputs and state, the loss, updated values, parameter gradients, the
// values a workload marks as results (an inference step's logits and sampled tokens), and every value nothing else
// consumes (a matmul's product, a collective's result); with run.dump_activations also
// every forward activation.
bool result_tensor(const ModelGraph& g, TensorId id, bool activations) {
  const TensorInfo& t = g.tensor(id);
  if (g.producer(id) < 0 || g.consumers(id).empty() || t.result) return true;
  switch (t.role) {
    case TensorRole::Loss: case TensorRole::Updated: return true;
    case TensorRole::Gradient:  // gradients of parameters: those the optimizer reads
      for (OpId c : g.consumers(id))
        if (g.op(c).phase == Phase::Optimizer) return true;
      return false;
    case TensorRole::Activation: return activations && g.op(g.producer(id)).phase == Phase::Forward;
    default: return false;
  }
}

constexpr double kBytesPerElement = 4;  // write_npy: float32, or int32

// A limit to suggest: the next power of two of MiB (or GiB) at or above `bytes`.
std::string round_up(double bytes) {
  double mib = std::pow(2.0, std::ceil(std::log2(std::max(bytes, 1.0) / 1048576.0)));
  return mib >= 1024 ? strprintf("%.0fGiB", mib / 1024) : strprintf("%.0fMiB", std::max(mib, 1.0));
}

}  // namespace

double tensor_output_bytes(const Prepared& p) {
  const bool activations = p.exp.params.b("run.dump_activations");
  // The logical tensors the plan binds (assemble_results gives exactly those), once each.
  std::set<TensorId> bound;
  for (const Program& prog : p.plan.programs)
    for (const auto* list : {&prog.inputs, &prog.results})
      for (const TensorBinding& b : *list) bound.insert(b.logical);
  double bytes = 0;
  for (TensorId id : bound)
    if (result_tensor(p.graph, id, activations))
      bytes += static_cast<double>(p.graph.tensor(id).elements()) * kBytesPerElement;
  if (!p.exp.params.b("run.dump_shards")) return bytes;
  for (int32_t role : p.plan.role_of_chip) {
    if (role < 0) continue;
    const Program& prog = p.plan.programs[role];
    for (const auto* list : {&prog.inputs, &prog.results})
      for (const TensorBinding& b : *list)
        if (result_tensor(p.graph, b.logical, activations))
          bytes += static_cast<double>(prog.graph.tensor(b.local).elements()) * kBytesPerElement;
  }
  return bytes;
}

void check_tensor_output(const Prepared& p) {
  const double limit = p.exp.params.f("run.max_tensor_bytes");
  const double bytes = tensor_output_bytes(p);
  if (bytes <= limit) return;
  const bool set = !p.exp.params.where("run.max_tensor_bytes").file.empty();
  const std::string key = set ? "run.max_tensor_bytes" : "run.numeric";
  throw Error(Err::TensorOutputTooLarge, p.exp.params.where(key),
              "numeric mode would write " + format_bytes(bytes) + " of tensors to tensors/" +
                  (p.exp.params.b("run.dump_shards") ? " (with each chip's shards)" : "") +
                  (p.exp.params.b("run.dump_activations") ? " (with the activations)" : "") + ", more than " +
                  "run.max_tensor_bytes = " + format_bytes(limit) + "; raise the limit (--set run.max_tensor_bytes=" +
                  round_up(bytes) + "), shrink the workload, or run without run.numeric",
              key);
}

void write_tensors(const Prepared& p, const Simulation& s, const std::string& dir) {
  namespace fs = std::filesystem;
  const bool activations = p.exp.params.b("run.dump_activations");
  auto store_of = [&](int64_t chip) -> const TensorStore* {
    Chip& c = *s.pod->chips()[chip];
    return c.role() < 0 ? nullptr : &c.store();
  };
  // The logical tensors, assembled from the chips' shards.
  TensorStore logical;
  assemble_results(p.plan, p.graph, store_of, logical);
  fs::create_directories(dir);
  for (size_t i = 0; i < p.graph.num_tensors(); ++i) {
    TensorId id = static_cast<TensorId>(i);
    if (!result_tensor(p.graph, id, activations) || !logical.has(id)) continue;
    const TensorInfo& info = p.graph.tensor(id);
    write_npy(dir + "/" + tensor_file_stem(info.name) + ".npy", info.shape, logical.get(id).data,
              dtype_is_integer(info.dtype));
  }
  if (!p.exp.params.b("run.dump_shards")) return;
  // Each chip's local tensors (its shards), under tensors/chip<N>/.
  for (size_t c = 0; c < s.pod->chips().size(); ++c) {
    const TensorStore* st = store_of(static_cast<int64_t>(c));
    if (!st) continue;
    const Program& prog = p.plan.programs[s.pod->chips()[c]->role()];
    const std::string sub = dir + "/chip" + std::to_string(c);
    fs::create_directories(sub);
    for (const auto* list : {&prog.inputs, &prog.results})
      for (const TensorBinding& b : *list) {
        if (!result_tensor(p.graph, b.logical, activations) || !st->has(b.local)) continue;
        const TensorInfo& info = prog.graph.tensor(b.local);
        write_npy(sub + "/" + tensor_file_stem(p.graph.tensor(b.logical).name) + ".npy", info.shape,
                  st->get(b.local).data, dtype_is_integer(info.dtype));
      }
  }
}

}  // namespace podsim

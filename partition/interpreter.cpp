#include "partition/interpreter.h"

#include <algorithm>
#include <deque>
#include <map>
#include <tuple>
#include <memory>

#include "collectives/i_algorithm.h"
#include "plan/shard_data.h"
#include "base/error.h"
#include "workloads/op_def.h"

namespace podsim {
namespace {

// The result of a collective on member `rank` given every member's input (in rank order): sums accumulate in
// rank order in fp32 (a max all-reduce keeps the largest).
Tensor collective_result(const Op& op, const std::vector<const Tensor*>& in, int64_t rank, const std::vector<int64_t>& out_shape) {
  const int64_t n = static_cast<int64_t>(in.size());
  const size_t dim = static_cast<size_t>(op.attrs.dim);
  auto sum = [&]() {
    Tensor s = *in.front();
    for (size_t k = 1; k < in.size(); ++k)
      for (size_t i = 0; i < s.data.size(); ++i)
        s.data[i] = op.attrs.reduce_max ? std::max(s.data[i], in[k]->data[i]) : s.data[i] + in[k]->data[i];
    return s;
  };
  switch (op.kind) {
    case OpKind::AllReduce: return sum();
    case OpKind::ReduceScatter: return block_of(sum(), dim, rank, n);
    case OpKind::AllGather: return concat(in, dim);
    case OpKind::AllToAll: {
      std::vector<Tensor> blocks;
      for (const Tensor* t : in) blocks.push_back(block_of(*t, dim, rank, n));
      std::vector<const Tensor*> ptrs;
      for (const Tensor& b : blocks) ptrs.push_back(&b);
      return concat(ptrs, static_cast<size_t>(op.attrs.dim2));
    }
    case OpKind::CollectivePermute: {  // rank r receives from the rank `shift` steps back, round the group
      if (op.attrs.targets.empty()) return *in[static_cast<size_t>(((rank - op.attrs.shift) % n + n) % n)];
      // Arbitrary pairs: from the rank that targets r, else zeros.
      auto it = std::find(op.attrs.targets.begin(), op.attrs.targets.end(), rank);
      if (it != op.attrs.targets.end()) return *in[static_cast<size_t>(it - op.attrs.targets.begin())];
      Tensor z(out_shape);
      return z;
    }
    default: break;
  }
  (void)out_shape;
  throw Error(Err::Internal, std::string("the plan interpreter does not run ") + op_kind_name(op.kind));
}

}  // namespace

std::vector<TensorStore> interpret_plan(const Plan& plan, const ModelGraph& logical, const TensorStore& logical_inputs,
                                        uint64_t seed) {
  const int64_t chips = static_cast<int64_t>(plan.role_of_chip.size());
  std::vector<TensorStore> stores(static_cast<size_t>(chips));
  std::vector<size_t> pc(static_cast<size_t>(chips), 0);
  for (int64_t c = 0; c < chips; ++c) {
    if (plan.role_of_chip[c] < 0) continue;
    bind_inputs(plan, logical, logical_inputs, c, stores[c], seed);
    stores[c].set_device(std::make_shared<MeshDevice>(plan.mesh, c));
  }
  auto role = [&](int64_t c) { return plan.role_of_chip[c]; };
  auto done = [&](int64_t c) { return role(c) < 0 || pc[c] >= plan.programs[role(c)].order.size(); };
  // A collective runs once every member of its group has reached it.
  std::map<std::pair<std::string, int64_t>, int64_t> arrived;
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::deque<Tensor>> mailbox;  // (sender, receiver, tag)
  for (;;) {
    bool progress = false, all_done = true;
    for (int64_t c = 0; c < chips; ++c) {
      while (!done(c)) {
        const Program& p = plan.programs[role(c)];
        const Op& op = p.graph.op(p.order[pc[c]]);
        if (!is_communication(op.kind)) {
          run_op(p.graph, op, stores[c]);
          ++pc[c];
          progress = true;
          continue;
        }
        if (op.kind == OpKind::Send || op.kind == OpKind::Recv) {
          // The peer `shift` steps along the op's mesh axes; a message is keyed by (sender, receiver, tag).
          const std::vector<int64_t> line = plan.mesh.members(c, op.attrs.axes);
          const int64_t me = std::find(line.begin(), line.end(), c) - line.begin();
          const int64_t peer = line.at(static_cast<size_t>(me + op.attrs.shift));
          if (op.kind == OpKind::Send) {
            mailbox[{c, peer, op.attrs.tag}].push_back(stores[c].get(op.inputs.front()));
            stores[c].put(op.outputs.front(), Tensor(p.graph.tensor(op.outputs.front()).shape));
          } else {
            auto it = mailbox.find({peer, c, op.attrs.tag});
            if (it == mailbox.end() || it->second.empty()) break;  // not sent yet: wait
            stores[c].put(op.outputs.front(), std::move(it->second.front()));
            it->second.pop_front();
          }
          ++pc[c];
          progress = true;
          continue;
        }
        if (op.kind != OpKind::AllReduce && op.kind != OpKind::ReduceScatter && op.kind != OpKind::AllGather &&
            op.kind != OpKind::AllToAll && op.kind != OpKind::CollectivePermute)
          throw Error(Err::Internal, std::string("the plan interpreter does not run ") + op_kind_name(op.kind));
        const std::vector<int64_t> members = plan.mesh.members(c, op.attrs.axes, op.attrs.group_block);
        // Every sweep visits each chip once, so each waiting member counts once per sweep; the last to arrive runs it.
        if (++arrived[{op.name, members.front()}] < static_cast<int64_t>(members.size())) break;
        for (int64_t m : members)
          if (role(m) != role(c)) throw Error(Err::Internal, "collective '" + op.name + "' spans chips of different roles");
        // A combined collective (partition/combine.h) carries several tensors: each is reduced as on its own.
        if (op.inputs.size() != op.outputs.size())
          throw Error(Err::Internal, "collective '" + op.name + "' has " + std::to_string(op.inputs.size()) +
                                         " inputs for " + std::to_string(op.outputs.size()) + " outputs");
        for (size_t k = 0; k < op.inputs.size(); ++k) {
          std::vector<const Tensor*> in;
          for (int64_t m : members) in.push_back(&stores[m].get(op.inputs[k]));
          const std::vector<int64_t>& shape = p.graph.tensor(op.outputs[k]).shape;
          std::vector<Tensor> out;
          for (size_t r = 0; r < members.size(); ++r)
            out.push_back(collective_result(op, in, static_cast<int64_t>(r), shape));
          for (size_t r = 0; r < members.size(); ++r) {
            if (out[r].shape != shape)
              throw Error(Err::Internal, "collective '" + op.name + "' produced " +
                                             std::to_string(out[r].elements()) + " elements of the wrong shape");
            stores[members[r]].put(op.outputs[k], std::move(out[r]));
          }
        }
        for (int64_t m : members) ++pc[m];
        progress = true;
      }
      all_done = all_done && done(c);
    }
    if (all_done) break;
    if (!progress) throw Error(Err::Deadlock, "the partitioned programs wait on each other forever");
    arrived.clear();  // chips still waiting arrive again in the next sweep
  }
  return stores;
}

}  // namespace podsim

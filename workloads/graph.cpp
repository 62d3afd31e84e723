#include "workloads/graph.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>
#include <queue>

#include "base/error.h"
#include "workloads/model_flops.h"
#include "workloads/op_def.h"

namespace podsim {

// Vertices are op ids; an edge u -> v means v reads a tensor u produces.
struct ModelGraph::Impl {
  using G = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS>;
  G g;
};

ModelGraph::ModelGraph(std::string name) : m_name(std::move(name)), m_impl(std::make_unique<Impl>()) {}
ModelGraph::ModelGraph(const ModelGraph& o)
    : m_name(o.m_name),
      m_tensors(o.m_tensors),
      m_ops(o.m_ops),
      m_producer(o.m_producer),
      m_consumers(o.m_consumers),
      m_impl(std::make_unique<Impl>(*o.m_impl)) {}
ModelGraph& ModelGraph::operator=(const ModelGraph& o) {
  if (this != &o) {
    m_name = o.m_name;
    m_tensors = o.m_tensors;
    m_ops = o.m_ops;
    m_producer = o.m_producer;
    m_consumers = o.m_consumers;
    m_impl = std::make_unique<Impl>(*o.m_impl);
  }
  return *this;
}
ModelGraph::ModelGraph(ModelGraph&&) noexcept = default;
ModelGraph& ModelGraph::operator=(ModelGraph&&) noexcept = default;
ModelGraph::~ModelGraph() = default;

TensorId ModelGraph::add_tensor(TensorInfo t) {
  for (auto d : t.shape)
    if (d <= 0) throw Error(Err::Internal, "tensor '" + t.name + "' has a non-positive dimension");
  m_tensors.push_back(std::move(t));
  m_producer.push_back(-1);
  m_consumers.emplace_back();
  return static_cast<TensorId>(m_tensors.size() - 1);
}

OpId ModelGraph::add_op(Op op) {
  OpId id = static_cast<OpId>(m_ops.size());
  auto check = [&](TensorId t) {
    if (t < 0 || static_cast<size_t>(t) >= m_tensors.size())
      throw Error(Err::Internal, "op '" + op.name + "' uses unknown tensor id " + std::to_string(t));
  };
  for (TensorId t : op.inputs) check(t);
  for (TensorId t : op.outputs) {
    check(t);
    if (m_producer[t] != -1)
      throw Error(Err::Internal, "tensor '" + m_tensors[t].name + "' produced twice (by '" + m_ops[m_producer[t]].name +
                                     "' and '" + op.name + "')");
  }
  boost::add_vertex(m_impl->g);
  // Edges are not duplicated. The new op has only the edges added here, so the check scans its own few edges
  // (boost::edge would scan the other end's, which grow with every consumer of a value read many times).
  auto has_in = [&](OpId from) {
    for (auto [it, end] = boost::in_edges(id, m_impl->g); it != end; ++it)
      if (static_cast<OpId>(boost::source(*it, m_impl->g)) == from) return true;
    return false;
  };
  auto has_out = [&](OpId to) {
    for (auto [it, end] = boost::out_edges(id, m_impl->g); it != end; ++it)
      if (static_cast<OpId>(boost::target(*it, m_impl->g)) == to) return true;
    return false;
  };
  for (TensorId t : op.inputs) {
    m_consumers[t].push_back(id);
    if (m_producer[t] >= 0 && !has_in(m_producer[t])) boost::add_edge(m_producer[t], id, m_impl->g);
  }
  for (TensorId t : op.outputs) {
    m_producer[t] = id;
    // A producer added after its consumers (a transfer that brings a value in) still precedes them.
    for (OpId c : m_consumers[t])
      if (!has_out(c)) boost::add_edge(id, c, m_impl->g);
  }
  m_ops.push_back(std::move(op));
  return id;
}

void ModelGraph::add_control(OpId before, OpId after) {
  if (before < 0 || after < 0 || static_cast<size_t>(before) >= m_ops.size() ||
      static_cast<size_t>(after) >= m_ops.size() || before == after)
    throw Error(Err::Internal, "control edge between unknown ops");
  const auto& g = m_impl->g;
  bool exists = false;
  if (boost::out_degree(before, g) <= boost::in_degree(after, g)) {
    exists = boost::edge(before, after, g).second;
  } else {
    for (auto [it, end] = boost::in_edges(after, g); it != end && !exists; ++it)
      exists = boost::source(*it, g) == static_cast<Impl::G::vertex_descriptor>(before);
  }
  if (!exists) boost::add_edge(before, after, m_impl->g);
}

TensorId ModelGraph::find_tensor(const std::string& name) const {
  for (size_t i = 0; i < m_tensors.size(); ++i)
    if (m_tensors[i].name == name) return static_cast<TensorId>(i);
  return -1;
}

OpId ModelGraph::producer(TensorId t) const { return m_producer.at(t); }
const std::vector<OpId>& ModelGraph::consumers(TensorId t) const { return m_consumers.at(t); }

std::vector<OpId> ModelGraph::predecessors(OpId op) const {
  std::vector<OpId> out;
  for (auto [it, end] = boost::in_edges(op, m_impl->g); it != end; ++it)
    out.push_back(static_cast<OpId>(boost::source(*it, m_impl->g)));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<OpId> ModelGraph::successors(OpId op) const {
  std::vector<OpId> out;
  for (auto [it, end] = boost::out_edges(op, m_impl->g); it != end; ++it)
    out.push_back(static_cast<OpId>(boost::target(*it, m_impl->g)));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<OpId> ModelGraph::topological_order() const {
  // Boost's topological_sort proves the graph acyclic (it throws not_a_dag); the order returned is Kahn's with the
  // smallest ready id first, so it is deterministic and keeps the construction order where dependencies allow.
  std::vector<Impl::G::vertex_descriptor> rev;
  try {
    boost::topological_sort(m_impl->g, std::back_inserter(rev));
  } catch (const boost::not_a_dag&) {
    throw Error(Err::Internal, "graph '" + m_name + "' has a cycle");
  }
  const size_t n = m_ops.size();
  std::vector<int> indeg(n, 0);
  for (size_t v = 0; v < n; ++v) indeg[v] = static_cast<int>(boost::in_degree(v, m_impl->g));
  std::priority_queue<OpId, std::vector<OpId>, std::greater<>> ready;
  for (size_t v = 0; v < n; ++v)
    if (indeg[v] == 0) ready.push(static_cast<OpId>(v));
  std::vector<OpId> order;
  order.reserve(n);
  while (!ready.empty()) {
    OpId v = ready.top();
    ready.pop();
    order.push_back(v);
    for (auto [it, end] = boost::out_edges(v, m_impl->g); it != end; ++it) {
      auto t = boost::target(*it, m_impl->g);
      if (--indeg[t] == 0) ready.push(static_cast<OpId>(t));
    }
  }
  return order;
}

double ModelGraph::total_flops() const {
  double f = 0;
  for (const auto& op : m_ops) f += op_flops(*this, op);
  return f;
}

double model_flops_scaled(const ModelGraph& g, FlopsConvention convention, const std::function<double(OpId)>& share) {
  double f = 0;
  for (size_t i = 0; i < g.ops().size(); ++i) {
    const Op& op = g.ops()[i];
    if (op.phase == Phase::Optimizer || op.recompute) continue;
    const OpCost c = op_cost(g, op);
    if (c.unit != Unit::Mxu) continue;
    f += c.model_flops >= 0 ? c.model_flops : c.flops * share(static_cast<OpId>(i));
    if (convention == FlopsConvention::MaxText) f -= c.causal_flops / 2;
  }
  return f;
}

double ModelGraph::model_flops(FlopsConvention convention) const {
  return model_flops_scaled(*this, convention, [](OpId) { return 1.0; });
}

const char* flops_convention_name(FlopsConvention c) { return c == FlopsConvention::MaxText ? "maxtext" : "palm"; }

FlopsConvention flops_convention(const std::string& name) {
  if (name == "palm") return FlopsConvention::Palm;
  if (name == "maxtext") return FlopsConvention::MaxText;
  throw Error(Err::Internal, "unknown FLOPs convention '" + name + "'");
}

}  // namespace podsim

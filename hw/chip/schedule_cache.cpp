#include "hw/chip/schedule_cache.h"

#include "base/error.h"

namespace podsim {
namespace {

std::string key_of(const std::string& algo, const CollectiveRequest& r, int64_t rank) {
  std::string k = algo;
  k += '|';
  k += std::to_string(static_cast<int>(r.kind));
  for (size_t i = 0; i < r.group.dims.size(); ++i) {
    k += i ? ',' : '|';
    k += std::to_string(r.group.dims[i]);
    k += i < r.group.wrap.size() && !r.group.wrap[i] ? 'l' : 'w';
    if (r.group.is_dcn(i)) k += 'd';
  }
  for (int64_t v : {r.elements, static_cast<int64_t>(r.elem_bytes), r.chunk_elements, r.max_chunks, r.dcn_chunk_elements,
                    r.shift,
                    r.root, rank}) {
    k += '|';
    k += std::to_string(v);
  }
  for (size_t i = 0; i < r.targets.size(); ++i) {  // a collective-permute's arbitrary pairs
    k += i ? ',' : '|';
    k += std::to_string(r.targets[i]);
  }
  return k;
}

std::shared_ptr<SharedSchedule> build(const ICollectiveAlgorithm& algo, const CollectiveRequest& req, int64_t rank,
                                      RankSymmetry sym) {
  auto s = std::make_shared<SharedSchedule>();
  s->symmetry = sym;
  s->group = req.group;
  s->sched = algo.schedule(req, sym == RankSymmetry::None ? rank : 0);
  const Schedule& sc = s->sched;
  const size_t n = sc.tasks.size();
  std::vector<int32_t> count(n + 1, 0);
  for (const Task& t : sc.tasks)
    for (int32_t d = 0; d < t.dep_count; ++d) ++count[sc.deps[t.dep_begin + d] + 1];
  for (size_t i = 0; i < n; ++i) count[i + 1] += count[i];
  s->dep_ptr = count;
  s->dep_list.assign(count[n], 0);
  std::vector<int32_t> fill(count.begin(), count.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    const Task& t = sc.tasks[i];
    for (int32_t d = 0; d < t.dep_count; ++d) s->dep_list[fill[sc.deps[t.dep_begin + d]]++] = static_cast<int32_t>(i);
  }
  s->recv_index.reserve(n / 2 + 1);
  for (size_t i = 0; i < n; ++i)
    if (sc.tasks[i].type == Task::Type::Recv)
      s->recv_index.emplace(SharedSchedule::RecvKey{sc.tasks[i].peer, sc.tasks[i].tag}, static_cast<int32_t>(i));
  s->sched.tasks.shrink_to_fit();
  s->sched.deps.shrink_to_fit();
  return s;
}

}  // namespace

size_t SharedSchedule::bytes() const {
  return sizeof(*this) + sched.tasks.capacity() * sizeof(Task) + recv_index.size() * 48 +
         (sched.deps.capacity() + dep_ptr.capacity() + dep_list.capacity()) * sizeof(int32_t);
}

std::shared_ptr<const SharedSchedule> ScheduleCache::get(const std::string& algo, const CollectiveRequest& req,
                                                         int64_t rank, bool exact) {
  auto it = m_algos.find(algo);
  if (it == m_algos.end()) {
    std::unique_ptr<ICollectiveAlgorithm> a = CollectiveRegistry::instance().make(algo);
    if (!a) throw Error(Err::Internal, "collective algorithm '" + algo + "' is not registered");
    it = m_algos.emplace(algo, std::move(a)).first;
  }
  const ICollectiveAlgorithm& a = *it->second;
  const RankSymmetry sym = exact ? RankSymmetry::None : a.symmetry(req);
  if (sym != RankSymmetry::None) {
    auto& slot = m_shared[key_of(algo, req, -1)];
    if (!slot) {
      slot = build(a, req, rank, sym);
      ++m_built;
    }
    return slot;
  }
  if (m_own.size() > 2 * m_live_hint + 64) {  // forget the schedules no chip runs any more
    std::erase_if(m_own, [](const auto& kv) { return kv.second.expired(); });
    m_live_hint = m_own.size();
  }
  auto& weak = m_own[key_of(algo, req, rank)];
  if (auto s = weak.lock()) return s;
  std::shared_ptr<const SharedSchedule> s = build(a, req, rank, sym);
  ++m_built;
  weak = s;
  return s;
}

}  // namespace podsim

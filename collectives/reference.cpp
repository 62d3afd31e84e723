#include "collectives/reference.h"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <tuple>

namespace podsim {

std::vector<std::vector<double>> expected_result(const CollectiveRequest& req,
                                                 const std::vector<std::vector<float>>& in) {
  const int64_t N = req.group.size(), n = req.elements;
  std::vector<std::vector<double>> out(static_cast<size_t>(N));
  std::vector<double> sum(static_cast<size_t>(n), 0.0);
  for (const auto& v : in)
    for (int64_t i = 0; i < n; ++i) sum[i] += v[i];
  for (int64_t r = 0; r < N; ++r) {
    auto& o = out[r];
    switch (req.kind) {
      case CollectiveKind::AllReduce: o = sum; break;
      case CollectiveKind::ReduceScatter: o.assign(sum.begin() + r * (n / N), sum.begin() + (r + 1) * (n / N)); break;
      case CollectiveKind::AllGather:
        for (int64_t k = 0; k < N; ++k) o.insert(o.end(), in[k].begin(), in[k].end());
        break;
      case CollectiveKind::AllToAll: {
        int64_t B = n / N;
        for (int64_t k = 0; k < N; ++k) o.insert(o.end(), in[k].begin() + r * B, in[k].begin() + (r + 1) * B);
        break;
      }
      case CollectiveKind::CollectivePermute: {
        if (!req.targets.empty()) {  // arbitrary pairs: the rank that targets r, else zeros
          auto it = std::find(req.targets.begin(), req.targets.end(), r);
          if (it == req.targets.end()) o.assign(static_cast<size_t>(n), 0.0);
          else o.assign(in[it - req.targets.begin()].begin(), in[it - req.targets.begin()].end());
          break;
        }
        const auto& src = in[static_cast<size_t>(((r - req.shift) % N + N) % N)];  // round the group's linear rank
        o.assign(src.begin(), src.end());
        break;
      }
      case CollectiveKind::Broadcast: o.assign(in[req.root].begin(), in[req.root].end()); break;
    }
  }
  return out;
}

namespace {

struct Rank {
  Schedule sched;
  std::vector<float> buf[3];
  std::vector<int32_t> deps_left;
  std::vector<std::vector<int32_t>> dependents;
  std::vector<uint8_t> done;
  std::deque<int32_t> ready;
  size_t finished = 0;
};

bool in_bounds(const Region& r, size_t size) {
  if (r.elements() == 0) return true;
  if (r.offset < 0 || r.block < 0 || r.count < 1 || r.count2 < 1) return false;
  int64_t lo = r.offset, hi = r.end();
  for (int64_t j = 0; j < r.count2; ++j)
    for (int64_t i = 0; i < r.count; ++i) {
      lo = std::min(lo, r.offset + j * r.stride2 + i * r.stride);
      hi = std::max(hi, r.offset + j * r.stride2 + i * r.stride + r.block);
    }
  return lo >= 0 && hi <= static_cast<int64_t>(size);
}

std::vector<float> gather(const std::vector<float>& b, const Region& r) {
  std::vector<float> out;
  out.reserve(static_cast<size_t>(r.elements()));
  r.for_blocks([&](int64_t off, int64_t len) { out.insert(out.end(), b.begin() + off, b.begin() + off + len); });
  return out;
}

void scatter(std::vector<float>& b, const Region& r, const std::vector<float>& data, bool add) {
  size_t k = 0;
  r.for_blocks([&](int64_t off, int64_t len) {
    for (int64_t i = 0; i < len; ++i, ++k) b[off + i] = add ? b[off + i] + data[k] : data[k];
  });
}

}  // namespace

ExecutionResult execute_schedules(const ICollectiveAlgorithm& algo, const CollectiveRequest& req,
                                  const std::vector<std::vector<float>>& inputs) {
  return execute_schedules(algo, req, inputs, false);
}

ExecutionResult execute_schedules(const ICollectiveAlgorithm& algo, const CollectiveRequest& req,
                                  const std::vector<std::vector<float>>& inputs, bool reverse_order) {
  ExecutionResult res;
  const int64_t N = req.group.size();
  std::vector<Rank> ranks(static_cast<size_t>(N));
  auto fail = [&](const std::string& why) {
    if (res.problem.empty()) res.problem = why;
  };
  for (int64_t r = 0; r < N; ++r) {
    Rank& k = ranks[r];
    k.sched = algo.schedule(req, r);
    k.buf[0] = inputs[r];
    k.buf[1] = k.sched.output_elements == req.elements ? inputs[r]
                                                        : std::vector<float>(static_cast<size_t>(k.sched.output_elements));
    k.buf[2].assign(static_cast<size_t>(k.sched.scratch_elements), 0.0f);
    const size_t n = k.sched.tasks.size();
    k.deps_left.resize(n);
    k.dependents.resize(n);
    k.done.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
      const Task& t = k.sched.tasks[i];
      k.deps_left[i] = t.dep_count;
      for (int32_t d = 0; d < t.dep_count; ++d) {
        int32_t dep = k.sched.deps[t.dep_begin + d];
        if (dep < 0 || dep >= static_cast<int32_t>(i))
          fail("rank " + std::to_string(r) + " task " + std::to_string(i) + " depends on task " + std::to_string(dep) +
               " (dependencies must point backwards)");
        else
          k.dependents[dep].push_back(static_cast<int32_t>(i));
      }
      if (t.type != Task::Type::Recv && !in_bounds(t.src, k.buf[static_cast<int>(t.src_buf)].size()))
        fail("rank " + std::to_string(r) + " task " + std::to_string(i) + " reads outside its buffer");
      if (t.type != Task::Type::Send && !in_bounds(t.dst, k.buf[static_cast<int>(t.dst_buf)].size()))
        fail("rank " + std::to_string(r) + " task " + std::to_string(i) + " writes outside its buffer");
      if ((t.type == Task::Type::Send || t.type == Task::Type::Recv) && (t.peer < 0 || t.peer >= N || t.peer == r))
        fail("rank " + std::to_string(r) + " task " + std::to_string(i) + " has peer " + std::to_string(t.peer));
      if (t.type == Task::Type::Copy && t.src.elements() != t.dst.elements())
        fail("rank " + std::to_string(r) + " task " + std::to_string(i) + " copies between regions of different sizes");
      if (t.dep_count == 0) k.ready.push_back(static_cast<int32_t>(i));
    }
  }
  if (!res.problem.empty()) return res;

  // In flight: (src, dst, tag) -> payload.
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::vector<float>> mail;
  auto complete = [&](Rank& k, int32_t i) {
    k.done[i] = 1;
    ++k.finished;
    for (int32_t j : k.dependents[i])
      if (--k.deps_left[j] == 0) k.ready.push_back(j);
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t rr = 0; rr < N; ++rr) {
      int64_t r = reverse_order ? N - 1 - rr : rr;
      Rank& k = ranks[r];
      // This round runs what is ready now, forwards or newest first; receives still waiting go back.
      std::vector<int32_t> round(k.ready.begin(), k.ready.end());
      k.ready.clear();
      if (reverse_order) std::reverse(round.begin(), round.end());
      for (int32_t i : round) {
        const Task& t = k.sched.tasks[i];
        if (t.type == Task::Type::Send) {
          auto key = std::make_tuple(r, t.peer, t.tag);
          if (mail.count(key)) {
            fail("rank " + std::to_string(r) + " sends tag " + std::to_string(t.tag) + " to rank " +
                 std::to_string(t.peer) + " twice");
            return res;
          }
          mail[key] = gather(k.buf[static_cast<int>(t.src_buf)], t.src);
          ++res.messages;
          res.bytes += static_cast<double>(t.src.elements()) * req.elem_bytes;
          complete(k, i);
          progress = true;
        } else if (t.type == Task::Type::Recv) {
          auto key = std::make_tuple(t.peer, r, t.tag);
          auto m = mail.find(key);
          if (m == mail.end()) {
            k.ready.push_back(i);  // not arrived yet
            continue;
          }
          if (static_cast<int64_t>(m->second.size()) != t.dst.elements()) {
            fail("rank " + std::to_string(r) + " receives " + std::to_string(m->second.size()) + " elements into a "
                 "region of " + std::to_string(t.dst.elements()) + " (tag " + std::to_string(t.tag) + ")");
            return res;
          }
          scatter(k.buf[static_cast<int>(t.dst_buf)], t.dst, m->second, t.combine == Task::Combine::Add);
          mail.erase(m);
          complete(k, i);
          progress = true;
        } else {
          std::vector<float> data = gather(k.buf[static_cast<int>(t.src_buf)], t.src);
          scatter(k.buf[static_cast<int>(t.dst_buf)], t.dst, data, t.combine == Task::Combine::Add);
          complete(k, i);
          progress = true;
        }
      }
    }
  }
  for (int64_t r = 0; r < N; ++r)
    if (ranks[r].finished != ranks[r].sched.tasks.size())
      fail("rank " + std::to_string(r) + " finished " + std::to_string(ranks[r].finished) + " of " +
           std::to_string(ranks[r].sched.tasks.size()) + " tasks (a receive without its send, or a cycle)");
  if (!mail.empty()) fail(std::to_string(mail.size()) + " messages were sent but never received");
  for (int64_t r = 0; r < N; ++r) res.outputs.push_back(ranks[r].buf[1]);
  return res;
}

}  // namespace podsim

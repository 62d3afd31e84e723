#include "collectives/i_algorithm.h"

namespace podsim {

const char* collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::AllToAll: return "all_to_all";
    case CollectiveKind::CollectivePermute: return "collective_permute";
    case CollectiveKind::Broadcast: return "broadcast";
  }
  return "?";
}

const std::vector<CollectiveKind>& all_collectives() {
  static const std::vector<CollectiveKind> all = {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter,
                                                  CollectiveKind::AllGather, CollectiveKind::AllToAll,
                                                  CollectiveKind::CollectivePermute, CollectiveKind::Broadcast};
  return all;
}

bool parse_collective(const std::string& name, CollectiveKind& out) {
  for (auto k : all_collectives())
    if (name == collective_name(k)) {
      out = k;
      return true;
    }
  return false;
}

int64_t GroupShape::size() const {
  int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

bool GroupShape::spans_dcn() const {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] > 1 && is_dcn(i)) return true;
  return false;
}

std::vector<int64_t> GroupShape::coords(int64_t rank) const {
  std::vector<int64_t> c(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    c[i] = rank % dims[i];
    rank /= dims[i];
  }
  return c;
}

int64_t GroupShape::rank(const std::vector<int64_t>& c) const {
  int64_t r = 0;
  for (size_t i = dims.size(); i-- > 0;) r = r * dims[i] + c[i];
  return r;
}

int64_t GroupShape::neighbor(int64_t r, int axis, int64_t steps) const {
  std::vector<int64_t> c = coords(r);
  int64_t n = dims[axis];
  int64_t v = c[axis] + steps;
  bool w = axis < static_cast<int>(wrap.size()) ? wrap[axis] : true;
  if (w) {
    v %= n;
    if (v < 0) v += n;
  } else if (v < 0 || v >= n) {
    return -1;
  }
  c[axis] = v;
  return rank(c);
}

int64_t symmetric_peer(RankSymmetry sym, const GroupShape& g, int64_t peer0, int64_t rank) {
  switch (sym) {
    case RankSymmetry::None: return peer0;
    case RankSymmetry::Cyclic: return (peer0 + rank) % g.size();
    case RankSymmetry::Torus: {
      // Mixed-radix addition of the two ranks' coordinates, without allocating.
      int64_t out = 0, scale = 1;
      for (int64_t d : g.dims) {
        out += ((peer0 % d + rank % d) % d) * scale;
        peer0 /= d;
        rank /= d;
        scale *= d;
      }
      return out;
    }
  }
  return peer0;
}

int64_t symmetric_peer0(RankSymmetry sym, const GroupShape& g, int64_t peer, int64_t rank) {
  switch (sym) {
    case RankSymmetry::None: return peer;
    case RankSymmetry::Cyclic: return ((peer - rank) % g.size() + g.size()) % g.size();
    case RankSymmetry::Torus: {
      int64_t out = 0, scale = 1;
      for (int64_t d : g.dims) {
        out += ((peer % d - rank % d + d) % d) * scale;
        peer /= d;
        rank /= d;
        scale *= d;
      }
      return out;
    }
  }
  return peer;
}

int64_t Region::end() const {
  if (elements() == 0) return offset;
  return offset + (count2 - 1) * stride2 + (count - 1) * stride + block;
}

int32_t Schedule::add(Task t, const std::vector<int32_t>& after) {
  t.dep_begin = static_cast<int32_t>(deps.size());
  t.dep_count = static_cast<int32_t>(after.size());
  deps.insert(deps.end(), after.begin(), after.end());
  tasks.push_back(t);
  return static_cast<int32_t>(tasks.size() - 1);
}

std::string default_algorithm(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce:
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather: return "torus";
    case CollectiveKind::AllToAll: return "direct";
    case CollectiveKind::CollectivePermute: return "direct";
    case CollectiveKind::Broadcast: return "ring";
  }
  return "";
}

}  // namespace podsim

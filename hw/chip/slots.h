// Small helpers for the models' hot paths: no allocation per event once warm, no division per lookup.
//
//   Slots<Job> jobs;   uint32_t id = jobs.add(job);   jobs[id] ...;   jobs.release(id);   // ids reused
//   Memo peers;        int64_t chip = peers.get(rank, [&] { return chip_of(rank); });      // 8 kept
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace podsim {

// Values in a vector whose released entries are reused (last released, first reused): an id stays valid until it
// is released, and a steady flow of add() and release() allocates nothing.
template <class T>
class Slots {
 public:
  uint32_t add(T value) {
    uint32_t id;
    if (m_free.empty()) {
      id = static_cast<uint32_t>(m_items.size());
      m_items.push_back(std::move(value));
    } else {
      id = m_free.back();
      m_free.pop_back();
      m_items[id] = std::move(value);
    }
    return id;
  }
  T& operator[](uint32_t id) { return m_items[id]; }
  void release(uint32_t id) { m_free.push_back(id); }

 private:
  std::vector<T> m_items;
  std::vector<uint32_t> m_free;
};

// The last eight (key, value) pairs computed, the oldest replaced: a ring schedule has few peers and a chip few
// destinations, and finding a peer's chip, a sender's rank or a next hop divides along every dimension of the group
// and the torus. Eight, since a 3-D torus collective exchanges with the six neighbours in turn (with four kept, a
// cycle through six keys missed every time). Keys and values fit 32 bits (chips, ranks, directions); others are
// computed every time.
struct Memo {
  static constexpr int kSize = 8;
  int32_t key[kSize] = {}, value[kSize] = {};
  uint8_t size = 0, next = 0;
  template <class F>
  int64_t get(int64_t k, F compute) {
    for (int i = 0; i < size; ++i)
      if (key[i] == k) return value[i];
    const int64_t v = compute();
    if (k != static_cast<int32_t>(k) || v != static_cast<int32_t>(v)) return v;
    const int i = size < kSize ? size++ : (next++ & (kSize - 1));
    key[i] = static_cast<int32_t>(k);
    value[i] = static_cast<int32_t>(v);
    return v;
  }
};

}  // namespace podsim

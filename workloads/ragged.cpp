#include "workloads/ragged.h"

namespace podsim {

int64_t ragged_sequences(const OpAttrs::Ragged& r) { return static_cast<int64_t>(r.fresh.size()); }

int64_t ragged_width(const OpAttrs::Ragged& r, int64_t seq) {
  return r.width.empty() ? r.fresh.at(static_cast<size_t>(seq)) : r.width.at(static_cast<size_t>(seq));
}

int64_t ragged_start(const OpAttrs::Ragged& r, int64_t seq) {
  if (!r.packed) return 0;
  int64_t at = 0;
  for (int64_t i = 0; i < seq; ++i) at += ragged_width(r, i);
  return at;
}

RaggedToken ragged_token(const OpAttrs::Ragged& r, int64_t row, int64_t s) {
  RaggedToken t;
  const int64_t n = ragged_sequences(r);
  if (!r.packed) {
    if (row >= n) return t;
    t.seq = row;
    t.place = s;
  } else {
    int64_t at = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t w = ragged_width(r, i);
      if (s < at + w) {
        t.seq = i;
        t.place = s - at;
        break;
      }
      at += w;
    }
    if (t.seq < 0) return t;
  }
  t.pos = r.cached.at(static_cast<size_t>(t.seq)) + t.place;
  t.padding = t.place >= r.fresh.at(static_cast<size_t>(t.seq));
  return t;
}

}  // namespace podsim

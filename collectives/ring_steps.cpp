#include "collectives/ring_steps.h"

#include <algorithm>

#include "base/error.h"

namespace podsim::ring {

Layout::Layout(const GroupShape& g, int64_t base_, int64_t B_, int64_t P_, Buffer buf_)
    : base(base_), B(B_), P(P_), dims(g.dims), buf(buf_) {
  int64_t st = 1;
  for (auto d : dims) {
    strides.push_back(st);
    st *= d;
  }
}

Region block_set(const Layout& l, int64_t q, const std::vector<int64_t>& fixed) {
  const size_t A = l.dims.size();
  int64_t first_block = 0;
  for (size_t a = 0; a < A; ++a)
    if (fixed[a] >= 0) first_block += fixed[a] * l.strides[a];
  // Free axes: a prefix starting at axis 0 forms runs of consecutive blocks; the rest must be consecutive axes,
  // which repeat the runs at one stride.
  size_t m = 0;
  while (m < A && fixed[m] < 0) ++m;
  int64_t run = 1;
  for (size_t a = 0; a < m; ++a) run *= l.dims[a];
  int64_t outer_stride = 0, outer_count = 1;
  bool started = false, ended = false;
  for (size_t a = m; a < A; ++a) {
    if (fixed[a] < 0) {
      if (ended) throw Error(Err::Internal, "block set with non-consecutive free axes");
      if (!started) outer_stride = l.strides[a];
      started = true;
      outer_count *= l.dims[a];
    } else if (started) {
      ended = true;
    }
  }
  Region r;
  const int64_t bs = l.piece_size(q);
  r.offset = l.base + first_block * l.B + l.piece_offset(q);
  if (l.P == 1) {
    r.block = run * l.B;
    r.stride = outer_stride * l.B;
    r.count = outer_count;
    r.stride2 = 0;
    r.count2 = 1;
    if (r.count == 1) r.stride = r.block;
  } else {
    r.block = bs;
    r.stride = l.B;
    r.count = run;
    r.stride2 = outer_stride * l.B;
    r.count2 = outer_count;
    if (r.count == 1 && r.count2 > 1) {
      r.stride = r.stride2;
      r.count = r.count2;
      r.stride2 = 0;
      r.count2 = 1;
    }
  }
  if (r.count2 == 1) r.stride2 = r.count * r.stride;
  return r;
}

int64_t capped_chunk(int64_t elements, int64_t chunk, int64_t max_chunks) {
  if (chunk <= 0 || max_chunks <= 0 || elements <= chunk * max_chunks) return chunk;
  return (elements + max_chunks - 1) / max_chunks;
}

std::vector<Region> chunks(const Region& r, int64_t chunk_, int64_t max_chunks) {
  const int64_t chunk = capped_chunk(r.elements(), chunk_, max_chunks);
  std::vector<Region> out;
  if (chunk <= 0 || r.elements() <= chunk) {
    out.push_back(r);
    return out;
  }
  const int64_t row = r.block * r.count;  // one outer repetition
  if (r.count2 > 1 && row <= chunk) {
    int64_t k = std::max<int64_t>(1, chunk / row);
    for (int64_t j = 0; j < r.count2; j += k) {
      Region c = r;
      c.offset = r.offset + j * r.stride2;
      c.count2 = std::min(k, r.count2 - j);
      out.push_back(c);
    }
    return out;
  }
  for (int64_t j = 0; j < r.count2; ++j) {
    int64_t base = r.offset + j * r.stride2;
    if (r.block <= chunk) {
      int64_t k = std::max<int64_t>(1, chunk / r.block);
      for (int64_t i = 0; i < r.count; i += k) {
        Region c;
        c.offset = base + i * r.stride;
        c.block = r.block;
        c.stride = r.stride;
        c.count = std::min(k, r.count - i);
        c.count2 = 1;
        c.stride2 = c.count * c.stride;
        out.push_back(c);
      }
    } else {
      for (int64_t i = 0; i < r.count; ++i)
        for (int64_t e = 0; e < r.block; e += chunk) out.push_back(contiguous(base + i * r.stride + e, std::min(chunk, r.block - e)));
    }
  }
  return out;
}

int64_t parts_for(int64_t B, int64_t want) { return std::max<int64_t>(1, std::min(B, want)); }

int64_t tag(int64_t q, int64_t phase, int64_t step, int64_t c) {
  return ((q * 16 + phase) * (int64_t{1} << 20) + step) * (int64_t{1} << 24) + c;
}

int64_t ring_peer(const GroupShape& g, int64_t rank, int axis, int64_t steps) {
  std::vector<int64_t> c = g.coords(rank);
  int64_t n = g.dims[axis];
  c[axis] = ((c[axis] + steps) % n + n) % n;
  return g.rank(c);
}

namespace {

// The entry lanes whose span overlaps `r` (in the same buffer; another buffer always counts). A reader of `r`
// waits for the lanes that wrote there; a writer also for those that read there.
std::vector<int32_t> overlapping(const Entry& entry, Buffer buf, const Region& r, bool writer = false) {
  std::vector<int32_t> out;
  const int64_t lo = r.offset, hi = r.end();
  for (size_t i = 0; i < entry.tasks.size(); ++i) {
    if (!writer && !entry.writes[i]) continue;
    if (entry.buf != buf || (entry.spans[i].first < hi && lo < entry.spans[i].second)) out.push_back(entry.tasks[i]);
  }
  return out;
}

PhaseResult ring_phase(Schedule& s, const RingSpec& r, const Entry& entry, int64_t chunk, int64_t max_chunks,
                       bool reduce) {
  const int64_t n = r.n;
  if (n < 2) return {entry, Entry{}};
  const Layout& l = *r.layout;
  std::vector<int64_t> fixed = r.fixed;
  auto set = [&](int64_t j) {
    int64_t travel = ((j % n) + n) % n;
    fixed[r.set_axis] = r.dir > 0 ? travel : (n - travel) % n;
    return block_set(l, r.part, fixed);
  };
  const int64_t p = r.position;
  std::vector<int32_t> prev;  // last step's receives, per chunk lane
  std::vector<std::pair<int64_t, int64_t>> span;  // elements each lane wrote (all-gather: every step)
  std::vector<int32_t> prev_send;                 // last step's sends, per chunk lane
  std::vector<std::pair<int64_t, int64_t>> read;  // elements each lane's sends read, over every step
  for (int64_t st = 0; st + 1 < n; ++st) {
    // Positions count in the direction of travel: reduce-scatter ends with rank p holding set p, all-gather
    // starts there.
    int64_t send_j = reduce ? p - (st + 1) : p - st;
    int64_t recv_j = send_j - 1;
    bool from_input = st == 0 && r.first_from;
    std::vector<Region> sc = chunks(from_input ? r.first_region : set(send_j), chunk, max_chunks),
                        rc = chunks(set(recv_j), chunk, max_chunks);
    std::vector<int32_t> recvs;
    for (size_t k = 0; k < sc.size(); ++k) {
      Task t;
      t.type = Task::Type::Send;
      t.peer = r.to;
      t.tag = tag(r.part, r.phase, st, static_cast<int64_t>(k));
      t.src_buf = from_input ? r.first_buf : l.buf;
      t.src = sc[k];
      t.on_chip = st > 0;  // forwards the chunk the previous step just received
      t.flow = static_cast<int32_t>(r.part);
      t.priority = static_cast<int32_t>(r.phase);
      // A lane's sends also run in step order, so its last send follows every earlier one.
      std::vector<int32_t> deps = st == 0 ? (from_input ? std::vector<int32_t>{} : overlapping(entry, t.src_buf, t.src))
                                          : std::vector<int32_t>{prev[std::min(k, prev.size() - 1)]};
      if (st > 0 && k < prev_send.size()) deps.push_back(prev_send[k]);
      int32_t id = s.add(t, deps);
      std::pair<int64_t, int64_t> rd{t.src.offset, t.src.end()};
      if (k >= prev_send.size()) {
        prev_send.push_back(id);
        read.push_back(rd);
      } else {
        prev_send[k] = id;
        read[k] = {std::min(read[k].first, rd.first), std::max(read[k].second, rd.second)};
      }
    }
    for (size_t k = 0; k < rc.size(); ++k) {
      Task t;
      t.type = Task::Type::Recv;
      t.combine = reduce ? Task::Combine::Add : Task::Combine::Overwrite;
      t.peer = r.from;
      t.tag = tag(r.part, r.phase, st, static_cast<int64_t>(k));
      t.dst_buf = l.buf;
      t.dst = rc[k];
      // A partial sum that the next step forwards is never needed here again: it need not reach HBM.
      t.on_chip = reduce && st + 2 < n;
      // Every receive waits for the entry lanes that wrote where it writes (an add must follow them), and for the
      // lane's previous receive.
      std::vector<int32_t> deps = overlapping(entry, t.dst_buf, t.dst, true);
      if (st > 0) deps.push_back(prev[std::min(k, prev.size() - 1)]);
      recvs.push_back(s.add(t, deps));
      std::pair<int64_t, int64_t> w{t.dst.offset, t.dst.end()};
      if (k >= span.size()) span.push_back(w);
      else if (reduce) span[k] = w;
      else span[k] = {std::min(span[k].first, w.first), std::max(span[k].second, w.second)};
    }
    prev = recvs;
  }
  // A reduce-scatter's result is the final sets; an all-gather keeps what it started from as well. The sends are
  // reported apart: a later phase that overwrites what they read must wait for them.
  PhaseResult out;
  out.written.buf = out.read.buf = l.buf;
  if (!reduce && entry.buf == l.buf) out.written = entry;
  for (size_t k = 0; k < prev.size(); ++k) out.written.add(prev[k], span[k].first, span[k].second);
  if (!r.first_from)
    for (size_t k = 0; k < prev_send.size(); ++k) out.read.add(prev_send[k], read[k].first, read[k].second, false);
  return out;
}

}  // namespace

PhaseResult reduce_scatter_phase(Schedule& s, const RingSpec& r, const Entry& entry, int64_t chunk,
                                 int64_t max_chunks) {
  return ring_phase(s, r, entry, chunk, max_chunks, true);
}

PhaseResult all_gather_phase(Schedule& s, const RingSpec& r, const Entry& entry, int64_t chunk,
                             int64_t max_chunks) {
  return ring_phase(s, r, entry, chunk, max_chunks, false);
}

RingSpec ring_on_axis(const Layout& l, const GroupShape& g, int64_t rank, int64_t part, int64_t phase, int axis,
                      int dir, const std::vector<int>& fixed_axes) {
  RingSpec r;
  r.layout = &l;
  r.part = part;
  r.phase = phase;
  r.set_axis = axis;
  std::vector<int64_t> c = g.coords(rank);
  r.fixed.assign(g.dims.size(), -1);
  for (int a : fixed_axes) r.fixed[a] = c[a];
  for (size_t a = 0; a < g.dims.size(); ++a)
    if (g.dims[a] == 1) r.fixed[a] = 0;  // an axis of one chip has one coordinate
  r.n = g.dims[axis];
  // Count positions in the direction of travel, so one code path serves both directions.
  r.position = dir > 0 ? c[axis] : (r.n - c[axis]) % r.n;
  r.dir = dir;
  r.to = ring_peer(g, rank, axis, dir);
  r.from = ring_peer(g, rank, axis, -dir);
  return r;
}

}  // namespace podsim::ring

// TraceWriter: the checks common to both formats, lane allocation and the tally; encoding is left to the backend.
//
// Each track keeps a stack of the slices still open at the latest begin. A new slice first closes (slice_end) every
// open slice that ended at or before its begin, then must fit inside the one left on top. So the backend receives
// every track's BEGIN/END events in time order and properly nested, which is all Perfetto's importer assumes and
// the one thing it cannot check for us: it pairs END with the most recent BEGIN and mis-nests silently.
#include "sim/trace/trace_writer.h"

#include <cmath>

#include "base/error.h"
#include "sim/trace/trace_backend.h"

namespace podsim {

namespace {

// pids above this are the JSON backend's synthetic process and thread ids.
constexpr int kMaxPid = 1 << 30;

[[noreturn]] void bug(const std::string& message) { throw Error(Err::Internal, "trace writer: " + message); }

bool contains(const std::vector<uint64_t>& ids, size_t count, uint64_t id) {
  for (size_t i = 0; i < count; ++i) {
    if (ids[i] == id) return true;
  }
  return false;
}

}  // namespace

std::unique_ptr<TraceWriter> TraceWriter::create(const std::string& path, TraceFormat fmt, bool gzip) {
  auto sink = std::make_unique<TraceSink>(path, gzip);
  auto backend = fmt == TraceFormat::Pftrace ? make_pftrace_backend(std::move(sink))
                                             : make_json_backend(std::move(sink));
  return std::unique_ptr<TraceWriter>(new TraceWriter(std::move(backend)));
}

TraceWriter::TraceWriter(std::unique_ptr<TraceBackend> backend) : m_backend(std::move(backend)) {
  m_tracks.push_back(TrackState{Kind::Global, {}, 0});  // uuid 0: Perfetto's root; used_track() refuses it
}

TraceWriter::~TraceWriter() {
  if (m_closed) return;
  try {
    close();
  } catch (const Error&) {
    // A destructor cannot report; close() is the call that does.
  }
}

void TraceWriter::check_open(const char* what) const {
  if (m_closed) bug(std::string(what) + " after close()");
}

// Messages are built only on failure: these checks run for every slice of a long simulation.
TraceWriter::TrackState& TraceWriter::used_track(Track t, const char* what, const std::string& name,
                                                 const char* relation) {
  if (t == 0 || t >= m_tracks.size()) {
    std::string subject = name.empty() ? std::string(what) : std::string(what) + " '" + name + "'";
    bug(subject + relation + std::to_string(t) + ", never declared");
  }
  return m_tracks[t];
}

void TraceWriter::check_parent(Track parent, const char* what, const std::string& name) {
  if (used_track(parent, what, name, " under track ").kind == Kind::Counter) {
    bug(std::string(what) + " '" + name + "' under counter track " + std::to_string(parent));
  }
}

TraceWriter::Track TraceWriter::add_track(Kind kind) {
  m_tracks.push_back(TrackState{kind, {}, 0});
  ++m_tally.tracks;
  return m_tracks.size() - 1;
}

TraceWriter::Track TraceWriter::process(const std::string& name, int pid, int rank) {
  check_open("process()");
  if (pid < 1 || pid >= kMaxPid) bug("process '" + name + "' has pid " + std::to_string(pid) + ", not in [1, 2^30)");
  if (m_pids.count(pid)) bug("process '" + name + "' reuses pid " + std::to_string(pid));
  Track t = add_track(Kind::Process);
  m_pids[pid] = t;
  m_backend->process(t, name, pid, rank);
  return t;
}

TraceWriter::Track TraceWriter::child(Track parent, const std::string& name, int rank) {
  check_open("child()");
  check_parent(parent, "child track", name);
  Track t = add_track(Kind::Child);
  m_backend->child(t, parent, name, rank);
  return t;
}

TraceWriter::Track TraceWriter::counter(Track parent, const std::string& name, const std::string& unit, int rank,
                                        const std::string& share_key) {
  check_open("counter()");
  check_parent(parent, "counter track", name);
  Track t = add_track(Kind::Counter);
  m_backend->counter(t, parent, name, unit, rank, share_key);
  return t;
}

TraceWriter::Track TraceWriter::global(const std::string& name, int rank) {
  check_open("global()");
  Track t = add_track(Kind::Global);
  m_backend->global(t, name, rank);
  return t;
}

TraceWriter::Track TraceWriter::lane(Track parent, const std::string& name, uint64_t begin_ns, uint64_t end_ns,
                                     int rank) {
  check_open("lane()");
  check_parent(parent, "lane", name);
  if (end_ns < begin_ns) bug("lane '" + name + "' asked for an interval that ends before it begins");
  LaneGroup& group = m_lanes[std::to_string(parent) + '\0' + name];
  for (size_t i = 0; i < group.lanes.size(); ++i) {
    if (group.busy_until[i] <= begin_ns) {
      group.busy_until[i] = end_ns;
      return group.lanes[i];
    }
  }
  // The first lane keeps the plain name; the others are numbered so the UI does not merge them into one row.
  std::string lane_name = group.lanes.empty() ? name : name + " " + std::to_string(group.lanes.size() + 1);
  Track t = child(parent, lane_name, rank);
  group.lanes.push_back(t);
  group.busy_until.push_back(end_ns);
  return t;
}

void TraceWriter::slice(Track t, uint64_t begin_ns, uint64_t end_ns, const std::string& name,
                        const std::vector<TraceArg>& args, const std::vector<uint64_t>& flows_out,
                        const std::vector<uint64_t>& flows_in) {
  check_open("slice()");
  TrackState& track = used_track(t, "slice", name);
  auto where = [&] {
    return "slice '" + name + "' [" + std::to_string(begin_ns) + ", " + std::to_string(end_ns) + "] on track " +
           std::to_string(t);
  };
  if (track.kind == Kind::Counter) bug(where() + ": a counter track takes only counter values");
  if (end_ns < begin_ns) bug(where() + " ends before it begins");
  if (begin_ns < track.last_begin) {
    bug(where() + " begins before the previous slice on that track (" + std::to_string(track.last_begin) + ")");
  }
  // Everything that ended by begin_ns is closed; what is left on top must contain the new slice.
  size_t still_open = track.open.size();
  while (still_open > 0 && track.open[still_open - 1].end <= begin_ns) --still_open;
  if (still_open > 0 && track.open[still_open - 1].end < end_ns) {
    const OpenSlice& outer = track.open[still_open - 1];
    bug(where() + " overlaps [" + std::to_string(outer.begin) + ", " + std::to_string(outer.end) +
        "] without nesting inside it");
  }
  for (const TraceArg& a : args) {
    if (const double* d = std::get_if<double>(&a.value); d && !std::isfinite(*d)) {
      bug(where() + ": arg '" + a.name + "' is not finite");
    }
  }
  // Flow ids: each once as out, once as in, never both on one slice, and the arrow may not point back in time.
  for (size_t i = 0; i < flows_out.size(); ++i) {
    uint64_t id = flows_out[i];
    if (contains(flows_out, i, id) || contains(flows_in, flows_in.size(), id)) {
      bug(where() + " names flow " + std::to_string(id) + " twice");
    }
    auto it = m_flows.find(id);
    if (it == m_flows.end()) continue;
    if (it->second.has_out) bug(where() + " starts flow " + std::to_string(id) + ", which another slice started");
    if (it->second.has_in && it->second.in_begin < begin_ns) {
      bug(where() + " starts flow " + std::to_string(id) + " after its end (" +
          std::to_string(it->second.in_begin) + ")");
    }
    // At equal times the importers take file order as time order, and both formats would drop the arrow.
    if (it->second.has_in && it->second.in_begin == begin_ns) {
      bug(where() + " starts flow " + std::to_string(id) + " at the time it ends, but was reported after the end; "
          "report the sending slice first");
    }
  }
  for (size_t i = 0; i < flows_in.size(); ++i) {
    uint64_t id = flows_in[i];
    if (contains(flows_in, i, id)) bug(where() + " names flow " + std::to_string(id) + " twice");
    auto it = m_flows.find(id);
    if (it == m_flows.end()) continue;
    if (it->second.has_in) bug(where() + " ends flow " + std::to_string(id) + ", which another slice ended");
    if (it->second.has_out && begin_ns < it->second.out_begin) {
      bug(where() + " ends flow " + std::to_string(id) + " before its start (" +
          std::to_string(it->second.out_begin) + ")");
    }
  }

  while (track.open.size() > still_open) {
    m_backend->slice_end(t, track.open.back().end);
    track.open.pop_back();
  }
  m_backend->slice_begin(t, begin_ns, end_ns, name, args, flows_out, flows_in);
  track.open.push_back(OpenSlice{begin_ns, end_ns});
  track.last_begin = begin_ns;
  ++m_tally.slices;
  for (uint64_t id : flows_out) {
    FlowState& f = m_flows[id];
    f.has_out = true;
    f.out_begin = begin_ns;
    if (f.has_in) ++m_tally.flows;
  }
  for (uint64_t id : flows_in) {
    FlowState& f = m_flows[id];
    f.has_in = true;
    f.in_begin = begin_ns;
    if (f.has_out) ++m_tally.flows;
  }
}

void TraceWriter::counter_value(Track t, uint64_t ts_ns, double v) {
  check_open("counter_value()");
  const TrackState& track = used_track(t, "counter value");
  if (track.kind != Kind::Counter) bug("counter value on track " + std::to_string(t) + ", not a counter track");
  if (!std::isfinite(v)) bug("counter value on track " + std::to_string(t) + " is not finite");
  m_backend->counter_value(t, ts_ns, v);
  ++m_tally.counter_values;
}

void TraceWriter::close() {
  if (m_closed) return;
  m_closed = true;
  for (Track t = 1; t < m_tracks.size(); ++t) {
    std::vector<OpenSlice>& open = m_tracks[t].open;
    while (!open.empty()) {
      m_backend->slice_end(t, open.back().end);
      open.pop_back();
    }
  }
  m_backend->finish();
}

TraceWriter::Tally TraceWriter::tally() const { return m_tally; }

}  // namespace podsim

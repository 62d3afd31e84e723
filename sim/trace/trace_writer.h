// TraceWriter: the simulator's timeline output, one writer sequence per file.
//
//   auto w = TraceWriter::create("out/trace.pftrace", TraceFormat::Pftrace, /*gzip=*/false);
//   auto chip = w->process("chip 0 (x=0,y=0,z=0)", /*pid=*/1, /*rank=*/0);
//   auto ops = w->child(chip, "XLA Ops", 2);
//   w->slice(ops, 200, 3000, "fusion.1", {{"flops", int64_t{1} << 34}});
//   w->close();
//
// Pftrace is Perfetto's native protobuf (TrackEvent packets, streamed, interned names); Json is the Chrome trace
// event format for tools that read nothing else. Both carry the same tracks, slices, counters and flows, as far as
// JSON can (its hierarchy is only process -> thread, so deeper tracks become threads named by their path).
//
// The writer checks what Perfetto's importer would silently get wrong (mis-nested slices, undeclared tracks,
// counters on slice tracks, reused flow ids) and throws Error(Err::Internal): those are simulator bugs. So are
// non-finite counter values and args, which JSON cannot carry. A rejected call writes nothing.
// The file is written as the buffer fills, so any call may also throw Error(Err::OutputUnwritable).
// Timestamps are integer ns of simulated time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

namespace podsim {

enum class TraceFormat { Pftrace, Json };

struct TraceArg {
  std::string name;
  std::variant<int64_t, double, std::string> value;
};

class TraceBackend;  // the format encoder, in sim/trace/trace_backend.h

class TraceWriter {
 public:
  using Track = uint64_t;

  // Opens `path` for writing (replacing it); Error(Err::OutputUnwritable) if it cannot be created.
  static std::unique_ptr<TraceWriter> create(const std::string& path, TraceFormat fmt, bool gzip);
  // Finishes the file if close() was not called; I/O errors are then lost, so call close().
  virtual ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // A chip: a process track, ordered among processes by `rank`. pid must be unique, in [1, 2^30).
  Track process(const std::string& name, int pid, int rank);
  // A slice track under a process, global or child track, ordered among its siblings by `rank`.
  Track child(Track parent, const std::string& name, int rank);
  // A counter track with a unit ("%", "GB/s"); tracks with the same share_key share one y scale.
  Track counter(Track parent, const std::string& name, const std::string& unit, int rank,
                const std::string& share_key = "");
  // A pod-level track outside any process (aggregate counters, pipeline stages).
  Track global(const std::string& name, int rank);
  // First lane under `parent` named `name` (then "name 2", "name 3", ...) that is free at `begin`: concurrent
  // work goes to separate lanes automatically. The lane counts as busy until `end`. All lanes of a group get
  // `rank` and sit in creation order.
  Track lane(Track parent, const std::string& name, uint64_t begin_ns, uint64_t end_ns, int rank);

  // Slices on one track must arrive in non-decreasing begin order and nest strictly or be disjoint.
  // flows_out starts an arrow at this slice; flows_in ends one here. Each id is used once out and once in, the
  // in slice may not begin before the out slice, and when both begin at the same time the out slice must be
  // reported first (importers read ties in file order).
  void slice(Track t, uint64_t begin_ns, uint64_t end_ns, const std::string& name,
             const std::vector<TraceArg>& args = {}, const std::vector<uint64_t>& flows_out = {},
             const std::vector<uint64_t>& flows_in = {});
  void counter_value(Track t, uint64_t ts_ns, double v);

  // Flush and close; Error(Err::OutputUnwritable) on I/O failure. Nothing may be written afterwards.
  void close();

  struct Tally {
    uint64_t slices = 0, counter_values = 0, flows = 0, tracks = 0;  // flows: ids seen both out and in
  };
  Tally tally() const;

 private:
  enum class Kind : uint8_t { Process, Global, Child, Counter };
  struct OpenSlice {
    uint64_t begin, end;
  };
  struct TrackState {
    Kind kind;
    std::vector<OpenSlice> open;  // the nesting stack: slices not yet ended at the latest begin
    uint64_t last_begin = 0;
  };
  struct FlowState {
    uint64_t out_begin = 0, in_begin = 0;
    bool has_out = false, has_in = false;
  };
  struct LaneGroup {
    std::vector<Track> lanes;
    std::vector<uint64_t> busy_until;
  };

  explicit TraceWriter(std::unique_ptr<TraceBackend> backend);
  TrackState& used_track(Track t, const char* what, const std::string& name = {}, const char* relation = " on track ");
  void check_parent(Track parent, const char* what, const std::string& name);  // declared and not a counter
  Track add_track(Kind kind);
  void note_flow(uint64_t id, bool out, uint64_t begin_ns, const std::string& slice_name);
  void check_open(const char* what) const;

  std::unique_ptr<TraceBackend> m_backend;
  std::vector<TrackState> m_tracks;  // indexed by track uuid; uuid 0 is Perfetto's root and not usable
  std::unordered_map<int, Track> m_pids;
  std::unordered_map<uint64_t, FlowState> m_flows;
  std::unordered_map<std::string, LaneGroup> m_lanes;  // key: parent uuid + '\0' + name
  Tally m_tally;
  bool m_closed = false;
};

}  // namespace podsim

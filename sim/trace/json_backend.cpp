// The Chrome JSON backend: {"traceEvents":[...]} with one event per line, streamed like the protobuf output.
//
// JSON knows only process -> thread, so each chip process keeps its pid, each global track becomes a process of
// its own, and every slice track below them becomes a thread whose name is its path ("Collectives / all-reduce.3").
// Synthetic pids and tids start at 2^30 (TraceWriter keeps chip pids below) and are unique across the file,
// because a tid equal to some pid would make trace processor take it for that process's main thread.
//
// Things measured with Perfetto's trace processor (v55.3) that shape the output:
//  - times are µs; we print ns exactly as a decimal fraction, never through a double;
//  - a flow end binds to the slice enclosing its timestamp, and a zero-length slice encloses it only while it is
//    the latest event on its thread, so each `s`/`f` event is written right after its slice;
//  - M events are honoured anywhere in the file, so thread sort indexes, which need the whole track tree, go last;
//  - `C` counters are per process and named "<name> <arg key>", so the key is the unit: "HBM bandwidth GB/s";
//  - flow ids are hex strings: as numbers, ids above 2^63 are rejected.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "sim/trace/trace_backend.h"

namespace podsim {

namespace {

constexpr int64_t kSyntheticBase = int64_t{1} << 30;

struct JsonTrack {
  int64_t pid = 0;
  int64_t tid = 0;
  bool is_root = false;       // a process or global track: a JSON process
  bool is_counter = false;
  bool main_named = false;    // thread_name written for the root's own thread (slices on the process track)
  int rank = 0;
  std::string name;           // process name, or the path below the process
  std::string counter_key;
  std::vector<uint64_t> children;
};

void append_escaped(std::string& out, const std::string& s) {
  bool ascii = std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  if (!ascii) {
    // nlohmann validates UTF-8 and replaces what is broken, so one odd byte cannot make the file unreadable.
    out += nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return;
  }
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += c;
    }
  }
  out += '"';
}

// ns as µs with up to 3 decimals, exactly.
void append_us(std::string& out, uint64_t ns) {
  out += std::to_string(ns / 1000);
  unsigned frac = static_cast<unsigned>(ns % 1000);
  if (frac == 0) return;
  char digits[5];
  std::snprintf(digits, sizeof digits, ".%03u", frac);
  std::string_view d(digits);
  while (d.back() == '0') d.remove_suffix(1);
  out += d;
}

void append_double(std::string& out, double v) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that reads back as the same double
  out.append(buf, res.ptr);
}

class JsonBackend : public TraceBackend {
 public:
  explicit JsonBackend(std::unique_ptr<TraceSink> sink) : m_sink(std::move(sink)) {
    m_tracks.resize(1);  // uuid 0 is never used
    m_sink->append("{\"traceEvents\":[");
  }

  void process(uint64_t uuid, const std::string& name, int pid, int rank) override { add_root(uuid, name, pid, rank); }

  void global(uint64_t uuid, const std::string& name, int rank) override {
    add_root(uuid, name, kSyntheticBase + static_cast<int64_t>(uuid), rank);
  }

  void child(uint64_t uuid, uint64_t parent, const std::string& name, int rank) override {
    JsonTrack& t = add_below(uuid, parent, name, rank);
    t.tid = kSyntheticBase + static_cast<int64_t>(uuid);
    thread_name(t.pid, t.tid, t.name);
  }

  void counter(uint64_t uuid, uint64_t parent, const std::string& name, const std::string& unit, int rank,
               const std::string&) override {
    JsonTrack& t = add_below(uuid, parent, name, rank);
    t.is_counter = true;
    t.counter_key = unit.empty() ? "value" : unit;
  }

  void slice_begin(uint64_t track, uint64_t begin_ns, uint64_t end_ns, const std::string& name,
                   const std::vector<TraceArg>& args, const std::vector<uint64_t>& flows_out,
                   const std::vector<uint64_t>& flows_in) override {
    JsonTrack& t = m_tracks[track];
    if (t.is_root && !t.main_named) {
      thread_name(t.pid, t.tid, t.name);
      t.main_named = true;
    }
    std::string& out = start_event("X", t.pid, t.tid);
    out += ",\"ts\":";
    append_us(out, begin_ns);
    out += ",\"dur\":";
    append_us(out, end_ns - begin_ns);
    out += ",\"name\":";
    append_escaped(out, name);
    if (!args.empty()) {
      out += ",\"args\":{";
      for (size_t i = 0; i < args.size(); ++i) {
        if (i) out += ',';
        append_escaped(out, args[i].name);
        out += ':';
        if (const int64_t* v = std::get_if<int64_t>(&args[i].value)) {
          out += std::to_string(*v);
        } else if (const double* d = std::get_if<double>(&args[i].value)) {
          append_double(out, *d);
        } else {
          append_escaped(out, std::get<std::string>(args[i].value));
        }
      }
      out += '}';
    }
    out += '}';
    for (uint64_t id : flows_out) flow_event("s", t, begin_ns, id);
    for (uint64_t id : flows_in) flow_event("f", t, begin_ns, id);
    m_sink->maybe_flush();
  }

  void slice_end(uint64_t, uint64_t) override {}  // X events carry their duration

  void counter_value(uint64_t track, uint64_t ts_ns, double v) override {
    const JsonTrack& t = m_tracks[track];
    std::string& out = start_event("C", t.pid, -1);
    out += ",\"ts\":";
    append_us(out, ts_ns);
    out += ",\"name\":";
    append_escaped(out, t.name);
    out += ",\"args\":{";
    append_escaped(out, t.counter_key);
    out += ':';
    append_double(out, v);
    out += "}}";
    m_sink->maybe_flush();
  }

  void finish() override {
    // Threads in the order the protobuf output shows them: depth first, siblings by rank, then by creation.
    for (uint64_t uuid = 1; uuid < m_tracks.size(); ++uuid) {
      if (!m_tracks[uuid].is_root) continue;
      int index = 0;
      sort_threads(m_tracks[uuid], index);
    }
    m_sink->append("\n]}\n");
    m_sink->close();
  }

 private:
  std::string& start_event(const char* ph, int64_t pid, int64_t tid) {
    std::string& out = m_sink->buffer();
    out += m_first ? "\n{\"ph\":\"" : ",\n{\"ph\":\"";
    m_first = false;
    out += ph;
    out += "\",\"pid\":";
    out += std::to_string(pid);
    if (tid >= 0) {
      out += ",\"tid\":";
      out += std::to_string(tid);
    }
    return out;
  }

  // An M event; `args` is the text of its args object.
  void metadata(const char* what, int64_t pid, int64_t tid, const std::string& args) {
    std::string& out = start_event("M", pid, tid);
    out += ",\"name\":\"";
    out += what;
    out += "\",\"args\":";
    out += args;
    out += '}';
    m_sink->maybe_flush();
  }

  static std::string name_args(const std::string& name) {
    std::string args = "{\"name\":";
    append_escaped(args, name);
    return args + '}';
  }

  static std::string sort_args(int index) { return "{\"sort_index\":" + std::to_string(index) + '}'; }

  void thread_name(int64_t pid, int64_t tid, const std::string& name) {
    metadata("thread_name", pid, tid, name_args(name));
  }

  void add_root(uint64_t uuid, const std::string& name, int64_t pid, int rank) {
    m_tracks.resize(uuid + 1);
    JsonTrack& t = m_tracks[uuid];
    t.pid = pid;
    t.tid = pid;  // the process's own slices go on its main thread
    t.is_root = true;
    t.rank = rank;
    t.name = name;
    metadata("process_name", pid, -1, name_args(name));
    metadata("process_sort_index", pid, -1, sort_args(rank));
  }

  JsonTrack& add_below(uint64_t uuid, uint64_t parent, const std::string& name, int rank) {
    m_tracks.resize(uuid + 1);
    JsonTrack& p = m_tracks[parent];
    p.children.push_back(uuid);
    JsonTrack& t = m_tracks[uuid];
    t.pid = p.pid;
    t.rank = rank;
    t.name = p.is_root ? name : p.name + " / " + name;
    return t;
  }

  void flow_event(const char* ph, const JsonTrack& t, uint64_t ts_ns, uint64_t id) {
    std::string& out = start_event(ph, t.pid, t.tid);
    out += ",\"ts\":";
    append_us(out, ts_ns);
    char hex[24];
    std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(id));
    out += ",\"id\":\"";
    out += hex;
    out += '"';
    // "bp":"e" binds the end to the enclosing slice, as the start always is, instead of to the next slice.
    if (ph[0] == 'f') out += ",\"bp\":\"e\"";
    out += ",\"name\":\"flow\",\"cat\":\"flow\"}";
  }

  void sort_threads(const JsonTrack& parent, int& index) {
    std::vector<uint64_t> order = parent.children;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint64_t a, uint64_t b) { return m_tracks[a].rank < m_tracks[b].rank; });
    for (uint64_t uuid : order) {
      const JsonTrack& t = m_tracks[uuid];
      if (t.is_counter) continue;
      metadata("thread_sort_index", t.pid, t.tid, sort_args(index++));
      sort_threads(t, index);
    }
  }

  std::unique_ptr<TraceSink> m_sink;
  std::vector<JsonTrack> m_tracks;  // indexed by track uuid
  bool m_first = true;
};

}  // namespace

std::unique_ptr<TraceBackend> make_json_backend(std::unique_ptr<TraceSink> sink) {
  return std::make_unique<JsonBackend>(std::move(sink));
}

}  // namespace podsim

// The Perfetto protobuf backend: TrackEvent packets built with the classes protoc generates from
// perfetto_subset.proto and streamed as `Trace.packet` records (tag 0x0A, varint length, message), so the file is
// valid after every packet and memory stays flat however long the run.
//
// One writer sequence (trusted_packet_sequence_id 1): trace processor handles a single sequence best (one per track
// cost 2x memory in the reference measurements). Slice names are interned per sequence; the first packet clears the
// incremental state and every packet that defines or uses an iid says it needs it, or the names load as NULL.
#include <google/protobuf/io/coded_stream.h>

#include <string>
#include <unordered_map>

#include "base/error.h"
#include "sim/trace/perfetto_subset.pb.h"
#include "sim/trace/trace_backend.h"

namespace podsim {

namespace {

namespace pb = perfetto::protos;
using google::protobuf::io::CodedOutputStream;

constexpr uint32_t kSequenceId = 1;
constexpr uint8_t kTracePacketTag = (1 << 3) | 2;  // Trace.packet = 1, length-delimited

class PftraceBackend : public TraceBackend {
 public:
  explicit PftraceBackend(std::unique_ptr<TraceSink> sink) : m_sink(std::move(sink)) {
    // The root track (uuid 0) carries the process ordering; without it the UI sorts chips by its own heuristics.
    pb::TrackDescriptor* root = start_packet()->mutable_track_descriptor();
    root->set_uuid(0);
    root->set_process_ordering(pb::TrackDescriptor::PROCESS_ORDERING_EXPLICIT);
    m_packet.set_sequence_flags(pb::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
    emit();
  }

  void process(uint64_t uuid, const std::string& name, int pid, int rank) override {
    pb::TrackDescriptor* d = start_packet()->mutable_track_descriptor();
    d->set_uuid(uuid);
    d->mutable_process()->set_pid(pid);
    d->mutable_process()->set_process_name(name);
    d->set_child_ordering(pb::TrackDescriptor::EXPLICIT);
    d->set_sibling_order_rank(rank);
    emit();
  }

  void global(uint64_t uuid, const std::string& name, int rank) override {
    pb::TrackDescriptor* d = named_track(uuid, name, rank);
    d->set_child_ordering(pb::TrackDescriptor::EXPLICIT);
    emit();
  }

  void child(uint64_t uuid, uint64_t parent, const std::string& name, int rank) override {
    pb::TrackDescriptor* d = named_track(uuid, name, rank);
    d->set_parent_uuid(parent);
    d->set_child_ordering(pb::TrackDescriptor::EXPLICIT);
    emit();
  }

  void counter(uint64_t uuid, uint64_t parent, const std::string& name, const std::string& unit, int rank,
               const std::string& share_key) override {
    pb::TrackDescriptor* d = named_track(uuid, name, rank);
    d->set_parent_uuid(parent);
    pb::CounterDescriptor* c = d->mutable_counter();
    if (!unit.empty()) c->set_unit_name(unit);
    if (!share_key.empty()) c->set_y_axis_share_key(share_key);
    emit();
  }

  void slice_begin(uint64_t track, uint64_t begin_ns, uint64_t, const std::string& name,
                   const std::vector<TraceArg>& args, const std::vector<uint64_t>& flows_out,
                   const std::vector<uint64_t>& flows_in) override {
    pb::TrackEvent* e = start_event(begin_ns, track, pb::TrackEvent::TYPE_SLICE_BEGIN);
    e->set_name_iid(intern(name));
    m_packet.set_sequence_flags(pb::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
    for (const TraceArg& arg : args) {
      pb::DebugAnnotation* a = e->add_debug_annotations();
      a->set_name(arg.name);
      if (const int64_t* i = std::get_if<int64_t>(&arg.value)) {
        a->set_int_value(*i);
      } else if (const double* d = std::get_if<double>(&arg.value)) {
        a->set_double_value(*d);
      } else {
        a->set_string_value(std::get<std::string>(arg.value));
      }
    }
    for (uint64_t id : flows_out) e->add_flow_ids(id);
    for (uint64_t id : flows_in) e->add_terminating_flow_ids(id);
    emit();
  }

  void slice_end(uint64_t track, uint64_t end_ns) override {
    start_event(end_ns, track, pb::TrackEvent::TYPE_SLICE_END);
    emit();
  }

  void counter_value(uint64_t track, uint64_t ts_ns, double v) override {
    start_event(ts_ns, track, pb::TrackEvent::TYPE_COUNTER)->set_double_counter_value(v);
    emit();
  }

  void finish() override { m_sink->close(); }

 private:
  pb::TracePacket* start_packet() {
    m_packet.Clear();
    m_packet.set_trusted_packet_sequence_id(kSequenceId);
    return &m_packet;
  }

  // Names are not merged: lanes and per-collective tracks may share a name with a sibling, and each declared
  // track is meant to be its own row.
  pb::TrackDescriptor* named_track(uint64_t uuid, const std::string& name, int rank) {
    pb::TrackDescriptor* d = start_packet()->mutable_track_descriptor();
    d->set_uuid(uuid);
    d->set_name(name);
    d->set_sibling_order_rank(rank);
    d->set_sibling_merge_behavior(pb::TrackDescriptor::SIBLING_MERGE_BEHAVIOR_NONE);
    return d;
  }

  pb::TrackEvent* start_event(uint64_t ts_ns, uint64_t track, pb::TrackEvent::Type type) {
    start_packet()->set_timestamp(ts_ns);
    pb::TrackEvent* e = m_packet.mutable_track_event();
    e->set_type(type);
    e->set_track_uuid(track);
    return e;
  }

  // The iid of `name`, defining it in the current packet the first time: a definition must come no later than
  // its first use, and the same packet is early enough.
  uint64_t intern(const std::string& name) {
    auto [it, added] = m_iids.try_emplace(name, m_iids.size() + 1);
    if (added) {
      pb::EventName* n = m_packet.mutable_interned_data()->add_event_names();
      n->set_iid(it->second);
      n->set_name(name);
    }
    return it->second;
  }

  void emit() {
    size_t size = m_packet.ByteSizeLong();
    if (size > UINT32_MAX) throw Error(Err::Internal, "trace packet of " + std::to_string(size) + " bytes");
    std::string& buf = m_sink->buffer();
    size_t at = buf.size();
    buf.resize(at + 1 + CodedOutputStream::VarintSize32(static_cast<uint32_t>(size)) + size);
    auto* p = reinterpret_cast<uint8_t*>(buf.data()) + at;
    *p++ = kTracePacketTag;
    p = CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(size), p);
    m_packet.SerializeWithCachedSizesToArray(p);
    m_sink->maybe_flush();
  }

  std::unique_ptr<TraceSink> m_sink;
  pb::TracePacket m_packet;  // one packet object, cleared and refilled for each record
  std::unordered_map<std::string, uint64_t> m_iids;
};

}  // namespace

std::unique_ptr<TraceBackend> make_pftrace_backend(std::unique_ptr<TraceSink> sink) {
  return std::make_unique<PftraceBackend>(std::move(sink));
}

}  // namespace podsim

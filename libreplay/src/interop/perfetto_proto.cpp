// Perfetto's protobuf trace format; see replay/perfetto.h for the layout and
// interop/perfetto_trace.proto for the messages.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <variant>

#include "interop/perfetto_trace.pb.h"
#include "interop/perfetto_walk.h"
#include "replay/perfetto.h"

namespace replay {
namespace {

namespace pb = ::perfetto::protos;
using interop::PerfettoArrow;
using interop::PerfettoSlice;
using interop::PerfettoTrack;
using interop::RankTimeline;
using interop::TimelineInstant;

// Every packet is on one sequence: interned strings are per sequence.
constexpr uint32_t kSequence = 1;
// Trace.packet: field 1, length-delimited.
constexpr uint32_t kPacketTag = (1 << 3) | 2;
// Interned strings kept at most before the sequence's state is cleared and
// interning starts over, so that memory stays bounded however many distinct
// names a trace has.
constexpr size_t kMaxInterned = size_t{1} << 16;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
// One interning table: string -> iid, from 1.
using Interned = std::unordered_map<std::string, uint64_t, StringHash, std::equal_to<>>;

class ProtoSink : public interop::PerfettoSink {
 public:
  ProtoSink(std::ostream& out, int64_t start_ns) : stream_(&out), start_ns_(start_ns) {
    coded_ = std::make_unique<google::protobuf::io::CodedOutputStream>(&stream_);
  }

  // The root track: processes in the order of their sibling_order_rank (rank).
  void Begin() {
    Start();
    pb::TrackDescriptor* root = packet_.mutable_track_descriptor();
    root->set_uuid(0);
    root->set_process_ordering(pb::TrackDescriptor::PROCESS_ORDERING_EXPLICIT);
    Write();
  }

  void BeginRank(const RankTimeline& r, const std::vector<PerfettoTrack>& tracks) override {
    process_uuid_ = next_uuid_++;
    Start();
    pb::TrackDescriptor* process = packet_.mutable_track_descriptor();
    process->set_uuid(process_uuid_);
    process->set_child_ordering(pb::TrackDescriptor::EXPLICIT);
    process->set_sibling_order_rank(r.rank);
    pb::ProcessDescriptor* p = process->mutable_process();
    p->set_pid(r.rank + 1);
    std::string name = "rank " + std::to_string(r.rank);
    if (!r.host.empty()) name += " (" + r.host + ", pid " + std::to_string(r.pid) + ")";
    p->set_process_name(name);
    if (r.status != "complete") p->add_process_labels(r.status);
    Write();

    track_uuids_.assign(tracks.empty() ? 1 : static_cast<size_t>(tracks.back().id) + 1, 0);
    for (const PerfettoTrack& t : tracks) {
      track_uuids_[static_cast<size_t>(t.id)] = next_uuid_;
      Start();
      pb::TrackDescriptor* track = packet_.mutable_track_descriptor();
      track->set_uuid(next_uuid_++);
      track->set_parent_uuid(process_uuid_);
      track->set_name(t.name);
      track->set_sibling_order_rank(t.id);
      Write();
    }
  }

  void Slice(const RankTimeline&, const PerfettoSlice& s) override {
    StartInterning();
    packet_.set_timestamp(Ns(s.start_ns));
    pb::TrackEvent* e = packet_.mutable_track_event();
    e->set_type(pb::TrackEvent::TYPE_SLICE_BEGIN);
    e->set_track_uuid(TrackUuid(s.track));
    // A collective's name carries its sequence number and recurs only on
    // other ranks, long after: interning it would cost more than it saves.
    if (s.op->collective()) {
      e->set_name(s.name);
    } else {
      e->set_name_iid(Intern(names_, s.name, [](pb::InternedData* d) { return d->add_event_names(); }));
    }
    e->add_category_iids(Intern(categories_, s.category, [](pb::InternedData* d) { return d->add_event_categories(); }));
    for (const interop::PerfettoArg& a : s.args) {
      pb::DebugAnnotation* d = e->add_debug_annotations();
      d->set_name_iid(Intern(arg_names_, a.name, [](pb::InternedData* i) { return i->add_debug_annotation_names(); }));
      std::visit([&](auto v) {
        using T = decltype(v);
        if constexpr (std::is_same_v<T, int64_t>) {
          d->set_int_value(v);
        } else if constexpr (std::is_same_v<T, uint64_t>) {
          d->set_uint_value(v);
        } else if constexpr (std::is_same_v<T, double>) {
          d->set_double_value(v);
        } else {
          d->set_string_value_iid(InternBytes(strings_, v));
        }
      }, a.value);
    }
    for (uint64_t id : s.arrows_out) e->add_flow_ids(id);
    Write();

    Start();
    packet_.set_timestamp(Ns(s.end_ns));
    e = packet_.mutable_track_event();
    e->set_type(pb::TrackEvent::TYPE_SLICE_END);
    e->set_track_uuid(TrackUuid(s.track));
    // At the end: Perfetto drops an arrow whose end it reads first, and a
    // slice's end is not before the start of the slice its arrows come from
    // (the first caller of a collective; a message's send), clocks allowing.
    for (uint64_t id : s.arrows_in) e->add_terminating_flow_ids(id);
    Write();
  }

  void Instant(const RankTimeline&, int32_t track, const TimelineInstant& in) override {
    StartInterning();
    packet_.set_timestamp(Ns(in.time_ns));
    pb::TrackEvent* e = packet_.mutable_track_event();
    e->set_type(pb::TrackEvent::TYPE_INSTANT);
    e->set_track_uuid(track != 0 ? TrackUuid(track) : process_uuid_);
    e->set_name_iid(Intern(names_, in.text, [](pb::InternedData* d) { return d->add_event_names(); }));
    const char* category = in.kind == TimelineInstant::Kind::kMark    ? "mark"
                           : in.kind == TimelineInstant::Kind::kError ? "error"
                                                                      : "signal";
    e->add_category_iids(Intern(categories_, category, [](pb::InternedData* d) { return d->add_event_categories(); }));
    Write();
  }

  // Arrows went with their slices.
  void Arrow(const PerfettoArrow&) override {}

  // Flushes what is buffered into the stream; false if writing failed.
  bool Finish() {
    const bool ok = !coded_->HadError();
    coded_.reset();
    return ok;
  }

  uint64_t packets() const { return packets_; }

 private:
  // A new packet on the sequence.
  void Start() {
    packet_.Clear();
    packet_.set_trusted_packet_sequence_id(kSequence);
    if (clear_) {
      packet_.set_sequence_flags(pb::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
      clear_ = false;
    }
  }

  // A new packet that refers to interned strings: the tables start over first
  // if they could grow past their bound with it.
  void StartInterning() {
    constexpr size_t kMostPerPacket = 64;
    if (names_.size() + categories_.size() + arg_names_.size() + strings_.size() + kMostPerPacket > kMaxInterned) {
      names_.clear();
      categories_.clear();
      arg_names_.clear();
      strings_.clear();
      clear_ = true;
    }
    Start();
    packet_.set_sequence_flags(packet_.sequence_flags() | pb::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
  }

  // The iid of `s` in `table`; a string new to the sequence goes into this
  // packet's interned data, as the entry `add` makes.
  template <typename Add>
  uint64_t Intern(Interned& table, std::string_view s, Add add) {
    auto it = table.find(s);
    if (it != table.end()) return it->second;
    const uint64_t iid = table.size() + 1;
    table.emplace(std::string(s), iid);
    auto* entry = add(packet_.mutable_interned_data());
    entry->set_iid(iid);
    entry->set_name(std::string(s));
    return iid;
  }

  uint64_t InternBytes(Interned& table, std::string_view s) {
    auto it = table.find(s);
    if (it != table.end()) return it->second;
    const uint64_t iid = table.size() + 1;
    table.emplace(std::string(s), iid);
    pb::InternedString* entry = packet_.mutable_interned_data()->add_debug_annotation_string_values();
    entry->set_iid(iid);
    entry->set_str(std::string(s));
    return iid;
  }

  // Trace.packet, one at a time: the file is a Trace without ever holding one.
  void Write() {
    coded_->WriteTag(kPacketTag);
    coded_->WriteVarint32(static_cast<uint32_t>(packet_.ByteSizeLong()));
    packet_.SerializeWithCachedSizes(coded_.get());
    ++packets_;
  }

  uint64_t Ns(int64_t t) const { return t > start_ns_ ? static_cast<uint64_t>(t - start_ns_) : 0; }
  uint64_t TrackUuid(int32_t track) const { return track_uuids_[static_cast<size_t>(track)]; }

  google::protobuf::io::OstreamOutputStream stream_;
  std::unique_ptr<google::protobuf::io::CodedOutputStream> coded_;  // over stream_
  int64_t start_ns_;
  pb::TracePacket packet_;
  uint64_t packets_ = 0;
  bool clear_ = true;  // the next packet clears the sequence's incremental state
  Interned names_;
  Interned categories_;
  Interned arg_names_;
  Interned strings_;
  uint64_t next_uuid_ = 1;  // 0 is the root
  uint64_t process_uuid_ = 0;
  std::vector<uint64_t> track_uuids_;  // this rank's, by track id
};

}  // namespace

Result<PerfettoSummary> WritePerfettoProto(const TraceReader& trace, std::ostream& out,
                                           const PerfettoOptions& options) {
  REPLAY_ASSIGN_OR_RETURN(interop::PerfettoPlan plan, interop::PlanPerfetto(trace, options));
  Result<PerfettoSummary> summary = PerfettoSummary{};
  bool written = false;
  {
    ProtoSink sink(out, plan.timeline.start_ns);
    sink.Begin();
    summary = interop::WalkPerfetto(plan, sink);
    if (!summary.ok()) return summary.status();
    written = sink.Finish();
    summary->events = sink.packets();
  }  // the stream flushes what it holds into `out`
  if (!written || !out) return Status::IoError("writing the Perfetto trace failed");
  return summary;
}

}  // namespace replay

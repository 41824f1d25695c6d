// pftrace_reader.h: a protobuf Perfetto export read back with the generated
// classes, resolved as Perfetto resolves it (interned strings per sequence
// state, tracks by uuid, slices from begin and end events per track, arrows by
// flow id), for the tests of `replay export --format pftrace`.
//
// Reading checks what a reader relies on (REQUIRE): one sequence, a first
// packet that clears its state, interned ids defined before use and only on
// packets that say they need them, tracks described before their events,
// begin and end events that pair up on each track without overlapping.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "interop/perfetto_trace.pb.h"
#include "util/json.h"

namespace replay::testing {

struct PftraceTrack {
  uint64_t uuid = 0;
  uint64_t parent = 0;
  std::string name;          // child tracks
  int32_t pid = 0;           // process tracks
  std::string process_name;  // process tracks
  std::vector<std::string> labels;
  int32_t order = 0;         // sibling_order_rank
  bool is_process = false;
  bool explicit_children = false;
};

struct PftraceSlice {
  int32_t rank = -1;   // its process's pid - 1
  std::string track;   // the child track's name
  std::string name;
  std::string category;
  uint64_t begin_ns = 0;
  uint64_t end_ns = 0;
  size_t begin_packet = 0;
  size_t end_packet = 0;
  nlohmann::json args = nlohmann::json::object();
  std::vector<uint64_t> flows_out;  // on the begin event
  std::vector<uint64_t> flows_in;   // on the end event
};

struct PftraceInstant {
  int32_t rank = -1;
  std::string track;  // empty: on the process track
  std::string name;
  std::string category;
  uint64_t ns = 0;
};

struct Pftrace {
  std::map<uint64_t, PftraceTrack> tracks;  // by uuid
  std::vector<PftraceSlice> slices;         // in the order their begin events come
  std::vector<PftraceInstant> instants;
  size_t packets = 0;
  size_t clears = 0;  // packets that cleared the incremental state
  bool process_ordering = false;  // the root orders processes explicitly
};

inline Pftrace ReadPftrace(const std::string& bytes) {
  namespace pb = ::perfetto::protos;
  pb::Trace trace;
  REQUIRE(trace.ParseFromString(bytes));
  Pftrace out;
  out.packets = static_cast<size_t>(trace.packet_size());
  std::map<uint64_t, std::string> names, categories, arg_names, strings;
  std::map<uint64_t, size_t> open;  // track uuid -> its open slice
  std::map<uint64_t, uint64_t> last_end;  // track uuid -> the end of its last slice
  auto rank_of = [&](uint64_t uuid) {
    const PftraceTrack& t = out.tracks.at(uuid);
    const PftraceTrack& p = t.is_process ? t : out.tracks.at(t.parent);
    REQUIRE(p.is_process);
    return p.pid - 1;
  };
  for (int i = 0; i < trace.packet_size(); ++i) {
    const pb::TracePacket& p = trace.packet(i);
    INFO("packet " << i);
    REQUIRE(p.trusted_packet_sequence_id() == 1);
    const bool cleared = (p.sequence_flags() & pb::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED) != 0;
    const bool needs = (p.sequence_flags() & pb::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE) != 0;
    if (i == 0) REQUIRE(cleared);
    if (cleared) {
      names.clear();
      categories.clear();
      arg_names.clear();
      strings.clear();
      ++out.clears;
    }
    if (p.has_interned_data()) {
      REQUIRE(needs);
      const pb::InternedData& d = p.interned_data();
      for (const auto& e : d.event_names()) REQUIRE(names.emplace(e.iid(), e.name()).second);
      for (const auto& e : d.event_categories()) REQUIRE(categories.emplace(e.iid(), e.name()).second);
      for (const auto& e : d.debug_annotation_names()) REQUIRE(arg_names.emplace(e.iid(), e.name()).second);
      for (const auto& e : d.debug_annotation_string_values()) REQUIRE(strings.emplace(e.iid(), e.str()).second);
    }
    if (p.has_track_descriptor()) {
      const pb::TrackDescriptor& d = p.track_descriptor();
      REQUIRE(d.has_uuid());
      if (d.uuid() == 0) {
        out.process_ordering = d.process_ordering() == pb::TrackDescriptor::PROCESS_ORDERING_EXPLICIT;
        continue;
      }
      PftraceTrack t;
      t.uuid = d.uuid();
      t.parent = d.parent_uuid();
      t.name = d.name();
      t.is_process = d.has_process();
      t.pid = d.process().pid();
      t.process_name = d.process().process_name();
      t.labels.assign(d.process().process_labels().begin(), d.process().process_labels().end());
      t.order = d.sibling_order_rank();
      t.explicit_children = d.child_ordering() == pb::TrackDescriptor::EXPLICIT;
      if (!t.is_process) REQUIRE(out.tracks.count(t.parent) == 1);
      REQUIRE(out.tracks.emplace(t.uuid, t).second);
      continue;
    }
    if (!p.has_track_event()) continue;
    const pb::TrackEvent& e = p.track_event();
    REQUIRE(p.has_timestamp());
    REQUIRE(out.tracks.count(e.track_uuid()) == 1);
    const PftraceTrack& track = out.tracks.at(e.track_uuid());
    auto resolve = [&](const std::map<uint64_t, std::string>& table, uint64_t iid) {
      REQUIRE(needs);
      auto it = table.find(iid);
      REQUIRE(it != table.end());
      return it->second;
    };
    std::string name = e.has_name_iid() ? resolve(names, e.name_iid()) : e.name();
    std::string category = e.category_iids_size() > 0 ? resolve(categories, e.category_iids(0)) : "";
    switch (e.type()) {
      case pb::TrackEvent::TYPE_SLICE_BEGIN: {
        REQUIRE(!track.is_process);
        REQUIRE(open.count(track.uuid) == 0);  // lanes never overlap
        REQUIRE(p.timestamp() >= last_end[track.uuid]);
        PftraceSlice s;
        s.rank = rank_of(track.uuid);
        s.track = track.name;
        s.name = name;
        s.category = category;
        s.begin_ns = p.timestamp();
        s.begin_packet = static_cast<size_t>(i);
        for (const pb::DebugAnnotation& a : e.debug_annotations()) {
          const std::string key = resolve(arg_names, a.name_iid());
          nlohmann::json& v = s.args[key];
          if (a.has_int_value()) {
            v = a.int_value();
          } else if (a.has_uint_value()) {
            v = a.uint_value();
          } else if (a.has_double_value()) {
            v = a.double_value();
          } else if (a.has_string_value_iid()) {
            v = resolve(strings, a.string_value_iid());
          } else {
            FAIL("debug annotation " << key << " has no value");
          }
        }
        s.flows_out.assign(e.flow_ids().begin(), e.flow_ids().end());
        REQUIRE(e.terminating_flow_ids_size() == 0);
        open[track.uuid] = out.slices.size();
        out.slices.push_back(std::move(s));
        break;
      }
      case pb::TrackEvent::TYPE_SLICE_END: {
        auto it = open.find(track.uuid);
        REQUIRE(it != open.end());
        PftraceSlice& s = out.slices[it->second];
        REQUIRE(p.timestamp() >= s.begin_ns);
        s.end_ns = p.timestamp();
        s.end_packet = static_cast<size_t>(i);
        s.flows_in.assign(e.terminating_flow_ids().begin(), e.terminating_flow_ids().end());
        REQUIRE(e.flow_ids_size() == 0);
        last_end[track.uuid] = s.end_ns;
        open.erase(it);
        break;
      }
      case pb::TrackEvent::TYPE_INSTANT: {
        PftraceInstant in;
        in.rank = rank_of(track.uuid);
        in.track = track.is_process ? "" : track.name;
        in.name = name;
        in.category = category;
        in.ns = p.timestamp();
        out.instants.push_back(std::move(in));
        break;
      }
      default:
        FAIL("unexpected track event type " << e.type());
    }
  }
  CHECK(open.empty());
  return out;
}

// The slices of a protobuf export: name -> [start, end] in seconds from the
// start of the trace, for each rank.
inline std::multimap<std::string, std::pair<double, double>> PftraceSlices(const Pftrace& t) {
  std::multimap<std::string, std::pair<double, double>> slices;
  for (const PftraceSlice& s : t.slices) {
    slices.emplace(s.name, std::make_pair(static_cast<double>(s.begin_ns) / 1e9, static_cast<double>(s.end_ns) / 1e9));
  }
  return slices;
}

}  // namespace replay::testing

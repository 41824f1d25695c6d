// trace_analysis_fuzz: libFuzzer target for what `replay` makes of a trace whose
// files are well formed but whose content is anything: a crafted, foreign or
// corrupted-then-repaired trace of one to four ranks.
//
// The input is read as a recipe (FuzzedDataProvider): each rank's header
// (rank, world size, API names, environment, how it closed) and its events,
// field by field, biased toward small values so that communicators, sequence
// numbers, peers and requests match across ranks as in a real job. The recipe
// is written as a trace directory with the real encoders, read back with
// TraceReader, and given to everything that reads a trace's content: `check`
// (and its JSON), the Markdown and HTML reports, `diff`, `dump` (text and
// JSON), the Perfetto exports (JSON, protobuf) and the flight-recorder export.
//
// The property checked is that none of them crashes, hangs, trips ASan or
// UBSan, or allocates without bound, whatever the events say.
//
// Build and run: see tests/fuzz/run_fuzz.sh (its TARGET variable).
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <type_traits>
#include <vector>

#include "read_trace.h"
#include "record/comm_table.h"
#include "replay/trace_header.h"
#include "trace/block.h"
#include "trace/event_codec.h"
#include "trace/format.h"

namespace replay::fuzz {
namespace {

constexpr Uuid kUuid = {9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9};

// Names a recorder writes in a header's API list; check and dump read some
// of them (point-to-point NCCL calls, group calls) by name.
constexpr const char* kApiNames[] = {
    "MPI_Init", "MPI_Finalize", "MPI_Allreduce", "MPI_Bcast", "MPI_Barrier", "MPI_Comm_dup",
    "MPI_Comm_split", "MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Wait", "MPI_Waitall",
    "MPI_Waitany", "MPI_Test", "MPI_Iprobe", "MPI_Iallreduce", "MPI_Abort", "MPI_Comm_free",
    "MPI_Sendrecv", "MPI_Start", "MPI_Alltoallv", "ncclCommInitRank", "ncclCommSplit",
    "ncclAllReduce", "ncclBroadcast", "ncclSend", "ncclRecv", "ncclGroupStart", "ncclGroupEnd",
    "ncclCommDestroy", "ncclCommAbort", "ncclCommGetAsyncError", "getrandom", "srand", "replay_mark",
};

constexpr const char* kEnvKeys[] = {
    "NCCL_ALGO", "NCCL_PROTO", "NCCL_DEBUG", "CUDA_VISIBLE_DEVICES", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", "RANK", "WORLD_SIZE", "NCCL_IB_HCA", "OMPI_MCA_btl",
};

constexpr const char* kWords[] = {"", "0", "1", "Ring", "Tree", "LL128", "node0", "node1", "x", "0,1"};

// A value of an integer field: mostly small (so that identifiers meet across
// ranks), sometimes negative or one of the recorder's special values,
// sometimes anything.
template <typename T>
T Value(FuzzedDataProvider& in) {
  uint8_t pick = in.ConsumeIntegral<uint8_t>();
  if (pick < 0xa0) return static_cast<T>(pick & 7);
  if (pick < 0xc0) return static_cast<T>(-static_cast<int64_t>(pick & 3) - 1);
  if (pick < 0xd0) return static_cast<T>(WorldCommId());
  if (pick < 0xd8) return static_cast<T>(static_cast<int64_t>(kNoPeer));
  return in.ConsumeIntegral<T>();
}

template <typename T>
void Fill(FuzzedDataProvider& in, T* field) {
  if constexpr (std::is_same_v<T, bool>) {
    *field = in.ConsumeBool();
  } else if constexpr (std::is_enum_v<T>) {
    *field = static_cast<T>(Value<std::underlying_type_t<T>>(in));
  } else {
    *field = Value<T>(in);
  }
}

#define F(field) Fill(in, &body.field)

void FillBody(FuzzedDataProvider& in, Event* e) {
  switch (e->kind) {
    case EventKind::kOp: {
      OpEvent& body = e->op;
      F(api); F(kind); F(flags); F(comm); F(seq); F(peer_seq); F(count); F(dtype); F(redop); F(dtype_size);
      F(dtype_sig); F(root); F(peer); F(tag); F(group); F(send_buf); F(recv_buf); F(stream); F(request);
      F(bytes); F(send_hash); F(send_nan); F(send_inf); F(recv_peer); F(recv_tag); F(recv_count);
      F(recv_dtype); F(recv_dtype_size);
      break;
    }
    case EventKind::kReturn: {
      ReturnEvent& body = e->ret;
      F(api); F(flags); F(rc); F(comm); F(seq); F(peer_seq); F(request); F(recv_hash); F(recv_nan);
      F(recv_inf); F(source); F(tag); F(recv_count); F(payload_hash); F(payload_size);
      break;
    }
    case EventKind::kCompletion: {
      CompletionEvent& body = e->completion;
      F(request); F(api); F(flags); F(rc); F(comm); F(seq); F(peer_seq); F(recv_hash); F(recv_nan);
      F(recv_inf); F(source); F(tag); F(recv_count); F(payload_hash); F(payload_size); F(cancelled);
      F(send_hash); F(send_nan); F(send_inf);
      break;
    }
    case EventKind::kTest: {
      TestEvent& body = e->test;
      F(api); F(flag); F(index); F(source); F(tag); F(count); F(comm); F(rc);
      break;
    }
    case EventKind::kCommCreate: {
      CommCreateEvent& body = e->comm_create;
      F(comm); F(parent); F(api); F(flags); F(size); F(parent_seq); F(color); F(key); F(rank); F(device);
      F(handle); F(unique_id);
      break;
    }
    case EventKind::kCommFree: {
      CommFreeEvent& body = e->comm_free;
      F(comm); F(api); F(rc);
      break;
    }
    case EventKind::kGroup: {
      GroupEvent& body = e->group;
      F(is_end); F(api); F(id); F(depth); F(rc);
      break;
    }
    case EventKind::kEntropy: {
      EntropyEvent& body = e->entropy;
      F(source); F(flags); F(requested); F(rc);
      break;
    }
    case EventKind::kSeed: {
      SeedEvent& body = e->seed;
      F(source); F(value); F(state);
      break;
    }
    case EventKind::kCuda: {
      CudaEvent& body = e->cuda;
      F(op); F(rc); F(device); F(stream); F(event); F(graph); F(other); F(count);
      break;
    }
    case EventKind::kMark: {
      MarkEvent& body = e->mark;
      F(value);
      break;
    }
    case EventKind::kError: {
      ErrorEvent& body = e->error;
      F(source); F(code); F(comm);
      break;
    }
    case EventKind::kSignal: {
      SignalEvent& body = e->signal;
      F(signo); F(code); F(address); F(fatal);
      break;
    }
    case EventKind::kDrop: {
      DropEvent& body = e->drop;
      F(count);
      break;
    }
    case EventKind::kInfo: {
      InfoEvent& body = e->info;
      F(key_size);
      break;
    }
  }
}

#undef F

std::string Word(FuzzedDataProvider& in) {
  if (in.ConsumeBool()) return in.PickValueInArray(kWords);
  return in.ConsumeRandomLengthString(24);
}

RankHeader Header(FuzzedDataProvider& in, int i, int ranks) {
  RankHeader h;
  h.trace_uuid = kUuid;
  h.format_epoch = format::kFormatEpoch;
  h.min_reader_epoch = format::kMinReaderEpoch;
  h.rank = in.ConsumeBool() ? i : Value<int32_t>(in);
  h.world_size = in.ConsumeBool() ? ranks : Value<int32_t>(in);
  h.host = in.ConsumeBool() ? "node0" : Word(in);
  h.pid = 100 + i;
  h.start_realtime_ns = in.ConsumeBool() ? 1'700'000'000'000'000'000 + (Value<int64_t>(in) & 0xffff)
                                         : Value<int64_t>(in);
  h.start_monotonic_ns = Value<int64_t>(in);
  Fill(in, &h.level);
  h.cores = Value<uint32_t>(in);
  for (const char* name : kApiNames) h.api_names.push_back(name);
  for (int n = in.ConsumeIntegralInRange(0, 6); n > 0; --n) {
    size_t a = in.ConsumeIntegralInRange<size_t>(0, h.api_names.size() - 1);
    size_t b = in.ConsumeIntegralInRange<size_t>(0, h.api_names.size() - 1);
    std::swap(h.api_names[a], h.api_names[b]);
  }
  h.api_names.resize(in.ConsumeIntegralInRange<size_t>(0, h.api_names.size()));
  for (int n = in.ConsumeIntegralInRange(0, 4); n > 0; --n) {
    h.environment.push_back({in.PickValueInArray(kEnvKeys), Word(in)});
  }
  for (int n = in.ConsumeIntegralInRange(0, 2); n > 0; --n) {
    h.versions.push_back({in.ConsumeBool() ? "nccl" : "mpi", Word(in)});
  }
  if (in.ConsumeBool()) h.modules.push_back({"/lib/libtrain.so", 0x400000, 0x10000});
  h.complete = in.ConsumeBool();
  Fill(in, &h.close_reason);
  h.close_realtime_ns = in.ConsumeBool() ? 0 : Value<int64_t>(in);
  h.event_count = Value<uint64_t>(in);
  h.dropped_events = Value<uint64_t>(in);
  if (in.ConsumeBool()) h.recording_error = Word(in);
  return h;
}

std::vector<Event> Events(FuzzedDataProvider& in) {
  std::vector<Event> events;
  uint64_t index = Value<uint8_t>(in);
  int64_t time = 0;
  size_t n = in.ConsumeIntegralInRange<size_t>(0, 48);
  for (size_t i = 0; i < n && in.remaining_bytes() > 0; ++i) {
    Event e;
    e.kind = static_cast<EventKind>(in.ConsumeIntegralInRange<int>(1, kEventKindCount));
    FillBody(in, &e);
    e.index = index;
    index += 1 + (in.ConsumeIntegral<uint8_t>() > 0xf0 ? Value<uint8_t>(in) : 0);
    // Wrapping: any time at all may follow any other.
    time = static_cast<int64_t>(static_cast<uint64_t>(time) +
                                static_cast<uint64_t>(in.ConsumeBool() ? 1000 : Value<int64_t>(in)));
    e.time_ns = time;
    e.thread = Value<uint32_t>(in) & 3;
    e.call_site = in.ConsumeBool() ? 0x400100 + Value<uint16_t>(in) : Value<uint64_t>(in);
    for (int k = in.ConsumeIntegralInRange(0, 5); k > 0; --k) e.list.push_back(Value<int64_t>(in));
    if (e.kind == EventKind::kEntropy || e.kind == EventKind::kMark || e.kind == EventKind::kError ||
        e.kind == EventKind::kInfo) {
      e.text = Word(in);
    }
    if (e.kind == EventKind::kInfo) e.info.key_size = std::min<uint32_t>(e.info.key_size, e.text.size());
    events.push_back(std::move(e));
  }
  return events;
}

void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The events as a stream of one to three blocks.
std::string EventsStream(FuzzedDataProvider& in, const std::vector<Event>& events) {
  std::string file;
  EncodeFileHeader(format::StreamKind::kEvents, kUuid.data(), &file);
  BlockCodec codec(1);
  EventBlockEncoder encoder;
  size_t at = 0;
  while (at < events.size()) {
    size_t n = in.ConsumeBool() ? events.size() - at
                                : in.ConsumeIntegralInRange<size_t>(1, events.size() - at);
    std::span<const uint8_t> raw = encoder.Encode(std::span<const Event>(events).subspan(at, n));
    if (!codec.Encode(format::BlockKind::kEvents, events[at].index, n, raw, &file).ok()) break;
    at += n;
  }
  return file;
}

}  // namespace
}  // namespace replay::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace replay;
  using namespace replay::fuzz;
  static const std::string root = [] {
    std::string d = std::filesystem::temp_directory_path().string() + "/replay-analysis-fuzz-" +
                    std::to_string(getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  const std::string dir = root + "/trace";
  std::filesystem::remove_all(root + "/trace");
  std::filesystem::remove_all(root + "/fr");
  std::filesystem::create_directories(dir);

  FuzzedDataProvider in(data, size);
  int ranks = in.ConsumeIntegralInRange(1, 4);
  std::vector<RankHeader> headers;
  for (int i = 0; i < ranks; ++i) headers.push_back(Header(in, i, ranks));
  if (in.ConsumeBool()) {
    JobManifest m;
    m.trace_uuid = kUuid;
    m.format_epoch = format::kFormatEpoch;
    m.min_reader_epoch = format::kMinReaderEpoch;
    m.world_size = in.ConsumeBool() ? ranks : Value<int32_t>(in);
    Fill(in, &m.level);
    m.command = {"train", Word(in)};
    WriteFile(dir + "/" + format::kManifestFile, EncodeJobManifest(m));
  }
  for (int i = 0; i < ranks; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "%s%05d", format::kRankDirPrefix, i);
    std::string rank_dir = dir + "/" + name;
    std::filesystem::create_directories(rank_dir);
    WriteFile(rank_dir + "/" + format::kHeaderFile, EncodeRankHeader(headers[static_cast<size_t>(i)]));
    std::vector<Event> events = Events(in);
    WriteFile(rank_dir + "/" + format::kEventsFile, EventsStream(in, events));
  }
  ReadTrace(dir, root);
  return 0;
}

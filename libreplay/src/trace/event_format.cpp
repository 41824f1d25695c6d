#include "replay/event_format.h"

#include "trace/event_json.h"
#include "util/json.h"

#include <cinttypes>
#include <csignal>
#include <cstring>
#include <cstdio>
#include <string_view>

namespace replay {

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
  return buf;
}

std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof(buf), "%" PRIu64 " B", bytes);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f %s", v, units[u]);
  }
  return buf;
}

std::string HumanDuration(int64_t ns) {
  char buf[32];
  double v = static_cast<double>(ns);
  if (ns < 0) v = -v;
  const char* sign = ns < 0 ? "-" : "";
  if (v >= 1e9) {
    std::snprintf(buf, sizeof(buf), "%s%.3f s", sign, v / 1e9);
  } else if (v >= 1e6) {
    std::snprintf(buf, sizeof(buf), "%s%.1f ms", sign, v / 1e6);
  } else if (v >= 1e3) {
    std::snprintf(buf, sizeof(buf), "%s%.1f us", sign, v / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%s%.0f ns", sign, v);
  }
  return buf;
}

std::string SignalName(int signo) {
  const char* abbrev = sigabbrev_np(signo);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(signo);
}

bool IsCrashSignal(int signo) {
  return signo == SIGSEGV || signo == SIGBUS || signo == SIGFPE || signo == SIGILL || signo == SIGABRT ||
         signo == SIGTRAP || signo == SIGSYS;
}

namespace {

std::string Peer(int32_t p) {
  switch (p) {
    case kAnySource: return "any";
    case kProcNull: return "null";
    case kNoPeer: return "-";
  }
  return std::to_string(p);
}

std::string Printable(std::string_view bytes, size_t max) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < bytes.size() && i < max; ++i) {
    std::snprintf(buf, sizeof(buf), "%02x", static_cast<unsigned char>(bytes[i]));
    out += buf;
  }
  if (bytes.size() > max) out += "…";
  return out;
}

// Appends " key=value" pairs.
struct Line {
  std::string s;
  template <typename T>
  Line& kv(std::string_view k, const T& v) {
    s += ' ';
    s += k;
    s += '=';
    if constexpr (std::is_convertible_v<T, std::string_view>) {
      s += std::string_view(v);
    } else {
      s += std::to_string(v);
    }
    return *this;
  }
};

std::string FlagNames(uint16_t f) {
  std::string out;
  auto add = [&](uint16_t bit, const char* name) {
    if ((f & bit) == 0) return;
    if (!out.empty()) out += ',';
    out += name;
  };
  add(op_flags::kNonBlocking, "nonblocking");
  add(op_flags::kPersistent, "persistent");
  add(op_flags::kInGroup, "group");
  add(op_flags::kGraphCaptured, "graph");
  add(op_flags::kInPlace, "in_place");
  add(op_flags::kSynchronous, "sync");
  add(op_flags::kReady, "ready");
  add(op_flags::kBuffered, "buffered");
  add(op_flags::kDevice, "device");
  add(op_flags::kRecvSampled, "recv_sampled");
  return out;
}

std::string CudaStream(uint64_t s) {
  if (s == kCudaLegacyStream) return "legacy";
  if (s == kCudaPerThreadStream) return "per-thread";
  return Hex(s);
}

std::string_view CopyDirection(uint64_t d) {
  switch (d) {
    case cuda_copy::kByAddress: return "by-address";
    case cuda_copy::kHostToDevice: return "HtoD";
    case cuda_copy::kDeviceToHost: return "DtoH";
    case cuda_copy::kDeviceToDevice: return "DtoD";
  }
  return "?";
}

std::string_view CaptureMode(uint64_t m) {
  switch (m) {
    case 0: return "global";
    case 1: return "thread-local";
    case 2: return "relaxed";
  }
  return "?";
}

// What each field of a `cuda` event means depends on its op (trace.capnp).
void FormatCuda(const CudaEvent& c, Line& l) {
  l.s = std::string(CudaOpName(c.op));
  auto query = [&] {
    l.kv("ready", c.rc == 0 ? "yes" : c.rc == 600 ? "no" : "error");
    if (c.count) l.kv("left_out", c.count);
  };
  switch (c.op) {
    case CudaOp::kStreamCreate:
      l.kv("stream", CudaStream(c.stream)).kv("flags", Hex(c.other));
      if (c.count) l.kv("priority", static_cast<int64_t>(c.count));
      break;
    case CudaOp::kStreamDestroy:
    case CudaOp::kStreamSynchronize:
      l.kv("stream", CudaStream(c.stream));
      break;
    case CudaOp::kStreamQuery:
      l.kv("stream", CudaStream(c.stream));
      query();
      break;
    case CudaOp::kEventCreate:
      l.kv("event", Hex(c.event)).kv("flags", Hex(c.other));
      break;
    case CudaOp::kEventDestroy:
    case CudaOp::kEventSynchronize:
      l.kv("event", Hex(c.event));
      break;
    case CudaOp::kEventQuery:
      l.kv("event", Hex(c.event));
      query();
      break;
    case CudaOp::kEventRecord:
    case CudaOp::kStreamWaitEvent:
      l.kv("event", Hex(c.event)).kv("stream", CudaStream(c.stream));
      if (c.other) l.kv("flags", Hex(c.other));
      break;
    case CudaOp::kCtxSynchronize:
    case CudaOp::kSetDevice:
      if (c.other) l.kv("ctx", Hex(c.other));
      break;
    case CudaOp::kCaptureBegin:
      l.kv("stream", CudaStream(c.stream)).kv("mode", CaptureMode(c.other));
      break;
    case CudaOp::kCaptureEnd:
      l.kv("stream", CudaStream(c.stream)).kv("graph", Hex(c.graph));
      break;
    case CudaOp::kGraphInstantiate:
      l.kv("exec", Hex(c.graph)).kv("graph", Hex(c.other));
      break;
    case CudaOp::kGraphLaunch:
      l.kv("exec", Hex(c.graph)).kv("stream", CudaStream(c.stream));
      break;
    case CudaOp::kMemcpyAsync:
    case CudaOp::kMemcpy:
      l.kv("stream", CudaStream(c.stream)).kv("dir", CopyDirection(c.other)).kv("bytes", c.count);
      break;
    case CudaOp::kMemsetAsync:
      l.kv("stream", CudaStream(c.stream)).kv("bytes", c.count).kv("element", c.other);
      break;
    case CudaOp::kKernels:
      l.kv("stream", CudaStream(c.stream)).kv("launches", c.count);
      break;
    default:
      if (c.stream) l.kv("stream", CudaStream(c.stream));
      if (c.event) l.kv("event", Hex(c.event));
      if (c.graph) l.kv("graph", Hex(c.graph));
      if (c.other) l.kv("other", Hex(c.other));
      if (c.count) l.kv("count", c.count);
      break;
  }
  if (c.device >= 0) l.kv("device", c.device);
  l.kv("rc", c.rc);
}

}  // namespace

std::string FormatEventBody(const Event& e, const RankHeader& h) {
  Line l;
  switch (e.kind) {
    case EventKind::kOp: {
      const OpEvent& o = e.op;
      l.s = h.ApiName(o.api);
      l.kv("kind", OpKindName(o.kind));
      if (o.comm) l.kv("comm", Hex(o.comm));
      if (o.seq) l.kv("seq", o.seq);
      if (o.peer_seq) l.kv("peer_seq", o.peer_seq);
      if (o.peer != kNoPeer) l.kv("peer", Peer(o.peer));
      if (o.tag != 0) l.kv("tag", o.tag == kAnyTag ? std::string("any") : std::to_string(o.tag));
      if (o.root >= 0) l.kv("root", o.root);
      if (o.count || o.dtype != DataType::kUnknown) {
        l.kv("count", o.count).kv("dtype", DataTypeName(o.dtype));
      }
      if (o.redop != RedOp::kNone) l.kv("op", RedOpName(o.redop));
      if (!e.list.empty()) {
        std::string c;
        for (size_t i = 0; i < e.list.size() && i < 16; ++i) c += (i ? "," : "") + std::to_string(e.list[i]);
        if (e.list.size() > 16) c += ",…";
        l.kv("counts", "[" + c + "]");
      }
      if (o.request) l.kv("req", o.request);
      if (o.stream) l.kv("stream", Hex(o.stream));
      if (o.group) l.kv("group", o.group);
      if (o.flags & op_flags::kHasSendHash) {
        l.kv("send", Hex(o.send_hash));
        if (o.send_nan) l.kv("nan", o.send_nan);
        if (o.send_inf) l.kv("inf", o.send_inf);
      }
      if (std::string f = FlagNames(o.flags); !f.empty()) l.kv("flags", f);
      return l.s;
    }
    case EventKind::kReturn: {
      const ReturnEvent& r = e.ret;
      l.s = h.ApiName(r.api) + " returned";
      l.kv("rc", r.rc);
      if (r.seq) l.kv("seq", r.seq);
      if (r.peer_seq) l.kv("peer_seq", r.peer_seq);
      if (r.request) l.kv("req", r.request);
      if (r.source != kNoPeer) l.kv("source", Peer(r.source)).kv("tag", r.tag);
      if (r.recv_count >= 0 && r.source != kNoPeer) l.kv("recv_count", r.recv_count);
      if (r.flags & op_flags::kHasRecvHash) {
        l.kv("recv", Hex(r.recv_hash));
        if (r.recv_nan) l.kv("nan", r.recv_nan);
        if (r.recv_inf) l.kv("inf", r.recv_inf);
        if (r.flags & op_flags::kRecvSampled) l.kv("counted", "sample");
      }
      if (r.payload_size) l.kv("payload", Hex(r.payload_hash)).kv("bytes", r.payload_size);
      return l.s;
    }
    case EventKind::kCompletion: {
      const CompletionEvent& c = e.completion;
      l.s = "completed req=" + std::to_string(c.request) + " by " + h.ApiName(c.api);
      l.kv("rc", c.rc);
      if (c.comm) l.kv("comm", Hex(c.comm));
      if (c.seq) l.kv("seq", c.seq);
      if (c.peer_seq) l.kv("peer_seq", c.peer_seq);
      if (c.source != kNoPeer) l.kv("source", Peer(c.source)).kv("tag", c.tag);
      if (c.flags & op_flags::kHasSendHash) {
        l.kv("send", Hex(c.send_hash));
        if (c.send_nan) l.kv("send_nan", c.send_nan);
        if (c.send_inf) l.kv("send_inf", c.send_inf);
      }
      if (c.flags & op_flags::kHasRecvHash) {
        l.kv("recv", Hex(c.recv_hash));
        if (c.recv_nan) l.kv("nan", c.recv_nan);
        if (c.recv_inf) l.kv("inf", c.recv_inf);
        if (c.flags & op_flags::kRecvSampled) l.kv("counted", "sample");
      }
      if (c.payload_size) l.kv("payload", Hex(c.payload_hash)).kv("bytes", c.payload_size);
      if (c.cancelled) l.s += " cancelled";
      return l.s;
    }
    case EventKind::kTest: {
      const TestEvent& t = e.test;
      l.s = h.ApiName(t.api);
      l.kv("flag", t.flag ? "true" : "false");
      if (t.index >= 0) l.kv("index", t.index);
      if (!e.list.empty()) {
        std::string c;
        for (size_t i = 0; i < e.list.size(); ++i) c += (i ? "," : "") + std::to_string(e.list[i]);
        l.kv("indices", "[" + c + "]");
      }
      if (t.source != kNoPeer) l.kv("source", Peer(t.source)).kv("tag", t.tag);
      if (t.count > 0) l.kv("count", t.count);
      l.kv("rc", t.rc);
      return l.s;
    }
    case EventKind::kCommCreate: {
      const CommCreateEvent& c = e.comm_create;
      l.s = "comm " + Hex(c.comm) + " created by " + h.ApiName(c.api);
      if (c.parent) l.kv("parent", Hex(c.parent)).kv("parent_seq", c.parent_seq);
      if (c.color || c.key) l.kv("color", c.color).kv("key", c.key);
      l.kv("size", c.size).kv("rank", c.rank);
      if (c.unique_id) l.kv("unique_id", Hex(c.unique_id));
      if (c.device >= 0) l.kv("device", c.device);
      if (!e.list.empty() && e.list.size() <= 32) {
        std::string m;
        for (size_t i = 0; i < e.list.size(); ++i) m += (i ? "," : "") + std::to_string(e.list[i]);
        l.kv("members", "[" + m + "]");
      }
      return l.s;
    }
    case EventKind::kCommFree:
      l.s = "comm " + Hex(e.comm_free.comm) + " freed by " + h.ApiName(e.comm_free.api);
      l.kv("rc", e.comm_free.rc);
      return l.s;
    case EventKind::kGroup:
      l.s = std::string(e.group.is_end ? "group end " : "group start ") + h.ApiName(e.group.api);
      l.kv("id", e.group.id).kv("depth", e.group.depth).kv("rc", e.group.rc);
      return l.s;
    case EventKind::kEntropy:
      l.s = std::string("entropy ") + std::string(EntropySourceName(e.entropy.source));
      l.kv("requested", e.entropy.requested).kv("rc", e.entropy.rc);
      l.kv("bytes", Printable(e.text, 16));
      return l.s;
    case EventKind::kSeed:
      l.s = std::string("seed ") + std::string(SeedSourceName(e.seed.source));
      l.kv("value", e.seed.value);
      if (e.seed.state) l.kv("state", Hex(e.seed.state));
      return l.s;
    case EventKind::kCuda:
      FormatCuda(e.cuda, l);
      return l.s;
    case EventKind::kMark:
      l.s = "mark " + e.text;
      l.kv("value", e.mark.value);
      return l.s;
    case EventKind::kError:
      l.s = std::string("error ") + std::string(ErrorSourceName(e.error.source));
      l.kv("code", e.error.code);
      if (e.error.comm) l.kv("comm", Hex(e.error.comm));
      l.s += " \"" + e.text + "\"";
      return l.s;
    case EventKind::kSignal:
      l.s = "signal";
      l.kv("signo", e.signal.signo).kv("code", e.signal.code);
      if (e.signal.address) l.kv("address", Hex(e.signal.address));
      if (e.signal.fatal) l.s += " fatal";
      return l.s;
    case EventKind::kDrop:
      l.s = "DROPPED " + std::to_string(e.drop.count) + " events (ring full)";
      return l.s;
    case EventKind::kInfo:
      l.s = "info " + std::string(e.info_key()) + "=" + std::string(e.info_value());
      return l.s;
  }
  return "unknown event kind " + std::to_string(static_cast<int>(e.kind));
}

std::string FormatEvent(const Event& e, const RankHeader& h) {
  char prefix[80];
  std::snprintf(prefix, sizeof(prefix), "#%-7" PRIu64 " %12.6fs t%-2u ", e.index,
                static_cast<double>(e.time_ns) / 1e9, e.thread);
  std::string out = prefix;
  out += std::string(EventKindName(e.kind));
  out += ' ';
  out += FormatEventBody(e, h);
  return out;
}

namespace {

std::string_view NameOf(OpKind v) { return OpKindName(v); }
std::string_view NameOf(DataType v) { return DataTypeName(v); }
std::string_view NameOf(RedOp v) { return RedOpName(v); }
std::string_view NameOf(EntropySource v) { return EntropySourceName(v); }
std::string_view NameOf(SeedSource v) { return SeedSourceName(v); }
std::string_view NameOf(CudaOp v) { return CudaOpName(v); }
std::string_view NameOf(ErrorSource v) { return ErrorSourceName(v); }

// One field of a body `b` as JSON, as its role says (event.h).
template <FieldRole role, typename T, typename B>
void JsonField(nlohmann::json& j, const char* key, const T& v, const B& b, const RankHeader& h) {
  using R = FieldRole;
  if constexpr (role == R::kNum || role == R::kSeq) {
    j[key] = v;
  } else if constexpr (role == R::kHex) {
    j[key] = Hex(v);
  } else if constexpr (role == R::kHexIfSet) {
    if (v) j[key] = Hex(v);
  } else if constexpr (role == R::kNumIfSet) {
    if (v) j[key] = v;
  } else if constexpr (role == R::kApi) {
    j[key] = h.ApiName(v);
  } else if constexpr (role == R::kName) {
    j[key] = std::string(NameOf(v));
  } else if constexpr (role == R::kSendHash || role == R::kSendCount) {
    if (b.flags & op_flags::kHasSendHash) j[key] = role == R::kSendHash ? nlohmann::json(Hex(v)) : nlohmann::json(v);
  } else if constexpr (role == R::kRecvHash || role == R::kRecvCount) {
    if (b.flags & op_flags::kHasRecvHash) j[key] = role == R::kRecvHash ? nlohmann::json(Hex(v)) : nlohmann::json(v);
  } else if constexpr (role == R::kPayloadHash) {
    if (b.payload_size) j[key] = Hex(v);
  } else if constexpr (role == R::kPayloadSize) {
    if (v) j[key] = v;
  }
}

#define REPLAY_JSON_FIELD_(type, member, schema, json, role) JsonField<FieldRole::role>(j, json, b.member, b, h);
#define REPLAY_BODY_JSON_(Body, fields)                                     \
  void BodyToJson(const Body& b, const RankHeader& h, nlohmann::json& j) { \
    fields(REPLAY_JSON_FIELD_)                                             \
  }
REPLAY_BODY_JSON_(OpEvent, REPLAY_OP_FIELDS)
REPLAY_BODY_JSON_(ReturnEvent, REPLAY_RETURN_FIELDS)
REPLAY_BODY_JSON_(CompletionEvent, REPLAY_COMPLETION_FIELDS)
REPLAY_BODY_JSON_(TestEvent, REPLAY_TEST_FIELDS)
REPLAY_BODY_JSON_(CommCreateEvent, REPLAY_COMM_CREATE_FIELDS)
REPLAY_BODY_JSON_(CommFreeEvent, REPLAY_COMM_FREE_FIELDS)
REPLAY_BODY_JSON_(GroupEvent, REPLAY_GROUP_FIELDS)
REPLAY_BODY_JSON_(EntropyEvent, REPLAY_ENTROPY_FIELDS)
REPLAY_BODY_JSON_(SeedEvent, REPLAY_SEED_FIELDS)
REPLAY_BODY_JSON_(CudaEvent, REPLAY_CUDA_FIELDS)
REPLAY_BODY_JSON_(MarkEvent, REPLAY_MARK_FIELDS)
REPLAY_BODY_JSON_(ErrorEvent, REPLAY_ERROR_FIELDS)
REPLAY_BODY_JSON_(SignalEvent, REPLAY_SIGNAL_FIELDS)
REPLAY_BODY_JSON_(DropEvent, REPLAY_DROP_FIELDS)
#undef REPLAY_BODY_JSON_
#undef REPLAY_JSON_FIELD_

}  // namespace

nlohmann::json EventToJson(const Event& e, const RankHeader& h) {
  nlohmann::json j;
  j["index"] = e.index;
  j["time_ns"] = e.time_ns;
  j["thread"] = e.thread;
  if (e.call_site) j["call_site"] = Hex(e.call_site);
  j["kind"] = std::string(EventKindName(e.kind));
  // The body's fields, then what lives beside it.
  switch (e.kind) {
    case EventKind::kOp:
      BodyToJson(e.op, h, j);
      if (!e.list.empty()) j["counts"] = e.list;
      break;
    case EventKind::kReturn: BodyToJson(e.ret, h, j); break;
    case EventKind::kCompletion: BodyToJson(e.completion, h, j); break;
    case EventKind::kTest:
      BodyToJson(e.test, h, j);
      j["indices"] = e.list;
      break;
    case EventKind::kCommCreate:
      BodyToJson(e.comm_create, h, j);
      j["members"] = e.list;
      break;
    case EventKind::kCommFree: BodyToJson(e.comm_free, h, j); break;
    case EventKind::kGroup: BodyToJson(e.group, h, j); break;
    case EventKind::kEntropy:
      BodyToJson(e.entropy, h, j);
      j["bytes"] = Printable(e.text, e.text.size());
      break;
    case EventKind::kSeed: BodyToJson(e.seed, h, j); break;
    case EventKind::kCuda: BodyToJson(e.cuda, h, j); break;
    case EventKind::kMark:
      BodyToJson(e.mark, h, j);
      j["name"] = e.text;
      break;
    case EventKind::kError:
      BodyToJson(e.error, h, j);
      j["message"] = e.text;
      break;
    case EventKind::kSignal: BodyToJson(e.signal, h, j); break;
    case EventKind::kDrop: BodyToJson(e.drop, h, j); break;
    case EventKind::kInfo:
      j["key"] = std::string(e.info_key());
      j["value"] = std::string(e.info_value());
      break;
  }
  return j;
}

std::string EventJson(const Event& e, const RankHeader& h) { return JsonText(EventToJson(e, h)); }

}  // namespace replay

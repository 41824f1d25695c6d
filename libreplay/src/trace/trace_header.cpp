#include "replay/trace_header.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <sys/random.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <random>

#include "trace/block.h"
#include "trace/format.h"
#include "trace/trace.capnp.h"

namespace replay {

namespace s = schema;

Uuid NewUuid() {
  Uuid u{};
  size_t got = 0;
  while (got < u.size()) {
    ssize_t n = getrandom(u.data() + got, u.size() - got, 0);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got < u.size()) {
    std::random_device rd;
    for (auto& b : u) b = static_cast<uint8_t>(rd());
  }
  u[6] = static_cast<uint8_t>((u[6] & 0x0f) | 0x40);
  u[8] = static_cast<uint8_t>((u[8] & 0x3f) | 0x80);
  return u;
}

std::string UuidToString(const Uuid& u) {
  char buf[40];
  std::snprintf(buf, sizeof(buf),
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
                u[15]);
  return buf;
}

std::optional<Uuid> ParseUuid(std::string_view text) {
  Uuid u{};
  size_t j = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '-') continue;
    int v = (c >= '0' && c <= '9')   ? c - '0'
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                     : -1;
    if (v < 0 || j >= 32) return std::nullopt;
    u[j / 2] = static_cast<uint8_t>(u[j / 2] | (j % 2 == 0 ? v << 4 : v));
    ++j;
  }
  if (j != 32) return std::nullopt;
  return u;
}

std::string_view LevelName(Level level) {
  switch (level) {
    case Level::kMeta: return "meta";
    case Level::kHash: return "hash";
    case Level::kData: return "data";
  }
  return "unknown";
}

std::optional<Level> ParseLevel(std::string_view name) {
  if (name == "meta") return Level::kMeta;
  if (name == "hash") return Level::kHash;
  if (name == "data") return Level::kData;
  return std::nullopt;
}

std::string JoinCommand(const std::vector<std::string>& words) {
  std::string joined;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) joined += kCommandSeparator;
    joined += words[i];
  }
  return joined;
}

std::vector<std::string> SplitCommand(std::string_view joined) {
  std::vector<std::string> words;
  size_t start = 0;
  while (start < joined.size()) {
    size_t end = joined.find(kCommandSeparator, start);
    if (end == std::string_view::npos) end = joined.size();
    words.emplace_back(joined.substr(start, end - start));
    start = end + 1;
  }
  return words;
}

std::string CommandText(const std::vector<std::string>& words) {
  auto plain = [](unsigned char c) {
    return std::isalnum(c) || std::strchr("@%+=:,./-_", c) != nullptr;
  };
  std::string text;
  for (const std::string& w : words) {
    if (!text.empty()) text += ' ';
    if (!w.empty() && std::all_of(w.begin(), w.end(), plain)) {
      text += w;
      continue;
    }
    text += '\'';
    for (char c : w) text += c == '\'' ? std::string("'\\''") : std::string(1, c);
    text += '\'';
  }
  return text;
}

std::string EnvValueText(std::string_view key, std::string_view value) {
  if (key == "REPLAY_COMMAND") return CommandText(SplitCommand(value));
  return std::string(value);
}

std::string_view CloseReasonName(CloseReason reason) {
  switch (reason) {
    case CloseReason::kNone: return "none";
    case CloseReason::kExit: return "exit";
    case CloseReason::kFinalize: return "finalize";
    case CloseReason::kSignal: return "signal";
    case CloseReason::kAbort: return "abort";
    case CloseReason::kExec: return "exec";
    case CloseReason::kFailed: return "recording failed";
  }
  return "unknown";
}

std::string RankHeader::ApiName(uint16_t api) const {
  if (api < api_names.size()) return api_names[api];
  return "api#" + std::to_string(api);
}

namespace {

std::string_view Lookup(const KeyValues& kvs, std::string_view key) {
  for (const auto& [k, v] : kvs) {
    if (k == key) return v;
  }
  return {};
}

capnp::Text::Reader T(const std::string& v) { return capnp::Text::Reader(v.data(), v.size()); }
std::string S(capnp::Text::Reader r) { return std::string(r.cStr(), r.size()); }

void SetKeyValues(capnp::List<s::KeyValue>::Builder list, const KeyValues& kvs) {
  for (unsigned i = 0; i < kvs.size(); ++i) {
    list[i].setKey(T(kvs[i].first));
    list[i].setValue(T(kvs[i].second));
  }
}

KeyValues GetKeyValues(capnp::List<s::KeyValue>::Reader list) {
  KeyValues out;
  for (auto kv : list) out.emplace_back(S(kv.getKey()), S(kv.getValue()));
  return out;
}

std::string Frame(format::StreamKind stream, format::BlockKind kind, const Uuid& uuid,
                  capnp::MessageBuilder& message) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  std::string out;
  EncodeFileHeader(stream, uuid.data(), &out);
  BlockCodec codec(3);
  Status st = codec.Encode(kind, 0, 0, std::span<const uint8_t>(bytes.begin(), bytes.size()), &out);
  (void)st;  // a header is far below the block limit
  return out;
}

// Finds and decompresses the single block of a header or manifest file.
Status Unframe(std::span<const uint8_t> file, format::StreamKind stream, format::BlockKind kind,
               const std::string& what, std::vector<capnp::word>* words) {
  format::FileHeader fh;
  REPLAY_RETURN_IF_ERROR(CheckFileHeader(file, stream, what, &fh));
  BlockScanner scanner(file, fh.header_size);
  FoundBlock block;
  if (!scanner.Next(&block)) {
    std::string why = scanner.problems().empty() ? "no content" : scanner.problems()[0].reason;
    return Status::Corruption(what + " is damaged: " + why);
  }
  if (block.header.kind != static_cast<uint8_t>(kind)) {
    return Status::Corruption(what + " holds an unexpected block kind");
  }
  BlockCodec codec;
  std::string raw;
  REPLAY_RETURN_IF_ERROR(codec.Decode(block.header, block.stored, &raw).WithContext(what));
  if (raw.empty() || raw.size() % sizeof(capnp::word) != 0) {
    return Status::Corruption(what + " does not hold a whole message (" + std::to_string(raw.size()) +
                              " bytes)");
  }
  *words = std::vector<capnp::word>(raw.size() / sizeof(capnp::word));
  std::memcpy(words->data(), raw.data(), raw.size());
  return Status::Ok();
}

capnp::ReaderOptions Limits(size_t words) {
  capnp::ReaderOptions o;
  o.traversalLimitInWords = words + 1024;  // a writer's message is read once
  o.nestingLimit = 16;
  return o;
}

void AddDamage(std::string* damage, const std::string& what) {
  if (!damage->empty()) *damage += "; ";
  *damage += what;
}

// A rank or world size a header states: -1 (not known) or 0..`most`. Any
// other value is damage: it is replaced by -1 and described in `damage`.
void CheckRanks(const char* field, int32_t* value, int32_t most, std::string* damage) {
  if (*value >= -1 && *value <= most) return;
  AddDamage(damage, std::string("states ") + field + " " + std::to_string(*value) + ", outside -1.." +
                        std::to_string(most));
  *value = -1;
}

// A clock reading a header states, in ns: 0..kMaxClockNs. Any other value is
// damage: it is replaced by 0 (not known) and described in `damage`.
void CheckClock(const char* field, int64_t* value, std::string* damage) {
  if (*value >= 0 && *value < format::kMaxClockNs) return;
  AddDamage(damage, std::string("states ") + field + " " + std::to_string(*value) + " ns, not a clock reading");
  *value = 0;
}

void EndDamage(std::string* damage) {
  if (!damage->empty()) *damage += " (damaged, or not written by replay): ignored";
}

}  // namespace

std::string_view RankHeader::Version(std::string_view key) const { return Lookup(versions, key); }
std::string_view RankHeader::Env(std::string_view key) const { return Lookup(environment, key); }

std::string EncodeRankHeader(const RankHeader& h) {
  capnp::MallocMessageBuilder message;
  auto b = message.initRoot<s::RankHeader>();
  b.setTraceUuid(capnp::Data::Reader(h.trace_uuid.data(), h.trace_uuid.size()));
  b.setFormatEpoch(h.format_epoch);
  b.setMinReaderEpoch(h.min_reader_epoch);
  b.setRank(h.rank);
  b.setWorldSize(h.world_size);
  b.setHost(T(h.host));
  b.setPid(h.pid);
  b.setStartRealtimeNs(h.start_realtime_ns);
  b.setStartMonotonicNs(h.start_monotonic_ns);
  b.setLevel(static_cast<s::Level>(h.level));
  SetKeyValues(b.initVersions(static_cast<unsigned>(h.versions.size())), h.versions);
  SetKeyValues(b.initEnvironment(static_cast<unsigned>(h.environment.size())), h.environment);
  auto cmd = b.initCommandLine(static_cast<unsigned>(h.command_line.size()));
  for (unsigned i = 0; i < h.command_line.size(); ++i) cmd.set(i, T(h.command_line[i]));
  b.setCores(h.cores);
  auto apis = b.initApiNames(static_cast<unsigned>(h.api_names.size()));
  for (unsigned i = 0; i < h.api_names.size(); ++i) apis.set(i, T(h.api_names[i]));
  auto mods = b.initModules(static_cast<unsigned>(h.modules.size()));
  for (unsigned i = 0; i < h.modules.size(); ++i) {
    mods[i].setPath(T(h.modules[i].path));
    mods[i].setBase(h.modules[i].base);
    mods[i].setSize(h.modules[i].size);
  }
  b.setState(h.complete ? s::RankState::COMPLETE : s::RankState::OPEN);
  b.setCloseReason(static_cast<s::CloseReason>(h.close_reason));
  b.setCloseRealtimeNs(h.close_realtime_ns);
  b.setEventCount(h.event_count);
  b.setDroppedEvents(h.dropped_events);
  b.setUnrecordedCalls(h.unrecorded_calls);
  b.setRecordingError(T(h.recording_error));
  b.setExecutable(T(h.executable));
  b.setBuildId(T(h.build_id));
  return Frame(format::StreamKind::kHeader, format::BlockKind::kHeader, h.trace_uuid, message);
}

Result<RankHeader> DecodeRankHeader(std::span<const uint8_t> file, const std::string& what) {
  std::vector<capnp::word> words;
  REPLAY_RETURN_IF_ERROR(
      Unframe(file, format::StreamKind::kHeader, format::BlockKind::kHeader, what, &words));
  RankHeader h;
  try {
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()),
                                         Limits(words.size()));
    auto r = reader.getRoot<s::RankHeader>();
    auto uuid = r.getTraceUuid();
    if (uuid.size() == h.trace_uuid.size()) std::memcpy(h.trace_uuid.data(), uuid.begin(), uuid.size());
    h.format_epoch = r.getFormatEpoch();
    h.min_reader_epoch = r.getMinReaderEpoch();
    h.rank = r.getRank();
    h.world_size = r.getWorldSize();
    h.host = S(r.getHost());
    h.pid = r.getPid();
    h.start_realtime_ns = r.getStartRealtimeNs();
    h.start_monotonic_ns = r.getStartMonotonicNs();
    h.level = static_cast<Level>(r.getLevel());
    h.versions = GetKeyValues(r.getVersions());
    h.environment = GetKeyValues(r.getEnvironment());
    for (auto t : r.getCommandLine()) h.command_line.push_back(S(t));
    h.cores = r.getCores();
    for (auto t : r.getApiNames()) h.api_names.push_back(S(t));
    for (auto m : r.getModules()) h.modules.push_back(Module{S(m.getPath()), m.getBase(), m.getSize()});
    h.complete = r.getState() == s::RankState::COMPLETE;
    h.close_reason = static_cast<CloseReason>(r.getCloseReason());
    h.close_realtime_ns = r.getCloseRealtimeNs();
    h.event_count = r.getEventCount();
    h.dropped_events = r.getDroppedEvents();
    h.unrecorded_calls = r.getUnrecordedCalls();
    h.recording_error = S(r.getRecordingError());
    h.executable = S(r.getExecutable());
    h.build_id = S(r.getBuildId());
  } catch (const kj::Exception& e) {
    return Status::Corruption(what + " does not decode: " + e.getDescription().cStr());
  }
  if (h.min_reader_epoch > format::kFormatEpoch) {
    return Status::Version(what + " needs a replay of trace epoch " +
                           std::to_string(h.min_reader_epoch) + " or later (this one reads " +
                           std::to_string(format::kFormatEpoch) + "): upgrade replay");
  }
  CheckRanks("rank", &h.rank, format::kMaxRanks - 1, &h.damage);
  CheckRanks("world size", &h.world_size, format::kMaxRanks, &h.damage);
  CheckClock("start time", &h.start_realtime_ns, &h.damage);
  CheckClock("monotonic start time", &h.start_monotonic_ns, &h.damage);
  CheckClock("close time", &h.close_realtime_ns, &h.damage);
  EndDamage(&h.damage);
  return h;
}

std::string EncodeJobManifest(const JobManifest& m) {
  capnp::MallocMessageBuilder message;
  auto b = message.initRoot<s::JobManifest>();
  b.setTraceUuid(capnp::Data::Reader(m.trace_uuid.data(), m.trace_uuid.size()));
  b.setFormatEpoch(m.format_epoch);
  b.setMinReaderEpoch(m.min_reader_epoch);
  b.setCreatedRealtimeNs(m.created_realtime_ns);
  auto cmd = b.initCommand(static_cast<unsigned>(m.command.size()));
  for (unsigned i = 0; i < m.command.size(); ++i) cmd.set(i, T(m.command[i]));
  b.setLevel(static_cast<s::Level>(m.level));
  b.setWorldSize(m.world_size);
  b.setRecorder(T(m.recorder));
  b.setHost(T(m.host));
  return Frame(format::StreamKind::kManifest, format::BlockKind::kManifest, m.trace_uuid, message);
}

Result<JobManifest> DecodeJobManifest(std::span<const uint8_t> file, const std::string& what) {
  std::vector<capnp::word> words;
  REPLAY_RETURN_IF_ERROR(
      Unframe(file, format::StreamKind::kManifest, format::BlockKind::kManifest, what, &words));
  JobManifest m;
  try {
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()),
                                         Limits(words.size()));
    auto r = reader.getRoot<s::JobManifest>();
    auto uuid = r.getTraceUuid();
    if (uuid.size() == m.trace_uuid.size()) std::memcpy(m.trace_uuid.data(), uuid.begin(), uuid.size());
    m.format_epoch = r.getFormatEpoch();
    m.min_reader_epoch = r.getMinReaderEpoch();
    m.created_realtime_ns = r.getCreatedRealtimeNs();
    for (auto t : r.getCommand()) m.command.push_back(S(t));
    m.level = static_cast<Level>(r.getLevel());
    m.world_size = r.getWorldSize();
    m.recorder = S(r.getRecorder());
    m.host = S(r.getHost());
  } catch (const kj::Exception& e) {
    return Status::Corruption(what + " does not decode: " + e.getDescription().cStr());
  }
  if (m.min_reader_epoch > format::kFormatEpoch) {
    return Status::Version(what + " needs a replay of trace epoch " +
                           std::to_string(m.min_reader_epoch) + " or later (this one reads " +
                           std::to_string(format::kFormatEpoch) + "): upgrade replay");
  }
  CheckRanks("world size", &m.world_size, format::kMaxRanks, &m.damage);
  CheckClock("creation time", &m.created_realtime_ns, &m.damage);
  EndDamage(&m.damage);
  return m;
}

}  // namespace replay

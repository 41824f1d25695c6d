// trace_header.h: what a trace says about itself: the job manifest at the top of
// a trace directory and the header of each rank. Mirrors JobManifest and
// RankHeader in trace.capnp, where each field's invariant is written.
//
// Plain values; safe to share read-only between threads.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "replay/status.h"

namespace replay {

using Uuid = std::array<uint8_t, 16>;
// A random (version 4) UUID.
Uuid NewUuid();
// "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
std::string UuidToString(const Uuid& uuid);
std::optional<Uuid> ParseUuid(std::string_view text);

enum class Level : uint8_t { kMeta = 0, kHash = 1, kData = 2 };
std::string_view LevelName(Level level);
std::optional<Level> ParseLevel(std::string_view name);

enum class CloseReason : uint8_t {
  kNone = 0, kExit, kFinalize, kSignal, kAbort, kExec, kFailed,
};
std::string_view CloseReasonName(CloseReason reason);

using KeyValues = std::vector<std::pair<std::string, std::string>>;

struct Module {
  std::string path;
  uint64_t base = 0;
  uint64_t size = 0;
};

// A frame of source: a function, its file and a line in it (0: not known).
struct SourceFrame {
  std::string function;
  std::string file;
  int32_t line = 0;
  auto operator<=>(const SourceFrame&) const = default;
};

struct RankHeader {
  Uuid trace_uuid{};
  uint32_t format_epoch = 0;
  uint32_t min_reader_epoch = 0;
  int32_t rank = -1;
  int32_t world_size = -1;
  std::string host;
  int32_t pid = 0;
  int64_t start_realtime_ns = 0;
  int64_t start_monotonic_ns = 0;
  Level level = Level::kHash;
  KeyValues versions;
  KeyValues environment;
  std::vector<std::string> command_line;
  std::string executable;  // resolved path of the program run; empty in older traces
  std::string build_id;    // its GNU build id (hex); empty if none
  uint32_t cores = 0;
  std::vector<std::string> api_names;
  std::vector<Module> modules;
  bool complete = false;
  CloseReason close_reason = CloseReason::kNone;
  int64_t close_realtime_ns = 0;
  uint64_t event_count = 0;
  uint64_t dropped_events = 0;     // lost to a full ring
  uint64_t unrecorded_calls = 0;  // made after recording stopped, or with no ring slot or disk room
  std::string recording_error;
  // Set by DecodeRankHeader: the values it found impossible (a rank or world
  // size no job has, a time no clock gives) and replaced by "not known"
  // (-1, or 0 for times). Empty for a sound header. Never written.
  std::string damage;

  // The name of API id `api`, or "api#N" if the header does not list it.
  std::string ApiName(uint16_t api) const;
  // The value of `key` in versions / environment, or empty.
  std::string_view Version(std::string_view key) const;
  std::string_view Env(std::string_view key) const;
};

struct JobManifest {
  Uuid trace_uuid{};
  uint32_t format_epoch = 0;
  uint32_t min_reader_epoch = 0;
  int64_t created_realtime_ns = 0;
  std::vector<std::string> command;
  Level level = Level::kHash;
  int32_t world_size = -1;
  std::string recorder;
  std::string host;
  std::string damage;  // as RankHeader::damage
};

// REPLAY_COMMAND, which `replay record` sets for the ranks it starts: the
// command's words separated by this (ASCII unit separator).
inline constexpr char kCommandSeparator = '\x1f';
std::string JoinCommand(const std::vector<std::string>& words);
std::vector<std::string> SplitCommand(std::string_view joined);
// A command as a person would type it: words joined by spaces, each quoted
// where a POSIX shell would need it ("mpirun -np 4 ./train 'a b'").
std::string CommandText(const std::vector<std::string>& words);
// The value of environment variable `key` as a person reads it: REPLAY_COMMAND
// as CommandText, anything else as it is.
std::string EnvValueText(std::string_view key, std::string_view value);

// Encodings as stored in `header` and `manifest` (a framed, checksummed block).
std::string EncodeRankHeader(const RankHeader& header);
Result<RankHeader> DecodeRankHeader(std::span<const uint8_t> file, const std::string& what);
std::string EncodeJobManifest(const JobManifest& manifest);
Result<JobManifest> DecodeJobManifest(std::span<const uint8_t> file, const std::string& what);

}  // namespace replay

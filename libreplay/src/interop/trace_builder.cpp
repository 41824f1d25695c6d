#include "interop/trace_builder.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

#include "trace/block.h"
#include "trace/event_codec.h"
#include "trace/format.h"
#include "util/file_system.h"

namespace replay::interop {

void RankTraceBuilder::Add(Event e, int64_t realtime_ns) {
  e.index = events_.size();
  e.time_ns = realtime_ns - header_.start_realtime_ns;
  events_.push_back(std::move(e));
}

Status RankTraceBuilder::Write(const std::string& dir, CloseReason reason, int64_t close_realtime_ns,
                               bool complete) {
  FileSystem* fs = FileSystem::Default();
  REPLAY_RETURN_IF_ERROR(fs->CreateDirs(dir, 0700));
  char name[32];
  std::snprintf(name, sizeof(name), "%s%05d", format::kRankDirPrefix, header_.rank);
  const std::string rank_dir = dir + "/" + name;
  REPLAY_RETURN_IF_ERROR(fs->CreateDirExclusive(rank_dir, 0700));

  RankHeader h = header_;
  if (h.trace_uuid == Uuid{}) h.trace_uuid = NewUuid();
  h.format_epoch = format::kFormatEpoch;
  h.min_reader_epoch = format::kMinReaderEpoch;
  if (h.start_monotonic_ns == 0) h.start_monotonic_ns = 1;
  h.complete = complete;
  h.close_reason = reason;
  h.close_realtime_ns = close_realtime_ns;
  h.event_count = events_.size();

  std::string file;
  EncodeFileHeader(format::StreamKind::kEvents, h.trace_uuid.data(), &file);
  EventBlockEncoder encoder;
  BlockCodec codec(3);
  constexpr size_t kBlockEvents = 8192;
  for (size_t at = 0; at < events_.size(); at += kBlockEvents) {
    size_t n = std::min(kBlockEvents, events_.size() - at);
    std::span<const uint8_t> raw = encoder.Encode(std::span<const Event>(events_).subspan(at, n));
    REPLAY_RETURN_IF_ERROR(codec.Encode(format::BlockKind::kEvents, events_[at].index, n, raw, &file));
  }
  REPLAY_RETURN_IF_ERROR(fs->WriteAtomic(rank_dir + "/" + format::kEventsFile, file));
  return fs->WriteAtomic(rank_dir + "/" + format::kHeaderFile, EncodeRankHeader(h));
}

Status WriteTraceManifest(const std::string& dir, JobManifest manifest) {
  FileSystem* fs = FileSystem::Default();
  REPLAY_RETURN_IF_ERROR(fs->CreateDirs(dir, 0700));
  manifest.format_epoch = format::kFormatEpoch;
  manifest.min_reader_epoch = format::kMinReaderEpoch;
  return fs->WriteAtomic(dir + "/" + format::kManifestFile, EncodeJobManifest(manifest));
}

}  // namespace replay::interop

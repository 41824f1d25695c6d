#include "replay/trace_reader.h"

#include "replay/event_format.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <new>
#include <optional>
#include <stdexcept>

#include "trace/block.h"
#include "trace/event_codec.h"
#include "trace/format.h"
#include "trace/ring.h"
#include "util/mapped_file.h"

namespace replay {
namespace {

// Rank from a directory name "rank-00003" (or "rank-00003.p123"); -1 otherwise.
int32_t RankFromName(const std::string& name) {
  const std::string prefix = format::kRankDirPrefix;
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  int32_t r = 0;
  size_t i = prefix.size();
  if (i >= name.size() || !isdigit(static_cast<unsigned char>(name[i]))) return -1;
  for (; i < name.size() && isdigit(static_cast<unsigned char>(name[i])); ++i) {
    r = r * 10 + (name[i] - '0');
    if (r >= format::kMaxRanks) return -1;
  }
  return r;
}

// The payload files of a rank, oldest first: payloads, payloads.1, ...
std::vector<std::string> PayloadFiles(const std::string& dir) {
  std::vector<std::pair<long, std::string>> found;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return {};
  const std::string base = format::kPayloadsFile;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == base) {
      found.emplace_back(0, dir + "/" + name);
    } else if (name.rfind(base + ".", 0) == 0 && name.find(".tmp") == std::string::npos) {
      char* end = nullptr;
      long n = std::strtol(name.c_str() + base.size() + 1, &end, 10);
      if (end != nullptr && *end == '\0' && n > 0) found.emplace_back(n, dir + "/" + name);
    }
  }
  closedir(d);
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [n, path] : found) out.push_back(path);
  return out;
}

bool IsEmptyDirectory(const std::string& path) {
  std::error_code ec;
  const bool empty = std::filesystem::is_directory(path, ec) && std::filesystem::is_empty(path, ec);
  return empty && !ec;
}

bool IsRankDirName(const std::string& name) {
  return RankFromName(name) >= 0 || name.compare(0, 4, "pid-") == 0;
}

// Whether the process recording into `ring_path` still holds its lock.
bool RingLocked(const std::string& ring_path) {
  int fd = open(ring_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool locked = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);
  return locked;
}

std::string BaseName(const std::string& path) {
  size_t end = path.find_last_not_of('/');
  if (end == std::string::npos) return path;
  size_t slash = path.rfind('/', end);
  return path.substr(slash == std::string::npos ? 0 : slash + 1,
                     end - (slash == std::string::npos ? 0 : slash + 1) + 1);
}

}  // namespace

std::string_view RankStatusName(RankStatus status) {
  switch (status) {
    case RankStatus::kComplete: return "complete";
    case RankStatus::kSalvaged: return "salvaged after crash";
    case RankStatus::kRunning: return "still being written";
    case RankStatus::kFailed: return "recording failed";
  }
  return "unknown";
}

std::string RankEndText(RankStatus status, CloseReason reason, int fatal_signal) {
  if (fatal_signal != 0) {
    return (IsCrashSignal(fatal_signal) ? "crashed with " : "killed by ") + SignalName(fatal_signal) +
           (status == RankStatus::kComplete ? "" : ", " + std::string(RankStatusName(status)));
  }
  std::string s(RankStatusName(status));
  if (status == RankStatus::kComplete && reason != CloseReason::kNone) {
    s += " (" + std::string(CloseReasonName(reason)) + ")";
  }
  return s;
}

Result<std::unique_ptr<RankReader>> RankReader::Open(const std::string& dir,
                                                     const ReadOptions& options) {
  std::unique_ptr<RankReader> r(new RankReader());
  r->dir_ = dir;
  REPLAY_RETURN_IF_ERROR(r->Load(options));
  return r;
}

// Reserves room for the events the blocks of an events stream declare, found
// from their headers before any is decompressed, so that a long rank's events
// are not moved each time their vector would grow (which also made the peak
// up to twice the events' size). Only intact blocks count, and at most
// kReserveEvents in all: a crafted file can declare more than it holds, and
// past that the vector grows as it must. Room reserved and never filled is
// address space, not resident memory; a reservation the system refuses is
// not made.
void RankReader::ReserveEvents(std::span<const uint8_t> bytes, uint64_t offset) {
  constexpr uint64_t kReserveEvents = uint64_t{1} << 22;
  BlockScanner scanner(bytes, offset);
  FoundBlock block;
  uint64_t declared = 0;
  while (declared < kReserveEvents && scanner.Next(&block)) {
    if (block.header.kind != static_cast<uint8_t>(format::BlockKind::kEvents)) continue;
    declared += std::min<uint64_t>(block.header.aux, format::kMaxBlockEvents);
  }
  declared = std::min(declared, kReserveEvents);
  try {
    events_.reserve(events_.size() + declared);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
}

// The events file of a rank opened to stream, and what its ring held.
struct RankReader::Stream {
  std::string path;
  MappedFile file;        // the events stream (a copy for a running rank)
  uint64_t offset = 0;    // of its first block
  bool running = false;
  std::vector<Event> ring;  // salvaged, by index
};

namespace {

// Blocks of the events stream are in index order, and so are the events in
// each; only an event whose thread was slow to publish it can land in a later
// block than events after it. The merge holds events back until no block to
// come can hold an earlier one, on the evidence of the last kOrderBlocks
// blocks and at least kOrderEvents events, and merges the ring's events in
// (dropping those the stream has).
constexpr size_t kOrderBlocks = 4;
constexpr size_t kOrderEvents = size_t{1} << 16;

class EventMerger {
 public:
  EventMerger(const std::vector<Event>& ring, const std::function<bool(const Event&)>& fn, EventWalk* walk)
      : ring_(ring), fn_(fn), walk_(*walk) {}

  // Takes a decoded block's events (in index order). False once `fn` said stop.
  bool Block(std::vector<Event>* block) {
    if (block->empty()) return !stopped_;
    firsts_.push_back({block->front().index, block->size()});
    window_ += block->size();
    while (firsts_.size() > kOrderBlocks && window_ - firsts_.front().second >= kOrderEvents) {
      window_ -= firsts_.front().second;
      firsts_.erase(firsts_.begin());
    }
    if (pending_.empty()) {
      pending_.swap(*block);
    } else {
      std::vector<Event> merged;
      merged.reserve(pending_.size() + block->size());
      std::merge(std::make_move_iterator(pending_.begin()), std::make_move_iterator(pending_.end()),
                 std::make_move_iterator(block->begin()), std::make_move_iterator(block->end()),
                 std::back_inserter(merged), [](const Event& a, const Event& b) { return a.index < b.index; });
      pending_.swap(merged);
    }
    block->clear();
    uint64_t horizon = UINT64_MAX;
    for (const auto& [first, size] : firsts_) horizon = std::min(horizon, first);
    return Release(horizon);
  }

  // Passes on everything left.
  void Finish() {
    Release(UINT64_MAX);
    while (!stopped_ && next_ring_ < ring_.size()) EmitRing();
  }

  bool stopped() const { return stopped_; }

 private:
  // Passes on the held events with an index below `horizon`.
  bool Release(uint64_t horizon) {
    size_t n = 0;
    while (n < pending_.size() && pending_[n].index < horizon && !stopped_) {
      const Event& e = pending_[n++];
      while (next_ring_ < ring_.size() && ring_[next_ring_].index < e.index && !stopped_) EmitRing();
      while (next_ring_ < ring_.size() && ring_[next_ring_].index == e.index) ++next_ring_;  // in the stream too
      if (!stopped_) Emit(e);
    }
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
    return !stopped_;
  }

  // Passes on the next ring event: one the events stream does not have.
  void EmitRing() {
    const Event& e = ring_[next_ring_++];
    if (emitted_any_ && e.index == last_) return;
    ++from_ring_;
    Emit(e);
  }

  void Emit(const Event& in) {
    if (emitted_any_ && in.index == last_) return;  // the same event twice
    const Event* e = &in;
    Event clamped;
    // A time no clock gives (a damaged or foreign trace) is clamped, so that
    // what reads the events can add and subtract times without overflow.
    if (in.time_ns > format::kMaxEventTimeNs || in.time_ns < -format::kMaxEventTimeNs) {
      clamped = in;
      clamped.time_ns = in.time_ns > 0 ? format::kMaxEventTimeNs : -format::kMaxEventTimeNs;
      e = &clamped;
      ++clamped_;
    }
    if (emitted_any_ && e->index < last_) {
      ++late_;
    } else {
      uint64_t expected = emitted_any_ ? last_ + 1 : 0;
      if (e->index > expected) walk_.stats.missing += e->index - expected;
      last_ = e->index;
    }
    if (e->kind == EventKind::kDrop) walk_.stats.dropped += e->drop.count;
    if (walk_.events == 0) walk_.first_ns = e->time_ns;
    walk_.last_ns = e->time_ns;
    ++walk_.events;
    emitted_any_ = true;
    if (!fn_(*e)) stopped_ = true;
  }

 public:
  uint64_t clamped_ = 0;
  uint64_t late_ = 0;
  uint64_t from_ring_ = 0;

 private:
  const std::vector<Event>& ring_;
  const std::function<bool(const Event&)>& fn_;
  EventWalk& walk_;
  std::vector<Event> pending_;
  std::vector<std::pair<uint64_t, size_t>> firsts_;  // recent blocks: first index, events
  size_t window_ = 0;                                  // events in them
  size_t next_ring_ = 0;
  uint64_t last_ = 0;
  bool emitted_any_ = false;
  bool stopped_ = false;
};

// Decodes the event blocks of `bytes` from `offset`, passing them to `merger`,
// and adds what it found to `walk` (blocks, bytes, problems).
void DecodeBlocks(std::span<const uint8_t> bytes, uint64_t offset, const std::string& path, bool running,
                  EventMerger* merger, EventWalk* walk) {
  BlockScanner scanner(bytes, offset);
  BlockCodec codec;
  std::string raw;
  std::vector<Event> block_events;
  FoundBlock block;
  while (!merger->stopped() && scanner.Next(&block)) {
    if (block.header.kind != static_cast<uint8_t>(format::BlockKind::kEvents)) continue;
    block_events.clear();
    Status ds = codec.Decode(block.header, block.stored, &raw);
    if (ds.ok()) {
      ds = DecodeEventBlock(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()),
                            &block_events);
    }
    if (!ds.ok()) {
      walk->problems.push_back(
          {path, block.offset, sizeof(format::BlockHeader) + block.header.stored_size, false, ds.message()});
      continue;
    }
    ++walk->stats.blocks;
    walk->stats.raw_bytes += raw.size();
    if (!std::is_sorted(block_events.begin(), block_events.end(),
                        [](const Event& a, const Event& b) { return a.index < b.index; })) {
      std::stable_sort(block_events.begin(), block_events.end(),
                       [](const Event& a, const Event& b) { return a.index < b.index; });
    }
    merger->Block(&block_events);
  }
  if (merger->stopped()) return;
  for (const BlockProblem& p : scanner.problems()) {
    // On a file system without flock a running rank's copy may catch its
    // open last block being rewritten: damaged rather than short.
    bool tail = p.torn_tail || (running && p.offset + p.length == bytes.size());
    std::string msg = tail ? (running ? "last block still being written (" + p.reason + ")" : "torn tail: " + p.reason)
                           : "damaged block skipped: " + p.reason;
    walk->problems.push_back({path, p.offset, p.length, tail, msg});
  }
}

// The problems a walk adds for the counts it ends with.
void CountProblems(const std::string& path, const EventMerger& merger, EventWalk* walk) {
  if (walk->stats.missing > 0) {
    walk->problems.push_back({path, 0, 0, false,
                              std::to_string(walk->stats.missing) + " events missing from the index sequence"});
  }
  if (merger.clamped_ > 0) {
    walk->problems.push_back({path, 0, 0, false,
                              std::to_string(merger.clamped_) +
                                  " events with a time more than 2^60 ns from the rank's start "
                                  "(damaged): their times are clamped to it"});
  }
  if (merger.late_ > 0) {
    walk->problems.push_back({path, 0, 0, false,
                              std::to_string(merger.late_) + " events stored further out of place than " +
                                  std::to_string(kOrderEvents) + " events: read out of order"});
  }
}

}  // namespace

Status RankReader::Load(const ReadOptions& options) {
  if (!IsDirectory(dir_)) {
    return Status::NotFound(dir_ + " is not a directory: expected a rank directory of a trace");
  }
  std::string header_path = dir_ + "/" + format::kHeaderFile;
  std::string events_path = dir_ + "/" + format::kEventsFile;
  std::string ring_path = dir_ + "/" + format::kRingFile;

  // Header.
  auto header_file = MappedFile::Open(header_path);
  if (header_file.ok()) {
    auto h = DecodeRankHeader(header_file->bytes(), header_path);
    if (h.ok()) {
      header_ = std::move(h).value();
      header_ok_ = true;
      if (!header_.damage.empty()) problems_.push_back({header_path, 0, 0, false, header_.damage});
    } else if (h.status().code() == Status::Code::kVersion ||
               h.status().code() == Status::Code::kNotATrace) {
      return h.status();
    } else {
      problems_.push_back({header_path, 0, 0, false, h.status().message()});
    }
  } else {
    problems_.push_back({header_path, 0, 0, false, header_file.status().message()});
  }

  // A running rank's writer moves events from the ring to the events stream
  // while we read: it writes them in a block, then advances the slot's tail.
  // So the ring is copied first, then each slot's tail is read again, then the
  // events stream is read. An event below the tail read again was in the
  // stream before the stream was read; one at or past it was still in the
  // ring when the copy was taken, and its space had not been reused.
  bool ring_exists = FileExists(ring_path);
  bool running = ring_exists && RingLocked(ring_path);
  bool want_ring = options.salvage_ring && ring_exists && !(header_ok_ && header_.complete);
  std::optional<MappedFile> ring_copy;
  if (want_ring) {
    auto m = MappedFile::Open(ring_path, /*copy=*/true);
    if (m.ok()) {
      ring_copy = std::move(m).value();
    } else {
      problems_.push_back({ring_path, 0, 0, false, m.status().message()});
    }
  }
  std::vector<uint64_t> tails;
  if (ring_copy && running) {
    if (auto again = MappedFile::Open(ring_path, true); again.ok()) tails = RingTails(again->bytes());
  }

  // Events stream. A running rank's writer rewrites its open last block in
  // place, so read a copy, taken under the file's shared lock: the writer
  // rewrites only while it holds the lock exclusively (it appends instead when
  // it cannot), so the copy never holds a torn block followed by intact ones.
  auto stream = std::make_shared<Stream>();
  stream->path = events_path;
  stream->running = running;
  auto events_file = MappedFile::Open(events_path, /*copy=*/running, /*lock_shared=*/running);
  bool have_events = false;
  if (events_file.ok()) {
    stats_.stored_bytes = events_file->bytes().size();
    format::FileHeader fh;
    Status st = CheckFileHeader(events_file->bytes(), format::StreamKind::kEvents, events_path, &fh);
    if (st.code() == Status::Code::kVersion || st.code() == Status::Code::kNotATrace) return st;
    if (st.ok()) {
      have_events = true;
      stream->offset = fh.header_size;
      stream->file = std::move(events_file).value();
    } else {
      problems_.push_back({events_path, 0, 0, false, st.message()});
    }
  } else if (events_file.status().code() != Status::Code::kNotFound || !ring_exists) {
    problems_.push_back({events_path, 0, 0, false, events_file.status().message()});
  }

  // Ring.
  bool have_ring = false;
  bool ring_failed = false;
  if (ring_copy) {
    auto salvaged = SalvageRing(ring_copy->bytes(), tails);
    if (salvaged.ok()) {
      have_ring = true;
      ring_failed = salvaged->failed;
      stats_.dropped += salvaged->dropped;
      stats_.unrecorded = salvaged->lost_no_slot + salvaged->unrecorded;
      if (header_.recording_error.empty()) header_.recording_error = salvaged->failure;
      stream->ring = std::move(salvaged->events);
      std::stable_sort(stream->ring.begin(), stream->ring.end(),
                       [](const Event& a, const Event& b) { return a.index < b.index; });
      stream->ring.erase(std::unique(stream->ring.begin(), stream->ring.end(),
                                     [](const Event& a, const Event& b) { return a.index == b.index; }),
                         stream->ring.end());
      for (const std::string& p : salvaged->problems) problems_.push_back({ring_path, 0, 0, false, p});
    } else if (salvaged.status().code() == Status::Code::kVersion) {
      return salvaged.status();
    } else {
      problems_.push_back({ring_path, 0, 0, false, salvaged.status().message()});
    }
  }

  if (header_ok_) stats_.unrecorded = std::max(stats_.unrecorded, header_.unrecorded_calls);
  if (!header_ok_ && !have_events && !have_ring) {
    if (IsEmptyDirectory(dir_)) {
      return Status::Corruption(dir_ + " is empty: its recording could not start there (was the disk full or "
                                "the directory unwritable? the rank said so on its standard error)");
    }
    return Status::Corruption(dir_ + " holds no readable header, events or ring");
  }
  stream_ = std::move(stream);

  if (!options.stream) {
    // Read whole: walk once into events_ and keep what the walk found.
    ReserveEvents(stream_->file.bytes(), stream_->offset);
    auto walk = ForEachEvent([this](const Event& e) {
      events_.push_back(e);
      return true;
    });
    if (!walk.ok()) return walk.status();
    stream_.reset();
    stats_ = walk->stats;
    problems_ = std::move(walk->problems);
    // Events stored too far out of place were passed on late: sort them in,
    // and count the gaps again.
    auto by_index = [](const Event& a, const Event& b) { return a.index < b.index; };
    if (!std::is_sorted(events_.begin(), events_.end(), by_index)) {
      std::stable_sort(events_.begin(), events_.end(), by_index);
      events_.erase(std::unique(events_.begin(), events_.end(),
                                [](const Event& a, const Event& b) { return a.index == b.index; }),
                    events_.end());
      std::erase_if(problems_, [&](const TraceProblem& p) {
        return p.message.find(" events missing from the index sequence") != std::string::npos ||
               p.message.find(" out of place than ") != std::string::npos;
      });
      stats_.missing = 0;
      for (size_t i = 0; i < events_.size(); ++i) {
        uint64_t expected = i == 0 ? 0 : events_[i - 1].index + 1;
        if (events_[i].index > expected) stats_.missing += events_[i].index - expected;
      }
      if (header_ok_ && header_.complete && header_.event_count > events_.size() + stats_.missing) {
        stats_.missing = header_.event_count - events_.size();
      }
      if (stats_.missing > 0) {
        problems_.push_back({events_path, 0, 0, false,
                             std::to_string(stats_.missing) + " events missing from the index sequence"});
      }
    }
  }

  if (header_ok_ && header_.complete) {
    status_ = header_.close_reason == CloseReason::kFailed ? RankStatus::kFailed : RankStatus::kComplete;
  } else if (running) {
    status_ = RankStatus::kRunning;
  } else if ((header_ok_ && header_.close_reason == CloseReason::kFailed) || ring_failed) {
    status_ = RankStatus::kFailed;
  } else if (!header_ok_ && !ring_exists && have_events) {
    // A rank removes its ring only after writing its closing header: that
    // header is what is damaged, and the rank ended in a way it no longer says.
    status_ = RankStatus::kComplete;
  } else {
    status_ = RankStatus::kSalvaged;
  }

  rank_ = header_ok_ ? header_.rank : -1;
  if (rank_ < 0) {
    auto world_rank = [this](const Event& e) {
      if (e.kind != EventKind::kInfo || e.info_key() != "mpi.world_rank") return true;
      std::string v(e.info_value());
      char* end = nullptr;
      long r = std::strtol(v.c_str(), &end, 10);
      if (end != v.c_str() && *end == '\0' && r >= 0 && r < format::kMaxRanks) rank_ = static_cast<int32_t>(r);
      return false;
    };
    (void)ForEachEvent(world_rank);
  }
  if (rank_ < 0) rank_ = RankFromName(BaseName(dir_));
  if (!header_ok_) header_.rank = rank_;

  for (const std::string& f : PayloadFiles(dir_)) {
    if (auto st = MappedFile::Open(f); st.ok()) stats_.payload_bytes += st->bytes().size();
  }
  return Status::Ok();
}

void RankReader::AdoptApiNames(const std::vector<std::string>& names, const std::string& from) {
  if (!header_.api_names.empty()) return;
  header_.api_names = names;
  problems_.push_back({dir_, 0, 0, false, "the names of its calls are taken from " + from + "'s header"});
}

Result<EventWalk> RankReader::ForEachEvent(const std::function<bool(const Event&)>& fn) const {
  EventWalk walk;
  walk.stats = stats_;
  walk.problems = problems_;
  if (stream_ == nullptr) {
    for (const Event& e : events_) {
      if (walk.events == 0) walk.first_ns = e.time_ns;
      walk.last_ns = e.time_ns;
      ++walk.events;
      if (!fn(e)) break;
    }
    return walk;
  }
  // Counted afresh by the walk.
  walk.stats.blocks = 0;
  walk.stats.raw_bytes = 0;
  walk.stats.missing = 0;
  walk.stats.salvaged = 0;
  EventMerger merger(stream_->ring, fn, &walk);
  if (!stream_->file.bytes().empty()) {
    DecodeBlocks(stream_->file.bytes(), stream_->offset, stream_->path, stream_->running, &merger, &walk);
  }
  merger.Finish();
  walk.stats.salvaged = merger.from_ring_;
  if (!merger.stopped()) {
    // Events lost past the last one read (a damaged last block) leave no gap:
    // the closing header says how many there were.
    if (header_ok_ && header_.complete && header_.event_count > walk.events + walk.stats.missing) {
      walk.stats.missing = header_.event_count - walk.events;
    }
    CountProblems(stream_->path, merger, &walk);
  }
  return walk;
}

bool RankReader::IsRunning(const std::string& dir) {
  std::string ring = dir + "/" + format::kRingFile;
  return FileExists(ring) && RingLocked(ring);
}

bool RankReader::has_payloads() const { return !PayloadFiles(dir_).empty(); }

std::vector<TraceProblem> RankReader::PayloadProblems() const {
  (void)IndexPayloads();
  return payload_problems_;
}

// Indexes every payload block whose checksum holds, and keeps what the scan
// found damaged: one pass over the streams serves lookups and verification.
Status RankReader::IndexPayloads() const {
  if (payloads_indexed_) return Status::Ok();
  payload_files_ = PayloadFiles(dir_);
  if (payload_files_.empty()) {
    return Status::NotFound(dir_ + " has no payloads: record at level data to keep received bytes");
  }
  const bool running = IsRunning(dir_);
  for (size_t i = 0; i < payload_files_.size(); ++i) {
    const std::string& path = payload_files_[i];
    auto file = MappedFile::Open(path);
    if (!file.ok()) {
      payload_problems_.push_back({path, 0, 0, false, file.status().message()});
      continue;
    }
    format::FileHeader fh;
    if (Status st = CheckFileHeader(file->bytes(), format::StreamKind::kPayloads, path, &fh); !st.ok()) {
      payload_problems_.push_back({path, 0, file->bytes().size(), false, st.message()});
      continue;
    }
    BlockScanner scanner(file->bytes(), fh.header_size);
    FoundBlock block;
    while (scanner.Next(&block)) {
      if (block.header.kind == static_cast<uint8_t>(format::BlockKind::kPayload)) {
        payload_blocks_.emplace(block.header.tag, std::make_pair(i, block.offset));
      }
    }
    for (const BlockProblem& p : scanner.problems()) {
      // A running rank may be appending its last payload right now.
      if (running && p.offset + p.length == file->bytes().size()) continue;
      payload_problems_.push_back({path, p.offset, p.length, p.torn_tail,
                                   (p.torn_tail ? "received bytes cut short: " : "received bytes damaged: ") + p.reason});
    }
  }
  payloads_indexed_ = true;
  return Status::Ok();
}

std::vector<std::string> RankReader::ReceivedBytesDamage(std::vector<uint64_t> named) const {
  std::vector<std::string> out;
  const bool closed = status_ == RankStatus::kComplete;
  for (const TraceProblem& p : PayloadProblems()) {
    if (closed || !p.torn_tail) out.push_back(p.file + ": " + p.message);
  }
  if (named.empty()) {
    for (const Event& e : events_) {
      if (auto h = NamedPayload(e)) named.push_back(*h);
    }
  }
  const std::string_view window = header_.Env("REPLAY_DATA_WINDOW");
  if (status_ != RankStatus::kFailed && (window.empty() || window == "all") && !named.empty()) {
    std::sort(named.begin(), named.end());
    named.erase(std::unique(named.begin(), named.end()), named.end());
    size_t absent = 0;
    for (uint64_t h : named) absent += HasPayload(h) ? 0 : 1;
    if (absent > 0) {
      out.push_back(std::to_string(absent) + " of the " + std::to_string(named.size()) +
                    " payloads its events name are not in " + dir_);
    }
  }
  return out;
}

bool RankReader::HasPayload(uint64_t hash) const {
  return IndexPayloads().ok() && payload_blocks_.count(hash) != 0;
}

Result<std::string> RankReader::Payload(uint64_t hash) const {
  REPLAY_RETURN_IF_ERROR(IndexPayloads());
  auto range = payload_blocks_.equal_range(hash);
  if (range.first == range.second) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(hash));
    std::string why = " (received outside the recording's data window, or lost)";
    for (const TraceProblem& p : PayloadProblems()) {
      if (!p.torn_tail) {
        why = ": its stored bytes are damaged (" + p.file + " at offset " + std::to_string(p.offset) + ": " +
              p.message + ")";
        break;
      }
    }
    return Status::NotFound(std::string("payload ") + buf + " is not in " + dir_ + why);
  }
  // All parts of one payload are in one file (a payload is stored whole).
  const std::string& path = payload_files_[range.first->second.first];
  REPLAY_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  auto bytes = file.bytes();
  std::vector<std::pair<uint64_t, std::string>> parts;
  BlockCodec codec;
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second.first != range.first->second.first) continue;
    BlockScanner scanner(bytes, it->second.second);
    FoundBlock block;
    if (!scanner.Next(&block) || block.offset != it->second.second) {
      return Status::Corruption("payload block at offset " + std::to_string(it->second.second) + " of " + path +
                                " changed while reading");
    }
    std::string raw;
    REPLAY_RETURN_IF_ERROR(codec.Decode(block.header, block.stored, &raw));
    parts.emplace_back(block.header.aux, std::move(raw));
  }
  std::sort(parts.begin(), parts.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out;
  for (auto& [offset, raw] : parts) {
    if (offset != out.size()) {
      if (offset < out.size()) continue;  // the same part stored twice
      return Status::Corruption("payload parts of " + path + " are incomplete");
    }
    out += raw;
  }
  return out;
}

Result<std::unique_ptr<TraceReader>> TraceReader::Open(const std::string& dir) {
  std::unique_ptr<TraceReader> t(new TraceReader());
  t->dir_ = dir;
  if (!FileExists(dir)) {
    return Status::NotFound(dir + " does not exist: give the directory `replay record -o` wrote");
  }
  if (!IsDirectory(dir)) {
    // A single file: a trace stream or something else entirely.
    auto f = MappedFile::Open(dir);
    if (f.ok() && f->bytes().size() >= 8 && std::memcmp(f->bytes().data(), format::kFileMagic, 8) == 0) {
      return Status::InvalidArgument(dir + " is one file of a trace; give the trace directory instead");
    }
    return Status::NotATrace(dir + " is not a trace directory (it is a file)");
  }
  std::string manifest_path = dir + "/" + format::kManifestFile;
  if (FileExists(manifest_path)) {
    auto mf = MappedFile::Open(manifest_path);
    if (mf.ok()) {
      auto m = DecodeJobManifest(mf->bytes(), manifest_path);
      if (m.ok()) {
        t->manifest_ = std::move(m).value();
        if (!t->manifest_->damage.empty()) t->problems_.push_back({manifest_path, 0, 0, false, t->manifest_->damage});
      } else if (m.status().code() == Status::Code::kVersion) {
        return m.status();
      } else {
        t->problems_.push_back({manifest_path, 0, 0, false, m.status().message()});
      }
    } else {
      t->problems_.push_back({manifest_path, 0, 0, false, mf.status().message()});
    }
  }
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return Status::FromErrno("cannot list " + dir, errno);
  std::vector<std::string> names;
  while (dirent* ent = readdir(d)) {
    std::string name = ent->d_name;
    if (IsRankDirName(name) && IsDirectory(dir + "/" + name)) names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  std::vector<RankEntry> entries;
  for (const std::string& name : names) {
    RankEntry e;
    e.dir = dir + "/" + name;
    e.name = name;
    std::string hp = e.dir + "/" + format::kHeaderFile;
    if (auto hf = MappedFile::Open(hp); hf.ok()) {
      auto h = DecodeRankHeader(hf->bytes(), hp);
      if (h.ok()) {
        e.header = std::move(h).value();
        e.header_ok = true;
      } else if (h.status().code() == Status::Code::kVersion) {
        return h.status();
      }
    }
    e.rank = e.header_ok && e.header.rank >= 0 ? e.header.rank : RankFromName(name);
    entries.push_back(std::move(e));
  }
  // A manifest that no rank belongs to is the foreign one (copied in, or left
  // from an earlier recording), not every rank: when the ranks agree among
  // themselves, they are read and the manifest is not.
  if (t->manifest_) {
    const Uuid m = t->manifest_->trace_uuid;
    std::vector<Uuid> others;
    bool any_matches = false;
    for (const RankEntry& e : entries) {
      if (!e.header_ok) continue;
      if (e.header.trace_uuid == m) {
        any_matches = true;
      } else if (std::find(others.begin(), others.end(), e.header.trace_uuid) == others.end()) {
        others.push_back(e.header.trace_uuid);
      }
    }
    if (!any_matches && others.size() == 1) {
      t->problems_.push_back({manifest_path, 0, 0, false,
                              "belongs to another recording (trace " + UuidToString(m) +
                                  ") than every rank directory (trace " + UuidToString(others[0]) +
                                  "): the manifest is ignored"});
      t->manifest_.reset();
    } else if (!any_matches && others.size() > 1) {
      return Status::Corruption(dir + " mixes the ranks of " + std::to_string(others.size()) +
                                " recordings, and its manifest belongs to none of them: give each "
                                "recording its own directory");
    }
  }
  for (RankEntry& e : entries) {
    if (e.header_ok && t->manifest_ && e.header.trace_uuid != t->manifest_->trace_uuid) {
      t->problems_.push_back({e.dir, 0, 0, false,
                              "belongs to another recording (trace " +
                                  UuidToString(e.header.trace_uuid) + ", directory is " +
                                  UuidToString(t->manifest_->trace_uuid) + "): ignored"});
      continue;
    }
    // The recorder names a rank's directory after the rank its header holds.
    if (const int32_t named = RankFromName(e.name); e.header_ok && named >= 0 && e.header.rank >= 0 &&
                                                   named != e.header.rank) {
      t->problems_.push_back({e.dir, 0, 0, false,
                              "holds the header of rank " + std::to_string(e.header.rank) +
                                  " (moved or damaged): read as that rank"});
    }
    t->ranks_.push_back(std::move(e));
  }
  if (t->ranks_.empty()) {
    if (t->manifest_) {
      return Status::Unavailable(dir + " holds a trace manifest but no ranks yet: the job has not "
                                       "made a recorded call (is it running under replay?)");
    }
    return Status::NotATrace(dir + " is not a trace directory: no manifest and no rank-* "
                                   "directories (record one with `replay record -o " + dir + " -- ...`)");
  }
  std::stable_sort(t->ranks_.begin(), t->ranks_.end(), [](const RankEntry& a, const RankEntry& b) {
    if ((a.rank < 0) != (b.rank < 0)) return a.rank >= 0;
    return a.rank < b.rank;
  });
  return t;
}

Result<std::unique_ptr<RankReader>> TraceReader::OpenRank(size_t i, const ReadOptions& options) const {
  if (i >= ranks_.size()) return Status::InvalidArgument("no rank entry " + std::to_string(i));
  auto r = RankReader::Open(ranks_[i].dir, options);
  if (r.ok() && !(*r)->header_ok()) {
    // Its events name calls by indexes into the header's list of API names,
    // which is the recorder's own and the same in every rank it records.
    for (const RankEntry& e : ranks_) {
      if (e.header_ok && !e.header.api_names.empty()) {
        (*r)->AdoptApiNames(e.header.api_names, e.name);
        break;
      }
    }
  }
  return r;
}

const RankEntry* TraceReader::FindRank(int32_t rank) const {
  for (const RankEntry& e : ranks_) {
    if (e.rank == rank) return &e;
  }
  return nullptr;
}

}  // namespace replay

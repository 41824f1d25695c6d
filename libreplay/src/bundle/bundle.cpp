// The bundle file: a preamble, a JSON header, then the trace's files as entries
// of zstd-compressed chunks, then an end entry. Layout in docs/bundle.md; the
// constants below are its executable half.
#include "replay/bundle.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <set>

#include "analysis/check_json.h"
#include "bundle/redact.h"
#include "replay/check.h"
#include "replay/event_format.h"
#include "replay/trace_reader.h"
#include "replay/version.h"
#include "trace/format.h"
#include "util/clock.h"
#include "util/hash.h"
#include "util/mapped_file.h"

namespace replay {
namespace {

constexpr char kMagic[8] = {'R', 'P', 'L', 'Y', 'B', 'N', 'D', 'L'};
constexpr uint32_t kEntryMagic = 0x4e454252;  // "RBEN" as little-endian bytes
constexpr uint16_t kEntryFile = 1;
constexpr uint16_t kEntryEnd = 2;
constexpr size_t kChunkBytes = 4u << 20;       // raw bytes per compressed chunk, at most
constexpr uint64_t kMaxHeaderBytes = 16u << 20;
constexpr size_t kMaxPath = 255;
constexpr uint64_t kMaxFiles = 1u << 20;

struct Preamble {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  uint64_t header_size;
  uint64_t header_checksum;  // XXH3-64 of the header bytes
};
static_assert(sizeof(Preamble) == 32);

struct EntryHeader {
  uint32_t magic;      // kEntryMagic
  uint16_t kind;       // kEntryFile, kEntryEnd
  uint16_t path_size;  // bytes of path that follow
  uint32_t mode;       // permission bits to create the file with
  uint32_t reserved;
  uint64_t raw_size;   // file: its size; end: the number of file entries
  uint64_t checksum;   // XXH3-64 of this header (checksum = 0) and the path
};
static_assert(sizeof(EntryHeader) == 32);

struct ChunkHeader {
  uint32_t raw_size;     // at most kChunkBytes, > 0
  uint32_t stored_size;  // one zstd frame
};
static_assert(sizeof(ChunkHeader) == 8);

uint64_t EntryChecksum(EntryHeader h, std::string_view path) {
  h.checksum = 0;
  std::string bytes(reinterpret_cast<const char*>(&h), sizeof(h));
  bytes.append(path);
  return Hash64(bytes.data(), bytes.size());
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A rank directory's name as the writer makes them: rank-00003, rank-00003.p123, pid-123.
bool ValidRankDir(std::string_view d) {
  if (d.substr(0, 4) == "pid-") return AllDigits(d.substr(4));
  if (d.substr(0, 5) != "rank-") return false;
  std::string_view rest = d.substr(5);
  size_t dot = rest.find(".p");
  if (dot == std::string_view::npos) return AllDigits(rest);
  return AllDigits(rest.substr(0, dot)) && AllDigits(rest.substr(dot + 2));
}

bool ValidRankFile(std::string_view f) {
  if (f == format::kHeaderFile || f == format::kEventsFile || f == format::kRingFile || f == format::kPayloadsFile) {
    return true;
  }
  std::string_view p = format::kPayloadsFile;
  return f.size() > p.size() + 1 && f.substr(0, p.size()) == p && f[p.size()] == '.' && AllDigits(f.substr(p.size() + 1));
}

bool IsPayloadFile(std::string_view f) { return f.substr(0, std::string_view(format::kPayloadsFile).size()) == format::kPayloadsFile; }

// Whether `path` names a file of the trace layout: nothing else is ever written.
bool ValidEntryPath(std::string_view path) {
  if (path == format::kManifestFile) return true;
  size_t slash = path.find('/');
  if (slash == std::string_view::npos) return false;
  return ValidRankDir(path.substr(0, slash)) && ValidRankFile(path.substr(slash + 1));
}

std::string BaseName(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string Utc(int64_t realtime_ns) { return FormatUtc(realtime_ns, "%Y-%m-%dT%H:%M:%SZ"); }

Status ReadWholeFile(const std::string& path, std::string* out) {
  auto f = MappedFile::Open(path);
  if (!f.ok()) return f.status();
  auto b = f->bytes();
  out->assign(reinterpret_cast<const char*>(b.data()), b.size());
  return Status::Ok();
}

Status WriteWholeFile(const std::string& path, std::string_view data, mode_t mode) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::FromErrno("cannot create " + path, errno);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      close(fd);
      return Status::FromErrno("cannot write " + path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0) return Status::FromErrno("cannot write " + path, errno);
  return Status::Ok();
}

// Removes a directory tree of plain files and directories (the stage, a failed unpack).
void RemoveTree(const std::string& path) {
  DIR* d = opendir(path.c_str());
  if (d == nullptr) {
    unlink(path.c_str());
    return;
  }
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string child = path + "/" + name;
    struct stat st;
    if (lstat(child.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      RemoveTree(child);
    } else {
      unlink(child.c_str());
    }
  }
  closedir(d);
  rmdir(path.c_str());
}

std::string TempRoot() {
  const char* t = std::getenv("TMPDIR");
  return t != nullptr && *t != '\0' ? t : "/tmp";
}

// ---------------------------------------------------------------------------
// Writing

// A file of the bundle: where it is read from, under which name it is stored.
struct StagedFile {
  std::string source;
  std::string name;
  uint64_t size = 0;
};

class Writer {
 public:
  Writer(int fd, int level) : fd_(fd), cctx_(ZSTD_createCCtx()) {
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 0);
  }
  ~Writer() { ZSTD_freeCCtx(cctx_); }

  Status Write(const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      ssize_t n = write(fd_, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::FromErrno("cannot write the bundle", errno);
      p += n;
      size -= static_cast<size_t>(n);
      written_ += static_cast<uint64_t>(n);
    }
    return Status::Ok();
  }

  Status Entry(uint16_t kind, const std::string& path, uint64_t raw_size, uint32_t mode) {
    EntryHeader h{};
    h.magic = kEntryMagic;
    h.kind = kind;
    h.path_size = static_cast<uint16_t>(path.size());
    h.mode = mode;
    h.raw_size = raw_size;
    h.checksum = EntryChecksum(h, path);
    REPLAY_RETURN_IF_ERROR(Write(&h, sizeof(h)));
    return Write(path.data(), path.size());
  }

  // Stores `f`: exactly f.size bytes of it (a file that grows meanwhile is cut
  // there; one that shrinks is an error).
  Status File(const StagedFile& f, const std::function<void(uint64_t)>& on_bytes) {
    REPLAY_RETURN_IF_ERROR(Entry(kEntryFile, f.name, f.size, 0600));
    int in = open(f.source.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) return Status::FromErrno("cannot read " + f.source, errno);
    XXH3_state_t* state = XXH3_createState();
    XXH3_64bits_reset(state);
    std::string raw(kChunkBytes, '\0');
    std::string stored(ZSTD_compressBound(kChunkBytes), '\0');
    uint64_t left = f.size;
    Status st;
    while (left > 0 && st.ok()) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(left, kChunkBytes));
      size_t got = 0;
      while (got < want) {
        ssize_t n = read(in, raw.data() + got, want - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
      if (got != want) {
        st = Status::IoError(f.source + " shrank while it was being bundled");
        break;
      }
      XXH3_64bits_update(state, raw.data(), got);
      size_t n = ZSTD_compress2(cctx_, stored.data(), stored.size(), raw.data(), got);
      if (ZSTD_isError(n)) {
        st = Status::IoError(std::string("compression failed: ") + ZSTD_getErrorName(n));
        break;
      }
      ChunkHeader c{static_cast<uint32_t>(got), static_cast<uint32_t>(n)};
      st = Write(&c, sizeof(c));
      if (st.ok()) st = Write(stored.data(), n);
      left -= got;
      if (on_bytes) on_bytes(got);
    }
    uint64_t sum = XXH3_64bits_digest(state);
    XXH3_freeState(state);
    close(in);
    REPLAY_RETURN_IF_ERROR(st);
    return Write(&sum, sizeof(sum));
  }

  uint64_t written() const { return written_; }

 private:
  int fd_;
  ZSTD_CCtx* cctx_;
  uint64_t written_ = 0;
};

// Values of one key across ranks: [{"value", "ranks"}], most common first.
nlohmann::json ValuesAcrossRanks(const std::map<std::string, std::vector<int32_t>>& by_value) {
  std::vector<std::pair<std::string, std::vector<int32_t>>> v(by_value.begin(), by_value.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  nlohmann::json out = nlohmann::json::array();
  for (auto& [value, ranks] : v) out.push_back({{"value", value}, {"ranks", ranks}});
  return out;
}

}  // namespace

bool IsBundleFile(const std::string& path) {
  if (!IsRegularFile(path)) return false;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  char magic[8];
  bool yes = read(fd, magic, sizeof(magic)) == static_cast<ssize_t>(sizeof(magic)) &&
             std::memcmp(magic, kMagic, sizeof(magic)) == 0;
  close(fd);
  return yes;
}

Result<BundleSummary> WriteBundle(const std::string& trace_dir, const std::string& out,
                                  const BundleOptions& options) {
  REPLAY_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> trace, TraceReader::Open(trace_dir));
  const auto progress = [&](const std::string& what, uint64_t done, uint64_t total) {
    if (options.progress) options.progress(what, done, total);
  };

  // Which ranks.
  std::vector<const RankEntry*> chosen;
  std::set<int32_t> wanted(options.ranks.begin(), options.ranks.end());
  for (const RankEntry& e : trace->ranks()) {
    if (wanted.empty() || wanted.count(e.rank) != 0) chosen.push_back(&e);
  }
  for (int32_t r : wanted) {
    if (trace->FindRank(r) == nullptr) {
      return Status::InvalidArgument("rank " + std::to_string(r) + " is not in " + trace_dir + " (it has " +
                                     std::to_string(trace->ranks().size()) + " ranks; see `replay info`)");
    }
  }
  if (chosen.empty()) return Status::InvalidArgument(trace_dir + " has no ranks to bundle");

  // Stage: redacted headers and manifest written anew, everything else linked.
  std::string stage_root = TempRoot() + "/replay-bundle-XXXXXX";
  if (mkdtemp(stage_root.data()) == nullptr) return Status::FromErrno("cannot create a temporary directory", errno);
  struct Cleanup {
    std::string dir;
    ~Cleanup() { RemoveTree(dir); }
  } cleanup{stage_root};
  const std::string stage = stage_root + "/" + (BaseName(trace_dir).empty() ? "trace" : BaseName(trace_dir));
  if (mkdir(stage.c_str(), 0700) != 0) return Status::FromErrno("cannot create " + stage, errno);

  bundle::Redactor redactor;
  std::vector<StagedFile> files;
  std::vector<std::string> left_out;
  auto stage_file = [&](const std::string& source, const std::string& name) -> Status {
    struct stat st;
    if (stat(source.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return Status::Ok();
    std::string staged = stage + "/" + name;
    // The link lives elsewhere: it must name the file absolutely.
    char resolved[PATH_MAX];
    if (realpath(source.c_str(), resolved) == nullptr) return Status::FromErrno("cannot resolve " + source, errno);
    if (symlink(resolved, staged.c_str()) != 0) return Status::FromErrno("cannot stage " + source, errno);
    files.push_back({staged, name, static_cast<uint64_t>(st.st_size)});
    return Status::Ok();
  };
  auto stage_bytes = [&](const std::string& name, std::string_view bytes) -> Status {
    std::string staged = stage + "/" + name;
    REPLAY_RETURN_IF_ERROR(WriteWholeFile(staged, bytes, 0600));
    files.push_back({staged, name, bytes.size()});
    return Status::Ok();
  };

  std::string manifest_path = trace_dir + "/" + format::kManifestFile;
  std::optional<JobManifest> manifest;
  if (FileExists(manifest_path)) {
    std::string bytes;
    REPLAY_RETURN_IF_ERROR(ReadWholeFile(manifest_path, &bytes));
    auto m = DecodeJobManifest({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, manifest_path);
    if (m.ok()) {
      manifest = *m;
      if (options.redact) redactor.RedactManifest(&*manifest);
      REPLAY_RETURN_IF_ERROR(stage_bytes(format::kManifestFile, options.redact ? EncodeJobManifest(*manifest) : bytes));
    } else if (!options.redact) {
      REPLAY_RETURN_IF_ERROR(stage_file(manifest_path, format::kManifestFile));
    } else {
      left_out.push_back(std::string(format::kManifestFile) + ": unreadable, so it could not be redacted");
    }
  }

  for (size_t i = 0; i < chosen.size(); ++i) {
    const RankEntry& e = *chosen[i];
    if (!ValidRankDir(e.name)) {
      left_out.push_back(e.name + ": not a rank directory name replay writes");
      continue;
    }
    if (mkdir((stage + "/" + e.name).c_str(), 0700) != 0) return Status::FromErrno("cannot create the stage", errno);
    DIR* d = opendir(e.dir.c_str());
    if (d == nullptr) return Status::FromErrno("cannot list " + e.dir, errno);
    std::vector<std::string> names;
    while (dirent* de = readdir(d)) names.push_back(de->d_name);
    closedir(d);
    std::sort(names.begin(), names.end());
    // A running rank's writer moves events from its ring to its events stream
    // and rewrites the stream's open last block, so both are copied now, as
    // RankReader reads a running rank: the ring first, then the stream under
    // its shared lock. An event sealed in between is then in both (the reader
    // drops the second), never in neither.
    const bool running = RankReader::IsRunning(e.dir);
    if (running) {
      for (const char* f : {format::kRingFile, format::kEventsFile}) {
        std::string source = e.dir + "/" + f;
        if (!FileExists(source)) continue;
        bool stream = std::string_view(f) == format::kEventsFile;
        auto copy = MappedFile::Open(source, /*copy=*/true, /*lock_shared=*/stream);
        if (!copy.ok()) return copy.status();
        auto bytes = copy->bytes();
        REPLAY_RETURN_IF_ERROR(
            stage_bytes(e.name + "/" + f, {reinterpret_cast<const char*>(bytes.data()), bytes.size()}));
      }
    }
    for (const std::string& f : names) {
      if (!ValidRankFile(f)) continue;
      if (running && (f == format::kRingFile || f == format::kEventsFile)) continue;
      if (!options.payloads && IsPayloadFile(f)) continue;
      std::string source = e.dir + "/" + f;
      std::string name = e.name + "/" + f;
      if (f == format::kHeaderFile && options.redact) {
        std::string bytes;
        REPLAY_RETURN_IF_ERROR(ReadWholeFile(source, &bytes));
        auto h = DecodeRankHeader({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, source);
        if (!h.ok()) {
          left_out.push_back(name + ": unreadable, so it could not be redacted");
          continue;
        }
        RankHeader header = *h;
        redactor.RedactHeader(&header);
        REPLAY_RETURN_IF_ERROR(stage_bytes(name, EncodeRankHeader(header)));
        continue;
      }
      REPLAY_RETURN_IF_ERROR(stage_file(source, name));
    }
    progress("staging", i + 1, chosen.size());
  }

  // What the bundle says about itself.
  REPLAY_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> staged, TraceReader::Open(stage));
  const std::string source_name = options.source_name.empty() ? BaseName(trace_dir) : options.source_name;
  nlohmann::json h;
  h["format"] = "replay-bundle";
  h["bundle_version"] = kBundleVersion;
  h["created_by"] = VersionLine();
  h["created_utc"] = Utc(RealtimeNs());
  h["trace"] = source_name;
  if (manifest) {
    h["trace_uuid"] = UuidToString(manifest->trace_uuid);
    h["recorded_utc"] = Utc(manifest->created_realtime_ns);
    h["level"] = std::string(LevelName(manifest->level));
    h["world_size"] = manifest->world_size;
    h["command"] = manifest->command;
    h["recorder"] = manifest->recorder;
  }
  std::vector<int32_t> included;
  std::map<std::string, std::vector<int32_t>> hosts;
  std::map<std::string, std::map<std::string, std::vector<int32_t>>> versions;
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankEntry& e : staged->ranks()) {
    included.push_back(e.rank);
    nlohmann::json r = {{"rank", e.rank}, {"dir", e.name}};
    if (e.header_ok) {
      r["host"] = e.header.host;
      r["pid"] = e.header.pid;
      hosts[e.header.host].push_back(e.rank);
      for (const auto& [k, v] : e.header.versions) versions[k][v].push_back(e.rank);
    }
    ranks.push_back(std::move(r));
  }
  h["ranks_included"] = included;
  h["topology"]["hosts"] = nlohmann::json::array();
  for (auto& [host, rs] : hosts) h["topology"]["hosts"].push_back({{"host", host}, {"ranks", rs}});
  h["versions"]["replay"] = Version();
  h["versions"]["trace_epoch"] = TraceEpoch();
  h["versions"]["recorded"] = nlohmann::json::object();
  for (auto& [k, by_value] : versions) h["versions"]["recorded"][k] = ValuesAcrossRanks(by_value);
  h["payloads_included"] = options.payloads;
  h["redaction"] = {{"enabled", options.redact}, {"secrets", redactor.secrets()}, {"items", redactor.RecordsJson()}};
  if (!left_out.empty()) h["left_out"] = left_out;

  size_t findings = 0;
  if (options.check) {
    CheckOptions co;
    co.progress = [&](const ReadProgress& p) { progress("checking", p.ranks_done, p.ranks); };
    auto report = CheckTrace(*staged, co);
    if (report.ok()) {
      for (RankState& s : report->ranks) {
        for (auto& r : ranks) {
          if (r["rank"] == s.rank) {
            r["status"] = s.status;
            r["events"] = s.events;
            r["doing"] = s.doing;
          }
        }
      }
      findings = report->findings.size();
      report->trace = source_name;
      h["check"] = CheckReportToJson(*report);
    } else {
      h["check"] = {{"error", report.status().message()}};
    }
  }
  h["ranks"] = std::move(ranks);
  uint64_t trace_bytes = 0;
  for (const StagedFile& f : files) trace_bytes += f.size;
  h["size"] = {{"files", files.size()}, {"trace_bytes", trace_bytes}};
  std::string header = JsonText(h, 1);

  // Write it.
  std::string tmp = out + ".tmp" + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno("cannot create " + out, errno);
  Status st;
  uint64_t written = 0;
  {
    Writer w(fd, options.zstd_level);
    Preamble p{};
    std::memcpy(p.magic, kMagic, sizeof(kMagic));
    p.version = kBundleVersion;
    p.header_size = header.size();
    p.header_checksum = Hash64(header.data(), header.size());
    st = w.Write(&p, sizeof(p));
    if (st.ok()) st = w.Write(header.data(), header.size());
    uint64_t done = 0;
    for (const StagedFile& f : files) {
      if (!st.ok()) break;
      st = w.File(f, [&](uint64_t n) {
        done += n;
        progress("packing", done, trace_bytes);
      });
    }
    if (st.ok()) st = w.Entry(kEntryEnd, "", files.size(), 0);
    written = w.written();
  }
  if (st.ok() && fsync(fd) != 0) st = Status::FromErrno("cannot write " + out, errno);
  if (close(fd) != 0 && st.ok()) st = Status::FromErrno("cannot write " + out, errno);
  if (st.ok() && rename(tmp.c_str(), out.c_str()) != 0) st = Status::FromErrno("cannot create " + out, errno);
  if (!st.ok()) {
    unlink(tmp.c_str());
    return st;
  }

  BundleSummary s;
  s.path = out;
  s.bytes = written;
  s.trace_bytes = trace_bytes;
  s.files = files.size();
  s.ranks = included.size();
  s.redacted = redactor.secrets();
  s.findings = findings;
  s.header = std::move(header);
  return s;
}

// ---------------------------------------------------------------------------
// Reading

namespace {

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}
  ~Reader() {
    if (f_ != nullptr) std::fclose(f_);
    if (dctx_ != nullptr) ZSTD_freeDCtx(dctx_);
  }

  Status Open() {
    struct stat kind;
    if (stat(path_.c_str(), &kind) == 0 && !S_ISREG(kind.st_mode)) {
      return Status::InvalidArgument(path_ + " is " + FileTypeName(kind.st_mode) + ", not a bundle file");
    }
    f_ = std::fopen(path_.c_str(), "rb");
    if (f_ == nullptr) {
      int err = errno;
      if (err == ENOENT) return Status::NotFound(path_ + " does not exist");
      return Status::FromErrno("cannot read " + path_, err);
    }
    struct stat st;
    if (fstat(fileno(f_), &st) == 0) size_ = static_cast<uint64_t>(st.st_size);
    return Status::Ok();
  }

  // Reads exactly `n` bytes; `what` names them in the message when the file ends first.
  Status Read(void* out, size_t n, const char* what) {
    size_t got = n == 0 ? 0 : std::fread(out, 1, n, f_);
    if (got != n) return CutShort(pos_ + got, what);
    pos_ += n;
    return Status::Ok();
  }

  Status CutShort(uint64_t at, const char* what) const {
    return Status::Corruption(path_ + " is cut short at byte " + std::to_string(at) + " (in " + what +
                              "): the bundle is incomplete; copy it again");
  }

  Status Damaged(const std::string& why) const {
    return Status::Corruption(path_ + " is damaged near byte " + std::to_string(pos_) + ": " + why);
  }

  Result<std::string> Header() {
    Preamble p{};
    size_t got = std::fread(&p, 1, sizeof(p), f_);
    if (got < sizeof(kMagic) || std::memcmp(p.magic, kMagic, sizeof(kMagic)) != 0) {
      return Status::NotATrace(path_ + " is not a replay bundle (made by `replay bundle`)");
    }
    pos_ = got;
    if (got != sizeof(p)) return CutShort(got, "the preamble");
    if (p.version > kBundleVersion) {
      return Status::Version(path_ + " is a bundle of version " + std::to_string(p.version) + "; this replay reads " +
                             std::to_string(kBundleVersion) + ": upgrade replay");
    }
    if (p.header_size > kMaxHeaderBytes) return Damaged("its header claims " + std::to_string(p.header_size) + " bytes");
    if (p.header_size > size_ - pos_) return CutShort(size_, "the header");
    std::string text(p.header_size, '\0');
    REPLAY_RETURN_IF_ERROR(Read(text.data(), text.size(), "the header"));
    if (Hash64(text.data(), text.size()) != p.header_checksum) return Damaged("its header fails its checksum");
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return Damaged("its header is not a JSON object");
    return text;
  }

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  bool AtEnd() {
    int c = std::fgetc(f_);
    if (c == EOF) return true;
    std::ungetc(c, f_);
    return false;
  }

  // Decompresses one chunk into `raw`.
  Status Chunk(uint64_t left, std::string* raw) {
    ChunkHeader c;
    REPLAY_RETURN_IF_ERROR(Read(&c, sizeof(c), "a chunk header"));
    if (c.raw_size == 0 || c.raw_size > kChunkBytes || c.raw_size > left) {
      return Damaged("a chunk claims " + std::to_string(c.raw_size) + " bytes");
    }
    if (c.stored_size > ZSTD_compressBound(kChunkBytes)) {
      return Damaged("a chunk claims " + std::to_string(c.stored_size) + " stored bytes");
    }
    if (c.stored_size > size_ - pos_) return CutShort(size_, "a chunk");
    stored_.resize(c.stored_size);
    REPLAY_RETURN_IF_ERROR(Read(stored_.data(), stored_.size(), "a chunk"));
    raw->resize(c.raw_size);
    if (dctx_ == nullptr) dctx_ = ZSTD_createDCtx();
    size_t n = ZSTD_decompressDCtx(dctx_, raw->data(), raw->size(), stored_.data(), stored_.size());
    if (ZSTD_isError(n) || n != c.raw_size) return Damaged("a chunk does not decompress");
    return Status::Ok();
  }

 private:
  std::string path_;
  FILE* f_ = nullptr;
  uint64_t size_ = 0;
  uint64_t pos_ = 0;
  std::string stored_;
  ZSTD_DCtx* dctx_ = nullptr;
};

}  // namespace

Result<std::string> ReadBundleHeader(const std::string& path) {
  Reader r(path);
  REPLAY_RETURN_IF_ERROR(r.Open());
  return r.Header();
}

Result<UnpackedBundle> UnpackBundle(const std::string& path, const std::string& dest,
                                    const BundleProgress& progress) {
  Reader r(path);
  REPLAY_RETURN_IF_ERROR(r.Open());
  UnpackedBundle out;
  REPLAY_ASSIGN_OR_RETURN(out.header, r.Header());

  bool made_dest = false;
  if (mkdir(dest.c_str(), 0700) == 0) {
    made_dest = true;
  } else if (errno != EEXIST) {
    return Status::FromErrno("cannot create " + dest, errno);
  } else {
    DIR* d = opendir(dest.c_str());
    if (d == nullptr) return Status::FromErrno("cannot use " + dest, errno);
    bool empty = true;
    while (dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) empty = false;
    }
    closedir(d);
    if (!empty) return Status::InvalidArgument(dest + " is not empty; unpack into a new directory");
  }

  auto undo = [&](Status st) -> Status {
    for (auto it = out.files.rbegin(); it != out.files.rend(); ++it) unlink((dest + "/" + *it).c_str());
    for (auto it = out.dirs.rbegin(); it != out.dirs.rend(); ++it) rmdir((dest + "/" + *it).c_str());
    if (made_dest) rmdir(dest.c_str());
    return st;
  };

  std::string raw;
  for (;;) {
    EntryHeader h;
    if (r.AtEnd()) {
      return undo(Status::Corruption(path + " is cut short after " + std::to_string(out.files.size()) +
                                     " files (its end marker is missing): the bundle is incomplete; copy it again"));
    }
    Status st = r.Read(&h, sizeof(h), "an entry header");
    if (!st.ok()) return undo(st);
    if (h.magic != kEntryMagic) return undo(r.Damaged("an entry header has the wrong magic number"));
    if (h.path_size > kMaxPath) return undo(r.Damaged("an entry's name is too long"));
    std::string name(h.path_size, '\0');
    st = r.Read(name.data(), name.size(), "an entry name");
    if (!st.ok()) return undo(st);
    if (EntryChecksum(h, name) != h.checksum) return undo(r.Damaged("an entry header fails its checksum"));
    if (h.kind == kEntryEnd) {
      if (h.raw_size != out.files.size()) {
        return undo(r.Damaged("it ends after " + std::to_string(out.files.size()) + " files, not " +
                              std::to_string(h.raw_size)));
      }
      if (!r.AtEnd()) return undo(r.Damaged("bytes follow its end marker"));
      break;
    }
    if (h.kind != kEntryFile) return undo(r.Damaged("an entry of unknown kind " + std::to_string(h.kind)));
    if (!ValidEntryPath(name)) return undo(r.Damaged("it holds \"" + name + "\", which is no file of a trace"));
    if (out.files.size() >= kMaxFiles) return undo(r.Damaged("it holds too many files"));
    size_t slash = name.find('/');
    if (slash != std::string::npos) {
      std::string dir = name.substr(0, slash);
      if (std::find(out.dirs.begin(), out.dirs.end(), dir) == out.dirs.end()) {
        if (mkdir((dest + "/" + dir).c_str(), 0700) != 0) {
          return undo(Status::FromErrno("cannot create " + dest + "/" + dir, errno));
        }
        out.dirs.push_back(dir);
      }
    }
    std::string target = dest + "/" + name;
    int fd = open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
      if (errno == EEXIST) return undo(r.Damaged("it holds \"" + name + "\" twice"));
      return undo(Status::FromErrno("cannot create " + target, errno));
    }
    out.files.push_back(name);
    XXH3_state_t* state = XXH3_createState();
    XXH3_64bits_reset(state);
    uint64_t left = h.raw_size;
    while (left > 0 && st.ok()) {
      st = r.Chunk(left, &raw);
      if (!st.ok()) break;
      XXH3_64bits_update(state, raw.data(), raw.size());
      size_t done = 0;
      while (done < raw.size()) {
        ssize_t n = write(fd, raw.data() + done, raw.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          st = Status::FromErrno("cannot write " + target, errno);
          break;
        }
        done += static_cast<size_t>(n);
      }
      left -= raw.size();
      out.bytes += raw.size();
      if (progress) progress("unpacking", r.pos(), r.size());
    }
    uint64_t sum = XXH3_64bits_digest(state);
    XXH3_freeState(state);
    if (close(fd) != 0 && st.ok()) st = Status::FromErrno("cannot write " + target, errno);
    if (!st.ok()) return undo(st);
    uint64_t stored_sum = 0;
    st = r.Read(&stored_sum, sizeof(stored_sum), "a file checksum");
    if (!st.ok()) return undo(st);
    if (stored_sum != sum) return undo(r.Damaged("\"" + name + "\" fails its checksum"));
  }
  return out;
}

}  // namespace replay

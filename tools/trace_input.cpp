#include "trace_input.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <vector>

#include "replay/bundle.h"
#include "replay/flight_recorder.h"
#include "term.h"
#include "util/mapped_file.h"

namespace replay::cli {
namespace {

// Temporary directories made for this process, removed at exit. Never
// destroyed, so that it is still there when the exit handler runs.
std::vector<std::string>& TempDirs() {
  static auto* dirs = new std::vector<std::string>;
  return *dirs;
}

pid_t g_owner = 0;  // the process that made them; a forked child leaves them alone

void RemoveTempDirs() {
  if (getpid() != g_owner) return;
  for (const std::string& d : TempDirs()) {
    std::error_code ec;
    std::filesystem::remove_all(d, ec);
  }
  TempDirs().clear();
}

Result<std::string> MakeTempDir() {
  const char* t = std::getenv("TMPDIR");
  std::string tmpl = std::string(t != nullptr && *t != '\0' ? t : "/tmp") + "/replay-input-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return Status::FromErrno("cannot create a temporary directory", errno);
  if (g_owner == 0) {
    g_owner = getpid();
    std::atexit(RemoveTempDirs);
  }
  TempDirs().push_back(tmpl);
  return tmpl;
}

// "runs/job.rpb" -> "job", the name the unpacked trace gets (and shows under).
std::string Stem(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  if (name.empty()) name = std::filesystem::path(path).parent_path().filename().string();
  size_t dot = name.rfind('.');
  if (dot != std::string::npos && dot > 0) name = name.substr(0, dot);
  return name.empty() || name == "." || name == ".." ? "trace" : name;
}

Result<std::string> Unpack(const std::string& path) {
  REPLAY_ASSIGN_OR_RETURN(std::string tmp, MakeTempDir());
  const std::string dest = tmp + "/" + Stem(path);
  Progress progress("unpacking " + path, 0, true);
  auto unpacked = UnpackBundle(path, dest, [&](const std::string& what, uint64_t done, uint64_t total) {
    progress.Update(what + " " + path, done, total, true);
  });
  if (!unpacked.ok()) return unpacked.status();
  return dest;
}

Result<std::string> Import(const std::string& path, const std::vector<std::string>& dumps) {
  REPLAY_ASSIGN_OR_RETURN(std::string tmp, MakeTempDir());
  const std::string dest = tmp + "/" + Stem(path);
  auto imported = ImportFlightRecorder(dumps, dest);
  if (!imported.ok()) return imported.status();
  return dest;
}

// Whether the directory `path` holds a recorded trace: a manifest or a rank directory.
bool HoldsTrace(const std::string& path) {
  auto t = TraceReader::Open(path);
  return t.ok() && ((*t)->manifest().has_value() || !(*t)->ranks().empty());
}

}  // namespace

Result<std::string> ResolveTraceDir(const std::string& path) {
  if (IsDirectory(path)) {
    if (HoldsTrace(path)) return path;
    auto dumps = FindFlightRecorderDumps(path);
    if (dumps.ok()) return Import(path, *dumps);
    return path;  // TraceReader::Open says what is wrong with it
  }
  if (FileExists(path)) {
    if (!IsRegularFile(path)) {
      struct stat st;
      std::string what = stat(path.c_str(), &st) == 0 ? FileTypeName(st.st_mode) : "not a file";
      return Status::NotATrace(path + " is " + what +
                               ": give a trace directory, a bundle or Flight Recorder dumps");
    }
    if (IsBundleFile(path)) return Unpack(path);
    if (LooksLikeFlightRecorderDump(path)) return Import(path, {path});
    auto t = TraceReader::Open(path);
    if (!t.ok() && t.status().code() != Status::Code::kNotATrace) return t.status();
    return Status::NotATrace(path +
                             " is a file, but neither a bundle (made by `replay bundle`) nor a PyTorch Flight Recorder "
                             "dump: give a trace directory, a bundle or Flight Recorder dumps");
  }
  // A prefix of Flight Recorder dumps: dumps/nccl_trace_rank_ for dumps/nccl_trace_rank_0 ...
  auto dumps = FindFlightRecorderDumps(path);
  if (dumps.ok()) return Import(path, *dumps);
  return path;  // TraceReader::Open says that it does not exist
}

Result<std::unique_ptr<TraceReader>> OpenTrace(const std::string& path) {
  REPLAY_ASSIGN_OR_RETURN(std::string dir, ResolveTraceDir(path));
  return TraceReader::Open(dir);
}

void AddTraceArgument(CLI::App* cmd, std::string* dir) {
  cmd->add_option("DIR", *dir, "Trace directory (or bundle, or Flight Recorder dumps)")->required();
}

Result<std::vector<int32_t>> ParseRankList(const std::string& text) {
  std::vector<int32_t> ranks;
  auto bad = [&](const std::string& item) {
    return Status::InvalidArgument("--ranks " + text + ": \"" + item +
                                   "\" is not a rank or a range of ranks (give e.g. 0,2,5-7)");
  };
  auto number = [](const std::string& s, int32_t* out) {
    if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return false;
    }
    *out = static_cast<int32_t>(std::stol(s));
    return true;
  };
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t dash = item.find('-');
    int32_t lo = 0;
    int32_t hi = 0;
    if (dash == std::string::npos) {
      if (!number(item, &lo)) return bad(item);
      hi = lo;
    } else if (!number(item.substr(0, dash), &lo) || !number(item.substr(dash + 1), &hi) || hi < lo ||
               hi - lo > 1000000) {
      return bad(item);
    }
    for (int32_t r = lo; r <= hi; ++r) ranks.push_back(r);
  }
  if (ranks.empty()) return bad(text);
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

}  // namespace replay::cli

// bundle.h: a whole trace as one file that explains itself, to attach to a bug
// report (`replay bundle`), and the way back to a trace directory.
//
// A bundle holds the trace's manifest and every chosen rank's files, and in
// front of them a JSON header that a person or a tool can read without
// unpacking anything: the `replay check` result, versions, topology (hosts and
// their ranks), what was redacted and sizes. Secrets in the recorded
// environment and command lines are redacted by default (bundle/redact.h); the
// check result in the header is computed on the redacted trace, so it leaks
// nothing the bundle does not hold. The byte layout is specified in
// docs/bundle.md.
//
// Reading never trusts the file: every length is bounded, every file checksummed,
// every path checked against the trace layout before anything is written, and a
// damaged or foreign bundle is a Status, never a crash.
//
// Thread safety: the functions are independent; each may be called from any
// thread, on different files.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "replay/status.h"

namespace replay {

// Bundle format version, in the preamble and the header ("bundle_version").
inline constexpr uint32_t kBundleVersion = 1;

// Progress: (what, units done, units in total); units are bytes or ranks.
using BundleProgress = std::function<void(const std::string& what, uint64_t done, uint64_t total)>;

struct BundleOptions {
  bool redact = true;            // replace secrets in environment and command lines
  bool payloads = true;          // include the received bytes (level data)
  std::vector<int32_t> ranks;    // world ranks to include; empty: all
  int zstd_level = 6;
  // Whether to run `check` and store its result in the header.
  bool check = true;
  BundleProgress progress;
  // Shown in the header's "trace" (default: the directory's base name).
  std::string source_name;
};

struct BundleSummary {
  std::string path;
  uint64_t bytes = 0;          // the bundle file's size
  uint64_t trace_bytes = 0;    // the files it holds, uncompressed
  uint64_t files = 0;
  uint64_t ranks = 0;
  uint64_t redacted = 0;       // distinct secret values replaced
  size_t findings = 0;         // of the check stored in it
  std::string header;          // the header as written: a JSON object (docs/bundle.md)
};

// Packs the trace directory `trace_dir` into `out` (replaced atomically).
Result<BundleSummary> WriteBundle(const std::string& trace_dir, const std::string& out,
                                  const BundleOptions& options = {});

// Whether `path` is a file that starts like a bundle (reads 8 bytes).
bool IsBundleFile(const std::string& path);

// The JSON header of the bundle at `path` (a JSON object, as text), without
// reading further.
Result<std::string> ReadBundleHeader(const std::string& path);

struct UnpackedBundle {
  std::string header;              // the bundle's JSON header, as text
  std::vector<std::string> files;  // relative paths written, in bundle order
  std::vector<std::string> dirs;   // relative directories created
  uint64_t bytes = 0;              // written
};

// Unpacks the bundle at `path` into `dest`, a directory that must be empty or
// missing (created with mode 0700; files get 0600). On failure what was written
// is removed again.
Result<UnpackedBundle> UnpackBundle(const std::string& path, const std::string& dest,
                                    const BundleProgress& progress = nullptr);

}  // namespace replay

// python_sites.h: call sites with Python frames, as a trace holds them.
//
// In a process running CPython, the recorder notes with each distinct call
// site the innermost Python frames that led to it (file, function, line,
// innermost first). A site is written once per rank, as an info event with
// key kPythonSiteKey, before the first event made from it; that event and
// every later one from the same site carry the site's number, tagged with
// kPythonSiteTag, in their callSite field instead of the return address, which
// the site itself holds. Readers resolve a tagged call site through the rank's
// sites; a call site without the tag is a return address as before.
//
// The same form holds the frames of imported Flight Recorder entries (no
// native address there).
//
// Stateless functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "replay/trace_header.h"

namespace replay {

// Return addresses are user-space addresses and never have the top bit set.
inline constexpr uint64_t kPythonSiteTag = uint64_t{1} << 63;
inline constexpr std::string_view kPythonSiteKey = "python.site";
// Frames kept per site: the innermost ones say where; more cost bytes.
inline constexpr size_t kPythonSiteFrames = 8;

inline bool IsPythonSite(uint64_t call_site) { return (call_site & kPythonSiteTag) != 0; }

struct PythonSite {
  uint64_t id = 0;                   // numbers the rank's sites from 1
  uint64_t native = 0;               // the return address into native code; 0 none
  std::vector<SourceFrame> frames;   // innermost first
  bool operator==(const PythonSite&) const = default;
};

// The info event value of `site`: "<id> <native>\n" in hex, then one line per
// frame, "<line>\t<file>\t<function>" (tabs and newlines in names become spaces).
std::string EncodePythonSite(const PythonSite& site);
// Its inverse; nullopt for a value that is not one (a damaged trace).
std::optional<PythonSite> DecodePythonSite(std::string_view value);

}  // namespace replay

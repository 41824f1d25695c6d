// event_format.h: events as text for people and as JSON for tools.
//
// Both forms name APIs through the rank header's API table and print only the
// fields that mean something for the event's kind. Stateless; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "replay/event.h"
#include "replay/trace_header.h"

namespace replay {

// One line, no newline: "#12  0.004513s  t0  op MPI_Allreduce comm=… seq=3 count=1024 …".
std::string FormatEvent(const Event& e, const RankHeader& header);
// Only the kind-specific part: "MPI_Allreduce comm=… seq=3 …".
std::string FormatEventBody(const Event& e, const RankHeader& header);
nlohmann::json EventToJson(const Event& e, const RankHeader& header);
// `j` as JSON text, `indent` spaces per level (-1: one line). Strings from a
// trace or a dump may hold bytes that are not UTF-8: they are replaced (U+FFFD),
// never thrown on.
std::string JsonText(const nlohmann::json& j, int indent = -1);

// "0x1a2b3c"
std::string Hex(uint64_t v);
// "12.3 KiB"
std::string HumanBytes(uint64_t bytes);
// "1.234 s", "56.7 ms"
std::string HumanDuration(int64_t ns);
// "SIGSEGV"; "signal 99" for a number that names no signal here.
std::string SignalName(int signo);

}  // namespace replay

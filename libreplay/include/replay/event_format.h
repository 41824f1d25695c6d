// event_format.h: events as text for people and as JSON for tools.
//
// Both forms name APIs through the rank header's API table and print only the
// fields that mean something for the event's kind. Stateless; thread-safe.
#pragma once

#include <string>

#include "replay/event.h"
#include "replay/trace_header.h"

namespace replay {

// One line, no newline: "#12  0.004513s  t0  op MPI_Allreduce comm=… seq=3 count=1024 …".
std::string FormatEvent(const Event& e, const RankHeader& header);
// Only the kind-specific part: "MPI_Allreduce comm=… seq=3 …".
std::string FormatEventBody(const Event& e, const RankHeader& header);
// One line of JSON, as `replay dump --json` prints the event (docs/trace-format.md).
std::string EventJson(const Event& e, const RankHeader& header);

// "0x1a2b3c"
std::string Hex(uint64_t v);
// "12.3 KiB"
std::string HumanBytes(uint64_t bytes);
// "1.234 s", "56.7 ms"
std::string HumanDuration(int64_t ns);
// "SIGSEGV"; "signal 99" for a number that names no signal here.
std::string SignalName(int signo);
// Whether a program dies of `signo` by itself (SIGSEGV, SIGABRT...), as opposed
// to being stopped from outside (SIGTERM from a launcher, SIGINT from a user).
bool IsCrashSignal(int signo);

}  // namespace replay

// log.h: how the preload warns: one line on stderr, "replay: " first, through
// the project's logger (util/log.h: spdlog, one write(2) per line, REPLAY_LOG
// chooses what is said), never through the C library's stdio.
#pragma once

#include <string>

namespace replay::interpose {

void Warn(const std::string& message);
// Warns at most once per `key` (a string literal naming the situation).
void WarnOnce(const char* key, const std::string& message);

}  // namespace replay::interpose

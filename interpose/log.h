// log.h: how the preload speaks: one line on stderr, written with write(2) so
// that it is safe anywhere, including where the C library's stdio is not.
#pragma once

#include <string>

namespace replay::interpose {

void Warn(const std::string& message);
// Warns at most once per `key` (a string literal naming the situation).
void WarnOnce(const char* key, const std::string& message);

}  // namespace replay::interpose

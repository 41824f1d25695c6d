#include "log.h"

#include <mutex>
#include <set>
#include <string>

#include "util/log.h"

namespace replay::interpose {

void Warn(const std::string& message) { log::Warn("replay: " + message); }

void WarnOnce(const char* key, const std::string& message) {
  static std::mutex mu;
  static auto* seen = new std::set<std::string>();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!seen->insert(key).second) return;
  }
  Warn(message);
}

}  // namespace replay::interpose

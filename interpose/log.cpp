#include "log.h"

#include <unistd.h>

#include <mutex>
#include <set>
#include <string>

namespace replay::interpose {

void Warn(const std::string& message) {
  std::string line = "replay: " + message + "\n";
  (void)!write(STDERR_FILENO, line.data(), line.size());
}

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

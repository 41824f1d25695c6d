#include "replay/settings.h"

#include <cstdlib>

namespace replay {

Settings Settings::FromEnvironment() {
  return From([](const char* name) { return std::getenv(name); });
}

Result<Level> Settings::ParsedLevel() const {
  auto l = ParseLevel(level);
  if (!l) {
    return Status::InvalidArgument("REPLAY_LEVEL=" + level + " is not a level: use meta, hash or data");
  }
  return *l;
}

Result<int64_t> Settings::Integer(std::string_view field_name) const {
  const std::string* v = nullptr;
  const char* full = nullptr;
#define REPLAY_SETTINGS_FIND_(field, name, def, doc) \
  if (field_name == #field) {                         \
    v = &field;                                       \
    full = "REPLAY_" name;                            \
  }
  REPLAY_SETTINGS(REPLAY_SETTINGS_FIND_)
#undef REPLAY_SETTINGS_FIND_
  if (v == nullptr) return Status::InvalidArgument("no setting named " + std::string(field_name));
  char* end = nullptr;
  long long n = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || end == nullptr || *end != '\0' || n < 0) {
    return Status::InvalidArgument(std::string(full) + "=" + *v + " is not a non-negative integer");
  }
  return static_cast<int64_t>(n);
}

std::vector<std::string> Settings::EnvPrefixes() const {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= env_prefixes.size()) {
    size_t comma = env_prefixes.find(',', start);
    if (comma == std::string::npos) comma = env_prefixes.size();
    if (comma > start) out.push_back(env_prefixes.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

Result<uint32_t> Settings::DataWindowMarks() const {
  if (data_window == "all" || data_window.empty()) return 0u;
  if (data_window.rfind("marks:", 0) == 0) {
    char* end = nullptr;
    long k = std::strtol(data_window.c_str() + 6, &end, 10);
    if (end != nullptr && *end == '\0' && k >= 1 && k <= 1000000) return static_cast<uint32_t>(k);
  }
  return Status::InvalidArgument("REPLAY_DATA_WINDOW=" + data_window +
                                 " is not a window: use all, or marks:K with K >= 1 (e.g. marks:2)");
}

const std::vector<SettingInfo>& AllSettings() {
  static const std::vector<SettingInfo> kAll = {
#define REPLAY_SETTINGS_INFO_(field, name, def, doc) {"REPLAY_" name, def, doc},
      REPLAY_SETTINGS(REPLAY_SETTINGS_INFO_)
#undef REPLAY_SETTINGS_INFO_
  };
  return kAll;
}

}  // namespace replay

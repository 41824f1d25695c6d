#include "faults.h"

#include <algorithm>
#include <charconv>
#include <iterator>

namespace mpi_train {
namespace {

struct FaultName {
  FaultKind kind;
  std::string_view name;
  bool targeted;  // takes rank= and step=
};

// Keep in step with FaultKind.
constexpr FaultName kFaultNames[] = {
    {FaultKind::kHang, "hang", true},          {FaultKind::kMismatch, "mismatch", true},
    {FaultKind::kOrder, "order", true},        {FaultKind::kNan, "nan", true},
    {FaultKind::kUnseeded, "unseeded", false}, {FaultKind::kRace, "race", false},
    {FaultKind::kCrash, "crash", true},
};

template <typename T>
bool ParseNonNegative(std::string_view text, T* value) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *value);
  return ec == std::errc() && ptr == end && *value >= 0;
}

}  // namespace

bool ParseFault(std::string_view spec, Fault* fault, std::string* error) {
  const size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  const auto* entry = std::find_if(std::begin(kFaultNames), std::end(kFaultNames),
                                   [&](const FaultName& f) { return f.name == name; });
  if (entry == std::end(kFaultNames)) {
    *error = "unknown fault '" + std::string(name) +
             "' (expected hang, mismatch, order, nan, unseeded, race or crash)";
    return false;
  }
  *fault = Fault{};
  fault->kind = entry->kind;
  if (colon == std::string_view::npos) return true;
  if (!entry->targeted) {
    *error = "fault '" + std::string(name) + "' takes no rank= or step=";
    return false;
  }

  std::string_view rest = spec.substr(colon + 1);
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    bool ok = false;
    if (item.starts_with("rank=")) {
      ok = ParseNonNegative(item.substr(5), &fault->rank);
    } else if (item.starts_with("step=")) {
      ok = ParseNonNegative(item.substr(5), &fault->step);
    }
    if (!ok) {
      *error = "bad fault parameter '" + std::string(item) + "' in '" + std::string(spec) +
               "' (expected rank=R or step=S, non-negative integers)";
      return false;
    }
    if (comma == std::string_view::npos) return true;
    rest = rest.substr(comma + 1);
  }
}

void FaultPlan::ClampRanks(int world_size) {
  for (Fault& fault : faults_) fault.rank = std::min(fault.rank, world_size - 1);
}

bool FaultPlan::Fires(FaultKind kind, int rank, int64_t step) const {
  return std::any_of(faults_.begin(), faults_.end(), [&](const Fault& f) {
    return f.kind == kind && f.rank == rank && f.step == step;
  });
}

bool FaultPlan::Enabled(FaultKind kind) const {
  return std::any_of(faults_.begin(), faults_.end(),
                     [&](const Fault& f) { return f.kind == kind; });
}

}  // namespace mpi_train

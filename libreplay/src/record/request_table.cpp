#include "record/request_table.h"

namespace replay {

void RequestTable::Put(uint64_t handle, const PendingOp& op) {
  Stripe& s = stripes_[StripeOf(handle)];
  std::lock_guard<std::mutex> lock(s.mu);
  s.map[handle] = op;
}

std::optional<PendingOp> RequestTable::Get(uint64_t handle) const {
  const Stripe& s = stripes_[StripeOf(handle)];
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(handle);
  if (it == s.map.end()) return std::nullopt;
  return it->second;
}

std::optional<PendingOp> RequestTable::Complete(uint64_t handle, bool free_persistent) {
  Stripe& s = stripes_[StripeOf(handle)];
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(handle);
  if (it == s.map.end()) return std::nullopt;
  PendingOp op = it->second;
  if (op.persistent && !free_persistent) {
    it->second.active = false;
  } else {
    s.map.erase(it);
  }
  return op;
}

}  // namespace replay

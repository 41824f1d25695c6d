// request_table.h: non-blocking operations in flight, by request handle.
//
// When a non-blocking call returns, the recorder files what it must know at
// completion (the operation's identity, and where and how to fingerprint the
// received data); the wait/test call that completes the request takes it out.
// Persistent requests stay until freed; each start files a new operation.
//
// Thread safety: all methods may be called concurrently (striped locks).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "replay/event.h"

namespace replay {

struct PendingOp {
  uint64_t request_id = 0;  // per-rank id recorded in the op event
  uint16_t api = 0;         // the call that started it
  OpKind kind = OpKind::kOther;
  uint64_t comm = 0;        // identity
  uint64_t comm_handle = 0;
  uint64_t seq = 0;
  uint64_t peer_seq = 0;
  int32_t peer = kNoPeer;   // receives: requested source (kAnySource for wildcards)
  bool persistent = false;
  bool active = true;       // persistent requests: between start and completion
  bool is_recv = false;     // completion carries received data to fingerprint
  // Where received data lands, in the interposer's terms (buffer, count, datatype).
  uint64_t recv_buf = 0;
  int64_t recv_count = 0;
  uint64_t recv_type = 0;
  // Persistent send/recv template: the arguments of the init call.
  int32_t tag = 0;
  uint64_t send_buf = 0;
  uint64_t send_type = 0;
  int64_t send_count = 0;
  // Where a non-blocking collective's received data lands: (buffer, count,
  // datatype) pieces, in the interposer's terms.
  std::vector<std::array<uint64_t, 3>> recv_pieces;
};

class RequestTable {
 public:
  void Put(uint64_t handle, const PendingOp& op);
  // A copy of the entry, or nullopt.
  std::optional<PendingOp> Get(uint64_t handle) const;
  // Removes and returns the entry; persistent entries are kept (marked inactive)
  // unless `free_persistent`.
  std::optional<PendingOp> Complete(uint64_t handle, bool free_persistent = false);
  // Updates an entry in place; false if absent.
  template <typename F>
  bool Update(uint64_t handle, F&& f) {
    Stripe& s = stripes_[StripeOf(handle)];
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(handle);
    if (it == s.map.end()) return false;
    f(it->second);
    return true;
  }

  uint64_t NextId() { return next_id_.fetch_add(1, std::memory_order_relaxed) + 1; }

 private:
  static constexpr size_t kStripes = 16;
  struct Stripe {
    mutable std::mutex mu;
    std::unordered_map<uint64_t, PendingOp> map;
  };
  static size_t StripeOf(uint64_t handle) { return (handle >> 4) % kStripes; }
  std::array<Stripe, kStripes> stripes_;
  std::atomic<uint64_t> next_id_{0};
};

}  // namespace replay

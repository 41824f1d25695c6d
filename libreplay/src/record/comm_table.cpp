#include "record/comm_table.h"

#include <cstring>

#include "util/hash.h"

namespace replay {
namespace {

uint64_t HashStr(const char* s) { return Hash64(s, std::strlen(s)); }

}  // namespace

uint64_t WorldCommId() { return HashStr("replay.comm.world"); }

uint64_t SelfCommId(int32_t world_rank) {
  return HashCombine(HashStr("replay.comm.self"), static_cast<uint64_t>(world_rank));
}

uint64_t DerivedCommId(uint64_t parent, uint64_t parent_seq, int32_t lowest_member) {
  return HashCombine(HashCombine(parent, parent_seq), static_cast<uint64_t>(lowest_member) + 1);
}

uint64_t MemberSetCommId(uint64_t parent, const std::vector<int32_t>& sorted_members, int64_t tag,
                         uint64_t nth) {
  uint64_t h = Hash64(sorted_members.data(), sorted_members.size() * sizeof(int32_t), parent);
  return HashCombine(HashCombine(h, static_cast<uint64_t>(tag)), nth);
}

CommTable::CommTable() : buckets_(new Bucket[kBuckets]) {}
CommTable::~CommTable() = default;

CommState* CommTable::Insert(uint64_t handle, uint64_t id, int32_t size, int32_t rank,
                             std::vector<int32_t> members, int32_t remote_size) {
  auto state = std::make_unique<CommState>();
  state->handle = handle;
  state->id = id;
  state->size = size;
  state->remote_size = remote_size;
  state->rank = rank;
  state->members = std::move(members);
  state->peers = remote_size > 0 ? remote_size : size;
  if (state->peers > 0) {
    state->send_seq.reset(new std::atomic<uint64_t>[state->peers]);
    state->recv_seq.reset(new std::atomic<uint64_t>[state->peers]);
    for (int32_t i = 0; i < state->peers; ++i) {
      state->send_seq[i].store(0, std::memory_order_relaxed);
      state->recv_seq[i].store(0, std::memory_order_relaxed);
    }
  }
  CommState* raw = state.get();
  std::lock_guard<std::mutex> lock(mu_);
  all_.push_back(std::move(state));
  // Linear probing; a slot whose handle matches (a reused handle) is replaced.
  size_t start = Slot(handle);
  for (size_t i = 0; i < kBuckets; ++i) {
    Bucket& b = buckets_[(start + i) & (kBuckets - 1)];
    uint64_t h = b.handle.load(std::memory_order_relaxed);
    if (h == handle || h == 0 || b.state.load(std::memory_order_relaxed) == nullptr) {
      // Handle first: a reader that matches it before the state lands sees null
      // and moves on, never another communicator's state.
      b.state.store(nullptr, std::memory_order_release);
      b.handle.store(handle, std::memory_order_release);
      b.state.store(raw, std::memory_order_release);
      return raw;
    }
  }
  return raw;  // table full: the communicator is still recorded, calls on it are not numbered
}

void CommTable::Remove(uint64_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t start = Slot(handle);
  for (size_t i = 0; i < kBuckets; ++i) {
    Bucket& b = buckets_[(start + i) & (kBuckets - 1)];
    uint64_t h = b.handle.load(std::memory_order_relaxed);
    if (h == handle) {
      // Keep the handle as a tombstone so probe chains stay intact.
      b.state.store(nullptr, std::memory_order_release);
      return;
    }
    if (h == 0) return;
  }
}

}  // namespace replay

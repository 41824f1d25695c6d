// comm_table.h: the communicators a rank knows, by process-local handle.
//
// Each communicator has a job-wide identity, equal on every member without any
// communication, derived from its lineage (docs/trace-format.md
// "Communicator identity"), and the counters that number the operations on it:
// one collective sequence, and one point-to-point sequence per peer and
// direction. Lookups are lock-free (they run on every intercepted call);
// inserts and removals take a lock (communicator creation is rare).
//
// Thread safety: all methods may be called concurrently. A CommState stays
// valid until Remove() of its handle and after, until the table is destroyed:
// removed states are retired, never freed, so a racing reader is safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace replay {

struct alignas(64) CommState {  // what a call reads and counts, on its first cache line
  uint64_t handle = 0;     // process-local handle value
  uint64_t id = 0;         // job-wide identity
  int32_t size = 0;        // local group size
  int32_t remote_size = 0; // intercommunicators: remote group size; else 0
  int32_t rank = -1;       // this process's rank in it
  std::vector<int32_t> members;  // world ranks in communicator-rank order (local group)
  std::atomic<uint64_t> coll_seq{0};
  // Point-to-point sequence numbers by peer rank (remote group for
  // intercommunicators); sized by the peer group size.
  std::unique_ptr<std::atomic<uint64_t>[]> send_seq;
  std::unique_ptr<std::atomic<uint64_t>[]> recv_seq;
  int32_t peers = 0;
  // Communicators created from this one with MPI_Comm_create_group and the same
  // member set, counted so that repeated creations get distinct identities.
  std::atomic<uint64_t> group_creations{0};

  uint64_t NextCollective() { return coll_seq.fetch_add(1, std::memory_order_relaxed) + 1; }
  // 0 when `peer` is out of range (MPI_PROC_NULL, a bad rank).
  uint64_t NextSend(int32_t peer) {
    return peer >= 0 && peer < peers ? send_seq[peer].fetch_add(1, std::memory_order_relaxed) + 1 : 0;
  }
  uint64_t NextRecv(int32_t peer) {
    return peer >= 0 && peer < peers ? recv_seq[peer].fetch_add(1, std::memory_order_relaxed) + 1 : 0;
  }
};

// Identity helpers (docs/trace-format.md "Communicator identity").
uint64_t WorldCommId();
uint64_t SelfCommId(int32_t world_rank);
// A communicator derived from `parent` by the creating call with sequence
// number `parent_seq` on it; `lowest_member` (smallest world rank in the new
// communicator) tells apart the several communicators one split creates.
uint64_t DerivedCommId(uint64_t parent, uint64_t parent_seq, int32_t lowest_member);
// Created over a member set without a collective on the parent
// (MPI_Comm_create_group, intercommunicator creation): from the sorted member
// list, a tag and the count of earlier such creations with the same members.
uint64_t MemberSetCommId(uint64_t parent, const std::vector<int32_t>& sorted_members, int64_t tag,
                         uint64_t nth);

class CommTable {
 public:
  CommTable();
  ~CommTable();

  // Registers a communicator; replaces any state with the same handle.
  CommState* Insert(uint64_t handle, uint64_t id, int32_t size, int32_t rank,
                    std::vector<int32_t> members, int32_t remote_size = 0);
  // Lock-free; null when unknown. Inline: every recorded call looks its
  // communicator up.
  CommState* Find(uint64_t handle) const {
    size_t start = Slot(handle);
    for (size_t i = 0; i < kBuckets; ++i) {
      const Bucket& b = buckets_[(start + i) & (kBuckets - 1)];
      uint64_t h = b.handle.load(std::memory_order_acquire);
      if (h == handle) {
        CommState* s = b.state.load(std::memory_order_acquire);
        if (s != nullptr) return s;
        continue;  // removed; a later slot may hold a re-insertion
      }
      if (h == 0) return nullptr;
    }
    return nullptr;
  }
  void Remove(uint64_t handle);

 private:
  static constexpr size_t kBuckets = 4096;  // power of two
  struct Bucket {
    std::atomic<uint64_t> handle{0};
    std::atomic<CommState*> state{nullptr};
  };
  static size_t Slot(uint64_t handle) {
    uint64_t h = handle;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h & (kBuckets - 1);
  }

  std::unique_ptr<Bucket[]> buckets_;
  std::mutex mu_;
  std::vector<std::unique_ptr<CommState>> all_;  // owned forever (see header comment)
  std::vector<std::unique_ptr<CommState>> overflow_;  // handles beyond the table's capacity
};

}  // namespace replay

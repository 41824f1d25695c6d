// thread_slot.h: the recording thread's slot in its writer's ring, cached.
//
// A thread claims a slot on its first append and keeps it until it ends; the
// cache says which writer (by generation) the slot belongs to, so that a
// thread never appends to the ring of a writer that was closed and replaced.
// It is plain data, so that an append inlined into another file reads it with
// one load and no call; trace_writer.cpp gives the slot back at thread exit.
#pragma once

#include <cstdint>

namespace replay {

struct SlotHeader;
struct RecordHeader;

struct ThreadSlot {
  uint64_t generation = 0;
  SlotHeader* slot = nullptr;
  // The record of the call this thread is in, which its return completes
  // (Ring::AppendOpen); null when there is none. Any other record the thread
  // appends first closes it as the op alone, and the return then goes in a
  // record of its own, after what came between.
  RecordHeader* open = nullptr;
};
extern constinit thread_local ThreadSlot t_thread_slot __attribute__((tls_model("initial-exec")));

// The calling thread's slot in the ring of the writer of `generation`; null
// when it has none there yet.
inline SlotHeader* CachedSlot(uint64_t generation) {
  const ThreadSlot& t = t_thread_slot;
  return t.generation == generation ? t.slot : nullptr;
}

}  // namespace replay

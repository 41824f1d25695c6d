// call_record.h: a call's op and its return in one ring record.
//
// A recorded call appends its op on entry and its return when it returns. In
// the common case (the thread has its slot, the slot has room) both go in one
// record: AppendCall appends the op with room for the return, CompleteCall
// writes the return there (trace/ring.h, RecordFlags). Any other record the
// thread appends in between closes the call's record as its op alone first,
// and the return then goes in a record of its own, so every thread's events
// stay in index order in its slot.
//
// Thread safety: each function acts on the calling thread's slot only.
#pragma once

#include <cstdint>
#include <span>

#include "replay/event.h"
#include "replay/trace_writer.h"
#include "trace/ring.h"
#include "trace/thread_slot.h"

namespace replay {

// Appends `op` in a record its return will complete. True when it did; false
// when it appended nothing (recording is off, the thread's first record, a
// slot without room at once): the caller then appends the op, and later the
// return, as records of their own.
[[gnu::always_inline]] inline bool AppendCall(TraceWriter& w, const OpEvent& op, uint64_t call_site,
                                              std::span<const int64_t> list) {
  if (__builtin_expect(!w.recording(), 0)) return false;
  ThreadSlot& t = t_thread_slot;
  if (__builtin_expect(t.generation != w.generation() || t.slot == nullptr, 0)) return false;
  if (__builtin_expect(t.open != nullptr, 0)) w.CloseOpenCall();
  t.open = w.ring()->AppendOpen(t.slot, op, list.data(), static_cast<uint32_t>(list.size()), call_site);
  return t.open != nullptr;
}

// Writes the return of the call AppendCall opened into its record. False when
// the record was closed meanwhile (another record of the thread came between,
// or the writer was replaced): the caller appends the return as a record of
// its own.
[[gnu::always_inline]] inline bool CompleteCall(TraceWriter& w, const ReturnEvent& ret) {
  ThreadSlot& t = t_thread_slot;
  if (__builtin_expect(t.open == nullptr || t.generation != w.generation(), 0)) return false;
  w.ring()->Complete(t.open, ret);
  t.open = nullptr;
  return true;
}

// The call AppendCall opened ends without a return event: its record is its
// op alone.
inline void AbandonCall(TraceWriter& w) {
  if (t_thread_slot.open != nullptr) w.CloseOpenCall();
}

}  // namespace replay

// sample_events.h: one event of every kind with every field set to a
// distinctive value, for round-trip tests.
#pragma once

#include <vector>

#include "replay/event.h"

namespace replay::testing {

// One event per EventKind, in kind order, with lists and text where the kind has them.
std::vector<Event> SampleEventsOfEveryKind();

// A training-loop-like event: allreduce of `count` floats on `comm` at `seq`.
Event AllreduceOp(uint64_t comm, uint64_t seq, int64_t count, uint64_t send_hash);

// The events that tests/trace/testdata/epoch2-* and epoch3-* were written from
// by the writers of format epochs 2 and 3: SampleEventsOfEveryKind, then
// allreduces on two communicators (an index gap, a time going backwards).
// Those files are fixed; a field added to the samples later reads from them as
// its default.
std::vector<Event> Epoch2FixtureEvents();

}  // namespace replay::testing

// read_progress.h: progress of reading many ranks at once, told as ReadProgress.
//
// A ProgressTally counts the events that any number of reading threads report
// and the ranks they finish, and passes the totals to the command's function,
// from one thread at a time. A thread reports every kEventsPerReport events
// (CountingWalk does it for a walk's callback), so counting costs a few
// nanoseconds an event; a report that finds another thread reporting is
// skipped rather than waited for.
//
// Thread safety: Events and RankDone may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "replay/trace_reader.h"

namespace replay {

class ProgressTally {
 public:
  static constexpr uint64_t kEventsPerReport = 1 << 14;

  // Progress over the entries `which` of `trace` (all when empty).
  ProgressTally(const TraceReader& trace, const std::vector<size_t>& which, ReadProgressFn fn);

  void Events(uint64_t n);
  // A rank is read; `walked` of its events went through Counting (the last
  // few, fewer than kEventsPerReport, were not reported yet).
  void RankDone(uint64_t walked = 0);

  // `fn` wrapped to report its events every kEventsPerReport.
  std::function<bool(const Event&)> Counting(std::function<bool(const Event&)> fn);

 private:
  void Report(bool must);

  ReadProgressFn fn_;
  size_t ranks_ = 0;
  uint64_t events_total_ = 0;
  std::atomic<size_t> ranks_done_{0};
  std::atomic<uint64_t> events_done_{0};
  std::mutex mu_;
};

}  // namespace replay

#include "trace/read_progress.h"

namespace replay {

ProgressTally::ProgressTally(const TraceReader& trace, const std::vector<size_t>& which, ReadProgressFn fn)
    : fn_(std::move(fn)) {
  std::vector<size_t> all;
  const std::vector<size_t>* entries = &which;
  if (which.empty()) {
    for (size_t i = 0; i < trace.ranks().size(); ++i) all.push_back(i);
    entries = &all;
  }
  ranks_ = entries->size();
  bool known = true;
  for (size_t i : *entries) {
    const RankEntry& e = trace.ranks()[i];
    // A rank that closed its trace wrote how many events it holds.
    if (e.header_ok && e.header.complete) {
      events_total_ += e.header.event_count;
    } else {
      known = false;
    }
  }
  if (!known) events_total_ = 0;
}

void ProgressTally::Events(uint64_t n) {
  events_done_.fetch_add(n, std::memory_order_relaxed);
  Report(false);
}

void ProgressTally::RankDone(uint64_t walked) {
  events_done_.fetch_add(walked % kEventsPerReport, std::memory_order_relaxed);
  ranks_done_.fetch_add(1, std::memory_order_relaxed);
  Report(true);
}

void ProgressTally::Report(bool must) {
  if (!fn_) return;
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (must) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return;
  }
  ReadProgress p;
  p.ranks = ranks_;
  p.ranks_done = ranks_done_.load(std::memory_order_relaxed);
  p.events = events_total_;
  p.events_done = events_done_.load(std::memory_order_relaxed);
  fn_(p);
}

std::function<bool(const Event&)> ProgressTally::Counting(std::function<bool(const Event&)> fn) {
  return [this, fn = std::move(fn), n = uint64_t{0}](const Event& e) mutable {
    if (++n == kEventsPerReport) {
      Events(n);
      n = 0;
    }
    return fn(e);
  };
}

}  // namespace replay

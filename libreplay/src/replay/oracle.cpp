#include "replay/oracle.h"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <cstdlib>

#include "replay/event_format.h"

namespace replay {
namespace {

uint16_t ApiIdOf(const Event& e) {
  switch (e.kind) {
    case EventKind::kOp: return e.op.api;
    case EventKind::kReturn: return e.ret.api;
    case EventKind::kCompletion: return e.completion.api;
    case EventKind::kTest: return e.test.api;
    case EventKind::kCommCreate: return e.comm_create.api;
    case EventKind::kCommFree: return e.comm_free.api;
    case EventKind::kGroup: return e.group.api;
    default: return UINT16_MAX;
  }
}

std::string FormName(CallForm form) {
  switch (form) {
    case CallForm::kOp: return "a call";
    case CallForm::kTest: return "a test";
    case CallForm::kEntropy: return "an entropy read";
    case CallForm::kSeed: return "a seed";
    case CallForm::kMark: return "a mark";
  }
  return "a call";
}

bool IsSetupKind(OpKind kind) { return kind == OpKind::kInit || kind == OpKind::kCommCreate; }

bool IsClockReading(const Event& e) { return e.kind == EventKind::kEntropy && IsClock(e.entropy.source); }

}  // namespace

std::string Oracle::ApiOf(const Event& e) const {
  uint16_t id = ApiIdOf(e);
  return id == UINT16_MAX ? std::string() : header().ApiName(id);
}

bool Oracle::StartsCall(const Event& e) {
  switch (e.kind) {
    case EventKind::kOp:
    case EventKind::kTest:
    case EventKind::kEntropy:
    case EventKind::kSeed:
    case EventKind::kMark:
      return true;
    default:
      return false;
  }
}

Result<std::unique_ptr<Oracle>> Oracle::Open(const OracleOptions& options) {
  auto trace = TraceReader::Open(options.trace_dir);
  if (!trace.ok()) return trace.status();
  const RankEntry* entry = (*trace)->FindRank(options.rank);
  if (entry == nullptr) {
    std::string have;
    for (const RankEntry& e : (*trace)->ranks()) have += (have.empty() ? "" : ", ") + std::to_string(e.rank);
    return Status::InvalidArgument("rank " + std::to_string(options.rank) + " is not in " + options.trace_dir +
                                   " (it has ranks " + have + ")");
  }
  std::unique_ptr<Oracle> o(new Oracle());
  auto rank = RankReader::Open(entry->dir);
  if (!rank.ok()) return rank.status();
  o->rank_ = std::move(rank).value();
  o->world_rank_ = o->rank_->rank();
  o->world_size_ = o->header().world_size;
  const std::vector<Event>& ev = o->events();
  for (const Event& e : ev) {
    if (e.kind == EventKind::kInfo && e.info_key() == "mpi.world_size") {
      o->world_size_ = std::atoi(std::string(e.info_value()).c_str());
    }
  }
  // Threads in order of their first event; the signal path's pseudo-thread is not one.
  for (const Event& e : ev) {
    if (e.thread == UINT32_MAX) continue;
    if (std::find(o->thread_ids_.begin(), o->thread_ids_.end(), e.thread) == o->thread_ids_.end()) {
      o->thread_ids_.push_back(e.thread);
    }
  }
  for (size_t i = 0; i < ev.size(); ++i) {
    if (ev[i].kind == EventKind::kCompletion) o->completions_.emplace(ev[i].completion.request, i);
  }
  o->main_.resize(o->thread_ids_.size());
  for (size_t i = 0; i < ev.size(); ++i) {
    auto it = std::find(o->thread_ids_.begin(), o->thread_ids_.end(), ev[i].thread);
    if (it == o->thread_ids_.end()) continue;
    o->main_[static_cast<size_t>(it - o->thread_ids_.begin())].events.push_back(i);
  }
  if (!options.from_mark.empty()) {
    size_t eq = options.from_mark.find('=');
    if (eq == std::string::npos) {
      return Status::InvalidArgument("--from-mark " + options.from_mark + " is not NAME=VALUE (e.g. checkpoint=40)");
    }
    std::string name = options.from_mark.substr(0, eq);
    int64_t value = std::strtoll(options.from_mark.c_str() + eq + 1, nullptr, 10);
    const Event* mark = nullptr;
    std::string marks;
    for (const Event& e : ev) {
      if (e.kind != EventKind::kMark) continue;
      marks += (marks.empty() ? "" : ", ") + e.text + "=" + std::to_string(e.mark.value);
      if (e.text == name && e.mark.value == value) mark = &e;
    }
    if (mark == nullptr) {
      return Status::InvalidArgument("rank " + std::to_string(options.rank) + " recorded no mark " +
                                     options.from_mark + (marks.empty() ? " (it has no marks)" : " (it has " + marks + ")"));
    }
    o->setup_ = o->main_;
    for (Cursor& c : o->main_) {
      while (c.next < c.events.size() && ev[c.events[c.next]].index <= mark->index) ++c.next;
    }
    o->from_mark_ = true;
    o->in_setup_ = true;
  }
  return o;
}

Result<ServedCall> Oracle::Serve(uint32_t thread, std::string_view api, CallForm form, OpKind kind) {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread >= main_.size()) {
    return Status::Unavailable("the recording has no thread " + std::to_string(thread) + " for " +
                               std::string(api));
  }
  if (from_mark_) {
    bool setup_call = (form == CallForm::kOp && IsSetupKind(kind)) ||
                      (in_setup_ && (form == CallForm::kEntropy || form == CallForm::kSeed));
    if (setup_call) return ServeFrom(setup_[thread], api, form);
    if (form == CallForm::kOp || form == CallForm::kTest) in_setup_ = false;
  }
  return ServeFrom(main_[thread], api, form);
}

const Event* Oracle::ServeClock(uint32_t thread) {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread >= main_.size()) return nullptr;
  Cursor& c = main_[thread];
  const std::vector<Event>& ev = events();
  while (c.next < c.events.size() && !StartsCall(ev[c.events[c.next]])) ++c.next;
  if (c.next >= c.events.size() || !IsClockReading(ev[c.events[c.next]])) return nullptr;
  const Event& e = ev[c.events[c.next++]];
  last_index_ = std::max<int64_t>(last_index_, static_cast<int64_t>(e.index));
  return &e;
}

Result<ServedCall> Oracle::ServeFrom(Cursor& c, std::string_view api, CallForm form) {
  const std::vector<Event>& ev = events();
  // In set-up serving only set-up calls are taken; everything else is passed by.
  bool setup = from_mark_ && &c >= setup_.data() && &c < setup_.data() + setup_.size();
  while (c.next < c.events.size()) {
    const Event& e = ev[c.events[c.next]];
    // Clock readings the program did not make again are passed by.
    if (!StartsCall(e) || IsClockReading(e)) {
      ++c.next;
      continue;
    }
    if (setup) {
      bool wanted = (form == CallForm::kOp && e.kind == EventKind::kOp && IsSetupKind(e.op.kind)) ||
                    (form == CallForm::kEntropy && e.kind == EventKind::kEntropy) ||
                    (form == CallForm::kSeed && e.kind == EventKind::kSeed);
      if (!wanted) {
        ++c.next;
        continue;
      }
    }
    break;
  }
  if (c.next >= c.events.size()) {
    return Status::Unavailable("the recording ends before " + FormName(form) + " to " + std::string(api) + ": " +
                               HowRecordingEnds());
  }
  const Event& first = ev[c.events[c.next]];
  bool match = false;
  switch (form) {
    case CallForm::kOp: match = first.kind == EventKind::kOp && ApiOf(first) == api; break;
    case CallForm::kTest: match = first.kind == EventKind::kTest && ApiOf(first) == api; break;
    case CallForm::kEntropy: match = first.kind == EventKind::kEntropy && !IsClock(first.entropy.source); break;
    case CallForm::kSeed: match = first.kind == EventKind::kSeed; break;
    case CallForm::kMark: match = first.kind == EventKind::kMark; break;
  }
  if (!match) {
    return Status::InvalidArgument("the program called " + std::string(api) + " where the recording has " +
                                   Describe(first));
  }
  ServedCall call;
  call.first = &first;
  ++c.next;
  last_index_ = std::max<int64_t>(last_index_, static_cast<int64_t>(first.index));
  if (form == CallForm::kEntropy || form == CallForm::kSeed || form == CallForm::kMark) {
    return call;
  }
  // The rest of the call's group: until its return (kOp) or the next call.
  while (c.next < c.events.size()) {
    const Event& e = ev[c.events[c.next]];
    bool same_call_op = form == CallForm::kOp && e.kind == EventKind::kOp && ApiOf(e) == api;
    if (StartsCall(e) && !(form == CallForm::kOp && e.kind == EventKind::kTest) && !same_call_op) break;
    ++c.next;
    last_index_ = std::max<int64_t>(last_index_, static_cast<int64_t>(e.index));
    switch (e.kind) {
      case EventKind::kOp: call.more_ops.push_back(&e); break;
      case EventKind::kTest: call.tests.push_back(&e); break;
      case EventKind::kCompletion: call.completions.push_back(&e); break;
      case EventKind::kCommCreate: call.created.push_back(&e); break;
      case EventKind::kError: call.errors.push_back(&e); break;
      case EventKind::kReturn:
        if (form == CallForm::kOp) call.ret = &e;
        break;
      default: break;
    }
    if (call.ret != nullptr) {
      // Communicators and errors recorded right after the return belong to it.
      while (c.next < c.events.size()) {
        const Event& after = ev[c.events[c.next]];
        if (after.kind == EventKind::kCommCreate) {
          call.created.push_back(&after);
        } else if (after.kind == EventKind::kError) {
          call.errors.push_back(&after);
        } else if (after.kind == EventKind::kInfo) {
          call.infos.push_back(&after);
        } else if (after.kind != EventKind::kCommFree) {
          break;
        }
        last_index_ = std::max<int64_t>(last_index_, static_cast<int64_t>(after.index));
        ++c.next;
      }
      break;
    }
  }
  return call;
}

const Event* Oracle::Upcoming(uint32_t thread) {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread >= main_.size()) return nullptr;
  const Cursor& c = main_[thread];
  for (size_t i = c.next; i < c.events.size(); ++i) {
    const Event& e = events()[c.events[i]];
    if (StartsCall(e) && !IsClockReading(e)) return &e;
  }
  return nullptr;
}

const Event* Oracle::FindCompletion(uint64_t request) const {
  auto it = completions_.find(request);
  return it == completions_.end() ? nullptr : &events()[it->second];
}

std::string Oracle::HowRecordingEnds() const {
  const RankHeader& h = header();
  for (auto it = events().rbegin(); it != events().rend(); ++it) {
    if (it->kind == EventKind::kSignal && it->signal.fatal) {
      return std::string("rank ") + std::to_string(world_rank_) + " died of " + SignalName(it->signal.signo) +
             " after event #" + std::to_string(it->index > 0 ? it->index - 1 : 0);
    }
  }
  // A call entered and never returned: the rank was blocked there.
  const Event* open = nullptr;
  for (const Event& e : events()) {
    if (e.kind == EventKind::kOp && (e.op.flags & op_flags::kNonBlocking) == 0) open = &e;
    if (e.kind == EventKind::kReturn && open != nullptr && e.ret.api == open->op.api) open = nullptr;
  }
  if (open != nullptr && !(h.complete && h.close_reason == CloseReason::kFinalize)) {
    return "rank " + std::to_string(world_rank_) + " was blocked in " + Describe(*open) + " and never returned";
  }
  if (h.complete) {
    return "rank " + std::to_string(world_rank_) + " closed its trace (" + std::string(CloseReasonName(h.close_reason)) + ")";
  }
  return "rank " + std::to_string(world_rank_) + " stopped recording (" + std::string(RankStatusName(rank_->status())) + ")";
}

std::string Oracle::Describe(const Event& e) const {
  return "#" + std::to_string(e.index) + " " + std::string(EventKindName(e.kind)) + " " + FormatEventBody(e, header());
}

}  // namespace replay

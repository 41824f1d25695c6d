// shrink.h: the smallest job that still fails the same way, for a bug report
// (`replay shrink`).
//
// Shrink takes a trace whose `check` names a fault (a hang, a mismatch, an
// error) and searches, by delta debugging over its recorded operations, for
// the smallest job that, re-issued without the application (`replay drive`),
// still fails with the same finding (shrink/finding_key.h says what "same"
// is): fewest ranks (communicators rebuilt over those that remain), fewest
// operations (whole iterations of the loop first, then single calls),
// smallest counts, fewest communicators, synthetic bytes instead of recorded
// ones. A long job is searched from its last operations first. Each
// candidate is written as a trace, checked (a candidate whose own trace no
// longer shows the finding is not driven) and then driven; only a
// drive that fails the same way is accepted. The search is deterministic:
// it depends only on which candidates reproduce, never on timing, so the
// same trace and budget give the same result (unless the budget ends it).
//
// The library does the search; driving is the caller's (ShrinkDriver): the
// `replay` command runs `replay drive` on each candidate, several at once
// where cores allow.
//
// ReproProgram turns a trace into a standalone C program that makes its
// calls (MPI, or MPI to start the ranks and CUDA + NCCL), for the
// maintainers of the library that fails.
//
// Thread safety: Shrink calls the driver and the progress callback from its
// own thread only. Results are plain values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "replay/check.h"
#include "replay/status.h"
#include "replay/trace_reader.h"

namespace replay {

// Re-issues candidate traces without the application.
class ShrinkDriver {
 public:
  struct Outcome {
    Status status;          // not ok: the drive could not run at all
    std::string trace_dir;  // the drive's own recording of itself
  };
  // Whether a drive that is still running has already shown all it will: its
  // ranks all wait, and its trace so far shows the finding. Asked now and then
  // with the candidate's index in the batch and the drive's trace directory;
  // true ends that drive as its timeout would, so that a hang costs seconds
  // rather than the whole timeout.
  using Settled = std::function<bool(size_t index, const std::string& trace_dir)>;
  virtual ~ShrinkDriver() = default;
  // Drives each of `trace_dirs`, several at once if it can; one outcome per
  // directory, in order.
  virtual std::vector<Outcome> Drive(const std::vector<std::string>& trace_dirs, const Settled& settled) = 0;
  // How many candidates of `ranks` ranks it drives at once (>= 1).
  virtual size_t Parallel(size_t ranks) const = 0;
  // Whether it re-issues NCCL calls as NCCL calls; when not (NCCL's semantics
  // over MPI), a finding's call is compared by what it does, not its API.
  virtual bool NcclCalls() const = 0;
};

// One accepted reduction, or the start.
struct ShrinkStep {
  std::string what;        // "ranks", "iterations", "calls", "counts", "as recorded"
  size_t ranks = 0;
  size_t operations = 0;   // calls in all, besides MPI_Init and MPI_Finalize
  size_t max_rank_operations = 0;
  double seconds = 0;      // since the search started
};

struct ShrinkOptions {
  // The kind of finding to keep (FindingKindName); empty: the first finding
  // of `check` that a drive can show (a mismatch, an error, a hang).
  std::string keep;
  // Seconds the whole search may take; it stops at the first candidate
  // after that with the smallest job found so far.
  double budget_s = 600;
  // Where candidates are written (must exist).
  std::string work_dir;
  // Called at the start and after each accepted reduction.
  std::function<void(const ShrinkStep&)> progress;
  // When set, called with a line on each candidate: its size and why it was
  // kept or not.
  std::function<void(const std::string&)> log;
};

// The size of a job, before or after.
struct ShrinkSize {
  size_t ranks = 0;
  size_t operations = 0;
  size_t max_rank_operations = 0;
  size_t communicators = 0;
};

struct ShrinkResult {
  Finding target;                // the recorded finding kept (of those of its kind, the one shown at the end)
  Finding reduced;               // the same, as `check` reads it in the smaller job
  ShrinkSize before, after;
  std::vector<int32_t> origin;   // rank i of the smaller job is the recording's origin[i]
  size_t iterations_found = 0;   // iterations of the loop the recording had (0: none seen)
  // A long job is searched from its last collectives and messages: how many
  // it started from (with every communicator's creation); 0: the whole job.
  size_t tail_units = 0;
  size_t scaled_units = 0;       // collectives and messages whose counts were made smaller
  bool nccl = false;             // the job makes NCCL calls
  bool budget_exhausted = false; // stopped by the budget before the search ended
  size_t candidates = 0;         // candidates written
  size_t drives = 0;             // candidates driven
  std::vector<ShrinkStep> steps; // accepted reductions, in order
};

// Why a search could not start: the trace's check names no fault a drive can
// show, or the drive of the job as recorded does not fail the same way.
// These come back as Status with code kNotFound; anything else (an
// unreadable trace, a driver that cannot run) as other codes.
//
// Searches for the smallest job, and writes it as a trace into `out_dir`
// (which must not exist yet; nothing is written there unless it succeeds).
Result<ShrinkResult> Shrink(const TraceReader& trace, ShrinkDriver& driver, const ShrinkOptions& options,
                            const std::string& out_dir);

// A standalone C program that makes the calls of `trace`, in order, rank by
// rank, with synthetic data: plain MPI, or for a trace with NCCL calls MPI
// to start the ranks and pass the unique ids, and CUDA (driver API) + NCCL.
// Its header comment gives the lines to build and run it, and what it is
// expected to show: `finding` (of `trace`), or when null the first finding
// of its check.
Result<std::string> ReproProgram(const TraceReader& trace, const Finding* finding = nullptr);

// The build and run lines of ReproProgram's program for `trace`; a hang gets
// a timeout.
std::string ReproCommands(const TraceReader& trace, const Finding* finding = nullptr);

// README.md for a reduced job: what it shows, what was removed, and the
// versions and settings of the recorded job that matter.
std::string ShrinkReadme(const ShrinkResult& result, const TraceReader& recorded, const TraceReader& reduced);

}  // namespace replay

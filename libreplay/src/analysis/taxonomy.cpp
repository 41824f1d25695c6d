#include "analysis/taxonomy.h"

#include <csignal>

namespace replay::analysis {

Advice AdviceFor(FindingKind kind) {
  switch (kind) {
    case FindingKind::kMismatch:
      return {{"hang", "tensor mismatch", "communication error"},
              "fix distributed API usage; fix consistency between devices: every member must make "
              "the same collective calls, in the same order, with matching count, datatype, root and "
              "reduction"};
    case FindingKind::kMissingRanks:
      return {{"hang", "hang & timeout"},
              "fix behaviour logic / consistency between devices: look for rank-dependent control "
              "flow (a condition on the rank or on local data, an early exit or skipped step) that "
              "keeps the missing ranks from making this call"};
    case FindingKind::kNeverCompleted:
      return {{"hang & timeout"},
              "fix communication configuration; fix network setting: every member made the call and "
              "it never finished, which points at the transport (interfaces, ports, firewall, "
              "transport selection variables) rather than the program"};
    case FindingKind::kUnmatchedP2p:
      return {{"hang", "communication error"},
              "fix distributed API usage: the peer, tag and communicator of each send must match a "
              "receive on the other side"};
    case FindingKind::kNanInf:
      return {{"unexpected intermediate result", "non-convergence"},
              "fix behaviour logic: the named rank produced the NaN/Inf itself (it had received none "
              "before); inspect its inputs and computation just before this call"};
    case FindingKind::kOutputsDiffer:
      return {{"unexpected intermediate result"},
              "fix consistency between devices: ranks that should hold identical results do not "
              "(different library versions or algorithm settings, or memory overwritten during the "
              "call)"};
    case FindingKind::kDevice:
      return {{"device error", "unexpected device"},
              "fix device assignment: give each rank on a host its own device (local rank -> device)"};
    case FindingKind::kConfig:
      return {{"setup failure", "unexpected protocol", "device error"},
              "fix communication configuration; fix dependency version; fix device assignment: make "
              "the environment and library versions the same on every rank"};
    case FindingKind::kStraggler:
      return {{"low efficiency"},
              "fix device / network setting: find out why this rank is slow (a slower or shared "
              "device, CPU binding, a busier host or link, more work in its data shard)"};
    case FindingKind::kError:
      return AdviceForError(ErrorSource::kMpi, false);
  }
  return {};
}

Advice AdviceForSignal(int signo) {
  switch (signo) {
    case SIGSEGV:
    case SIGBUS:
      return {{"segmentation fault"},
              "fix behaviour logic: a memory error in this rank; run it alone with `replay rerun "
              "--rank` under a debugger to stop at the same point"};
    case SIGABRT:
      return {{"communication error", "program failure"},
              "an assertion or a library abort (heap corruption often follows a count or buffer "
              "mismatch); read the rank's stderr and any mismatch reported above"};
    case SIGFPE:
    case SIGILL:
      return {{"program failure"}, "fix behaviour logic: an arithmetic fault or an illegal instruction in this rank"};
    default:
      return {{"program failure"}, "find what sent the signal (a watchdog, the launcher, the OOM killer)"};
  }
}

Advice AdviceForError(ErrorSource source, bool abort) {
  if (abort) {
    return {{"communication error"},
            "the program gave up on purpose: the error code and the check that called abort say why"};
  }
  switch (source) {
    case ErrorSource::kNccl:
    case ErrorSource::kCuda:
      return {{"communication error", "device error"},
              "fix communication configuration or device assignment, depending on the error (the "
              "message names it)"};
    case ErrorSource::kRecorder:
      return {{"recording"}, "the recording itself failed here; later events of this rank are missing"};
    case ErrorSource::kMpi:
    default:
      return {{"communication error"},
              "fix distributed API usage or communication configuration, depending on the error "
              "class the message names"};
  }
}

}  // namespace replay::analysis

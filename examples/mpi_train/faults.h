// faults.h: the bugs mpi_train can be told to commit (--fault), each one a real
// failure mode of distributed training that replay is meant to record and explain.
// See README.md for the symptom each one produces.
//
// A FaultPlan is built once from the command line and then only read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mpi_train {

// Keep in step with kFaultNames in faults.cpp and the list in README.md.
enum class FaultKind {
  kHang,      // a rank skips the gradient allreduce
  kMismatch,  // a rank passes a different count to the gradient allreduce
  kOrder,     // a rank swaps the order of collectives on two communicators
  kNan,       // a rank's gradient gets a NaN
  kUnseeded,  // initial parameters and batch sampling come from getrandom()
  kRace,      // a loss sum depends on the arrival order of wildcard receives
  kCrash,     // a rank dies with SIGSEGV
};

struct Fault {
  FaultKind kind = FaultKind::kHang;
  int rank = 1;      // unused by kUnseeded and kRace, which act on every rank
  int64_t step = 3;  // likewise
};

// Parses "name" or "name:rank=R,step=S". On failure returns false and sets *error.
bool ParseFault(std::string_view spec, Fault* fault, std::string* error);

class FaultPlan {
 public:
  void Add(const Fault& fault) { faults_.push_back(fault); }

  // Retargets faults aimed past the last rank at the last rank, so that the default
  // rank=1 still means something in a one-rank run.
  void ClampRanks(int world_size);

  // Whether a fault of `kind` targets `rank` at `step`.
  bool Fires(FaultKind kind, int rank, int64_t step) const;

  // Whether a fault of `kind` is on at all (for the untargeted kinds).
  bool Enabled(FaultKind kind) const;

 private:
  std::vector<Fault> faults_;
};

}  // namespace mpi_train

// comm_lineage.h: the communicators of a job, by identity, and the names
// people read them by.
//
// Every member of a communicator records its creation with the same job-wide
// identity, the parent it came from and the creating call's arguments. From
// those, CommLineage names each communicator after its lineage, the way a
// reader of the program would: "WORLD", "dup(WORLD)", "split(WORLD, color=1)",
// "split(dup(WORLD), color=0)". Two communicators that would get the same name
// (two dups of WORLD) are told apart by the creating call's sequence number on
// the parent: "dup(WORLD)@5".
//
// Add from any number of ranks, then Finish once; after that the lineage is
// read-only and safe to read from several threads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/rank_digest.h"
#include "analysis/rank_set.h"

namespace replay::analysis {

// How a reader calls what a communicator-creating function made ("dup",
// "split") and which of its arguments is worth showing ("color"). Names other
// than these: "nccl" for NCCL's initialisations, MPI_Comm_<verb>'s <verb>, the
// function's name. Every function named here is one the recorder's tables
// (interpose/*_api.def) record as creating a communicator; comm_lineage_test
// holds them to it.
struct CommVerb {
  const char* api;
  const char* verb;
  const char* argument;  // null: none shown
};
std::span<const CommVerb> CommVerbs();

struct CommNode {
  uint64_t id = 0;
  uint64_t parent = 0;
  std::string api;
  uint64_t parent_seq = 0;
  int64_t color = 0;
  uint16_t flags = 0;
  int32_t size = 0;
  std::vector<int32_t> members;  // world ranks in communicator-rank order
  RankSet seen_by;               // ranks whose trace recorded its creation
  std::string name;
  // For communicators whose creation does not list the members (NCCL's): the
  // world rank each member reported for its communicator rank, -1 where none
  // did. Becomes `members` once every member reported.
  std::vector<int32_t> reported;
};

class CommLineage {
 public:
  // Records what `world_rank` saw of a communicator's creation.
  void Add(const CommRecord& record, int32_t world_rank);
  // Names every communicator; call once, after the last Add.
  void Finish();

  // Null when no rank recorded the communicator's creation.
  const CommNode* Find(uint64_t id) const;
  // The communicator's name; "comm 0x…" when unknown.
  std::string Name(uint64_t id) const;
  // Its members, or empty when unknown.
  const std::vector<int32_t>& Members(uint64_t id) const;
  size_t size() const { return nodes_.size(); }

 private:
  std::string BaseName(const CommNode& node) const;
  std::unordered_map<uint64_t, CommNode> nodes_;
};

}  // namespace replay::analysis

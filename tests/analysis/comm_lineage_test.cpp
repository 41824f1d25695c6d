#include "analysis/comm_lineage.h"

#include <catch2/catch.hpp>
#include <set>
#include <string_view>

#include "replay/event.h"

namespace replay::analysis {
namespace {

CommRecord Record(uint64_t id, uint64_t parent, const std::string& api, uint64_t parent_seq, int64_t color,
                  std::vector<int32_t> members, uint16_t flags = 0) {
  CommRecord r;
  r.id = id;
  r.parent = parent;
  r.api = api;
  r.parent_seq = parent_seq;
  r.color = color;
  r.flags = flags;
  r.size = static_cast<int32_t>(members.size());
  r.members = std::move(members);
  return r;
}

TEST_CASE("communicators are named after their lineage", "[analysis]") {
  CommLineage l;
  l.Add(Record(1, 0, "MPI_Init", 0, 0, {0, 1, 2, 3}, comm_flags::kWorld), 0);
  l.Add(Record(2, 0, "MPI_Init", 0, 0, {0}, comm_flags::kSelf), 0);
  l.Add(Record(3, 1, "MPI_Comm_dup", 1, 0, {0, 1, 2, 3}), 0);
  l.Add(Record(4, 1, "MPI_Comm_split", 2, 0, {0, 2}), 0);
  l.Add(Record(5, 1, "MPI_Comm_split", 2, 1, {1, 3}), 1);
  // Its child is added before the parent: the order of ranks is arbitrary.
  l.Add(Record(7, 6, "MPI_Comm_split_type", 1, 0, {0, 1}), 0);
  l.Add(Record(6, 3, "MPI_Comm_split", 3, 0, {0, 1}), 0);
  l.Finish();
  CHECK(l.Name(1) == "WORLD");
  CHECK(l.Name(2) == "SELF");
  CHECK(l.Name(3) == "dup(WORLD)");
  CHECK(l.Name(4) == "split(WORLD, color=0)");
  CHECK(l.Name(5) == "split(WORLD, color=1)");
  CHECK(l.Name(6) == "split(dup(WORLD), color=0)");
  CHECK(l.Name(7) == "split_type(split(dup(WORLD), color=0), type=0)");
  CHECK(l.Members(5) == std::vector<int32_t>{1, 3});
  CHECK(l.Find(4)->seen_by.ToVector() == std::vector<int32_t>{0});
  CHECK(l.Name(0xabc) == "comm 0xabc");
  CHECK(l.Members(0xabc).empty());
}

TEST_CASE("communicators that would share a name are told apart by their creating call", "[analysis]") {
  CommLineage l;
  l.Add(Record(1, 0, "MPI_Init", 0, 0, {0, 1}, comm_flags::kWorld), 0);
  l.Add(Record(3, 1, "MPI_Comm_dup", 1, 0, {0, 1}), 0);
  l.Add(Record(4, 1, "MPI_Comm_dup", 5, 0, {0, 1}), 0);
  l.Add(Record(5, 3, "MPI_Comm_dup", 1, 0, {0, 1}), 0);
  l.Finish();
  CHECK(l.Name(3) == "dup(WORLD)@1");
  CHECK(l.Name(4) == "dup(WORLD)@5");
  CHECK(l.Name(5) == "dup(dup(WORLD)@1)");
}

// The functions the recorder's tables record as creating a communicator.
std::set<std::string> TableCreators() {
  std::set<std::string> creators;
#define REPLAY_MPI(name, shape, kind, ...) \
  if (std::string_view(#kind) == "CommCreate") creators.insert(#name);
#include "mpi_api.def"
#undef REPLAY_MPI
#define REPLAY_NCCL(name, shape, kind, ...) \
  if (std::string_view(#kind) == "CommCreate") creators.insert(#name);
#include "nccl_api.def"
#undef REPLAY_NCCL
  return creators;
}

TEST_CASE("the lineage names only functions the recorder records as creating communicators", "[analysis]") {
  const std::set<std::string> creators = TableCreators();
  for (const CommVerb& v : CommVerbs()) {
    INFO(v.api);
    CHECK(creators.count(v.api) == 1);
  }
}

TEST_CASE("every MPI function that creates a communicator has a verb", "[analysis]") {
  for (const std::string& api : TableCreators()) {
    if (api.rfind("MPI_", 0) != 0) continue;
    INFO(api);
    bool named = false;
    for (const CommVerb& v : CommVerbs()) named = named || api == v.api;
    CHECK(named);
  }
}

}  // namespace
}  // namespace replay::analysis

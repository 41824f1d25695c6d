#include "analysis/rank_digest.h"

#include <catch2/catch.hpp>

#include "analysis/collective_index.h"
#include "analysis/synthetic_job.h"
#include "support/temp_dir.h"

namespace replay::analysis {
namespace {

using testing::SyntheticJob;

// What the index says of a collective, in a form two indexes can compare.
std::string Describe(const CollectiveIndex& index, uint64_t comm, uint64_t seq) {
  const CollSummary* s = index.Find(comm, seq);
  if (s == nullptr) return "none";
  return std::to_string(s->entered) + " sig " + std::to_string(s->sig.count) + "/" + std::to_string(s->sig_groups()) +
         " stuck " + std::to_string(s->stuck().Count()) + " pending " + std::to_string(s->pending().Count()) +
         " in progress " + std::to_string(s->in_progress().Count()) + " timed " + std::to_string(s->timed) +
         " out " + std::to_string(s->out.count) + " first " + std::to_string(s->first_rank);
}

TEST_CASE("a digest handed over in parts merges into the index a whole one does", "[analysis]") {
  // More collectives than one part holds, with a non-blocking one started
  // before the first part and waited for after the last, one never waited
  // for, and a blocking one the rank never left.
  testing::TempDir dir;
  const uint64_t n = kFlushCollectives * 2 + 100;
  {
    SyntheticJob job(dir.path(), 1);
    job.Init(0);
    uint64_t early = job.Iallreduce(0, SyntheticJob::World(), 1);
    job.Iallreduce(0, SyntheticJob::World(), 2);  // never waited for
    for (uint64_t seq = 3; seq < n; ++seq) {
      job.Allreduce(0, SyntheticJob::World(), seq);
      if (seq % 1000 == 0) job.Flush(0);
    }
    job.Wait(0, {early}, 1, SyntheticJob::World(), 1);
    job.Allreduce(0, SyntheticJob::World(), n, 1024, /*returns=*/false);
    job.Die(0, 9);
  }
  ReadOptions stream;
  stream.stream = true;
  auto reader = RankReader::Open(dir / "rank-00000", stream);
  REQUIRE(reader.ok());
  DigestOptions whole_options;
  whole_options.min_wait_ns = 0;
  RankDigest whole = DigestRank(**reader, whole_options);
  CHECK(whole.collectives.size() == n);
  CollectiveIndex whole_index;
  whole_index.Merge(whole);

  DigestOptions parts_options = whole_options;
  CollectiveIndex parts_index;
  size_t parts = 0;
  parts_options.flush = [&](std::vector<CollEntry>& done) {
    ++parts;
    CHECK(done.size() >= kFlushCollectives - 2);
    parts_index.Merge(done, 0, (*reader)->header().start_realtime_ns);
  };
  RankDigest in_parts = DigestRank(**reader, parts_options);
  CHECK(parts == 2);
  CHECK(in_parts.collectives.size() < kFlushCollectives);  // what is left after the last part
  parts_index.Merge(in_parts);

  CHECK(parts_index.size() == whole_index.size());
  for (uint64_t seq : {uint64_t{1}, uint64_t{2}, uint64_t{3}, kFlushCollectives, kFlushCollectives + 7, n - 1, n}) {
    INFO("seq " << seq);
    CHECK(Describe(parts_index, SyntheticJob::World(), seq) == Describe(whole_index, SyntheticJob::World(), seq));
  }
  CHECK(Describe(parts_index, SyntheticJob::World(), 1).find("stuck 0 pending 0") != std::string::npos);
  CHECK(Describe(parts_index, SyntheticJob::World(), 2).find("pending 1") != std::string::npos);
  CHECK(Describe(parts_index, SyntheticJob::World(), n).find("stuck 1") != std::string::npos);
}

}  // namespace
}  // namespace replay::analysis

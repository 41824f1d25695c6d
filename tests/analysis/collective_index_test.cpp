#include "analysis/collective_index.h"

#include <catch2/catch.hpp>

namespace replay::analysis {
namespace {

// A digest of `rank` that entered allreduces 1..n on `comm` with `count` elements.
RankDigest Digest(int32_t rank, uint64_t comm, uint64_t n, int64_t count, uint64_t out = 0x77) {
  RankDigest d;
  d.rank = rank;
  for (uint64_t seq = 1; seq <= n; ++seq) {
    CollEntry e;
    e.comm = comm;
    e.seq = seq;
    e.sig.kind = OpKind::kAllreduce;
    e.sig.count = count;
    e.sig_hash = HashSignature(e.sig);
    e.has_out = true;
    e.out_hash = out;
    e.enter_ns = 100 * static_cast<int64_t>(seq);
    e.done_ns = e.enter_ns + 10 + rank;
    d.collectives.push_back(e);
  }
  d.last_seq[comm] = n;
  return d;
}

TEST_CASE("collective index keeps no rank sets for collectives every rank made alike", "[analysis]") {
  CollectiveIndex index;
  for (int32_t r = 0; r < 300; ++r) {
    RankDigest d = Digest(r, 5, 3, 1024);
    index.Merge(d);
    CHECK(d.collectives.empty());  // taken
  }
  CHECK(index.size() == 3);
  const CollSummary* s = index.Find(5, 2);
  REQUIRE(s != nullptr);
  CHECK(s->entered == 300);
  CHECK(s->sig_groups() == 1);
  CHECK(s->sig.count == 300);
  CHECK(s->sig.first_rank == 0);
  CHECK(!s->anomalies);  // a healthy collective holds nothing more
  CHECK(index.Signature(s->sig.hash).count == 1024);
  CHECK(s->out.count == 300);
  CHECK(s->other_outs().empty());
  // The rank that spent least inside it (rank 0: 10 ns), and the next (11 ns).
  CHECK(s->min1_rank == 0);
  CHECK(s->min2_ns - s->min1_ns == 1);
  CHECK(index.Find(5, 4) == nullptr);
  CHECK(index.Find(6, 1) == nullptr);
}

TEST_CASE("collective index keeps the ranks of signatures and results after the first", "[analysis]") {
  CollectiveIndex index;
  for (int32_t r = 0; r < 4; ++r) {
    RankDigest d = Digest(r, 5, 1, r == 2 ? 512 : 1024, r == 3 ? 0x78 : 0x77);
    index.Merge(d);
  }
  const CollSummary* s = index.Find(5, 1);
  REQUIRE(s != nullptr);
  REQUIRE(s->other_sigs().size() == 1);
  CHECK(s->other_sigs()[0].ranks.ToVector() == std::vector<int32_t>{2});
  CHECK(s->other_sigs()[0].sig.count == 512);
  REQUIRE(s->other_outs().size() == 1);
  CHECK(s->other_outs()[0].ranks.ToVector() == std::vector<int32_t>{3});
  CHECK(s->out.count == 3);
  std::vector<CollKey> keys = index.SortedKeys();
  REQUIRE(keys.size() == 1);
  CHECK(keys[0] == CollKey{5, 1});
}

TEST_CASE("collective index sets far-off sequence numbers of a damaged trace aside", "[analysis]") {
  CollectiveIndex index;
  RankDigest d = Digest(0, 9, 2, 8);
  d.collectives[1].seq = uint64_t{1} << 40;
  index.Merge(d);
  CHECK(index.size() == 2);
  CHECK(index.Find(9, uint64_t{1} << 40) != nullptr);
  CHECK(index.SortedKeys().back().seq == uint64_t{1} << 40);
}

}  // namespace
}  // namespace replay::analysis

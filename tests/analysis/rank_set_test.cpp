#include "analysis/rank_set.h"

#include <catch2/catch.hpp>

namespace replay::analysis {
namespace {

TEST_CASE("rank set holds ranks beyond one word and lists them in order", "[analysis]") {
  RankSet s;
  for (int32_t r : {1000, 3, 64, 0, 63}) s.Add(r);
  s.Add(-1);  // not a rank
  CHECK(s.Count() == 5);
  CHECK(s.Has(64));
  CHECK(!s.Has(65));
  CHECK(!s.Has(-1));
  CHECK(s.First() == 0);
  CHECK(s.ToVector() == std::vector<int32_t>{0, 3, 63, 64, 1000});
  RankSet t;
  t.Add(5000);
  s.Merge(t);
  CHECK(s.Has(5000));
  CHECK(RankSet().Empty());
  CHECK(RankSet().First() == -1);
}

TEST_CASE("rank lists fold runs of three or more", "[analysis]") {
  CHECK(FormatRanks({3}) == "3");
  CHECK(FormatRanks({0, 1}) == "0,1");
  CHECK(FormatRanks({0, 1, 2, 3}) == "0-3");
  CHECK(FormatRanks({0, 2, 5, 6, 7, 9}) == "0,2,5-7,9");
  CHECK(FormatRanks({}) == "");
}

}  // namespace
}  // namespace replay::analysis

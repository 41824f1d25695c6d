// Virtual topologies answered for a rank re-run alone (replay/topology.h),
// with MPI's rules.
#include <catch2/catch.hpp>

#include "replay/topology.h"

namespace replay {
namespace {

constexpr int kProcNull = -2;

TEST_CASE("Cartesian ranks are row-major and coordinates are their inverse", "[replay]") {
  const int dims[] = {2, 3};
  const int periods[] = {0, 1};
  Topology t = Topology::Cart(2, dims, periods);
  CHECK(t.size() == 6);
  CHECK(t.Coords(0) == std::vector<int>{0, 0});
  CHECK(t.Coords(4) == std::vector<int>{1, 1});
  CHECK(t.Coords(5) == std::vector<int>{1, 2});
  CHECK(t.Coords(6).empty());
  for (int r = 0; r < 6; ++r) CHECK(t.RankAt(t.Coords(r).data()) == r);
  const int wrapped[] = {1, -1};  // periodic in the second dimension
  CHECK(t.RankAt(wrapped) == 5);
  const int off[] = {2, 0};  // not periodic in the first
  CHECK(t.RankAt(off) == -1);
}

TEST_CASE("a Cartesian shift wraps in periodic dimensions and falls off the others", "[replay]") {
  const int dims[] = {2, 3};
  const int periods[] = {0, 1};
  Topology t = Topology::Cart(2, dims, periods);
  int src = 0, dst = 0;
  t.Shift(0, 1, 1, kProcNull, &src, &dst);  // (0,0) along the periodic dimension
  CHECK(dst == 1);
  CHECK(src == 2);
  t.Shift(0, 0, 1, kProcNull, &src, &dst);  // along the open one
  CHECK(dst == 3);
  CHECK(src == kProcNull);
  t.Shift(4, 0, 1, kProcNull, &src, &dst);
  CHECK(dst == kProcNull);
  CHECK(src == 1);
  t.Shift(0, 7, 1, kProcNull, &src, &dst);
  CHECK(src == kProcNull);
  CHECK(dst == kProcNull);
}

TEST_CASE("MPI_Cart_sub keeps the dimensions asked for", "[replay]") {
  const int dims[] = {2, 3, 4};
  const int periods[] = {1, 0, 1};
  const int remain[] = {1, 0, 1};
  Topology sub = Topology::CartSub(Topology::Cart(3, dims, periods), remain);
  CHECK(sub.dims == std::vector<int>{2, 4});
  CHECK(sub.periods == std::vector<int>{1, 1});
}

TEST_CASE("a graph's neighbours come from its index and edges", "[replay]") {
  // 0 - 1, 0 - 2, 1 - 2 (each edge listed at both ends).
  const int index[] = {2, 4, 6};
  const int edges[] = {1, 2, 0, 2, 0, 1};
  Topology g = Topology::Graph(3, index, edges);
  CHECK(g.size() == 3);
  CHECK(g.Neighbors(0) == std::vector<int>{1, 2});
  CHECK(g.Neighbors(2) == std::vector<int>{0, 1});
  CHECK(g.Neighbors(3).empty());
  const int in[] = {3};
  const int out[] = {1, 2};
  Topology d = Topology::DistGraph(1, in, 2, out);
  CHECK(d.sources == std::vector<int>{3});
  CHECK(d.destinations == std::vector<int>{1, 2});
}

TEST_CASE("a distributed graph's neighbours read back from the text the recording stores", "[replay]") {
  const int sources[] = {3, 1}, destinations[] = {2};
  Topology t = Topology::DistGraph(2, sources, 1, destinations);
  CHECK(t.DistGraphText() == "in=3,1;out=2");
  std::optional<Topology> back = Topology::ParseDistGraph(t.DistGraphText());
  REQUIRE(back);
  CHECK(back->kind == Topology::Kind::kDistGraph);
  CHECK(back->sources == t.sources);
  CHECK(back->destinations == t.destinations);
  CHECK(!back->weighted);

  t.weighted = true;
  t.source_weights = {5, -7};
  t.destination_weights = {1};
  back = Topology::ParseDistGraph(t.DistGraphText());
  REQUIRE(back);
  CHECK(back->weighted);
  CHECK(back->source_weights == std::vector<int>{5, -7});
  CHECK(back->destination_weights == std::vector<int>{1});

  // No neighbours at all is a graph too.
  back = Topology::ParseDistGraph("in=;out=");
  REQUIRE(back);
  CHECK(back->sources.empty());
  CHECK(back->destinations.empty());

  for (const char* bad : {"", "in=1", "in=1;out=x", "in=1;out=2;in_weights=1,2;out_weights=1", "in=1;up=2;out=3",
                          "in=1,;out=2"}) {
    INFO(bad);
    CHECK(!Topology::ParseDistGraph(bad));
  }
}

}  // namespace
}  // namespace replay

#include "shrink/ddmin.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <vector>

namespace replay::shrink {
namespace {

// Tries candidates one by one with `fails`; counts what it was offered.
struct Tester {
  std::function<bool(const std::vector<size_t>&)> fails;
  std::vector<std::vector<size_t>> offered;
  int operator()(const std::vector<std::vector<size_t>>& candidates) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      offered.push_back(candidates[i]);
      if (fails(candidates[i])) return static_cast<int>(i);
    }
    return -1;
  }
};

std::vector<size_t> Range(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

bool Has(const std::vector<size_t>& v, size_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

TEST_CASE("ddmin finds the two items that fail only together", "[shrink]") {
  Tester t;
  t.fails = [](const std::vector<size_t>& s) { return Has(s, 3) && Has(s, 11); };
  auto got = Ddmin(Range(20), std::ref(t), [] { return false; });
  CHECK(got == std::vector<size_t>{3, 11});
}

TEST_CASE("ddmin reduces to one item when one alone fails", "[shrink]") {
  Tester t;
  t.fails = [](const std::vector<size_t>& s) { return Has(s, 17); };
  auto got = Ddmin(Range(64), std::ref(t), [] { return false; });
  CHECK(got == std::vector<size_t>{17});
  // Halving: far fewer tries than items.
  CHECK(t.offered.size() < 20);
}

TEST_CASE("ddmin result is 1-minimal: no single item of it can go", "[shrink]") {
  // Fails when at least three of the even items below 12 are there.
  auto fails = [](const std::vector<size_t>& s) {
    return std::count_if(s.begin(), s.end(), [](size_t x) { return x % 2 == 0 && x < 12; }) >= 3;
  };
  Tester t;
  t.fails = fails;
  auto got = Ddmin(Range(16), std::ref(t), [] { return false; });
  REQUIRE(fails(got));
  CHECK(got.size() == 3);
  for (size_t i = 0; i < got.size(); ++i) {
    std::vector<size_t> less = got;
    less.erase(less.begin() + static_cast<std::ptrdiff_t>(i));
    CHECK_FALSE(fails(less));
  }
}

TEST_CASE("ddmin offers a round's chunks before their complements, in order", "[shrink]") {
  Tester t;
  t.fails = [](const std::vector<size_t>&) { return false; };
  Ddmin(Range(8), std::ref(t), [] { return false; });
  REQUIRE(t.offered.size() >= 2);
  // Two chunks first (each the other's complement, so offered once).
  CHECK(t.offered[0] == std::vector<size_t>{0, 1, 2, 3});
  CHECK(t.offered[1] == std::vector<size_t>{4, 5, 6, 7});
  // Then four chunks, then the four complements.
  REQUIRE(t.offered.size() >= 10);
  CHECK(t.offered[2] == std::vector<size_t>{0, 1});
  CHECK(t.offered[6] == std::vector<size_t>{2, 3, 4, 5, 6, 7});
}

TEST_CASE("ddmin gives the same answer for the same outcomes", "[shrink]") {
  auto fails = [](const std::vector<size_t>& s) { return Has(s, 2) && (Has(s, 9) || Has(s, 30)); };
  Tester a, b;
  a.fails = b.fails = fails;
  auto x = Ddmin(Range(40), std::ref(a), [] { return false; });
  auto y = Ddmin(Range(40), std::ref(b), [] { return false; });
  CHECK(x == y);
  CHECK(a.offered == b.offered);
}

TEST_CASE("ddmin stops when asked and returns the set it has", "[shrink]") {
  Tester t;
  t.fails = [](const std::vector<size_t>& s) { return Has(s, 5); };
  int rounds = 0;
  auto got = Ddmin(Range(32), std::ref(t), [&] { return ++rounds > 2; });
  // Two rounds halve it twice.
  CHECK(got.size() == 8);
  CHECK(Has(got, 5));
}

TEST_CASE("ddmin leaves a single item alone", "[shrink]") {
  Tester t;
  t.fails = [](const std::vector<size_t>&) { return true; };
  CHECK(Ddmin({7}, std::ref(t), [] { return false; }) == std::vector<size_t>{7});
  CHECK(t.offered.empty());
}

}  // namespace
}  // namespace replay::shrink

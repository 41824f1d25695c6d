#include "interop/pickle.h"
#include "util/json.h"

#include <catch2/catch.hpp>

namespace replay::interop {
namespace {

using nlohmann::json;

TEST_CASE("plain data survives a pickle round trip", "[interop]") {
  json v = {{"version", "2.10"},
            {"n", 7},
            {"big", int64_t{1} << 40},
            {"neg", -123456},
            {"huge", uint64_t{18000000000000000000u}},
            {"f", 0.25},
            {"ok", true},
            {"none", nullptr},
            {"list", {1, "two", json::array({3})}},
            {"process_group", {"0", "default_pg"}},
            {"empty", json::object()}};
  const std::string bytes = WritePickle(v, {"process_group"});
  CHECK(LooksLikePickle(bytes));
  auto back = ReadPickle(bytes, "test");
  REQUIRE(back.ok());
  CHECK((*back)["version"] == "2.10");
  CHECK((*back)["n"] == 7);
  CHECK((*back)["big"] == int64_t{1} << 40);
  CHECK((*back)["neg"] == -123456);
  CHECK((*back)["f"] == 0.25);
  CHECK((*back)["ok"] == true);
  CHECK((*back)["none"].is_null());
  CHECK((*back)["list"] == v["list"]);
  CHECK((*back)["process_group"] == v["process_group"]);
  CHECK((*back)["empty"] == json::object());
  CHECK((*back)["huge"].is_string());  // beyond int64: kept as hex text
}

TEST_CASE("pickles of Python's own protocols 0, 2 and 4 are read", "[interop]") {
  // pickle.dumps({'a': [1, 'x'], 'b': (2.5, None, True)}, protocol=P)
  const std::string p0("(dp0\012Va\012p1\012(lp2\012I1\012aVx\012p3\012asVb\012p4\012(F2.5\012NI01\012tp5\012s.", 51);
  const std::string p2(
      "\200\002}q\000(X\001\000\000\000aq\001]q\002(K\001X\001\000\000\000xq\003eX\001\000\000\000bq\004G@\004\000\000"
      "\000\000\000\000N\210\207q\005u.",
      53);
  const std::string p4(
      "\200\004\225$\000\000\000\000\000\000\000}\224(\214\001a\224]\224(K\001\214\001x\224e\214\001b\224G@\004\000"
      "\000\000\000\000\000N\210\207\224u.",
      47);
  json expected = {{"a", {1, "x"}}, {"b", {2.5, nullptr, true}}};
  for (const std::string* p : {&p0, &p2, &p4}) {
    auto r = ReadPickle(*p, "test");
    REQUIRE(r.ok());
    CHECK(*r == expected);
  }
}

TEST_CASE("a pickle that is cut short, calls code or refers to nothing is refused", "[interop]") {
  const std::string good = WritePickle(json{{"entries", {1, 2, 3}}});
  for (size_t cut = 0; cut < good.size(); ++cut) {
    auto r = ReadPickle(good.substr(0, cut), "cut");
    CHECK(!r.ok());
  }
  auto code = ReadPickle(std::string("\200\002cos\012system\012(S'true'\012tR.", 25), "evil");
  REQUIRE(!code.ok());
  CHECK(code.status().message().find("GLOBAL") != std::string::npos);
  auto memo = ReadPickle(std::string("\200\002h\005.", 5), "memo");
  REQUIRE(!memo.ok());
  CHECK(memo.status().message().find("memo entry 5") != std::string::npos);
  auto huge = ReadPickle(std::string("\200\002X\377\377\377\177", 7), "huge");
  REQUIRE(!huge.ok());
  CHECK(huge.status().message().find("more than are left") != std::string::npos);
}


TEST_CASE("a pickle of a list that holds itself is refused and leaves nothing behind", "[interop]") {
  // Found by flight_recorder_fuzz: l = []; l.append(l) leaked the list (a
  // cycle of shared owners), which LeakSanitizer reports.
  auto cycle = ReadPickle(std::string("\200\002]q\000h\000a.", 9), "cycle");
  REQUIRE(!cycle.ok());
  CHECK(cycle.status().message().find("refer to themselves") != std::string::npos);
  // A dict that holds itself as a value, and a list inside a list that holds the outer one.
  CHECK(!ReadPickle(std::string("\200\002}q\000X\001\000\000\000kh\000s.", 15), "dict").ok());
  CHECK(!ReadPickle(std::string("\200\002]q\000]q\001h\000aa.", 12), "nested").ok());
}


TEST_CASE("a dict key that is a tuple of bytes which are not UTF-8 reads, the bytes replaced", "[interop]") {
  // Found by flight_recorder_fuzz: writing such a key as JSON text threw.
  auto r = ReadPickle(std::string("\200\003}(C\001\224tK\001s.", 13), "key");
  REQUIRE(r.ok());
  REQUIRE(r->is_object());
  REQUIRE(r->size() == 1);
  CHECK(r->begin().key() == "[\"\xef\xbf\xbd\"]");
  CHECK(r->begin().value() == 1);
}

}  // namespace
}  // namespace replay::interop

#include "trace/python_sites.h"

#include <catch2/catch.hpp>

namespace replay {

TEST_CASE("a Python call site survives its info value, tabs and newlines in names becoming spaces", "[trace]") {
  PythonSite site{3, 0x7f00123456, {{"step", "/job/train.py", 42}, {"odd\tname", "dir\nfile.py", 0}}};
  std::string value = EncodePythonSite(site);
  auto back = DecodePythonSite(value);
  REQUIRE(back.has_value());
  CHECK(back->id == 3);
  CHECK(back->native == 0x7f00123456);
  REQUIRE(back->frames.size() == 2);
  CHECK(back->frames[0] == SourceFrame{"step", "/job/train.py", 42});
  CHECK(back->frames[1] == SourceFrame{"odd name", "dir file.py", 0});
  CHECK(IsPythonSite(kPythonSiteTag | 3));
  CHECK_FALSE(IsPythonSite(0x7f00123456));
}

TEST_CASE("a damaged Python call site is refused, not half read", "[trace]") {
  CHECK_FALSE(DecodePythonSite("").has_value());
  CHECK_FALSE(DecodePythonSite("0 0\n").has_value());          // site ids start at 1
  CHECK_FALSE(DecodePythonSite("1 zz\n").has_value());
  CHECK_FALSE(DecodePythonSite("1 0\n42\tonly-file\n").has_value());
  CHECK_FALSE(DecodePythonSite("1 0\nx\tf.py\tfn\n").has_value());
  CHECK_FALSE(DecodePythonSite("1 0\n42\tf.py\tfn").has_value());  // cut short
}

}  // namespace replay

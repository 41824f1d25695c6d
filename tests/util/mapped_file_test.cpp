#include "util/mapped_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "support/temp_dir.h"

namespace replay {
namespace {

using testing::TempDir;

TEST_CASE("a regular file is read whole, mapped or copied", "[util]") {
  TempDir tmp;
  testing::WriteFile(tmp / "f", "hello");
  for (bool copy : {false, true}) {
    auto f = MappedFile::Open(tmp / "f", copy);
    REQUIRE(f.ok());
    CHECK(std::string(reinterpret_cast<const char*>(f->bytes().data()), f->bytes().size()) == "hello");
  }
}

TEST_CASE("a link to a device is refused rather than read without end", "[util]") {
  TempDir tmp;
  REQUIRE(symlink("/dev/zero", (tmp / "events").c_str()) == 0);
  for (bool copy : {false, true}) {
    auto f = MappedFile::Open(tmp / "events", copy);
    REQUIRE(!f.ok());
    CHECK(f.status().message().find("is a character device, not a regular file") != std::string::npos);
  }
  CHECK(!IsRegularFile(tmp / "events"));
}

TEST_CASE("a pipe nobody writes to is refused at once, not waited on", "[util]") {
  TempDir tmp;
  REQUIRE(mkfifo((tmp / "header").c_str(), 0600) == 0);
  auto f = MappedFile::Open(tmp / "header");
  REQUIRE(!f.ok());
  CHECK(f.status().message().find("is a pipe") != std::string::npos);
}

TEST_CASE("a directory is refused with what it is", "[util]") {
  TempDir tmp;
  auto f = MappedFile::Open(tmp.path());
  REQUIRE(!f.ok());
  CHECK(f.status().message().find("is a directory") != std::string::npos);
}

TEST_CASE("a missing file is NotFound", "[util]") {
  TempDir tmp;
  auto f = MappedFile::Open(tmp / "nothing");
  REQUIRE(!f.ok());
  CHECK(f.status().code() == Status::Code::kNotFound);
}

}  // namespace
}  // namespace replay

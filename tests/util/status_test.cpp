#include "replay/status.h"

#include <catch2/catch.hpp>
#include <cerrno>

namespace replay {
namespace {

Result<int> Half(int v) {
  if (v % 2 != 0) return Status::InvalidArgument(std::to_string(v) + " is odd");
  return v / 2;
}

Status Quarter(int v, int* out) {
  REPLAY_ASSIGN_OR_RETURN(int h, Half(v));
  REPLAY_ASSIGN_OR_RETURN(int q, Half(h));
  *out = q;
  return Status::Ok();
}

TEST_CASE("a default status is ok and carries no message", "[util]") {
  Status s;
  CHECK(s.ok());
  CHECK(s.message().empty());
  CHECK(s.ToString() == "ok");
}

TEST_CASE("errno statuses name the operation and the system error", "[util]") {
  Status s = Status::FromErrno("cannot open x", ENOENT);
  CHECK_FALSE(s.ok());
  CHECK(s.code() == Status::Code::kIoError);
  CHECK(s.message() == "cannot open x: No such file or directory");
  CHECK(s.WithContext("trace").message() == "trace: cannot open x: No such file or directory");
}

TEST_CASE("results propagate the first failure through assign-or-return", "[util]") {
  int q = 0;
  CHECK(Quarter(8, &q).ok());
  CHECK(q == 2);
  Status s = Quarter(6, &q);
  CHECK(s.code() == Status::Code::kInvalidArgument);
  CHECK(s.message() == "3 is odd");
}

}  // namespace
}  // namespace replay

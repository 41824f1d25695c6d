#include "replay/status.h"

#include <cstring>

namespace replay {

Status Status::FromErrno(std::string_view what, int err) {
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  return Status(Code::kIoError, msg);
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

std::string Status::ToString() const { return ok() ? "ok" : state_->message; }

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string msg(context);
  msg += ": ";
  msg += state_->message;
  return Status(state_->code, msg);
}

}  // namespace replay

// Status and Result<T>: how libreplay reports expected failures.
//
// A Status is the outcome of an operation that can fail for reasons outside the
// program's control: a missing file, a corrupt or foreign trace, a full disk. Its
// message is written for the user of the tool and says what is wrong and, where
// possible, what to do. Broken invariants are not Statuses; they go through
// REPLAY_CHECK (util/check.h).
//
// Status and Result are values: copy and move freely. Const methods are safe to
// call from several threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace replay {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kNotFound,         // a file or directory that should be there is not
    kCorruption,       // bytes are there but do not decode
    kNotATrace,        // the input is some other kind of file
    kVersion,          // written by a newer replay
    kInvalidArgument,  // the caller asked for something that cannot be
    kIoError,          // the operating system refused
    kUnavailable,      // the data is not (yet) there, e.g. a rank still writing
  };

  Status() = default;  // OK
  static Status Ok() { return Status(); }
  static Status NotFound(std::string_view msg) { return Status(Code::kNotFound, msg); }
  static Status Corruption(std::string_view msg) { return Status(Code::kCorruption, msg); }
  static Status NotATrace(std::string_view msg) { return Status(Code::kNotATrace, msg); }
  static Status Version(std::string_view msg) { return Status(Code::kVersion, msg); }
  static Status InvalidArgument(std::string_view msg) {
    return Status(Code::kInvalidArgument, msg);
  }
  static Status IoError(std::string_view msg) { return Status(Code::kIoError, msg); }
  // An I/O error from errno: "<what>: <strerror(err)>".
  static Status FromErrno(std::string_view what, int err);
  static Status Unavailable(std::string_view msg) { return Status(Code::kUnavailable, msg); }

  bool ok() const { return state_ == nullptr; }
  Code code() const { return state_ ? state_->code : Code::kOk; }
  // The message alone, without a code prefix; empty when ok().
  const std::string& message() const;
  // "ok", or the message; for logs and error lines.
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>".
  Status WithContext(std::string_view context) const;

 private:
  struct State {
    Code code;
    std::string message;
  };
  Status(Code code, std::string_view msg)
      : state_(std::make_shared<State>(State{code, std::string(msg)})) {}
  std::shared_ptr<const State> state_;  // null when ok: success costs nothing
};

// Either a T or a non-ok Status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}                 // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}          // NOLINT: must not be ok

  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<1>(v_);
  }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace replay

// Returns early from the enclosing function with the Status of `expr` if not ok.
#define REPLAY_RETURN_IF_ERROR(expr)            \
  do {                                          \
    ::replay::Status _replay_st = (expr);       \
    if (!_replay_st.ok()) return _replay_st;    \
  } while (0)

#define REPLAY_CONCAT_INNER_(a, b) a##b
#define REPLAY_CONCAT_(a, b) REPLAY_CONCAT_INNER_(a, b)
// Declares `lhs` from a Result, or returns its Status from the enclosing function.
#define REPLAY_ASSIGN_OR_RETURN(lhs, expr) \
  REPLAY_ASSIGN_OR_RETURN_IMPL_(REPLAY_CONCAT_(_replay_r, __LINE__), lhs, expr)
#define REPLAY_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

// status.h — the error type used everywhere in Penstock: Status and Result<T>.
//
// Codes are numerically identical to gRPC's (and absl's), so a Status crosses the
// control plane unchanged. What a caller should do with each code:
//   retry this call:        kUnavailable, kDeadlineExceeded, kAborted, kResourceExhausted
//                           (the last after freeing space or waiting for GC)
//   retry higher up:        kFailedPrecondition (refresh the cluster map / state, then redo)
//   do not retry until fixed: kInvalidArgument, kNotFound, kAlreadyExists,
//                           kPermissionDenied, kUnauthenticated, kDataLoss, kInternal,
//                           kUnimplemented, kOutOfRange
// Messages name the thing that failed and, where there is one, the fix.
//
// Status and Result are values: cheap to move, safe to pass between threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "penstock/export.h"

namespace penstock {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// Short lower-case name of a code ("not_found"), stable for --json output.
PENSTOCK_API std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] PENSTOCK_API Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // True for the codes listed under "retry this call" above.
  bool retryable() const;

  // "not_found: container 'x' does not exist ..."
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>".
  Status WithContext(std::string_view context) const;

  // Marks a Status as intentionally unused.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
inline Status Unauthenticated(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }

// Status from the current errno: "<what>: <strerror(errno)>", code chosen from errno
// (ENOENT -> kNotFound, EACCES/EPERM/EROFS -> kPermissionDenied, ENOSPC -> kResourceExhausted,
// EADDRINUSE -> kUnavailable, ...).
PENSTOCK_API Status ErrnoStatus(int err, std::string_view what);

namespace detail {
// Prints "penstock: value() of a Result holding an error: <status>" to stderr and aborts.
[[noreturn]] PENSTOCK_API void DieOfValueOfError(const Status& status);
}  // namespace detail

// Result<T>: either a T or a non-OK Status. Shaped like std::expected. value() (and *, ->) of a
// Result holding an error is a bug in the caller: it aborts the process, printing the status
// (check ok() first, or use PS_ASSIGN_OR_RETURN / value_or).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "Result built from OK status");
  }
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U&&, T> &&
                                                    !std::is_same_v<std::decay_t<U>, Status> &&
                                                    !std::is_same_v<std::decay_t<U>, T>>>
  Result(U&& value) : v_(T(std::forward<U>(value))) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  // The error; OK when the result holds a value.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  T& value() & {
    if (!ok()) detail::DieOfValueOfError(std::get<Status>(v_));
    return *std::get_if<T>(&v_);
  }
  const T& value() const& {
    if (!ok()) detail::DieOfValueOfError(std::get<Status>(v_));
    return *std::get_if<T>(&v_);
  }
  T&& value() && {
    if (!ok()) detail::DieOfValueOfError(std::get<Status>(v_));
    return std::move(*std::get_if<T>(&v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  T value_or(T fallback) const& { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace penstock

#define PS_CONCAT_INNER_(a, b) a##b
#define PS_CONCAT_(a, b) PS_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` (a Status) is not OK.
#define PS_RETURN_IF_ERROR(expr)                         \
  do {                                                   \
    ::penstock::Status ps_status_ = (expr);              \
    if (!ps_status_.ok()) return ps_status_;             \
  } while (0)

// `lhs = value of expr` (a Result<T>), or return its Status from the enclosing function.
#define PS_ASSIGN_OR_RETURN(lhs, expr) \
  PS_ASSIGN_OR_RETURN_IMPL_(PS_CONCAT_(ps_result_, __LINE__), lhs, expr)
#define PS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

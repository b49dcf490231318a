#include "penstock/status.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace penstock {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kCancelled: return "cancelled";
    case StatusCode::kUnknown: return "unknown";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kDeadlineExceeded: return "deadline_exceeded";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kAlreadyExists: return "already_exists";
    case StatusCode::kPermissionDenied: return "permission_denied";
    case StatusCode::kResourceExhausted: return "resource_exhausted";
    case StatusCode::kFailedPrecondition: return "failed_precondition";
    case StatusCode::kAborted: return "aborted";
    case StatusCode::kOutOfRange: return "out_of_range";
    case StatusCode::kUnimplemented: return "unimplemented";
    case StatusCode::kInternal: return "internal";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kDataLoss: return "data_loss";
    case StatusCode::kUnauthenticated: return "unauthenticated";
  }
  return "unknown";
}

bool Status::retryable() const {
  switch (code_) {
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kAborted:
    case StatusCode::kResourceExhausted:
      return true;
    default:
      return false;
  }
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s(StatusCodeName(code_));
  s += ": ";
  s += message_;
  return s;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

Status ErrnoStatus(int err, std::string_view what) {
  StatusCode code = StatusCode::kInternal;
  switch (err) {
    case ENOENT: code = StatusCode::kNotFound; break;
    case EEXIST: code = StatusCode::kAlreadyExists; break;
    case EACCES:
    case EPERM:
    case EROFS: code = StatusCode::kPermissionDenied; break;
    case ENOSPC:
    case EDQUOT:
    case ENOMEM: code = StatusCode::kResourceExhausted; break;
    case EINVAL:
    case ENOTDIR:
    case EISDIR: code = StatusCode::kInvalidArgument; break;
    case EADDRINUSE:
    case ECONNREFUSED:
    case ECONNRESET:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EAGAIN: code = StatusCode::kUnavailable; break;
    case ETIMEDOUT: code = StatusCode::kDeadlineExceeded; break;
    case EIO: code = StatusCode::kDataLoss; break;
    default: break;
  }
  std::string m(what);
  m += ": ";
  m += std::strerror(err);
  return Status(code, std::move(m));
}

namespace detail {

void DieOfValueOfError(const Status& status) {
  std::fprintf(stderr, "penstock: value() of a Result holding an error: %s\n", status.ToString().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace detail

}  // namespace penstock

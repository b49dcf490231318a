// fs_errors.cc — see fs_errors.h; ErrnoOf is declared in penstock/fs.h.
#include "fs/fs_errors.h"

#include <cerrno>
#include <cstring>
#include <string_view>

#include "penstock/fs.h"

namespace penstock::fs {

namespace {

struct Named {
  int err;
  std::string_view name;
  StatusCode code;
};

// The errnos the file system reports, and the code each travels as.
constexpr Named kNamed[] = {
    {ENOENT, "ENOENT", StatusCode::kNotFound},
    {EEXIST, "EEXIST", StatusCode::kAlreadyExists},
    {ENOTDIR, "ENOTDIR", StatusCode::kFailedPrecondition},
    {EISDIR, "EISDIR", StatusCode::kFailedPrecondition},
    {ENOTEMPTY, "ENOTEMPTY", StatusCode::kFailedPrecondition},
    {EINVAL, "EINVAL", StatusCode::kInvalidArgument},
    {ENAMETOOLONG, "ENAMETOOLONG", StatusCode::kInvalidArgument},
    {ELOOP, "ELOOP", StatusCode::kFailedPrecondition},
    {EPERM, "EPERM", StatusCode::kPermissionDenied},
    {EACCES, "EACCES", StatusCode::kPermissionDenied},
    {ENOSPC, "ENOSPC", StatusCode::kResourceExhausted},
    {ENODATA, "ENODATA", StatusCode::kNotFound},
    {ERANGE, "ERANGE", StatusCode::kOutOfRange},
    {E2BIG, "E2BIG", StatusCode::kResourceExhausted},
    {EXDEV, "EXDEV", StatusCode::kInvalidArgument},
    {EBADF, "EBADF", StatusCode::kFailedPrecondition},
    {EROFS, "EROFS", StatusCode::kPermissionDenied},
    {ENOTSUP, "ENOTSUP", StatusCode::kUnimplemented},
    {EFBIG, "EFBIG", StatusCode::kOutOfRange},
    {EIO, "EIO", StatusCode::kUnavailable},
    {EBUSY, "EBUSY", StatusCode::kFailedPrecondition},
    {EAGAIN, "EAGAIN", StatusCode::kAborted},
};

}  // namespace

Status FsError(int err, const std::string& message) {
  for (const Named& n : kNamed) {
    if (n.err == err) return Status(n.code, std::string(n.name) + ": " + message);
  }
  return Status(StatusCode::kInternal, "errno " + std::to_string(err) + ": " + message);
}

int ErrnoOf(const Status& status) {
  if (status.ok()) return 0;
  const std::string& m = status.message();
  for (const Named& n : kNamed) {
    if (m.size() > n.name.size() && m.compare(0, n.name.size(), n.name) == 0 && m[n.name.size()] == ':') return n.err;
  }
  switch (status.code()) {
    case StatusCode::kNotFound: return ENOENT;
    case StatusCode::kAlreadyExists: return EEXIST;
    case StatusCode::kResourceExhausted: return ENOSPC;
    case StatusCode::kPermissionDenied:
    case StatusCode::kUnauthenticated: return EACCES;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange: return EINVAL;
    case StatusCode::kUnimplemented: return ENOTSUP;
    case StatusCode::kAborted: return EAGAIN;
    case StatusCode::kDeadlineExceeded: return ETIMEDOUT;
    case StatusCode::kCancelled: return ECANCELED;
    default: return EIO;
  }
}

}  // namespace penstock::fs

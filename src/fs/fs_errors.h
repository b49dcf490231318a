// fs_errors.h — errors of the file system API carrying their errno (fs.h: "ENOTDIR: ...").
// Pure functions; thread-safe.
#pragma once

#include <string>

#include "penstock/status.h"

namespace penstock::fs {

// A Status whose message starts with the errno's name ("ENOTDIR: " + message) and whose code
// is the nearest StatusCode (ENOENT kNotFound, EEXIST kAlreadyExists, ENOSPC
// kResourceExhausted, EIO kUnavailable, EACCES/EPERM kPermissionDenied, ENOTSUP
// kUnimplemented, the rest kFailedPrecondition or kInvalidArgument).
Status FsError(int err, const std::string& message);

}  // namespace penstock::fs

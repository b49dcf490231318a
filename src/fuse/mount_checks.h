// mount_checks.h — what must hold before a mount can work, each with an error naming the fix;
// and where mounts are (/proc/self/mountinfo). Functions of the local system only; thread-safe.
#pragma once

#include <string>

#include "penstock/status.h"

namespace penstock::fuse {

// `path` made absolute and normal without touching the file system (a dead mount point
// cannot be resolved).
std::string AbsolutePath(const std::string& path);

// OK when this process can mount with FUSE: /dev/fuse is there and openable, and either we
// are root or fusermount3 is installed.
Status CheckFuseAvailable();

// OK when `abs` (AbsolutePath) is an empty directory that is not a mount point already.
Status CheckMountpoint(const std::string& abs);

// Whether `abs` is a mount point, and of which file system type ("fuse.penstock", ...).
struct MountEntry {
  bool mounted = false;
  std::string fs_type;
};
MountEntry FindMount(const std::string& abs);

// The full path of `program` in $PATH, or "" when it is not there.
std::string FindProgram(const std::string& program);

}  // namespace penstock::fuse

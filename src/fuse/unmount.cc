// unmount.cc — Unmount() (mount.h): umount2 as root, else fusermount3, which lets a user
// unmount what they mounted.
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "fuse/mount.h"
#include "fuse/mount_checks.h"

namespace penstock::fuse {

namespace {

Status BusyError(const std::string& abs) {
  return FailedPrecondition("'" + abs + "' is busy: a process has a file open or its working directory there; "
                            "close them, or detach it now with `penstock umount --lazy " + abs + "`");
}

Status RunFusermount(const std::string& abs, bool lazy) {
  const std::string prog = FindProgram("fusermount3");
  if (prog.empty()) return FailedPrecondition("cannot unmount '" + abs + "': fusermount3 is missing (Debian package fuse3)");
  std::vector<const char*> argv = {prog.c_str(), lazy ? "-uz" : "-u", "--", abs.c_str(), nullptr};
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus(errno, "cannot start fusermount3");
  if (pid == 0) {
    ::execv(prog.c_str(), const_cast<char* const*>(argv.data()));
    ::_exit(127);
  }
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return OkStatus();
  return Unavailable("fusermount3 could not unmount '" + abs + "' (it said why above)");
}

}  // namespace

Status Unmount(const std::string& mountpoint, bool lazy) {
  const std::string abs = AbsolutePath(mountpoint);
  MountEntry m = FindMount(abs);
  if (!m.mounted) return NotFound("'" + abs + "' is not a mount point");
  if (m.fs_type.rfind("fuse", 0) != 0) {
    return FailedPrecondition("'" + abs + "' is a " + m.fs_type + " mount, not a penstock (FUSE) one");
  }
  if (::geteuid() != 0) return RunFusermount(abs, lazy);
  if (::umount2(abs.c_str(), lazy ? MNT_DETACH : 0) == 0) return OkStatus();
  if (errno == EBUSY) return BusyError(abs);
  return ErrnoStatus(errno, "cannot unmount '" + abs + "'");
}

}  // namespace penstock::fuse

// mount.h — `penstock mount`: a container's file system served through FUSE at a mount point,
// and `penstock umount`.
//
// Mount() checks what it can before anything starts (FUSE available, mount point usable),
// then, in the background mode, forks: the child connects to the cluster, opens the file
// system, mounts and serves it; the parent returns once the mount is ready (or with the
// child's error), so a shell script can use the mount on the next line. In the foreground the
// calling process does all of it and returns when the mount ends.
//
// A mount ends on `penstock umount` / `fusermount3 -u` (the kernel closes the session) or on
// SIGINT, SIGTERM or SIGHUP to the serving process (it unmounts itself). Files still open
// are closed first, flushing what they wrote.
//
// Called from the main thread of a process with no other threads (fork).
#pragma once

#include <string>
#include <vector>

#include "penstock/client.h"
#include "penstock/status.h"

namespace penstock::fuse {

struct MountOptions {
  ClientOptions client;
  std::string container;
  std::string mountpoint;
  bool foreground = false;
  bool read_only = false;  // EROFS for every change (and the kernel's "ro" mount flag)
  // More options for libfuse and the kernel, as given to -o ("allow_other", "max_read=N", ...).
  std::vector<std::string> fuse_options;
  // Where the background process's log goes after the mount is ready ("": nowhere).
  std::string log_file;
  double attr_timeout = 1.0;   // seconds
  double entry_timeout = 1.0;  // seconds
};

// Serves `o.container` at `o.mountpoint` (see the top of this file). Errors name the cause
// and the fix: FUSE unavailable, a mount point that is missing, not a directory, not empty or
// already mounted, a container that holds no file system. In the background mode, sets
// `*daemon_pid` (when given) to the serving process's id.
Status Mount(const MountOptions& o, int* daemon_pid = nullptr);

// Unmounts `mountpoint` (umount2 as root, else `fusermount3 -u`); `lazy` detaches it even
// while files are open there. Errors: "not a mount point", busy (files open: close them or use
// lazy), fusermount3 missing.
Status Unmount(const std::string& mountpoint, bool lazy);

}  // namespace penstock::fuse

// session.h — one FUSE session over an open file system: the kernel connection, the
// operations table, the worker threads; serves until the mount ends.
//
// Threads: libfuse's multi-threaded loop (up to 10 workers, each taking the next request from
// /dev/fuse and running its operation to the reply; operations block on the cluster, so
// parallel requests need parallel workers). The calling thread waits for the end and handles
// SIGINT/SIGTERM/SIGHUP, which end the loop and unmount.
#pragma once

#include <functional>

#include "fuse/mount.h"
#include "penstock/fs.h"

namespace penstock::fuse {

// Mounts `fs` at `o.mountpoint` and serves it; `ready` is called once the kernel has the
// mount (or with the error that prevented it). Returns when the mount ends: OK after an
// unmount or a signal. The signals above must be blocked in every thread when this is called
// (so only this thread takes them); it unblocks them here.
Status ServeSession(fs::FileSystem& fs, const MountOptions& o, const std::function<void(const Status&)>& ready);

}  // namespace penstock::fuse

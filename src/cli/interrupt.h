// interrupt.h — how `put`/`get` stop on Ctrl-C: InstallInterruptHandler() makes the first
// SIGINT or SIGTERM set a flag (Interrupted()) that readers, writers and the dataset workers
// check, so temporary files are removed and a summary printed; a second signal ends the
// process at once. Thread-safe.
#pragma once

#include "penstock/status.h"

namespace penstock::cli {

void InstallInterruptHandler();
bool Interrupted();

// Waits until `fd` is ready for `events` (POLLIN, POLLOUT), looking at Interrupted() every
// 200 ms: the signal may land on any of the process's threads, so a blocking read or write
// cannot count on EINTR. Errors: kCancelled when interrupted, errno-based ones from poll.
Status WaitReady(int fd, short events);

}  // namespace penstock::cli

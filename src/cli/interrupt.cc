#include "cli/interrupt.h"

#include <poll.h>
#include <signal.h>

#include <cerrno>
#include <string>

#include <atomic>

namespace penstock::cli {

namespace {

std::atomic<bool> g_interrupted{false};

void OnInterrupt(int sig) {
  if (g_interrupted.exchange(true)) {  // the second one: stop now
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
}

}  // namespace

void InstallInterruptHandler() {
  struct sigaction sa{};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

bool Interrupted() { return g_interrupted.load(std::memory_order_relaxed); }

Status WaitReady(int fd, short events) {
  for (;;) {
    if (Interrupted()) return Cancelled("interrupted");
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, 200);
    if (n > 0) return OkStatus();  // ready, or an error or hang-up the next call reports
    if (n < 0 && errno != EINTR) return ErrnoStatus(errno, "waiting for file descriptor " + std::to_string(fd));
  }
}

}  // namespace penstock::cli

// background.h — running the rest of a command in a child process that outlives the shell's
// command, while the parent waits until the child says it is ready (or failed) and reports
// that as its own result: what `penstock mount` without -f does.
//
// Fork() must be called while the process has a single thread.
#pragma once

#include <string>

#include "penstock/status.h"

namespace penstock::fuse {

// The child's end: tells the waiting parent how starting went, once.
class Readiness {
 public:
  explicit Readiness(int fd = -1, int child_pid = 0) : fd_(fd), child_pid_(child_pid) {}
  Readiness(Readiness&& o) noexcept : fd_(o.fd_), child_pid_(o.child_pid_) { o.fd_ = -1; }
  Readiness& operator=(Readiness&&) = delete;
  ~Readiness();

  bool in_child() const { return fd_ >= 0; }
  // In the parent: the child's process id.
  int child_pid() const { return child_pid_; }
  // Sends `s` (OK: ready) to the parent, which then returns it. Later calls do nothing.
  void Report(const Status& s);
  // After Report(OK): stdin from /dev/null, stdout and stderr to `log_file` (appended) or
  // /dev/null, so the terminal the parent ran in is free.
  static void DetachOutput(const std::string& log_file);

 private:
  int fd_;
  int child_pid_;
};

// Forks. In the child (a new session): returns a Readiness to report through. In the parent:
// waits for the child's report and returns it as an error Status, or as OK with in_child()
// false — the parent should then just return. A child that exits without reporting is an
// error naming its exit status.
Result<Readiness> Fork();

}  // namespace penstock::fuse

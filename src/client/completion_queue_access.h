// completion_queue_access.h — the library's side of a CompletionQueue (penstock/object_io.h):
// operations tell their queue when they start and finish. Not part of the public API.
// Thread-safe, as the queue is.
#pragma once

#include "penstock/object_io.h"

namespace penstock {

struct CompletionQueueAccess {
  // An operation was submitted to `cq`.
  static void Started(CompletionQueue& cq);
  // An operation of `cq` finished: runs the queue's callback (on this thread) or queues `c`
  // for Poll()/Wait().
  static void Complete(CompletionQueue& cq, IoCompletion c);
};

}  // namespace penstock

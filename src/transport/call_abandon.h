// call_abandon.h — CallAbandon: lets the maker of a data-plane call give up on it before its
// reply, so that the memory the call reads (its payload) is the caller's again at once instead
// of when the peer answers or the call times out.
//
// Why: a protected stripe's write is decided on its quorum; a shard request to a target later
// than the straggler delay (a stopped target) may otherwise read the caller's buffer until the
// transport's timeout, and the caller's completion waits for that (client/object_impl.h).
//
// Ownership: the caller makes one per call and passes it to RpcClient::Call (or RpcCaller::
// Call); the transport binds it while the call runs and unbinds it when the call ended. GiveUp
// ends the call with `why` as its outcome, the way its timeout would (rpc_call_engine.cc): a
// call handed to UCX whose send is still running, or whose reply is being received, closes the
// connection (every call on it fails); a payload the server was to copy out of our memory
// (local_direct.h) has its ticket cleared, so a copy that comes later is refused. `done` still
// runs exactly once, after which nothing of the call touches the caller's memory. A GiveUp
// before the transport bound it takes effect when it does; after the call ended, it is a no-op.
// Thread-safe.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <utility>

#include "penstock/status.h"

namespace penstock {

class CallAbandon {
 public:
  // Gives up on the call (see the header comment). The transport never runs the call's `done`
  // inside GiveUp (it posts the work to its thread), so the caller may hold its own locks.
  void GiveUp(Status why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_ || wanted_) return;
    wanted_ = std::move(why);
    if (give_up_) give_up_(*wanted_);
  }

  // Transport side: `give_up` ends the call (runs on any thread; must only post). Runs it at
  // once when GiveUp came first.
  void Bind(std::function<void(const Status&)> give_up) {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    give_up_ = std::move(give_up);
    if (wanted_) give_up_(*wanted_);
  }
  // Transport side: the call ended; GiveUp does nothing from now on.
  void Unbind() {
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = true;
    give_up_ = nullptr;
  }

 private:
  std::mutex mu_;
  bool ended_ = false;
  std::optional<Status> wanted_;
  std::function<void(const Status&)> give_up_;
};

}  // namespace penstock

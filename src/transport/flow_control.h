// flow_control.h — the data plane's credit accounting: how many calls and payload bytes may be
// in flight, on both ends of a connection.
//
//  - InflightWindow: the client's per-target window (RpcClientOptions::max_inflight_ops /
//    max_inflight_bytes). A call is admitted when it fits; otherwise the client queues it (FIFO)
//    and retries as replies come back. A call bigger than the whole byte window is admitted
//    alone, when nothing else is in flight, so it cannot wait forever.
//  - ByteBudget: the server's budget for incoming request payloads
//    (RpcServerOptions::max_incoming_bytes), held from the moment a payload's receive starts
//    until its request is answered. When a rendezvous payload does not fit, the server keeps
//    UCX's data descriptor and receives it later (the sender's call simply takes longer);
//    eager payloads (small, already in the server's memory) are always admitted and counted.
//    Like the window, it admits one payload of any size when nothing is held.
//
// Pure bookkeeping, no I/O; not thread-safe: each instance is owned by one transport thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace penstock {

class InflightWindow {
 public:
  // 0 means "no limit" for either bound.
  InflightWindow(uint64_t max_ops, uint64_t max_bytes) : max_ops_(max_ops), max_bytes_(max_bytes) {}

  // Admits a call carrying `bytes` and accounts it when it fits; false leaves nothing changed.
  bool TryAcquire(uint64_t bytes);
  // Returns what an admitted call took.
  void Release(uint64_t bytes);

  uint64_t ops() const { return ops_; }
  uint64_t bytes() const { return bytes_; }

 private:
  uint64_t max_ops_;
  uint64_t max_bytes_;
  uint64_t ops_ = 0;
  uint64_t bytes_ = 0;
};

class ByteBudget {
 public:
  explicit ByteBudget(uint64_t limit) : limit_(limit) {}  // 0 = no limit

  // Reserves `bytes` when they fit (or nothing is held); false leaves nothing changed.
  bool TryReserve(uint64_t bytes);
  // Reserves `bytes` even beyond the limit (eager payloads that have already arrived).
  void ForceReserve(uint64_t bytes) { held_ += bytes; }
  void Release(uint64_t bytes);

  uint64_t held() const { return held_; }
  uint64_t limit() const { return limit_; }

 private:
  uint64_t limit_;
  uint64_t held_ = 0;
};

}  // namespace penstock

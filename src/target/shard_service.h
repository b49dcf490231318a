// shard_service.h — the target's data-plane request handler: decodes shard requests
// (protocol/shard_protocol.h), runs them against the engine on a pool of I/O threads and
// replies. The transport calls Handle() on its own thread; Handle() never blocks it. Range
// writes of whole 4 KiB blocks take no I/O thread: Handle queues them with the
// engine itself when space is at hand (Engine::TryWriteRangeAsync) and the reply is sent from
// the engine's completion, so every such write that arrives can join the next group commit.
// Reads take no I/O thread either when the shard's record is in the index's memory and the
// bytes are one device read (Engine::TryReadRangeAsync): the reply is sent when the read
// completes, on the transport thread itself (TargetServer gives each transport thread a read
// queue of its own, Engine::CompleteReadsOnThisThread). Everything else runs on the pool.
//
// Capabilities: Execute checks the request's token (protocol/capability.h) against the key set
// from mgmt for the request's container and the op's right (read: read, read_range, stat,
// list; write: write, write_range, delete, lock_stripe, unlock_stripe) before the engine is
// touched; a refusal returns no data. Until the first SetKeySet every request is refused
// kUnavailable (retryable: the target is still registering). With auth disabled in the key set, requests without a token pass (a token that
// is present is still checked). Then the request's map epoch: one older than the placement
// epoch is refused kUnavailable "stale cluster map ..." (shard_protocol.h).
//
// Borrowed: the engine and the metrics registry must outlive the service. Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

#include "common/metrics.h"
#include "common/thread_pool.h"
#include "engine/engine.h"
#include "protocol/shard_protocol.h"
#include "protocol/capability.h"
#include "transport/rpc.h"

namespace penstock {

class ShardService {
 public:
  ShardService(Engine* engine, MetricsRegistry* metrics, unsigned io_threads);
  // Waits for the requests queued and the asynchronous writes in flight to be answered.
  ~ShardService();

  // RpcHandler: starts the request and returns at once: on the engine (whole-block range
  // writes, reads, above), on the calling thread (stripe leases, which touch only memory), or
  // queued for an I/O thread.
  void Handle(RpcRequest request, Responder respond);

  // Installs the key set from mgmt (registration and every heartbeat).
  void SetKeySet(CapabilityKeySet keys);
  // The cluster's placement epoch from mgmt (registration and every heartbeat): requests
  // whose map epoch is older are refused (see kStaleMapRefusal).
  void SetPlacementEpoch(uint64_t epoch);
  // mgmt declared this target lost (its heartbeats are refused, so it learns no newer epochs):
  // every shard request is refused as placed with a stale map, so a client that still places
  // data here refreshes its map and goes to the targets that took over.
  void SetLost();
  uint64_t placement_epoch() const { return placement_epoch_.load(std::memory_order_relaxed); }

  // Runs one request to completion on the calling thread (used by the pool; exposed for tests).
  RpcReply Execute(const RpcRequest& request);

 private:
  // OK when the request may run (see the class comment).
  Status Authorize(const RpcRequest& request) const;
  // Authorize and CheckEpoch, counting refusals in the metrics.
  Status Admit(const RpcRequest& request);
  // Admit for a request started on the transport thread: when refused, counts it and answers
  // it with the refusal, and returns true.
  bool Refused(const RpcRequest& request, const Responder& respond, std::chrono::steady_clock::time_point start);
  // Counts a served request (ops, latency since `start`, errors) in the metrics.
  void Account(uint16_t opcode, std::chrono::steady_clock::time_point start, const Status& status);
  // A range write of whole 4 KiB blocks (with kWriteIfVersion or not), on the transport's thread:
  // admitted, queued with the engine (Engine::TryWriteRangeAsync) and answered from its
  // completion; true when taken. False (the caller runs Execute on an I/O thread) for any other
  // request and when the engine would have to make space first.
  bool StartWriteRange(const std::shared_ptr<RpcRequest>& request, const Responder& respond);
  // A whole-shard write (kWrite, kRewrite) the same way (Engine::TryWriteAsync); with
  // kWriteReturnReplaced, the shard's prefix is read first (Engine::TryReadRangeAsync) and
  // the write queued from that read's completion. False as StartWriteRange's, and when the
  // read would wait.
  bool StartWrite(const std::shared_ptr<RpcRequest>& request, const Responder& respond);
  // A kWrite's or kRewrite's request, decoded (kRewrite's checked: RewriteHeader).
  struct WholeWrite {
    ShardKey key;
    uint64_t version = 0;
    bool not_older = false;        // kWriteIfNotOlder
    bool return_replaced = false;  // kWriteReturnReplaced
    std::optional<uint64_t> expected;  // kRewrite's expected version
  };
  static Result<WholeWrite> WholeWriteOf(const RpcRequest& request);
  // Queues admitted write `w` with the engine, answering `reply` (or the error) once durable;
  // false when the engine would have to make space first.
  bool QueueWrite(const std::shared_ptr<RpcRequest>& request, const WholeWrite& w, const Responder& respond,
                  std::chrono::steady_clock::time_point start, RpcReply reply);
  // kRead or kReadRange, on the transport's thread: admitted and started with the engine
  // (Engine::TryReadRangeAsync), answered from the read's completion; true when taken. False
  // (the caller runs Execute on an I/O thread) when malformed or when the read would wait.
  bool StartRead(const std::shared_ptr<RpcRequest>& request, const Responder& respond);
  void CountWritten(uint64_t bytes);  // penstock_target_bytes_written_total
  // OK unless the request's map epoch is older than the placement epoch.
  Status CheckEpoch(const RpcRequest& request) const;
  // kDeadlineExceeded for a request that arrived after its deadline (shard_protocol.h).
  Status CheckDeadline(const RpcRequest& request) const;
  // kWrite and kRewrite, blocking (a whole-shard write; kRewrite's over its expected version).
  RpcReply Write(const RpcRequest& request);
  // The reply of a kWriteReturnReplaced write or a kDeleteReturnDeleted delete: what `key`
  // holds before it is written or deleted (shard_protocol.h), read here or (the second form)
  // read already.
  RpcReply ReplacedReply(const ShardKey& key);
  RpcReply ReplacedReply(Result<AlignedBuffer> prefix, const ShardInfo& info);
  // kWriteRange: a partial-shard write (Engine::WriteRange), conditional on the stored version
  // with kWriteIfVersion (see RangeWriteHeader).
  RpcReply WriteRange(const RpcRequest& request);
  // A kRewrite's header, checked (offset 0, kWriteIfVersion, a version above the expected one).
  static Result<RangeWriteHeader> RewriteHeader(const RpcRequest& request);
  RpcReply Read(const RpcRequest& request);
  RpcReply ReadRange(const RpcRequest& request);
  // Reads [offset, offset + length) of `key` (the whole shard with 0, UINT64_MAX) and builds
  // the reply: ShardReplyHeader with the shard's full length and version, the bytes as payload.
  RpcReply ServeRead(const ShardKey& key, uint64_t offset, uint64_t length);
  // The reply to a read: that header and the bytes, or the error (a checksum failure logged).
  RpcReply ReadReply(Result<AlignedBuffer> data, const ShardInfo& info);
  RpcReply Delete(const RpcRequest& request);
  RpcReply Stat(const RpcRequest& request);
  RpcReply List(const RpcRequest& request);
  // kList with kListContainers: the containers this target holds shards of.
  RpcReply ListContainers(const ListRequestHeader& h, uint32_t limit);
  // Stripe write leases (shard_protocol.h), in memory.
  RpcReply Lease(const RpcRequest& request, bool lock);

  Engine* engine_;
  MetricsRegistry* metrics_;
  // Per opcode (index: ShardOp), the series every served request updates; null for unknown ones.
  struct OpMetrics {
    Counter* ops = nullptr;
    Histogram* seconds = nullptr;
  };
  std::array<OpMetrics, 16> op_metrics_{};
  Counter* bytes_written_ = nullptr;  // penstock_target_bytes_written_total
  Counter* bytes_read_ = nullptr;     // penstock_target_bytes_read_total
  struct StripeLease {
    uint64_t owner = 0;
    std::chrono::steady_clock::time_point expiry;
  };
  using StripeId = std::array<uint64_t, 4>;  // container, object hi, object lo, stripe
  // Work that may still call into the service: pool tasks queued or running, and
  // WriteRangeAsync calls the engine has not finished. The destructor waits for none.
  void Submit(std::function<void()> task);  // pool_.Submit, counted
  void Hold();
  void Unhold();
  std::mutex work_mu_;
  std::condition_variable work_cv_;
  uint64_t outstanding_ = 0;  // guarded by work_mu_
  std::mutex leases_mu_;
  std::map<StripeId, StripeLease> leases_;  // guarded by leases_mu_; expired ones swept lazily
  mutable std::mutex keys_mu_;
  std::shared_ptr<const CapabilityKeySet> keys_;  // guarded by keys_mu_; null until SetKeySet
  std::atomic<uint64_t> placement_epoch_{0};
  std::atomic<bool> lost_{false};
  std::atomic<int64_t> last_late_log_s_{INT64_MIN / 2};  // steady seconds of the last late-request log line
  ThreadPool pool_;
};

}  // namespace penstock

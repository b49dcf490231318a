// shard_client.h — shard operations against the targets that placement picks, with the
// retry policy of the client: a retryable failure (target unreachable, restarting, timing
// out) refreshes the cluster map and tries again with backoff until the client's timeout.
//
// Two forms: blocking calls for single shards (heads, deletes, lists), and StartWrite/StartRead
// for the windowed stripe pipelines, whose completions arrive on a transport thread.
// Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "client/capability_cache.h"
#include "client/cluster_view.h"
#include "common/buffer.h"
#include "protocol/shard_protocol.h"
#include "protocol/shard_request.h"
#include "client/rpc_caller.h"

namespace penstock {

// A shard's bytes (or a range of them) and the version stored with it.
struct ShardData {
  AlignedBuffer data;
  uint64_t version = 0;
  uint64_t length = 0;  // the whole shard's length (data may hold a range of it)
  // Bytes the transport placed straight into the reader's StripeDestination instead of `data`
  // (then empty): the first `placed` bytes of the range read.
  uint64_t placed = 0;
};

// Caller memory that a read may place its bytes into directly (zero-copy receive), addressed
// from the start of the range read. Borrow lends the memory for bytes [at, at + length) to one
// transfer (in order; empty: not lendable now, receive into a buffer instead) until Return;
// Zero clears bytes the read found to be zeros. Thread-safe.
class StripeDestination {
 public:
  virtual ~StripeDestination() = default;
  virtual std::vector<std::span<std::byte>> Borrow(uint64_t at, uint64_t length) = 0;
  virtual void Return(uint64_t at, uint64_t length) = 0;
  virtual void Zero(uint64_t at, uint64_t length) = 0;
};

class ShardClient {
 public:
  // `rpc` and `view` are borrowed and must outlive this object.
  ShardClient(RpcCaller* rpc, ClusterView* view, std::chrono::milliseconds retry_budget)
      : rpc_(rpc), view_(view), retry_budget_(retry_budget) {}

  // Attach a capability token from `caps` (borrowed; null: none) to every request. Blocking
  // calls refetch the token and retry once when a target refuses it (kPermissionDenied /
  // kUnauthenticated); asynchronous ones forget it so the caller's next attempt refetches.
  // Set before the first call.
  void set_capabilities(CapabilityCache* caps) { caps_ = caps; }

  // Asks a write for what it replaced (kWriteReturnReplaced), or a delete for what it deleted
  // (kDeleteReturnDeleted): called, before the write's or delete's `done`, with the shard as
  // it was (its first kHeadPrefixBytes, length and version; version 0: there was none) when
  // the target answered it (not by a target from before it).
  using ReplacedFn = std::function<void(ShardData)>;

  Status Write(const WireShardKey& key, std::span<const std::byte> data, uint64_t version);
  // The shard's bytes. kNotFound when the target has no such shard.
  // `version` (optional): the shard's version, as the target's reply tells it (0 when not).
  Result<AlignedBuffer> Read(const WireShardKey& key, uint64_t* version = nullptr);
  // With `deleted`, the target says what it deleted (kDeleteReturnDeleted; called before the
  // return, as StartWrite's `replaced`).
  Status Delete(const WireShardKey& key, ReplacedFn deleted = nullptr);
  // List of one target (all pages), filtered by `flags` (ListFlags). `left_out` (optional):
  // how many shards the target left out as corrupt (ListReplyHeader).
  Result<std::vector<ListEntry>> List(const TargetRef& target, uint64_t container, uint8_t flags,
                                      uint64_t* left_out = nullptr);
  // One page of a listing: at most `limit` entries after `start_after` (none: from the start).
  struct ListPage {
    std::vector<ListEntry> entries;
    uint32_t left_out = 0;  // shards of this page left out as corrupt
  };
  Result<ListPage> List(const TargetRef& target, uint64_t container, uint8_t flags,
                        std::optional<WireShardKey> start_after, uint32_t limit);

  // Asynchronous single attempt; `done` runs on a transport thread. `data` must stay valid
  // until then. The caller retries (see ShouldRetry) from its own thread.
  void StartWrite(const WireShardKey& key, std::span<const std::byte> data, uint64_t version,
                  std::function<void(Status)> done, ReplacedFn replaced = nullptr);
  void StartRead(const WireShardKey& key, std::function<void(Result<AlignedBuffer>)> done);
  // Partial-shard write (kWriteRange): `data` replaces bytes [offset, offset + size) of the
  // shard, whose version becomes `version`. With `expected`, only over that stored version
  // (kWriteIfVersion; 0: only when the shard is absent).
  void StartWriteRange(const WireShardKey& key, uint64_t offset, std::span<const std::byte> data, uint64_t version,
                       std::function<void(Status)> done, std::optional<uint64_t> expected = std::nullopt);
  // Replaces the shard whole with `data` (version `version`) only over stored version
  // `expected` (kRewrite; 0: only when absent): kAborted when a newer one is stored,
  // kFailedPrecondition when an older one or none is.
  void StartRewrite(const WireShardKey& key, std::span<const std::byte> data, uint64_t version, uint64_t expected,
                    std::function<void(Status)> done);
  // Bytes [offset, offset + length) of the shard; shorter when the shard is shorter.
  void StartReadRange(const WireShardKey& key, uint64_t offset, uint64_t length,
                      std::function<void(Result<ShardData>)> done,
                      std::shared_ptr<StripeDestination> into = nullptr);

  // Single attempts at an explicit target (protected stripes: the caller picked the slot).
  // `done` runs on a transport thread; errors name the target. `data` must stay valid until
  // `done` runs. With `only_if_not_older`, the target keeps a stored version newer than
  // `version` and answers kAborted (a concurrent writer won). Reads: `length` UINT64_MAX reads
  // to the end; a shorter shard gives a shorter reply.
  // With `abandon`, the write may be given up before its answer (CallAbandon).
  void StartWriteTo(const TargetRef& target, const WireShardKey& key, std::span<const std::byte> data,
                    uint64_t version, bool only_if_not_older, std::function<void(Status)> done,
                    std::shared_ptr<CallAbandon> abandon = nullptr, ReplacedFn replaced = nullptr);
  // Range write at an explicit target; with `expected`, applied only over that stored version
  // (kWriteIfVersion: kAborted when the stored one is newer, kFailedPrecondition when older).
  void StartWriteRangeTo(const TargetRef& target, const WireShardKey& key, uint64_t offset,
                         std::span<const std::byte> data, uint64_t version, std::optional<uint64_t> expected,
                         std::function<void(Status)> done);
  // With `into`, the reply may be placed into bytes [into_at, into_at + length) of it.
  void StartReadTo(const TargetRef& target, const WireShardKey& key, uint64_t offset, uint64_t length,
                   std::function<void(Result<ShardData>)> done,
                   std::shared_ptr<StripeDestination> into = nullptr, uint64_t into_at = 0);
  // With `if_version`, only when the stored version is that (kDeleteIfVersion).
  void StartDeleteTo(const TargetRef& target, const WireShardKey& key, std::function<void(Status)> done,
                     std::optional<uint64_t> if_version = std::nullopt);
  // Blocking forms of StartWriteTo and StartDeleteTo (not from a transport thread).
  Status WriteTo(const TargetRef& target, const WireShardKey& key, std::span<const std::byte> data,
                 uint64_t version, bool only_if_not_older);
  Status DeleteTo(const TargetRef& target, const WireShardKey& key, std::optional<uint64_t> if_version = std::nullopt);
  // Stripe write leases (shard_protocol.h, kLockStripe): takes or renews the lease of `key`'s
  // stripe for `owner` on `target` (kAborted while another owner holds it), answering whether
  // it was a renewal (kLeaseRenewed); releases it.
  void StartLockTo(const TargetRef& target, const WireShardKey& key, uint64_t owner, std::chrono::milliseconds ttl,
                   std::function<void(Result<bool>)> done);
  void StartUnlockTo(const TargetRef& target, const WireShardKey& key, uint64_t owner, std::function<void(Status)> done);
  // The shard's version and length (ShardData without bytes).
  void StartStatTo(const TargetRef& target, const WireShardKey& key, std::function<void(Result<ShardData>)> done);

  // For pipelines: true when `s` is worth another attempt at `key` and time remains since
  // `first_try`. Sleeps a backoff step and refreshes the map first; false at once when mgmt
  // has marked the target holding `key` down (its data is unavailable until it returns).
  bool ShouldRetry(const Status& s, const WireShardKey& key,
                   std::chrono::steady_clock::time_point first_try, int attempt);

  // Retry policy for callers that run their own attempts: false when `s` is not retryable or
  // the retry budget since `first_try` is spent; else sleeps a backoff step, refreshes the map
  // and returns true.
  bool Backoff(const Status& s, std::chrono::steady_clock::time_point first_try, int attempt) {
    return BackoffAndRefresh(s, first_try, attempt);
  }

  std::chrono::milliseconds retry_budget() const { return retry_budget_; }

  // "target 2 (127.0.0.1:7012)" for `key`, with ", down" when mgmt marks it so.
  std::string Describe(const WireShardKey& key) const;

 private:
  Result<TargetRef> Locate(const WireShardKey& key) const;
  // False when `s` is not retryable or the retry budget is spent; else sleeps a backoff step,
  // refreshes the map and returns true.
  bool BackoffAndRefresh(const Status& s, std::chrono::steady_clock::time_point first_try, int attempt);
  // The header of `r` at this client's map epoch, with its deadline (shard_request.h).
  std::vector<std::byte> Header(ShardRequest r) const;
  std::vector<std::byte> RequestHeader(ShardOp op, const WireShardKey& key, uint64_t version, uint8_t flags = 0) const;
  std::vector<std::byte> RangeHeader(const WireShardKey& key, uint64_t offset, uint64_t length) const;
  // Appends the token for `container` to `header` (nothing without a cache or key).
  Status AttachToken(std::vector<std::byte>& header, uint64_t container);
  // After a refusal of a token: forgets it; true when the status is such a refusal.
  bool TokenRefused(const Status& s, uint64_t container);
  RpcReply CallWithRetry(const WireShardKey& key, ShardOp op, std::span<const std::byte> payload,
                         uint64_t version, uint8_t flags = 0);

  static std::string Name(const TargetRef& t);
  // A write's reply handler: the token check, `replaced` (when asked and answered), `done`.
  std::function<void(RpcReply)> WriteReplied(uint64_t container, std::string name, std::function<void(Status)> done,
                                             ReplacedFn replaced);
  // Calls `replaced` (if set) with what a successful reply `r` says was replaced or deleted.
  static void TellReplaced(const ReplacedFn& replaced, RpcReply& r);

  RpcCaller* rpc_;
  ClusterView* view_;
  std::chrono::milliseconds retry_budget_;
  CapabilityCache* caps_ = nullptr;
};

}  // namespace penstock

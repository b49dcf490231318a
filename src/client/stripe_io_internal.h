// stripe_io_internal.h — what the files implementing StripeIo (stripe_*.cc) share, and no
// other code includes: the state of a protected write in flight and the phrases every error
// message uses.
//
// WriteState is guarded by its own mutex; the functions are pure.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "client/stripe_io.h"

namespace penstock {

// A protected write in flight (WriteSlots): its bytes and how each shard's request ended.
struct StripeIo::WriteState {
  std::mutex mu;
  std::shared_ptr<const AlignedBuffer> data;
  std::vector<std::shared_ptr<AlignedBuffer>> owned;  // parity and zero-padded cells
  std::function<void(Status)> done;
  Redundancy red;                         // the stripe's scheme and write quorum
  uint32_t width = 0, need = 0, pending = 0, ok = 0;  // need: the write quorum
  bool finished = false, timer_armed = false;
  Status first_error, aborted;
  std::map<uint32_t, TargetRef> waiting;  // by shard: sent, not answered
  std::vector<bool> written;              // by shard
  std::vector<uint32_t> targets;          // by shard: the slot's target (0: none, or lost)
  uint64_t version = 0;                   // the version every shard is written with
  std::shared_ptr<StripeKnowledge> known; // updated when the write is decided
  std::shared_ptr<ReplacedHead> replaced; // asked of every shard's target, when set
  uint64_t epoch = 0;                     // of the map the slots were taken from
  // By shard, when set: gives up the shard's request once the write is decided without it
  // (a straggler), so the memory it reads (maybe the caller's) is free at once.
  std::vector<std::shared_ptr<CallAbandon>> give_up;
};

namespace stripe_io_internal {

using Clock = std::chrono::steady_clock;

// What a write asks of its targets for `replaced` (nothing without one).
inline ShardClient::ReplacedFn SawReplaced(const std::shared_ptr<ReplacedHead>& replaced) {
  if (!replaced) return nullptr;
  return [replaced](ShardData d) { replaced->Saw(std::move(d)); };
}

// How errors name a stripe: "stripe 7", or "the head".
inline std::string Ordinal(const WireShardKey& key) {
  return key.stripe == UINT64_MAX ? std::string("the head") : "stripe " + std::to_string(key.stripe);
}

// The answer to a read whose map confirmation failed (StripeIo::ConfirmMap): a stale-map
// refusal, so the read is placed again with the new map.
inline Status MapMovedDuringRead(const WireShardKey& key) {
  return Unavailable(std::string(kStaleMapRefusal) + ": the cluster map changed while " + Ordinal(key) +
                     " was read without every copy's version (one was late, failing or suspected); retry with "
                     "the new map");
}

// (shard index, target) pairs: the slots a request goes to.
using SlotList = std::vector<std::pair<uint32_t, TargetRef>>;

}  // namespace stripe_io_internal
}  // namespace penstock

// stripe_lease.cc — stripe write leases (shard_protocol.h, kLockStripe): taken from the target
// of a stripe's first up slot before writes that must not interleave with another writer's
// (range writes, read-modify-write), renewed by a holder that asks again, released in the
// background.
//
// An unprotected stripe's lease target that is down fails the lock at once. A protected
// stripe's lease target that fails or is late by `straggler` is suspected, so the lease moves
// on to the next up slot and writes go on, degraded.
#include "client/stripe_io.h"

#include <algorithm>

#include "client/stripe_io_internal.h"

namespace penstock {

using stripe_io_internal::Clock;
using stripe_io_internal::Ordinal;

void StripeIo::LockStripe(const StripeGeometry& g, const WireShardKey& key, uint64_t owner, RetryPolicy retry,
                          std::function<void(Result<StripeLease>)> done, int attempt) {
  const WireShardKey k = WithShard(key, 0);
  auto slots = Slots(k, g.red.width());
  if (!slots.ok()) return done(slots.status());
  if (slots->empty()) return done(Unavailable("no target holds " + Ordinal(key)));
  const auto backoff = std::chrono::milliseconds(std::min(100, 5 << std::min(attempt, 5)));  // before a retry
  auto up = std::find_if(slots->begin(), slots->end(), [](const TargetRef& t) { return t.up; });
  if (up == slots->end() && !g.red.protected_()) {  // its one target is down: nothing to wait for
    return done(Unavailable("target " + std::to_string(slots->front().id) + " holding " + Ordinal(key) +
                            " is down; its write lease cannot be taken"));
  }
  if (up == slots->end()) {
    // Every slot down or suspected (late: a lease asked of it again could be granted twice
    // over one token, the first grant's release then ending the second): wait for the map
    // or the suspicion to change, within the policy, as for a transient failure.
    if (Clock::now() + backoff >= retry.until || (retry.wanted && !retry.wanted())) {
      return done(Unavailable("no target of " + Ordinal(key) + " is up to grant its write lease"));
    }
    timer_.After(backoff, [this, g, key, owner, retry = std::move(retry), done = std::move(done), attempt]() mutable {
      LockStripe(g, key, owner, std::move(retry), std::move(done), attempt + 1);
    });
    return;
  }
  TargetRef holder = *up;
  // A protected stripe's lease target that does not answer within `straggler` (a stopped
  // target) is suspected and the lease asked of the next up slot; a grant arriving after that
  // is released.
  auto decided = std::make_shared<std::atomic<bool>>(false);
  if (g.red.protected_()) {
    timer_.After(straggler_, [this, g, key, owner, retry, done, attempt, holder, decided]() mutable {
      if (decided->exchange(true)) return;
      Suspect(holder);
      if (Clock::now() >= retry.until || (retry.wanted && !retry.wanted())) {
        return done(Unavailable("target " + std::to_string(holder.id) + " (" + holder.address +
                                ") did not grant the write lease of " + Ordinal(key) + " within " +
                                std::to_string(straggler_.count()) + " ms"));
      }
      LockStripe(g, key, owner, std::move(retry), std::move(done), attempt + 1);
    });
  }
  shards_->StartLockTo(holder, k, owner, kStripeLeaseTtl,
                       [this, g, key, owner, retry = std::move(retry), done = std::move(done), attempt, backoff,
                        holder, decided, k](Result<bool> granted) mutable {
    if (decided->exchange(true)) {  // the straggler timer went on without this target
      if (granted.ok()) shards_->StartUnlockTo(holder, k, owner, [](Status) {});
      return;
    }
    if (granted.ok()) return done(StripeLease{holder, *granted});
    const Status s = granted.status();
    const bool held = s.code() == StatusCode::kAborted;
    const bool stale = IsStaleMap(s);
    const bool transient = s.retryable() && !held && s.code() != StatusCode::kResourceExhausted;
    // (The holder was up when asked: an unprotected stripe's down target failed at once above.)
    if (!(held || stale || transient) || Clock::now() + backoff >= retry.until || (retry.wanted && !retry.wanted())) {
      return done(held ? s : s.WithContext("taking the write lease of " + Ordinal(key)));
    }
    // A protected stripe's lease moves on to the next up slot when its target fails: writes go
    // on, degraded, while a target is down (this client suspects it for a while).
    if (transient && !stale && g.red.protected_()) Suspect(holder);
    timer_.After(backoff, [this, g, key, owner, retry = std::move(retry), done = std::move(done), attempt, stale]() mutable {
      if (stale) view_->Refresh().IgnoreError();
      LockStripe(g, key, owner, std::move(retry), std::move(done), attempt + 1);
    });
  });
}

void StripeIo::UnlockStripe(const TargetRef& holder, const WireShardKey& key, uint64_t owner) {
  shards_->StartUnlockTo(holder, WithShard(key, 0), owner, [](Status) {});
}

}  // namespace penstock

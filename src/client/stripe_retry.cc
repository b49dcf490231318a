// stripe_retry.cc — running a whole stripe operation (Write, WriteRange, Read, Delete) again
// after a stale-map refusal, or under a RetryPolicy after a transient failure.
//
// A stale map is refreshed from mgmt and the operation placed again at once, up to
// kStaleMapRetries times. A transient failure (kUnavailable, kDeadlineExceeded; never kAborted
// or kResourceExhausted) is waited out with a backoff of 20 ms doubling to 500 ms, while the
// policy allows. Both wait on the timer thread, never on the transport thread that delivered
// the failure.
#include "client/stripe_io.h"

#include <algorithm>

#include "client/stripe_io_internal.h"

namespace penstock {

using stripe_io_internal::Clock;

namespace {
const Status& StatusOf(const Status& s) { return s; }
Status StatusOf(const Result<ShardData>& r) { return r.status(); }
}  // namespace

StripeIo::Retries StripeIo::RetriesFor(const StripeGeometry& g, const WireShardKey& key,
                                       std::optional<RetryPolicy> policy) const {
  Retries st;
  st.stale_left = kStaleMapRetries;
  st.policy = std::move(policy);
  if (st.policy && !g.red.protected_()) {
    // The one target holding an unprotected stripe is down for mgmt: nothing to wait for.
    st.hopeless = [this, key] {
      auto slots = Slots(key, 1);
      return slots.ok() && !slots->empty() && !(*slots)[0].up;
    };
  }
  return st;
}

template <typename R>
void StripeIo::WithRetries(std::shared_ptr<std::function<void(std::function<void(R)>)>> attempt,
                           std::function<void(R)> done, Retries st) {
  (*attempt)([this, attempt, done = std::move(done), st = std::move(st)](R r) mutable {
    const Status s = StatusOf(r);
    if (s.ok()) return done(std::move(r));
    std::chrono::milliseconds delay{0};
    // Under a policy, no stale-map retry starts after its `until` either (a head write must
    // not start after its put's commit window, see WriteHead).
    const bool stale = IsStaleMap(s) && st.stale_left > 0 && !(st.policy && Clock::now() >= st.policy->until);
    if (stale) {
      --st.stale_left;
      stats_.stale_map_retries++;
    } else if (st.policy && s.retryable() && s.code() != StatusCode::kAborted &&
               s.code() != StatusCode::kResourceExhausted && !(st.hopeless && st.hopeless())) {
      delay = std::chrono::milliseconds(std::min(500, 20 << std::min(st.attempt, 5)));
      if ((st.policy->wanted && !st.policy->wanted()) || Clock::now() >= st.policy->until - delay) {
        return done(std::move(r));
      }
      stats_.transient_retries++;
    } else {
      return done(std::move(r));
    }
    ++st.attempt;
    // A stale map is refreshed from mgmt at once (not on the transport thread that delivered the
    // refusal). A transient failure only waits: the map watch keeps the view current, and a
    // call to an unreachable mgmt must not hold up the timer thread (straggler timers).
    timer_.After(delay, [this, attempt, done = std::move(done), st = std::move(st), stale]() mutable {
      if (stale) view_->Refresh().IgnoreError();
      WithRetries<R>(attempt, std::move(done), std::move(st));
    });
  });
}

// The operations that retry (stripe_write*.cc, stripe_read.cc, stripe_delete.cc) use these.
template void StripeIo::WithRetries<Status>(std::shared_ptr<std::function<void(std::function<void(Status)>)>>,
                                            std::function<void(Status)>, Retries);
template void StripeIo::WithRetries<Result<ShardData>>(
    std::shared_ptr<std::function<void(std::function<void(Result<ShardData>)>)>>,
    std::function<void(Result<ShardData>)>, Retries);

}  // namespace penstock

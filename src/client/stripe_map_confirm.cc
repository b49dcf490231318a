// stripe_map_confirm.cc — how a read that did not learn every copy's version still answers
// safely: it waits for mgmt to confirm that the map it was placed with is still current.
//
// A copy that missed a write is marked in mgmt's map before the write is acknowledged, so a
// map unchanged since the read was placed means the read found no copy an acknowledged write
// missed. Checked says whether a read knows a copy's version; Answer delivers a read's result,
// through ConfirmMap when needed. ConfirmMap batches its callers: one fetch at a time, on a
// thread of its own, serving every caller that came before it began.
#include "client/stripe_io.h"

#include "client/stripe_io_internal.h"

namespace penstock {

using stripe_io_internal::MapMovedDuringRead;

bool StripeIo::Checked(const TargetRef& t, const std::optional<Result<ShardData>>& reply) const {
  if (t.id == 0 || t.lost) return true;    // no target: nothing there
  if (!t.up) return !Suspected(t.id);      // down or recovering in the map; suspected: not asked
  return reply && (reply->ok() || reply->status().code() == StatusCode::kNotFound);
}

void StripeIo::Answer(uint64_t placed_at, const WireShardKey& key, bool confirm,
                      std::function<void(Result<ShardData>)> done, Result<ShardData> r) {
  if (!confirm || !r.ok()) return done(std::move(r));
  auto held = std::make_shared<Result<ShardData>>(std::move(r));
  ConfirmMap(placed_at, [held, key, done = std::move(done)](bool current) mutable {
    if (current) return done(std::move(*held));
    done(MapMovedDuringRead(key));
  });
}

void StripeIo::ConfirmMap(uint64_t epoch, std::function<void(bool)> done) {
  {
    std::lock_guard<std::mutex> lock(confirm_mu_);
    if (!confirm_stop_) {
      confirms_.push_back({epoch, std::move(done)});
      if (!confirm_thread_.joinable()) confirm_thread_ = std::thread([this] { ConfirmLoop(); });
      confirm_cv_.notify_one();
      return;
    }
  }
  done(false);
}

void StripeIo::ConfirmLoop() {
  std::unique_lock<std::mutex> lock(confirm_mu_);
  for (;;) {
    confirm_cv_.wait(lock, [this] { return confirm_stop_ || !confirms_.empty(); });
    // Those waiting now all came before this fetch begins.
    std::vector<Confirmation> batch;
    batch.swap(confirms_);
    const bool stop = confirm_stop_;
    lock.unlock();
    const bool fetched = !stop && view_->Refresh().ok();
    const uint64_t now = view_->epoch();
    stats_.map_confirmations++;
    for (Confirmation& c : batch) c.done(fetched && now == c.epoch);
    lock.lock();
    if (stop) {
      batch.swap(confirms_);
      lock.unlock();
      for (Confirmation& c : batch) c.done(false);
      return;
    }
  }
}

}  // namespace penstock

// stripe_io.cc — StripeIo's construction and teardown, and the machinery its operations share:
// the slots of a stripe as this client sees them (with the targets it suspects of being late
// and those it reported missing writes), erasure coders, and read repair's write-back.
//
// The operations themselves live in files of their own: stripe_write*.cc, stripe_read*.cc,
// stripe_delete.cc, stripe_heads.cc, stripe_lease.cc; the earlier-placement fallback in
// stripe_earlier.cc; retries in stripe_retry.cc; the calls to mgmt in stripe_missed_reports.cc
// and stripe_map_confirm.cc.
#include "client/stripe_io.h"

#include "client/stripe_io_internal.h"
#include "common/log.h"
#include "protocol/object_head.h"

namespace penstock {

using stripe_io_internal::Clock;

StripeIo::StripeIo(ShardClient* shards, ClusterView* view, std::chrono::milliseconds straggler)
    : shards_(shards), view_(view), straggler_(straggler) {}

StripeIo::~StripeIo() {
  {
    std::lock_guard<std::mutex> lock(confirm_mu_);
    confirm_stop_ = true;
  }
  confirm_cv_.notify_all();
  if (confirm_thread_.joinable()) confirm_thread_.join();
  // Reports queued for mgmt run now, while the timer their callers may retry on still runs.
  std::unique_ptr<ThreadPool> reports;
  {
    std::lock_guard<std::mutex> lock(reports_mu_);
    reports.swap(reports_);
  }
  reports.reset();
  // Read repairs still in flight get a moment to land (a CLI get exits right after its read).
  std::unique_lock<std::mutex> lock(repairs_mu_);
  repairs_cv_.wait_for(lock, std::chrono::seconds(10), [this] { return repairs_in_flight_ == 0; });
}

void StripeIo::WriteBack(const TargetRef& t, const WireShardKey& key, std::shared_ptr<AlignedBuffer> bytes,
                         uint64_t version) {
  stats_.read_repairs++;
  {
    std::lock_guard<std::mutex> lock(repairs_mu_);
    ++repairs_in_flight_;
  }
  shards_->StartWriteTo(t, key, bytes->span(), version, true, [this, bytes](Status s) {
    if (!s.ok()) PS_LOG_WARN("read repair failed: {}", s.ToString());
    std::lock_guard<std::mutex> lock(repairs_mu_);
    if (--repairs_in_flight_ == 0) repairs_cv_.notify_all();
  });
}

Result<std::vector<TargetRef>> StripeIo::Slots(const WireShardKey& key, size_t width) const {
  auto slots = view_->LocateSlots(PlacementKey{key.container, key.object_hi, key.object_lo, key.stripe}, width);
  if (!slots.ok() || width <= 1) return slots;  // unprotected: the one target is all there is
  std::lock_guard<std::mutex> lock(suspect_mu_);
  if (suspect_.empty()) return slots;
  const auto now = Clock::now();
  for (TargetRef& t : *slots) {
    auto it = suspect_.find(t.id);
    if (it != suspect_.end() && it->second > now) t.up = false;
  }
  return slots;
}

std::chrono::milliseconds StripeIo::commit_window() const { return PutCommitWindow(view_->orphan_grace()); }

Result<std::vector<TargetRef>> StripeIo::ReadSlots(const WireShardKey& key, size_t width) const {
  auto slots = Slots(key, width);
  if (!slots.ok() || width <= 1 || read_recovering_) return slots;
  {
    // Targets this client reported and its map does not show yet: as the map will.
    std::lock_guard<std::mutex> lock(suspect_mu_);
    if (!reported_.empty()) {
      const uint64_t epoch = view_->epoch();
      std::erase_if(reported_, [&](const auto& r) { return r.second <= epoch; });
      for (TargetRef& t : *slots) {
        if (reported_.count({t.id, key.container})) t.recovering_for.push_back(key.container);
      }
    }
  }
  for (TargetRef& t : *slots) {
    if (t.RecoveringFor(key.container)) t.up = false;
  }
  return slots;
}

bool StripeIo::Suspected(uint32_t id) const {
  std::lock_guard<std::mutex> lock(suspect_mu_);
  auto it = suspect_.find(id);
  return it != suspect_.end() && it->second > Clock::now();
}

void StripeIo::Suspect(const TargetRef& t) {
  if (t.id == 0) return;
  std::lock_guard<std::mutex> lock(suspect_mu_);
  auto& until = suspect_[t.id];
  if (until < Clock::now()) {
    PS_LOG_WARN("target {} ({}) did not answer within {} ms; treating it as down for {} s", t.id, t.address,
                straggler_.count(), kSuspectFor.count());
  }
  until = Clock::now() + kSuspectFor;
}

ErasureCoder& StripeIo::Coder(const Redundancy& red) {
  std::lock_guard<std::mutex> lock(coders_mu_);
  auto& c = coders_[{red.k, red.m}];
  if (!c) c = std::make_unique<ErasureCoder>(red.k, red.m);
  return *c;
}

}  // namespace penstock

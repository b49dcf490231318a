#include "client/stripe_io.h"

#include <algorithm>
#include <cstring>

#include "common/await.h"
#include "common/log.h"
#include "protocol/object_head.h"

namespace penstock {

using Clock = std::chrono::steady_clock;

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

void StripeIo::ReportMissedThen(const WireShardKey& key, const std::vector<uint32_t>& targets,
                                const std::vector<bool>& written, std::function<void(Status)> done) {
  if (!report_) return done(OkStatus());
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < targets.size() && i < written.size(); ++i) {
    // The slots the write went to, whatever this client's view says of them now (down,
    // recovering, moved by a new map): mgmt's may be newer, and a repair pass that listed
    // before this write must not clear the target.
    if (!written[i] && targets[i] != 0) ids.push_back(targets[i]);
  }
  if (ids.empty()) return done(OkStatus());
  const uint64_t container = key.container;
  auto answer = [this, container, ids, done = std::move(done)](const Result<uint64_t>& epoch) {
    if (!epoch.ok()) {
      return done(epoch.status().WithContext("recording with mgmt that a write missed target " +
                                             std::to_string(ids.front())));
    }
    if (*epoch > view_->epoch()) {  // until the map says so, this client knows better than its map
      std::lock_guard<std::mutex> lock(suspect_mu_);
      for (uint32_t id : ids) {
        uint64_t& at = reported_[{id, container}];
        at = std::max(at, *epoch);
      }
    }
    done(OkStatus());
  };
  bool start;
  {
    std::lock_guard<std::mutex> lock(missed_mu_);
    MissedReports& q = missed_[container];
    q.targets.insert(ids.begin(), ids.end());
    q.waiting.push_back(std::move(answer));
    start = !q.in_flight;
    q.in_flight = true;
  }
  if (start) RunBlocking([this, container] { SendMissed(container); });
}

void StripeIo::SendMissed(uint64_t container) {
  // A few rounds per task, then the container goes to the back of the pool's queue: under a
  // steady stream of degraded writes a round always finds new misses, and one task looping
  // for good would hold one of the pool's threads from every other container's reports.
  for (int round = 0;; ++round) {
    if (round > 0 && round % kMissedRoundsPerTask == 0) {
      std::lock_guard<std::mutex> lock(reports_mu_);
      if (reports_ != nullptr) return reports_->Submit([this, container] { SendMissed(container); });
    }
    std::vector<uint32_t> ids;
    std::vector<std::function<void(const Result<uint64_t>&)>> waiting;
    {
      std::lock_guard<std::mutex> lock(missed_mu_);
      auto it = missed_.find(container);
      if (it->second.waiting.empty()) {
        missed_.erase(it);
        return;
      }
      ids.assign(it->second.targets.begin(), it->second.targets.end());
      it->second.targets.clear();
      waiting.swap(it->second.waiting);
    }
    stats_.missed_reports++;
    const Result<uint64_t> epoch = report_(container, ids);  // after every miss it answers for
    for (auto& answer : waiting) answer(epoch);
  }
}

void StripeIo::RunBlocking(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(reports_mu_);
    if (reports_ != nullptr) return reports_->Submit(std::move(fn));
  }
  fn();  // no pool (none set up, or tearing down): nothing else is left to wait on
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

namespace {

// Asks `from[next]`, then the others, until one answers other than kNotFound; `not_found`
// when none does.
void AskEarlier(std::shared_ptr<std::vector<TargetRef>> from, size_t next,
                std::function<void(const TargetRef&, std::function<void(Result<ShardData>)>)> ask,
                Status not_found, std::function<void(Result<ShardData>)> done) {
  if (next >= from->size()) return done(std::move(not_found));
  const TargetRef t = (*from)[next];
  ask(t, [from, next, ask, not_found = std::move(not_found), done = std::move(done)](Result<ShardData> r) mutable {
    if (r.ok() || r.status().code() != StatusCode::kNotFound) return done(std::move(r));
    AskEarlier(std::move(from), next + 1, std::move(ask), std::move(not_found), std::move(done));
  });
}

std::string Ordinal(const WireShardKey& key) {
  return key.stripe == UINT64_MAX ? std::string("the head") : "stripe " + std::to_string(key.stripe);
}

// Deleting shard `index` of `key` where an earlier placement put it (on target `id`) answered
// `s`: a failure is logged and kept in `first` (the first one); kNotFound is none.
void NoteEarlierDelete(uint32_t index, const WireShardKey& key, uint32_t id, const Status& s, Status& first) {
  if (s.ok() || s.code() == StatusCode::kNotFound) return;
  PS_LOG_WARN("deleting shard {} of {} where an earlier placement put it (target {}): {}", index, Ordinal(key), id,
              s.ToString());
  if (first.ok()) first = s;
}

// What a delete that must reach every copy answers when one where an earlier placement put it
// failed with `first`: its code when that is not retryable, else kUnavailable (retry).
Status EarlierDeleteFailed(const WireShardKey& key, const Status& first) {
  if (!first.retryable()) return first.WithContext("deleting " + Ordinal(key) + " where an earlier placement put it");
  return Unavailable("shard of " + Ordinal(key) + " where placement put it before a target joined (not moved yet) " +
                     "could not be deleted: " + first.ToString() + "; the delete must reach every copy; retry");
}

// What a delete that must reach every copy answers when target `t`, where an earlier placement
// put shard `shard` of `key`, is down.
Status EarlierHolderDown(const TargetRef& t, uint32_t shard, const WireShardKey& key) {
  return Unavailable("target " + std::to_string(t.id) + ", where placement put shard " + std::to_string(shard) +
                     " of " + Ordinal(key) + " before a target joined (not moved yet), is down; the delete must " +
                     "reach every copy; retry when it is back");
}

// The answer to a read whose map confirmation failed (StripeIo::ConfirmMap): a stale-map
// refusal, so the read is placed again with the new map.
Status MapMovedDuringRead(const WireShardKey& key) {
  return Unavailable(std::string(kStaleMapRefusal) + ": the cluster map changed while " + Ordinal(key) +
                     " was read without every copy's version (one was late, failing or suspected); retry with "
                     "the new map");
}

// A blocking latch for the head operations.
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Writes

struct StripeIo::WriteState {
  std::mutex mu;
  std::shared_ptr<const AlignedBuffer> data;
  std::vector<std::shared_ptr<AlignedBuffer>> owned;  // parity and zero-padded cells
  std::function<void(Status)> done;
  uint32_t width = 0, need = 0, pending = 0, ok = 0;
  bool finished = false, timer_armed = false;
  Status first_error, aborted;
  std::map<uint32_t, TargetRef> waiting;  // by shard: sent, not answered
  std::vector<bool> written;              // by shard
  std::vector<uint32_t> targets;          // by shard: the slot's target (0: none, or lost)
  uint64_t version = 0;                   // the version every shard is written with
  std::shared_ptr<StripeKnowledge> known; // updated when the write is decided
  uint64_t epoch = 0;                     // of the map the slots were taken from
};

namespace {
const Status& StatusOf(const Status& s) { return s; }
Status StatusOf(const Result<ShardData>& r) { return r.status(); }
}  // namespace

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

void StripeIo::Write(const StripeGeometry& g, const WireShardKey& key, std::shared_ptr<const AlignedBuffer> data,
                     uint64_t version, std::function<void(Status)> done, std::optional<RetryPolicy> retry,
                     std::shared_ptr<StripeKnowledge> known) {
  auto attempt = std::make_shared<std::function<void(std::function<void(Status)>)>>(
      [this, g, key, data = std::move(data), version, known = std::move(known)](std::function<void(Status)> cb) {
        WriteOnce(g, key, data, version, std::move(cb), known);
      });
  WithRetries<Status>(std::move(attempt), std::move(done), RetriesFor(g, key, std::move(retry)));
}

void StripeIo::WriteOnce(const StripeGeometry& g, const WireShardKey& key, std::shared_ptr<const AlignedBuffer> data,
                         uint64_t version, std::function<void(Status)> done, std::shared_ptr<StripeKnowledge> known) {
  if (!g.red.protected_()) {
    shards_->StartWrite(key, data->span(), version, [data, done = std::move(done)](Status s) { done(std::move(s)); });
    return;
  }
  auto st = std::make_shared<WriteState>();
  st->data = data;
  st->done = std::move(done);
  st->version = version;
  st->known = std::move(known);
  const std::vector<std::span<const std::byte>> shard_bytes = EncodeShards(g, data->span(), st->owned);
  WriteSlots(g, key, st, [this, key, shard_bytes, version](uint32_t i, const TargetRef& t, std::function<void(Status)> cb) {
    shards_->StartWriteTo(t, WithShard(key, i), shard_bytes[i], version, true, std::move(cb));
  });
}

void StripeIo::WriteRange(const StripeGeometry& g, const WireShardKey& key, uint64_t begin,
                          std::shared_ptr<const AlignedBuffer> data, uint64_t version, std::function<void(Status)> done,
                          std::optional<RetryPolicy> retry, std::shared_ptr<StripeKnowledge> known) {
  auto attempt = std::make_shared<std::function<void(std::function<void(Status)>)>>(
      [this, g, key, begin, data = std::move(data), version, known = std::move(known)](std::function<void(Status)> cb) {
        WriteRangeOnce(g, key, begin, data, version, std::move(cb), known);
      });
  WithRetries<Status>(std::move(attempt), std::move(done), RetriesFor(g, key, std::move(retry)));
}

void StripeIo::WriteRangeOnce(const StripeGeometry& g, const WireShardKey& key, uint64_t begin,
                              std::shared_ptr<const AlignedBuffer> data, uint64_t version,
                              std::function<void(Status)> done, std::shared_ptr<StripeKnowledge> known) {
  if (!g.red.protected_()) {
    auto patch = [this, key, begin, data, version](std::function<void(Status)> done) {
      shards_->StartWriteRange(key, begin, data->span(), version,
                               [data, done = std::move(done)](Status s) { done(std::move(s)); });
    };
    if (!view_->has_earlier_placements()) return patch(std::move(done));
    // A target joined: a stripe its target does not hold yet may be where an earlier placement
    // put it, and a patch would hide the rest of it. It is moved first (as repair would: copied
    // at its version, unless the target has a newer one by then), then patched on that same
    // target. Unprotected stripes take no lease: each writer's patch still applies on its own.
    auto at = view_->Locate(PlacementKey{key.container, key.object_hi, key.object_lo, key.stripe});
    if (!at.ok()) return done(at.status());
    auto patch_at = [this, key, begin, data, version, at = *at](std::function<void(Status)> done) {
      shards_->StartWriteRangeTo(at, key, begin, data->span(), version, std::nullopt,
                                 [data, done = std::move(done)](Status s) { done(std::move(s)); });
    };
    shards_->StartStatTo(*at, key, [this, key, at = *at, patch_at, done = std::move(done)](Result<ShardData> r) mutable {
      if (r.ok()) return patch_at(std::move(done));
      if (r.status().code() != StatusCode::kNotFound) return done(r.status());
      auto source = std::make_shared<TargetRef>();  // the earlier holder that answered
      AskEarlierHolders(
          1, key, r.status(),
          [this, key, source](const TargetRef& t, std::function<void(Result<ShardData>)> cb) {
            shards_->StartReadTo(t, key, 0, UINT64_MAX, [t, source, cb = std::move(cb)](Result<ShardData> got) {
              if (got.ok()) *source = t;
              cb(std::move(got));
            });
          },
          [this, key, at, source, patch_at, done = std::move(done)](Result<ShardData> old) mutable {
            if (!old.ok()) {
              if (old.status().code() == StatusCode::kNotFound) return patch_at(std::move(done));  // a new stripe
              return done(old.status());
            }
            auto held = std::make_shared<ShardData>(std::move(*old));
            shards_->StartWriteTo(at, key, held->data.span(), held->version, /*only_if_not_older=*/true,
                                  [this, key, at, source, held, patch_at, done = std::move(done)](Status w) mutable {
              // kAborted: the target holds a newer version already.
              if (!w.ok() && w.code() != StatusCode::kAborted) return done(std::move(w));
              if (!w.ok()) return patch_at(std::move(done));
              // A delete (a truncate) that removed the source after it was read would miss
              // this copy: then it goes too (at its version), and the patch lands on nothing.
              shards_->StartStatTo(*source, key, [this, key, at, held, patch_at, done = std::move(done)](
                                                     Result<ShardData> src) mutable {
                if (src.ok() || src.status().code() != StatusCode::kNotFound) return patch_at(std::move(done));
                shards_->StartDeleteTo(at, key, [patch_at, done = std::move(done)](Status) mutable {
                  patch_at(std::move(done));
                }, held->version);
              });
            });
          });
    });
    return;
  }
  if (g.red.kind == Redundancy::Kind::kErasure) {
    return WriteEcRange(g, key, begin, data, version, std::move(done), std::move(known));
  }
  // Every copy is patched only over the newest version among the copies that may be read: one
  // that missed a write refuses (kFailedPrecondition), counts as a missed shard and is repaired
  // whole. So first the versions (kStat, no data), unless the lease holder knows them.
  auto patch = [this, g, key, begin, data, requested_version = version, known](uint64_t expected,
                                                                               std::function<void(Status)> done) {
    auto st = std::make_shared<WriteState>();
    st->data = data;
    st->done = std::move(done);
    st->version = NewerThan(requested_version, expected);  // see WriteEcRange
    st->known = known;
    WriteSlots(g, key, st, [this, key, begin, data, version = st->version, expected](
                               uint32_t i, const TargetRef& t, std::function<void(Status)> cb) {
      shards_->StartWriteRangeTo(t, WithShard(key, i), begin, data->span(), version, expected, std::move(cb));
    });
  };
  if (known && known->uniform_version != 0 && known->epoch == view_->epoch()) {
    stats_.known_version_patches++;
    return patch(known->uniform_version, [this, g, key, begin, data, version, known,
                                          done = std::move(done)](Status s) mutable {
      // Every copy refused the known version: the stripe changed without the lease (a truncate
      // deleted it). Asked again, the copies say what they hold now.
      if (s.code() != StatusCode::kFailedPrecondition) return done(std::move(s));
      *known = {};
      WriteRangeOnce(g, key, begin, data, version, std::move(done), known);
    });
  }
  auto slots = ReadSlots(key, g.red.width());
  if (!slots.ok()) return done(slots.status());
  struct Versions {
    std::mutex mu;
    size_t pending = 0;
    bool decided = false;  // after_stats ran (all answered, or the straggler timer fired)
    uint64_t newest = 0;
    bool some_missing = false;  // a copy answered kNotFound
    Status error;
    std::map<uint32_t, TargetRef> waiting;
  };
  auto v = std::make_shared<Versions>();
  std::vector<std::pair<uint32_t, TargetRef>> asks;
  for (uint32_t i = 0; i < slots->size(); ++i) {
    if ((*slots)[i].up) asks.emplace_back(i, (*slots)[i]);
  }
  if (asks.empty()) return done(Unavailable("no target of " + Ordinal(key) + " is up"));
  v->pending = asks.size();
  for (auto& [i, t] : asks) v->waiting[i] = t;
  auto after_stats = [this, key, v, patch, done = std::move(done)]() {
    if (!v->error.ok()) return done(v->error.WithContext("reading the versions of " + Ordinal(key)));
    if (v->some_missing && view_->has_earlier_placements()) {
      // A slot does not hold it, but a target joined since it may have been written: that copy
      // may be where an earlier placement put it, and a patch would hide the rest of it (or be
      // refused and count as missed). Read and written whole instead.
      return done(FailedPrecondition(std::string(kWholeUnitNeeded) + " for " + Ordinal(key) +
                                     ": a slot does not hold it, and a target joined since it may have been written"));
    }
    patch(v->newest, done);
  };
  // A copy late by `straggler` (a stopped target) is suspected and the attempt fails retryable:
  // the next one goes on without it, degraded, as a whole write would.
  timer_.After(straggler_, [this, v, key, after_stats] {
    std::unique_lock<std::mutex> lock(v->mu);
    if (v->decided) return;
    v->decided = true;
    for (auto& [i, t] : v->waiting) Suspect(t);
    v->error = Unavailable("a copy of " + Ordinal(key) + " did not tell its version within " +
                           std::to_string(straggler_.count()) + " ms");
    lock.unlock();
    after_stats();
  });
  for (auto& [i, t] : asks) {
    shards_->StartStatTo(t, WithShard(key, i), [this, v, i = i, t = t, after_stats](Result<ShardData> r) {
      std::unique_lock<std::mutex> lock(v->mu);
      if (v->decided) return;
      v->waiting.erase(i);
      if (r.ok()) {
        v->newest = std::max(v->newest, r->version);
      } else if (r.status().code() == StatusCode::kNotFound) {
        v->some_missing = true;
      } else if (v->error.ok()) {
        // Unknown version: the write cannot tell whether this copy is the newest. A target that
        // fails is suspected so the next attempt goes on without it (degraded).
        if (r.status().retryable()) Suspect(t);
        v->error = r.status();
      }
      if (--v->pending > 0) return;
      v->decided = true;
      lock.unlock();
      after_stats();
    });
  }
}

void StripeIo::WriteEcRange(const StripeGeometry& g, const WireShardKey& key, uint64_t begin,
                            std::shared_ptr<const AlignedBuffer> data, uint64_t version,
                            std::function<void(Status)> done, std::shared_ptr<StripeKnowledge> known) {
  const uint64_t c = g.cell, end = begin + data->size();
  const uint32_t cell = static_cast<uint32_t>(begin / c);
  auto whole = [&](const std::string& why) {
    return done(FailedPrecondition(std::string(kWholeUnitNeeded) + " for " + Ordinal(key) + ": " + why));
  };
  if (data->empty() || (end - 1) / c != cell) return whole("the write spans several cells");
  auto slots = ReadSlots(key, g.red.width());
  if (!slots.ok()) return done(slots.status());
  for (const TargetRef& t : *slots) {
    if (!t.up) return whole("a target is not up (a degraded write reads and rewrites the unit)");
  }
  // The old bytes of the range in the written cell and in every parity cell, and the version
  // and length of every cell.
  const uint64_t lo = begin - uint64_t{cell} * c, len = data->size();
  struct Old {
    std::mutex mu;
    size_t pending = 0;
    bool decided = false;  // patch ran (all answered, or the straggler timer fired)
    std::vector<std::optional<ShardData>> cells;
    Status error;
  };
  auto old = std::make_shared<Old>();
  const uint32_t width = g.red.width();
  old->cells.resize(width);
  old->pending = width;
  auto patch = [this, g, key, cell, lo, len, data, requested_version = version, old, c, known,
                done = std::move(done)]() {
    std::optional<uint64_t> v;
    for (uint32_t i = 0; i < old->cells.size() && old->error.ok(); ++i) {
      const auto& d = old->cells[i];
      if (!d || d->length != c || (v && d->version != *v) ||
          ((i == cell || i >= g.red.k) && d->data.size() != len)) {
        old->error = FailedPrecondition(std::string(kWholeUnitNeeded) + " for " + Ordinal(key) +
                                        ": its cells are not all full and of one version");
      }
      if (d) v = d->version;
    }
    if (!old->error.ok()) return done(old->error);
    // New parity = old parity + the contribution of (old data XOR new data).
    auto st = std::make_shared<WriteState>();
    st->data = data;
    st->done = done;
    auto delta = std::make_shared<AlignedBuffer>(len);
    const std::byte* before = old->cells[cell]->data.data();
    for (uint64_t j = 0; j < len; ++j) delta->data()[j] = before[j] ^ data->data()[j];
    std::vector<std::byte*> parity;
    for (uint32_t i = g.red.k; i < g.red.width(); ++i) {
      st->owned.push_back(std::make_shared<AlignedBuffer>(AlignedBuffer::CopyOf(old->cells[i]->data.span())));
      parity.push_back(st->owned.back()->data());
    }
    Coder(g.red).Update(len, cell, delta->data(), parity);
    const uint64_t expected = *v;
    // Above the version patched, whatever this client's clock says: a lower one would make the
    // copies that missed the patch look newer (NewerThan).
    const uint64_t version = NewerThan(requested_version, expected);
    st->version = version;
    st->known = known;
    WriteSlots(g, key, st, [this, g, key, cell, lo, data, st, version, expected](uint32_t i, const TargetRef& t,
                                                                                std::function<void(Status)> cb) {
      // Every cell takes the new version; the untouched data cells only that (no bytes).
      std::span<const std::byte> bytes;
      if (i == cell) bytes = data->span();
      if (i >= g.red.k) bytes = st->owned[i - g.red.k]->span();
      shards_->StartWriteRangeTo(t, WithShard(key, i), bytes.empty() ? 0 : lo, bytes, version, expected, std::move(cb));
    });
  };
  // A cell late by `straggler` (a stopped target): its target is suspected and the unit is
  // read and rewritten instead (degraded).
  timer_.After(straggler_, [this, old, key, slots = *slots, patch] {
    std::unique_lock<std::mutex> lock(old->mu);
    if (old->decided) return;
    old->decided = true;
    for (uint32_t i = 0; i < old->cells.size(); ++i) {
      if (!old->cells[i]) Suspect(slots[i]);
    }
    old->error = FailedPrecondition(std::string(kWholeUnitNeeded) + " for " + Ordinal(key) +
                                    ": a cell did not answer within " + std::to_string(straggler_.count()) + " ms");
    lock.unlock();
    patch();
  });
  for (uint32_t i = 0; i < width; ++i) {
    auto got = [old, i, patch](Result<ShardData> r) {
      std::unique_lock<std::mutex> lock(old->mu);
      if (old->decided) return;
      if (r.ok()) {
        old->cells[i] = std::move(*r);
      } else if (old->error.ok()) {
        old->error = r.status().code() == StatusCode::kNotFound
                         ? FailedPrecondition(std::string(kWholeUnitNeeded) + ": a cell is missing")
                         : r.status();
      }
      if (--old->pending > 0) return;
      old->decided = true;
      lock.unlock();
      patch();
    };
    if (i == cell || i >= g.red.k) {
      shards_->StartReadTo((*slots)[i], WithShard(key, i), lo, len, std::move(got));
    } else {
      shards_->StartStatTo((*slots)[i], WithShard(key, i), std::move(got));
    }
  }
}

void StripeIo::WriteSlots(const StripeGeometry& g, const WireShardKey& key, std::shared_ptr<WriteState> st,
                          const ShardSender& send) {
  if (st->known) st->known->uniform_version = 0;  // until this write is decided
  st->epoch = view_->epoch();  // before the slots: a map changing between gives an older epoch
  auto slots = Slots(key, g.red.width());
  if (!slots.ok()) return st->done(slots.status());
  st->width = g.red.width();
  st->need = g.red.k;
  st->written.assign(st->width, false);
  st->targets.assign(st->width, 0);
  for (uint32_t i = 0; i < st->width && i < slots->size(); ++i) {
    if (!(*slots)[i].lost) st->targets[i] = (*slots)[i].id;
  }

  std::vector<std::pair<uint32_t, TargetRef>> sends;
  for (uint32_t i = 0; i < st->width; ++i) {
    if (i >= slots->size()) {
      if (st->first_error.ok()) st->first_error = Unavailable("no target for shard " + std::to_string(i));
      continue;
    }
    const TargetRef& t = (*slots)[i];
    if (!t.up) {
      if (st->first_error.ok()) {
        st->first_error = t.id == 0 ? Unavailable("no usable target is left for shard " + std::to_string(i))
                                    : Unavailable("target " + std::to_string(t.id) + " (" + t.address + ") is down");
      }
      continue;
    }
    sends.emplace_back(i, t);
  }
  if (sends.size() < st->need) {
    return st->done(Unavailable("only " + std::to_string(sends.size()) + " of the " + std::to_string(st->width) +
                                " targets of " + Ordinal(key) + " are up; " + g.red.ToString() + " needs " +
                                std::to_string(st->need) + ": " + st->first_error.message()));
  }
  st->pending = static_cast<uint32_t>(sends.size());
  auto check = [this, st, key](std::unique_lock<std::mutex>& lock) {
    if (st->finished) return;
    Status result;
    bool finish = false;
    if (!st->aborted.ok()) {
      finish = true;
      result = st->aborted;
    } else if (st->ok + st->pending < st->need) {
      finish = true;
      result = st->first_error.WithContext("wrote " + std::to_string(st->ok) + " of " + std::to_string(st->width) +
                                           " shards of " + Ordinal(key) + ", " + std::to_string(st->need) +
                                           " needed");
    } else if (st->pending == 0) {
      finish = true;
    } else if (st->ok >= st->need && !st->timer_armed) {
      st->timer_armed = true;
      timer_.After(straggler_, [this, st, key] {
        std::unique_lock<std::mutex> l(st->mu);
        if (st->finished) return;
        st->finished = true;
        for (auto& [i, t] : st->waiting) Suspect(t);
        stats_.degraded_writes++;
        auto done = std::move(st->done);
        auto written = st->written;
        l.unlock();
        ReportMissedThen(key, st->targets, written, std::move(done));
      });
    }
    if (!finish) return;
    st->finished = true;
    if (result.ok() && st->ok < st->width) stats_.degraded_writes++;
    if (result.ok() && st->ok == st->width && st->known) *st->known = {st->version, st->epoch};
    auto done = std::move(st->done);
    auto written = st->written;
    lock.unlock();
    if (result.ok() && st->ok < st->width) return ReportMissedThen(key, st->targets, written, std::move(done));
    done(result);
  };
  for (auto& [i, t] : sends) st->waiting[i] = t;
  for (auto& [i, t] : sends) {
    send(i, t, [st, check, i = i](Status s) {
      std::unique_lock<std::mutex> lock(st->mu);
      --st->pending;
      st->waiting.erase(i);
      if (s.ok()) {
        ++st->ok;
        st->written[i] = true;
      } else if (s.code() == StatusCode::kAborted || IsStaleMap(s)) {
        st->aborted = s;  // a newer version won, or the slots were wrong: no degraded ack
      } else if (st->first_error.ok()) {
        st->first_error = s;
      }
      check(lock);
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Reads

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

void StripeIo::Read(const StripeGeometry& g, const WireShardKey& key, uint64_t begin, uint64_t length,
                    std::function<void(Result<ShardData>)> done, std::optional<RetryPolicy> retry,
                    std::shared_ptr<StripeDestination> into) {
  auto attempt = std::make_shared<std::function<void(std::function<void(Result<ShardData>)>)>>(
      [this, g, key, begin, length, into = std::move(into)](std::function<void(Result<ShardData>)> cb) {
        ReadOnce(g, key, begin, length, std::move(cb), into);
      });
  WithRetries<Result<ShardData>>(std::move(attempt), std::move(done), RetriesFor(g, key, std::move(retry)));
}

void StripeIo::ReadOnce(const StripeGeometry& g, const WireShardKey& key, uint64_t begin, uint64_t length,
                        std::function<void(Result<ShardData>)> done, std::shared_ptr<StripeDestination> into) {
  switch (g.red.kind) {
    case Redundancy::Kind::kNone:
      if (view_->has_earlier_placements()) {
        // Where an earlier placement put it, when its target does not hold it (not moved yet).
        return shards_->StartReadRange(key, begin, length, [this, key, begin, length, into, done = std::move(done)](
                                                               Result<ShardData> r) mutable {
          if (r.ok() || r.status().code() != StatusCode::kNotFound) return done(std::move(r));
          auto ask = [this, key, begin, length, into](const TargetRef& t, std::function<void(Result<ShardData>)> cb) {
            shards_->StartReadTo(t, key, begin, length, std::move(cb), into);
          };
          AskEarlierHolders(1, key, r.status(), std::move(ask), std::move(done));
        }, into);
      }
      return shards_->StartReadRange(key, begin, length, std::move(done), std::move(into));
    case Redundancy::Kind::kReplicate: return ReadReplica(g, key, begin, length, std::move(done), std::move(into));
    case Redundancy::Kind::kErasure: return ReadEc(g, key, begin, length, std::move(done), std::move(into));
  }
}

struct StripeIo::ReadState {
  std::mutex mu;
  std::function<void(Result<ShardData>)> done;
  bool finished = false;
  bool degraded = false;  // the ec fast path gave up
  uint32_t pending = 0;
  std::vector<std::optional<Result<ShardData>>> replies;
};

namespace {

using SlotList = std::vector<std::pair<uint32_t, TargetRef>>;  // (shard index, target)

}  // namespace

void StripeIo::ReadReplica(const StripeGeometry& g, const WireShardKey& key, uint64_t begin, uint64_t length,
                           std::function<void(Result<ShardData>)> done, std::shared_ptr<StripeDestination> into) {
  const uint64_t placed_at = view_->epoch();  // before the slots: a newer map only fails the check
  auto slots = ReadSlots(key, g.red.width());
  if (!slots.ok()) return done(slots.status());
  // Up slots first, in slot order; down ones last (the map may be behind), except those a
  // write to this container is known to have missed: their copy may be old, and with no
  // other copy answering nothing would show it.
  SlotList order;
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t i = 0; i < slots->size(); ++i) {
      const TargetRef& t = (*slots)[i];
      if (t.up != (pass == 0)) continue;
      if (!t.up && !read_recovering_ && t.MissedWritesIn(key.container)) continue;
      order.emplace_back(i, t);
    }
  }
  if (order.empty()) return done(Unavailable("no target holds " + Ordinal(key)));
  // Phase 1: the data from the first replica, and the versions of the other up ones (a replica
  // that missed a degraded write is older and must not answer alone).
  struct State {
    std::mutex mu;
    std::function<void(Result<ShardData>)> done;
    SlotList order;
    std::optional<Result<ShardData>> data;
    std::vector<std::optional<Result<ShardData>>> stats;  // by order index
    uint32_t pending = 0;
    bool decided = false;
  };
  auto st = std::make_shared<State>();
  st->done = std::move(done);
  st->order = std::move(order);
  st->stats.resize(st->order.size());
  std::vector<size_t> stat_idx;
  for (size_t i = 1; i < st->order.size(); ++i) {
    if (st->order[i].second.up) stat_idx.push_back(i);
  }
  st->pending = static_cast<uint32_t>(1 + stat_idx.size());
  auto decide = [this, st, g, key, begin, length, placed_at](std::unique_lock<std::mutex>& lock, bool data_late) {
    if (st->decided) return;
    st->decided = true;
    // Whether the copies told their versions (or that they have none): every one this client
    // sees up, and it does not suspect the others (late before: their versions were not
    // asked). The data's own copy must be up too. If not, a copy that missed a write and
    // whose mark this client's map does not have yet could answer alone: the answer waits for
    // mgmt to confirm the map it was placed with. (Copies the map shows down are not asked:
    // see docs/architecture.md.)
    bool all_checked = st->order[0].second.up;
    for (size_t i = 1; i < st->stats.size() && all_checked; ++i) {
      const TargetRef& t = st->order[i].second;
      if (!t.up) {
        all_checked = !Suspected(t.id);
        continue;
      }
      auto& r = st->stats[i];
      all_checked = r && (r->ok() || r->status().code() == StatusCode::kNotFound);
    }
    auto finish = [this, key, placed_at, all_checked](std::function<void(Result<ShardData>)> done, Result<ShardData> r) {
      Answer(placed_at, key, !all_checked, std::move(done), std::move(r));
    };
    uint64_t best_version = 0;
    size_t best = SIZE_MAX;
    if (st->data && st->data->ok()) {
      best_version = (*st->data)->version;
      best = 0;
    }
    for (size_t i = 1; i < st->stats.size(); ++i) {
      auto& r = st->stats[i];
      if (r && r->ok() && (best == SIZE_MAX || (*r)->version > best_version)) {
        best_version = (*r)->version;
        best = i;
      }
    }
    auto done = std::move(st->done);
    if (best == 0) {
      auto data = std::move(*st->data);
      lock.unlock();
      return finish(std::move(done), std::move(data));
    }
    // Another replica is newer, or the first failed or is late: try the others, newest first.
    SlotList chain;
    std::vector<std::pair<uint32_t, TargetRef>> corrupt;
    if (st->data && !st->data->ok() && st->data->status().code() == StatusCode::kDataLoss) {
      corrupt.push_back(st->order[0]);
    }
    std::vector<size_t> rest;
    for (size_t i = 1; i < st->order.size(); ++i) rest.push_back(i);
    auto ver = [&](size_t i) -> uint64_t {
      auto& r = st->stats[i];
      return r && r->ok() ? (*r)->version : 0;
    };
    std::stable_sort(rest.begin(), rest.end(), [&](size_t a, size_t b) { return ver(a) > ver(b); });
    for (size_t i : rest) chain.push_back(st->order[i]);
    const bool first_failed_for_good = st->data && !st->data->ok();
    if (!first_failed_for_good || data_late) chain.push_back(st->order[0]);
    lock.unlock();
    ReadReplicaChain(g.red.width(), key, begin, length, std::move(chain), std::move(corrupt), best_version,
                     [finish, done = std::move(done)](Result<ShardData> r) mutable { finish(std::move(done), std::move(r)); });
  };
  timer_.After(straggler_, [this, st, decide] {
    std::unique_lock<std::mutex> l(st->mu);
    if (st->decided) return;
    if (!st->data) Suspect(st->order[0].second);
    for (size_t i = 1; i < st->stats.size(); ++i) {
      if (!st->stats[i] && st->order[i].second.up) Suspect(st->order[i].second);
    }
    decide(l, !st->data.has_value());
  });
  ReadShardTo(g.red.width(), st->order[0].second, WithShard(key, st->order[0].first), begin, length,
                       [st, decide](Result<ShardData> r) {
                         std::unique_lock<std::mutex> l(st->mu);
                         st->data = std::move(r);
                         if (--st->pending == 0) decide(l, false);
                       },
                       std::move(into));
  for (size_t i : stat_idx) {
    StatShardTo(g.red.width(), st->order[i].second, WithShard(key, st->order[i].first), [st, i, decide](Result<ShardData> r) {
      std::unique_lock<std::mutex> l(st->mu);
      st->stats[i] = std::move(r);
      if (--st->pending == 0) decide(l, false);
    });
  }
}

void StripeIo::ReadReplicaChain(size_t width, const WireShardKey& key, uint64_t begin, uint64_t length,
                                std::vector<std::pair<uint32_t, TargetRef>> order,
                                std::vector<std::pair<uint32_t, TargetRef>> corrupt, uint64_t min_version,
                                std::function<void(Result<ShardData>)> done) {
  struct State {
    std::mutex mu;
    std::function<void(Result<ShardData>)> done;
    SlotList order;
    size_t next = 0;
    uint32_t pending = 0;
    bool finished = false, all_not_found = true;
    Status first_error;
    SlotList corrupt;  // replicas that failed their checksum
  };
  auto st = std::make_shared<State>();
  st->done = std::move(done);
  st->order = std::move(order);
  st->corrupt = std::move(corrupt);
  if (!st->corrupt.empty()) st->all_not_found = false;
  if (st->order.empty()) {
    return st->done(DataLoss("no replica of " + Ordinal(key) + " is readable"));
  }
  // Tries the next replica; a late one (straggler) makes the next start too, and the first
  // good answer wins.
  auto attempt = std::make_shared<std::function<void()>>();
  *attempt = [this, st, width, key, begin, length, min_version, weak = std::weak_ptr<std::function<void()>>(attempt)] {
    auto self = weak.lock();
    std::unique_lock<std::mutex> lock(st->mu);
    if (st->finished || st->next >= st->order.size()) return;
    const auto [shard, target] = st->order[st->next++];
    ++st->pending;
    lock.unlock();
    // This attempt's answer came (under st->mu): a replica that failed fast is not late.
    auto answered = std::make_shared<bool>(false);
    timer_.After(straggler_, [this, st, self, target, answered] {
      std::unique_lock<std::mutex> l(st->mu);
      if (st->finished || *answered) return;
      l.unlock();
      Suspect(target);
      (*self)();
    });
    ReadShardTo(width, target, WithShard(key, shard), begin, length,
                         [this, st, self, shard, target, key, begin, min_version, answered](Result<ShardData> r) {
      std::unique_lock<std::mutex> l(st->mu);
      *answered = true;
      --st->pending;
      if (st->finished) return;
      if (r.ok() && r->version < min_version) {
        // Older than a copy known to exist (it missed a write): not an answer, on its own.
        r = Unavailable("replica " + std::to_string(shard) + " of " + Ordinal(key) + " on target " +
                        std::to_string(target.id) + " holds version " + std::to_string(r->version) +
                        ", older than one another replica holds; retry");
      }
      if (r.ok()) {
        st->finished = true;
        auto corrupt = st->corrupt;
        auto done = std::move(st->done);
        l.unlock();
        // Read repair: a replica that failed its checksum gets this good copy back.
        if (!corrupt.empty() && begin == 0 && r->data.size() == r->length) {
          auto good = std::make_shared<AlignedBuffer>(AlignedBuffer::CopyOf(r->data.span()));
          for (auto& [c, t] : corrupt) {
            PS_LOG_WARN("read repair: rewriting corrupt replica {} of {} on target {}", c, Ordinal(key), t.id);
            WriteBack(t, WithShard(key, c), good, r->version);
          }
        }
        done(std::move(r));
        return;
      }
      if (r.status().code() == StatusCode::kDataLoss) st->corrupt.emplace_back(shard, target);
      if (r.status().code() != StatusCode::kNotFound) st->all_not_found = false;
      if (st->first_error.ok() || st->first_error.code() == StatusCode::kNotFound) st->first_error = r.status();
      const bool more = st->next < st->order.size();
      if (!more && st->pending == 0) {
        st->finished = true;
        auto done = std::move(st->done);
        Status e = st->all_not_found ? r.status()
                                     : st->first_error.WithContext("no replica of " + Ordinal(key) + " could be read");
        l.unlock();
        done(e);
        return;
      }
      l.unlock();
      if (more) (*self)();
    });
  };
  (*attempt)();
}

void StripeIo::ReadEc(const StripeGeometry& g, const WireShardKey& key, uint64_t begin, uint64_t length,
                      std::function<void(Result<ShardData>)> done, std::shared_ptr<StripeDestination> into) {
  // The stripe's data is its K data cells: a read past them ends there.
  const uint64_t data_bytes = g.cell * g.red.k;
  length = begin >= data_bytes ? 0 : std::min(length, data_bytes - begin);
  if (length == 0) return done(ShardData{});
  const uint64_t placed_at = view_->epoch();  // before the slots: a newer map only fails the check
  auto slots = ReadSlots(key, g.red.width());
  if (!slots.ok()) return done(slots.status());
  const uint64_t end = begin + length;
  const uint32_t j0 = static_cast<uint32_t>(begin / g.cell), j1 = static_cast<uint32_t>((end - 1) / g.cell);
  for (uint32_t j = j0; j <= j1; ++j) {
    if (j >= slots->size() || !(*slots)[j].up) return ReadEcDegraded(g, key, begin, length, std::move(done));
  }
  auto placed_slots = std::make_shared<const std::vector<TargetRef>>(*slots);
  auto st = std::make_shared<ReadState>();
  st->done = std::move(done);
  const uint32_t cells = j1 - j0 + 1;
  st->replies.resize(g.red.width());  // data cells j0..j1 at their index; versions of the others
  std::vector<uint32_t> stat;
  for (uint32_t i = 0; i < g.red.width() && i < slots->size(); ++i) {
    if ((i < j0 || i > j1) && (*slots)[i].up) stat.push_back(i);
  }
  st->pending = cells + static_cast<uint32_t>(stat.size());
  auto give_up = [this, st, g, key, begin, length](std::unique_lock<std::mutex>& lock) {
    st->degraded = true;
    auto done = std::move(st->done);
    lock.unlock();
    ReadEcDegraded(g, key, begin, length, std::move(done));
  };
  // With every data cell in: usable when they agree, at least K shards hold that version, and no
  // other shard holds a newer one (a cell that missed a degraded write is older).
  // A cell placed into `into` counts only when every cell was (the others' bytes would have
  // to be assembled around them).
  // As for replica reads: an answer without every cell's version (one late or failing, or
  // suspected and not asked) stands only once mgmt confirms the map it was placed with (a cell
  // that missed a write is marked there before the write is acknowledged).
  auto decide = [this, st, g, key, j0, j1, begin, length, give_up, into, placed_at,
                 placed_slots](std::unique_lock<std::mutex>& lock) {
    // Only cells of unknown version enough to hold a newer version (K) need it: fewer could not
    // have made a write acknowledged without a known cell showing it.
    uint32_t unknown = 0;
    for (uint32_t i = 0; i < placed_slots->size() && i < st->replies.size(); ++i) {
      unknown += !Checked((*placed_slots)[i], st->replies[i]);
    }
    const bool all_checked = unknown < g.red.k;
    uint64_t version = 0;
    uint32_t placed = 0;
    for (uint32_t j = j0; j <= j1; ++j) {
      auto& rep = st->replies[j];
      if (!rep || !rep->ok()) return give_up(lock);
      if (j == j0) version = (*rep)->version;
      if ((*rep)->version != version) return give_up(lock);
      if (into != nullptr && ((*rep)->placed > 0 || (*rep)->data.empty())) ++placed;
    }
    if (placed != 0 && placed != j1 - j0 + 1) return give_up(lock);
    uint32_t holding = 0;  // shards known to hold that version
    for (uint32_t i = 0; i < st->replies.size(); ++i) {
      auto& rep = st->replies[i];
      if ((i < j0 || i > j1) && rep && rep->ok() && (*rep)->version > version) return give_up(lock);
      if (rep && rep->ok() && (*rep)->version == version) ++holding;
    }
    // Fewer than K: a write that failed part way (never acknowledged) left these cells, or the
    // versions are not all in; the degraded read takes the newest version K shards hold.
    if (holding < g.red.k) return give_up(lock);
    st->finished = true;
    ShardData out;
    out.version = version;
    out.length = length;
    if (placed != 0) {
      // Every cell is in `into`; what a short cell did not fill reads as zeros.
      for (uint32_t c = j0; c <= j1; ++c) {
        const uint64_t at = std::max(begin, c * g.cell) - begin;
        const uint64_t want = std::min(begin + length, (c + 1) * g.cell) - begin - at;
        const uint64_t got = (*st->replies[c])->placed;
        if (got < want) into->Zero(at + got, want - got);
      }
      out.placed = length;
      auto done = std::move(st->done);
      lock.unlock();
      return Answer(placed_at, key, !all_checked, std::move(done), std::move(out));
    }
    out.data = AlignedBuffer(length);
    std::memset(out.data.data(), 0, length);
    for (uint32_t c = j0; c <= j1; ++c) {
      const uint64_t at = std::max(begin, c * g.cell) - begin;
      const auto& d = (*st->replies[c])->data;
      std::memcpy(out.data.data() + at, d.data(), std::min<uint64_t>(d.size(), length - at));
    }
    auto done = std::move(st->done);
    lock.unlock();
    Answer(placed_at, key, !all_checked, std::move(done), std::move(out));
  };
  timer_.After(straggler_, [this, st, j0, j1, give_up, decide, placed_slots] {
    std::unique_lock<std::mutex> l(st->mu);
    if (st->finished || st->degraded) return;
    for (uint32_t i = 0; i < st->replies.size() && i < placed_slots->size(); ++i) {
      if (!st->replies[i] && (*placed_slots)[i].up) Suspect((*placed_slots)[i]);
    }
    for (uint32_t j = j0; j <= j1; ++j) {
      if (!st->replies[j]) return give_up(l);  // a data cell is late
    }
    decide(l);  // only versions of other shards are late: go with what is known
  });
  auto on_reply = [st, decide](uint32_t i, Result<ShardData> r) {
    std::unique_lock<std::mutex> l(st->mu);
    st->replies[i] = std::move(r);
    if (--st->pending > 0 || st->degraded || st->finished) return;
    decide(l);
  };
  for (uint32_t j = j0; j <= j1; ++j) {
    const uint64_t cb = std::max(begin, j * g.cell) - j * g.cell;
    const uint64_t ce = std::min(end, (j + 1) * g.cell) - j * g.cell;
    ReadShardTo(g.red.width(), (*slots)[j], WithShard(key, j), cb, ce - cb,
                         [on_reply, j](Result<ShardData> r) { on_reply(j, std::move(r)); }, into,
                         j * g.cell + cb - begin);
  }
  for (uint32_t i : stat) {
    StatShardTo(g.red.width(), (*slots)[i], WithShard(key, i), [on_reply, i](Result<ShardData> r) { on_reply(i, std::move(r)); });
  }
}

void StripeIo::ReadEcDegraded(const StripeGeometry& g, const WireShardKey& key, uint64_t begin, uint64_t length,
                              std::function<void(Result<ShardData>)> done) {
  stats_.degraded_reads++;
  const uint64_t placed_at = view_->epoch();  // before the slots: a newer map only fails the check
  auto slots = ReadSlots(key, g.red.width());
  if (!slots.ok()) return done(slots.status());
  const uint64_t end = begin + length;
  const uint32_t j0 = static_cast<uint32_t>(begin / g.cell), j1 = static_cast<uint32_t>((end - 1) / g.cell);
  const uint64_t lo = j0 == j1 ? begin - j0 * g.cell : 0;
  const uint64_t hi = j0 == j1 ? end - j0 * g.cell : g.cell;
  const uint32_t width = g.red.width();
  auto st = std::make_shared<ReadState>();
  st->done = std::move(done);
  st->replies.resize(width);
  std::vector<uint32_t> send;
  for (uint32_t i = 0; i < width && i < slots->size(); ++i) {
    if ((*slots)[i].up) send.push_back(i);
  }
  for (uint32_t i = 0; i < width; ++i) {
    if (std::find(send.begin(), send.end(), i) == send.end()) {
      st->replies[i] = Result<ShardData>(Unavailable("target of shard " + std::to_string(i) + " is down"));
    }
  }
  st->pending = static_cast<uint32_t>(send.size());
  auto slots_copy = std::make_shared<std::vector<TargetRef>>(*slots);

  // Decides with the replies at hand; `final` when no more will come, `late` when the straggler
  // timer ran out.
  auto decide = [this, st, g, key, begin, length, lo, hi, j0, j1, width, slots_copy, placed_at](
                    std::unique_lock<std::mutex>& lock, bool final, bool late = false) {
    if (st->finished) return;
    std::map<uint64_t, uint32_t> by_version;
    bool all_not_found = true, any_unavailable = false;
    uint32_t absent = 0;  // shards their slots (and earlier placements) do not hold
    Status first_error;
    for (auto& r : st->replies) {
      if (!r) continue;
      if (r->ok()) {
        by_version[(*r)->version]++;
        all_not_found = false;
      } else {
        if (r->status().code() == StatusCode::kNotFound) ++absent;
        if (r->status().code() != StatusCode::kNotFound) all_not_found = false;
        if (r->status().code() == StatusCode::kUnavailable || r->status().code() == StatusCode::kDeadlineExceeded) {
          any_unavailable = true;
        }
        if (first_error.ok() && r->status().code() != StatusCode::kNotFound) first_error = r->status();
      }
    }
    uint64_t version = 0;
    uint32_t have = 0, newer = 0;
    for (auto it = by_version.rbegin(); it != by_version.rend(); ++it) {
      if (it->second >= g.red.k) {
        version = it->first;
        have = it->second;
        break;
      }
      newer += it->second;
    }
    // Before the straggler timer, an older version that K cells hold waits while the replies to
    // come could still give a newer one K (with M >= K, the cells that missed a write can be K).
    if (have > 0 && !final && !late && newer + st->pending >= g.red.k) return;
    if (have == 0) {
      if (!final) return;
      st->finished = true;
      auto done = std::move(st->done);
      lock.unlock();
      // No shard anywhere, or none readable and more than M known absent: fewer than K could
      // exist, so no write of it was acknowledged (a sparse stripe, read while a target is down).
      if (all_not_found || (by_version.empty() && absent > width - g.red.k)) {
        return done(NotFound(Ordinal(key) + " has no shards"));
      }
      uint32_t ok = 0;
      for (auto& [v, n] : by_version) ok = std::max(ok, n);
      std::string msg = "only " + std::to_string(ok) + " of the " + std::to_string(width) + " shards of " +
                        Ordinal(key) + " are readable and agree; " + std::to_string(g.red.k) + " are needed" +
                        (first_error.ok() ? std::string() : ": " + first_error.ToString());
      return done(any_unavailable ? Unavailable(msg) : DataLoss(msg));
    }
    st->finished = true;
    // Decided without every cell's version (late, failing, suspected): as in ReadEc, the answer
    // waits for mgmt to confirm the map (with M >= K, the cells that missed an acknowledged
    // write can be K and answer first).
    uint32_t unknown = 0;
    for (uint32_t i = 0; i < slots_copy->size() && i < width; ++i) {
      unknown += !Checked((*slots_copy)[i], st->replies[i]);
    }
    const bool all_checked = newer + unknown < g.red.k;  // no newer version K cells could hold
    // Cells of the chosen version, padded to the range; rebuild the touched data cells missing.
    const uint64_t span = hi - lo;
    std::vector<AlignedBuffer> padded(width);
    std::vector<const std::byte*> cells(width, nullptr);
    for (uint32_t i = 0; i < width; ++i) {
      auto& r = st->replies[i];
      if (!r || !r->ok() || (*r)->version != version) continue;
      padded[i] = AlignedBuffer(span);
      std::memset(padded[i].data(), 0, span);
      std::memcpy(padded[i].data(), (*r)->data.data(), std::min<uint64_t>((*r)->data.size(), span));
      cells[i] = padded[i].data();
    }
    // Shards to rebuild: touched data cells, and any cell that failed its checksum when the
    // whole shard was read (read repair).
    uint64_t shard_len = 0;
    for (auto& r : st->replies) {
      if (r && r->ok() && (*r)->version == version) shard_len = (*r)->length;
    }
    const bool whole = lo == 0 && hi >= shard_len;
    std::vector<uint32_t> want;
    std::vector<uint32_t> repair;
    for (uint32_t i = 0; i < width; ++i) {
      if (cells[i] != nullptr) continue;
      const bool corrupt = st->replies[i] && !st->replies[i]->ok() &&
                           st->replies[i]->status().code() == StatusCode::kDataLoss;
      if (corrupt && whole) repair.push_back(i);
      if ((i >= j0 && i <= j1) || (corrupt && whole)) want.push_back(i);
    }
    std::vector<AlignedBuffer> rebuilt(want.size());
    std::vector<std::byte*> out_ptrs;
    for (auto& b : rebuilt) {
      b = AlignedBuffer(span);
      out_ptrs.push_back(b.data());
    }
    Status s = Coder(g.red).Reconstruct(span, cells, want, out_ptrs);
    auto done = std::move(st->done);
    lock.unlock();
    if (!s.ok()) return done(s.WithContext(Ordinal(key)));
    auto cell_data = [&](uint32_t i) -> const std::byte* {
      if (cells[i]) return cells[i];
      for (size_t w = 0; w < want.size(); ++w) {
        if (want[w] == i) return rebuilt[w].data();
      }
      return nullptr;
    };
    // (Not before the map is confirmed: the version may turn out stale; repair rewrites it.)
    for (uint32_t i : all_checked ? repair : std::vector<uint32_t>{}) {
      auto bytes = std::make_shared<AlignedBuffer>(AlignedBuffer::CopyOf({cell_data(i), shard_len}));
      PS_LOG_WARN("read repair: rewriting corrupt shard {} of {} on target {}", i, Ordinal(key), (*slots_copy)[i].id);
      WriteBack((*slots_copy)[i], WithShard(key, i), bytes, version);
    }
    ShardData out;
    out.version = version;
    out.length = length;
    out.data = AlignedBuffer(length);
    for (uint32_t c = j0; c <= j1; ++c) {
      const uint64_t cb = std::max(begin, c * g.cell) - c * g.cell;  // within the cell
      const uint64_t ce = std::min(begin + length, (c + 1) * g.cell) - c * g.cell;
      std::memcpy(out.data.data() + (c * g.cell + cb - begin), cell_data(c) + (cb - lo), ce - cb);
    }
    Answer(placed_at, key, !all_checked, std::move(done), std::move(out));
  };
  if (send.empty()) {
    std::unique_lock<std::mutex> l(st->mu);
    return decide(l, true);
  }
  timer_.After(straggler_, [this, st, decide, send, slots_copy] {
    std::unique_lock<std::mutex> l(st->mu);
    for (uint32_t i : send) {
      if (!st->replies[i]) Suspect((*slots_copy)[i]);
    }
    decide(l, false, /*late=*/true);
  });
  for (uint32_t i : send) {
    ReadShardTo(width, (*slots)[i], WithShard(key, i), lo, hi - lo, [st, i, decide](Result<ShardData> r) {
      std::unique_lock<std::mutex> l(st->mu);
      st->replies[i] = std::move(r);
      --st->pending;
      decide(l, st->pending == 0);
    });
  }
}

void StripeIo::AskEarlierHolders(size_t width, const WireShardKey& key, Status not_found, ShardAsk ask,
                                 std::function<void(Result<ShardData>)> done) {
  auto from = std::make_shared<std::vector<TargetRef>>();
  for (const auto& [index, e] : EarlierCopies(width, key)) {
    if (index != key.shard) continue;
    if (!e.up && not_found.code() == StatusCode::kNotFound) {
      // It may be there: not found is not an answer while it cannot be asked.
      not_found = Unavailable("target " + std::to_string(e.id) + ", where placement put shard " +
                              std::to_string(key.shard) + " of " + Ordinal(key) +
                              " before a target joined (repair has not moved it yet), is down");
    }
    if (e.up) from->push_back(e);
  }
  if (from->empty()) return done(std::move(not_found));
  // The slot answered (not found) in time; the earlier holders get half the straggler delay
  // between them. One that is late is suspected and the shard counts as unavailable, so the
  // caller's straggler timer does not blame the slot's own target for the wait.
  struct Once {
    std::mutex mu;
    bool fired = false;
    std::optional<TargetRef> asking;
    std::function<void(Result<ShardData>)> done;
  };
  auto once = std::make_shared<Once>();
  once->done = std::move(done);
  auto finish = [once](Result<ShardData> r) {
    std::function<void(Result<ShardData>)> d;
    {
      std::lock_guard<std::mutex> l(once->mu);
      if (once->fired) return;
      once->fired = true;
      d = std::move(once->done);
    }
    d(std::move(r));
  };
  auto tracked = [once, ask = std::move(ask)](const TargetRef& at, std::function<void(Result<ShardData>)> cb) {
    {
      std::lock_guard<std::mutex> l(once->mu);
      once->asking = at;
    }
    ask(at, std::move(cb));
  };
  timer_.After(straggler_ / 2, [this, once, finish, key] {
    std::optional<TargetRef> late;
    {
      std::lock_guard<std::mutex> l(once->mu);
      if (once->fired) return;
      late = once->asking;
    }
    if (late) Suspect(*late);
    finish(Unavailable("target " + std::to_string(late ? late->id : 0) + ", where placement put shard " +
                       std::to_string(key.shard) + " of " + Ordinal(key) + " before a target joined, did not answer " +
                       "within " + std::to_string((straggler_ / 2).count()) + " ms"));
  });
  AskEarlier(std::move(from), 0, std::move(tracked), std::move(not_found), std::move(finish));
}

void StripeIo::AskWithFallback(size_t width, const TargetRef& t, const WireShardKey& key, ShardAsk ask,
                               std::function<void(Result<ShardData>)> done) {
  if (!view_->has_earlier_placements()) return ask(t, std::move(done));
  ask(t, [this, width, key, ask, done = std::move(done)](Result<ShardData> r) mutable {
    if (r.ok() || r.status().code() != StatusCode::kNotFound) return done(std::move(r));
    AskEarlierHolders(width, key, r.status(), std::move(ask), std::move(done));
  });
}

void StripeIo::ReadShardTo(size_t width, const TargetRef& t, const WireShardKey& key, uint64_t begin,
                           uint64_t length, std::function<void(Result<ShardData>)> done,
                           std::shared_ptr<StripeDestination> into, uint64_t into_at) {
  AskWithFallback(width, t, key,
                  [this, key, begin, length, into, into_at](const TargetRef& at, std::function<void(Result<ShardData>)> cb) {
                    shards_->StartReadTo(at, key, begin, length, std::move(cb), into, into_at);
                  },
                  std::move(done));
}

void StripeIo::StatShardTo(size_t width, const TargetRef& t, const WireShardKey& key,
                           std::function<void(Result<ShardData>)> done) {
  AskWithFallback(width, t, key,
                  [this, key](const TargetRef& at, std::function<void(Result<ShardData>)> cb) {
                    shards_->StartStatTo(at, key, std::move(cb));
                  },
                  std::move(done));
}

std::vector<std::pair<uint32_t, TargetRef>> StripeIo::EarlierCopies(size_t width, const WireShardKey& key) const {
  std::vector<std::pair<uint32_t, TargetRef>> out;
  if (!view_->has_earlier_placements()) return out;
  const auto placed = view_->EarlierSlots(PlacementKey{key.container, key.object_hi, key.object_lo, key.stripe}, width);
  const auto now = view_->LocateSlots(PlacementKey{key.container, key.object_hi, key.object_lo, key.stripe}, width);
  std::vector<uint32_t> indexes;
  if (width <= 1) {
    indexes.push_back(key.shard);
  } else {
    for (uint32_t i = 0; i < width; ++i) indexes.push_back(i);
  }
  for (uint32_t index : indexes) {
    const uint32_t slot = width <= 1 ? 0 : index;
    std::vector<uint32_t> seen;
    if (now.ok() && slot < now->size()) seen.push_back((*now)[slot].id);
    for (const auto& slots : placed) {
      if (slot >= slots.size()) continue;
      const TargetRef& e = slots[slot];
      if (e.id == 0 || e.lost || std::find(seen.begin(), seen.end(), e.id) != seen.end()) continue;
      seen.push_back(e.id);
      out.emplace_back(index, e);
    }
  }
  return out;
}

Result<bool> StripeIo::DeleteEarlier(size_t width, const WireShardKey& key, bool everywhere) {
  bool deleted = false;
  Status first;
  for (const auto& [index, t] : EarlierCopies(width, key)) {
    Status s = !t.up ? Unavailable("target " + std::to_string(t.id) + " is down")
                     : shards_->DeleteTo(t, WithShard(key, index));
    deleted |= s.ok();
    NoteEarlierDelete(index, key, t.id, s, first);
  }
  if (everywhere && !first.ok()) return EarlierDeleteFailed(key, first);
  return deleted;
}

// ---------------------------------------------------------------------------------------------
// Deletes

void StripeIo::Delete(const StripeGeometry& g, const WireShardKey& key, std::function<void(Status)> done,
                      bool everywhere) {
  auto attempt = std::make_shared<std::function<void(std::function<void(Status)>)>>(
      [this, g, key, everywhere](std::function<void(Status)> cb) { DeleteOnce(g, key, everywhere, std::move(cb)); });
  Retries retries = RetriesFor(g, key, std::nullopt);
  if (!g.red.protected_()) {
    // The one copy's transient failures are waited out within the client's retry budget, on
    // the timer thread (as the blocking ShardClient calls did), unless its target, or a target
    // still holding an earlier placement's copy, is down for mgmt: nothing to wait for.
    retries = RetriesFor(g, key, RetryPolicy{Clock::now() + shards_->retry_budget(), {}});
    retries.hopeless = [this, key, everywhere, slot_down = std::move(retries.hopeless)] {
      if (slot_down()) return true;
      if (!everywhere) return false;  // a best-effort delete leaves a down earlier holder be
      const auto earlier = EarlierCopies(1, key);
      return std::any_of(earlier.begin(), earlier.end(), [](const auto& e) { return !e.second.up; });
    };
  }
  WithRetries<Status>(std::move(attempt), std::move(done), std::move(retries));
}

void StripeIo::DeleteOnce(const StripeGeometry& g, const WireShardKey& key, bool everywhere,
                          std::function<void(Status)> done) {
  if (!g.red.protected_()) return DeleteUnprotected(key, everywhere, std::move(done));
  // Best effort: shards on down or late targets stay behind as garbage (no head refers to them).
  auto slots = Slots(key, g.red.width());
  if (!slots.ok()) return done(slots.status());
  struct State {
    std::mutex mu;
    bool finished = false;
    Status first_error;
    std::map<uint32_t, std::pair<uint32_t, TargetRef>> waiting;  // by request: (shard, target)
    std::function<void(Status)> done;
  };
  auto st = std::make_shared<State>();
  st->done = std::move(done);
  std::vector<std::pair<uint32_t, TargetRef>> send;  // (shard, target): the slots', then earlier placements'
  for (uint32_t i = 0; i < slots->size(); ++i) {
    const TargetRef& t = (*slots)[i];
    if (t.up) {
      send.emplace_back(i, t);
    } else if (everywhere && t.id != 0 && !t.lost) {
      // Its copy would outlive the delete, and a head still names the stripe: a read would
      // find the old bytes where there should be none.
      return st->done(Unavailable("target " + std::to_string(t.id) + " holding shard " + std::to_string(i) + " of " +
                                  Ordinal(key) + " is down; the delete must reach every copy; retry when it is back"));
    }
  }
  const size_t slot_requests = send.size();
  // Copies where earlier placements put them too (a join not settled yet), so that a read
  // looking there cannot find them: best effort, as for down targets, unless `everywhere`.
  for (auto& [i, t] : EarlierCopies(g.red.width(), key)) {
    if (t.up && Suspected(t.id)) t.up = false;  // late before: as the slots show it (Slots)
    if (t.up) {
      if (everywhere) send.emplace_back(i, std::move(t));
      else shards_->StartDeleteTo(t, WithShard(key, i), [](Status) {});
    } else if (everywhere) {
      return st->done(EarlierHolderDown(t, i, key));
    }
  }
  if (send.empty()) return st->done(OkStatus());
  for (uint32_t r = 0; r < send.size(); ++r) st->waiting.emplace(r, send[r]);
  auto finish = [st](std::unique_lock<std::mutex>& l) {
    if (st->finished) return;
    st->finished = true;
    auto done = std::move(st->done);
    Status e = st->first_error;
    l.unlock();
    done(e);
  };
  timer_.After(straggler_, [this, st, finish, key, everywhere] {
    std::unique_lock<std::mutex> l(st->mu);
    if (st->finished || st->waiting.empty()) return;
    // Late targets are named. Where every copy must go they are suspected too (a gray failure,
    // as the other paths treat it), so the retry and the next stripes fail at once instead of
    // each waiting for them again.
    std::string late;
    for (const auto& [r, at] : st->waiting) {
      late += (late.empty() ? "" : ", ") + std::to_string(at.second.id) + " (shard " + std::to_string(at.first) + ")";
      if (everywhere) Suspect(at.second);
    }
    if (st->first_error.ok()) {
      st->first_error = everywhere ? Unavailable("target(s) " + late + " did not confirm the delete of " +
                                                 Ordinal(key) + " within " + std::to_string(straggler_.count()) +
                                                 " ms; the delete must reach every copy; retry")
                                   : DeadlineExceeded("target(s) " + late + " did not confirm the delete of " +
                                                      Ordinal(key) + " in time");
    }
    finish(l);
  });
  for (uint32_t r = 0; r < send.size(); ++r) {
    const bool slot = r < slot_requests;
    shards_->StartDeleteTo(send[r].second, WithShard(key, send[r].first), [st, finish, r, slot](Status s) {
      std::unique_lock<std::mutex> l(st->mu);
      // A stale map's refusal wins: the delete runs again on the right slots.
      if (!s.ok() && s.code() != StatusCode::kNotFound && (st->first_error.ok() || (slot && IsStaleMap(s)))) {
        st->first_error = s;
      }
      st->waiting.erase(r);
      if (st->waiting.empty()) finish(l);
    });
  }
}

void StripeIo::DeleteUnprotected(const WireShardKey& key, bool everywhere, std::function<void(Status)> done) {
  // Where an earlier placement put it first (a join not settled yet), then its target: a
  // repair copying it from there to its target meanwhile finds its source gone and deletes its
  // copy (see Repairer). Nothing here blocks: this runs on the timer thread when retried.
  std::vector<std::pair<uint32_t, TargetRef>> earlier;
  for (auto& [i, t] : EarlierCopies(1, key)) {
    if (t.up) {
      earlier.emplace_back(i, std::move(t));
    } else if (everywhere) {
      return done(EarlierHolderDown(t, i, key));
    }
  }
  auto then_slot = [this, key](std::function<void(Status)> done) {
    auto slots = Slots(key, 1);
    if (!slots.ok()) return done(slots.status());
    if (slots->empty()) return done(Unavailable("no target holds " + Ordinal(key)));
    if (!slots->front().up) {
      return done(Unavailable("target " + std::to_string(slots->front().id) + " holding " + Ordinal(key) +
                              " is down; retry when it is back"));
    }
    DeleteFrom(slots->front(), key, /*refetched=*/false, std::move(done));
  };
  if (earlier.empty()) return then_slot(std::move(done));
  struct State {
    std::mutex mu;
    size_t pending = 0;
    Status first_error;
  };
  auto st = std::make_shared<State>();
  st->pending = earlier.size();
  auto one_done = [st, key, everywhere, then_slot, done = std::move(done)](uint32_t index, uint32_t id,
                                                                                   Status s) {
    std::unique_lock<std::mutex> l(st->mu);
    NoteEarlierDelete(index, key, id, s, st->first_error);
    if (--st->pending > 0) return;
    const Status failed = st->first_error;
    l.unlock();
    if (everywhere && !failed.ok()) return done(EarlierDeleteFailed(key, failed));
    then_slot(done);
  };
  auto shared_done = std::make_shared<decltype(one_done)>(std::move(one_done));
  for (const auto& [i, t] : earlier) {
    shards_->StartDeleteTo(t, WithShard(key, i), [shared_done, i = i, id = t.id](Status s) { (*shared_done)(i, id, s); });
  }
}

void StripeIo::DeleteFrom(const TargetRef& t, const WireShardKey& key, bool refetched, std::function<void(Status)> done) {
  shards_->StartDeleteTo(t, key, [this, t, key, refetched, done = std::move(done)](Status s) mutable {
    // A refused capability token is fetched again once (as ShardClient's blocking calls do):
    // a call to mgmt, so not on this transport thread.
    if (!refetched && (s.code() == StatusCode::kPermissionDenied || s.code() == StatusCode::kUnauthenticated)) {
      return RunBlocking([this, t, key, done = std::move(done)]() mutable {
        DeleteFrom(t, key, /*refetched=*/true, std::move(done));
      });
    }
    done(s.code() == StatusCode::kNotFound ? OkStatus() : s);
  });
}

// ---------------------------------------------------------------------------------------------
// Repair

std::vector<std::span<const std::byte>> StripeIo::EncodeShards(const StripeGeometry& g,
                                                               std::span<const std::byte> data,
                                                               std::vector<std::shared_ptr<AlignedBuffer>>& owned) {
  std::vector<std::span<const std::byte>> shards(g.red.width());
  if (g.red.kind != Redundancy::Kind::kErasure) {
    for (auto& s : shards) s = data;
    return shards;
  }
  const uint64_t len = data.size();
  const uint64_t plen = g.shard_length(len);
  std::vector<const std::byte*> cells(g.red.k);
  for (uint32_t j = 0; j < g.red.k; ++j) {
    const uint64_t off = j * g.cell;
    if (off + plen <= len) {
      shards[j] = data.subspan(off, plen);  // a slice of the caller's bytes: no copy
    } else {
      auto pad = std::make_shared<AlignedBuffer>(plen);
      std::memset(pad->data(), 0, plen);
      if (off < len) std::memcpy(pad->data(), data.data() + off, len - off);
      shards[j] = pad->span();
      owned.push_back(pad);
    }
    cells[j] = shards[j].data();
  }
  std::vector<std::byte*> parity(g.red.m);
  for (uint32_t p = 0; p < g.red.m; ++p) {
    auto buf = std::make_shared<AlignedBuffer>(plen);
    parity[p] = buf->data();
    shards[g.red.k + p] = buf->span();
    owned.push_back(buf);
  }
  if (plen > 0) Coder(g.red).Encode(plen, cells, parity);
  return shards;
}

Result<uint64_t> StripeIo::RepairShards(const StripeGeometry& g, const WireShardKey& key, uint64_t shard_length,
                                        const std::vector<uint32_t>& shards, uint64_t version) {
  uint64_t length = UINT64_MAX;
  if (g.red.kind == Redundancy::Kind::kErasure) {
    length = shard_length < g.cell ? shard_length : std::min<uint64_t>(g.stripe_unit, g.red.k * g.cell);
  }
  PS_ASSIGN_OR_RETURN(ShardData d, ReadSync(g, key, 0, length));
  if (d.version != version) {
    return Aborted(Ordinal(key) + " changed while it was being repaired (version " + std::to_string(d.version) +
                   ", expected " + std::to_string(version) + ")");
  }
  std::vector<std::shared_ptr<AlignedBuffer>> owned;
  const auto bytes = EncodeShards(g, d.data.span(), owned);  // spans into d.data and owned
  PS_ASSIGN_OR_RETURN(std::vector<TargetRef> slots, Slots(key, g.red.width()));
  uint64_t written = 0;
  for (uint32_t i : shards) {
    if (i >= slots.size()) continue;
    Status s = shards_->WriteTo(slots[i], WithShard(key, i), bytes[i], version, true);
    if (!s.ok()) return s.WithContext("repairing shard " + std::to_string(i) + " of " + Ordinal(key));
    written += bytes[i].size();
  }
  return written;
}

// ---------------------------------------------------------------------------------------------
// Heads

Result<ShardData> StripeIo::ReadHeadOnce(const Redundancy& red, const WireShardKey& key) {
  const uint32_t copies = red.head_copies();
  const uint64_t placed_at = view_->epoch();  // before the slots: a newer map only fails the check
  PS_ASSIGN_OR_RETURN(std::vector<TargetRef> slots, ReadSlots(key, copies));
  struct State : Waiter {
    uint32_t pending = 0, ok = 0;
    std::vector<std::optional<Result<ShardData>>> replies;
  };
  auto st = std::make_shared<State>();
  st->replies.resize(slots.size());
  std::vector<uint32_t> send;
  for (uint32_t i = 0; i < slots.size(); ++i) {
    if (slots[i].up || copies == 1) send.push_back(i);
  }
  if (send.empty()) return Unavailable("every target holding " + Ordinal(key) + " is down");
  st->pending = static_cast<uint32_t>(send.size());
  for (uint32_t i : send) {
    ReadShardTo(copies, slots[i], WithShard(key, i), 0, UINT64_MAX, [st, i](Result<ShardData> r) {
      std::lock_guard<std::mutex> l(st->mu);
      if (r.ok()) ++st->ok;
      st->replies[i] = std::move(r);
      --st->pending;
      st->cv.notify_all();
    });
  }
  {
    // Copies that have not answered after a straggler's time (a stopped target) are left out;
    // with one copy in hand, the others get that long to show a newer version.
    std::unique_lock<std::mutex> l(st->mu);
    const auto first = Clock::now();
    st->cv.wait_until(l, first + straggler_, [&] { return st->pending == 0 || st->ok > 0; });
    st->cv.wait_until(l, first + 2 * straggler_, [&] { return st->pending == 0; });
    if (st->pending > 0 && send.size() > 1) {
      bool answered = false;
      for (auto& r : st->replies) answered |= r.has_value();
      if (!answered) st->cv.wait(l, [&] { return st->pending == 0 || st->ok > 0; });  // nothing to go on
    }
  }
  std::unique_lock<std::mutex> l(st->mu);
  for (uint32_t i : send) {
    if (!st->replies[i]) Suspect(slots[i]);
  }
  // As for replica reads (ReadReplica): an answer without every copy's version (one late,
  // failing or suspected) stands only if mgmt's map is still the one the read was placed with.
  bool all_checked = true;
  for (uint32_t i = 0; i < slots.size(); ++i) {
    const TargetRef& t = slots[i];
    if (t.id == 0 || t.lost) continue;
    if (!t.up) {
      all_checked &= !Suspected(t.id);
      continue;
    }
    const auto& r = st->replies[i];
    all_checked &= r && (r->ok() || r->status().code() == StatusCode::kNotFound);
  }
  auto confirmed = [&]() -> Status {
    if (all_checked) return OkStatus();
    l.unlock();  // late replies may land meanwhile
    stats_.map_confirmations++;
    if (view_->Refresh().ok() && view_->epoch() == placed_at) return OkStatus();
    return MapMovedDuringRead(key);
  };
  ShardData* best = nullptr;
  Status first_error;
  bool all_not_found = true;
  for (auto& r : st->replies) {
    if (!r) continue;
    if (r->ok()) {
      all_not_found = false;
      if (best == nullptr || (*r)->version > best->version) best = &**r;
    } else {
      if (r->status().code() != StatusCode::kNotFound) all_not_found = false;
      if (first_error.ok() || first_error.code() == StatusCode::kNotFound) first_error = r->status();
    }
  }
  if (best == nullptr && !all_not_found) return first_error;
  std::optional<ShardData> found;
  if (best != nullptr) found = std::move(*best);
  PS_RETURN_IF_ERROR(confirmed());
  if (!found) return NotFound("no copy of the head");
  if (found->data.empty()) return NotFound("the object was deleted (tombstone)");
  return std::move(*found);
}

Result<ShardData> StripeIo::ReadHead(const Redundancy& red, const WireShardKey& key) {
  if (!red.protected_()) {
    auto got = shards_->Read(key);
    if (!got.ok() && got.status().code() == StatusCode::kNotFound && view_->has_earlier_placements()) {
      // Not moved to its target yet: where an earlier placement put it.
      auto r = Await<Result<ShardData>>([&](auto done) {
        AskEarlierHolders(1, key, got.status(),
                          [this, key](const TargetRef& t, std::function<void(Result<ShardData>)> cb) {
                            shards_->StartReadTo(t, key, 0, UINT64_MAX, std::move(cb));
                          },
                          std::move(done));
      });
      if (r.ok() || r.status().code() != StatusCode::kNotFound) return r;
    }
    PS_ASSIGN_OR_RETURN(AlignedBuffer data, std::move(got));
    ShardData d;
    d.length = data.size();
    d.data = std::move(data);
    return d;
  }
  const auto first = Clock::now();
  bool refetched = false;
  for (int attempt = 0;; ++attempt) {
    auto r = ReadHeadOnce(red, key);
    if (r.ok() || r.status().code() == StatusCode::kNotFound) return r;
    const StatusCode code = r.status().code();
    if (!refetched && (code == StatusCode::kPermissionDenied || code == StatusCode::kUnauthenticated)) {
      refetched = true;  // the refused token was dropped: the next attempt fetches a fresh one
      continue;
    }
    if (!shards_->Backoff(r.status(), first, attempt)) return r;
  }
}

Redundancy HeadRedundancy(const Redundancy& red) {
  if (!red.protected_()) return red;
  Redundancy r;
  r.kind = Redundancy::Kind::kReplicate;
  r.k = 1;
  r.m = red.m;
  return r;
}

void StripeIo::StartWriteHead(const Redundancy& red, const WireShardKey& key,
                              std::shared_ptr<const AlignedBuffer> bytes, uint64_t version,
                              std::function<void(Status)> done) {
  Write(StripeGeometry::For(HeadRedundancy(red), 0), key, std::move(bytes), version, std::move(done));
}

Status StripeIo::WriteSync(const StripeGeometry& g, const WireShardKey& key,
                           std::shared_ptr<const AlignedBuffer> data, uint64_t version) {
  return Await<Status>([&](auto done) { Write(g, key, std::move(data), version, std::move(done)); });
}

Result<ShardData> StripeIo::ReadSync(const StripeGeometry& g, const WireShardKey& key, uint64_t begin,
                                     uint64_t length) {
  return Await<Result<ShardData>>([&](auto done) { Read(g, key, begin, length, std::move(done)); });
}

Status StripeIo::DeleteSync(const StripeGeometry& g, const WireShardKey& key, bool everywhere) {
  return Await<Status>([&](auto done) { Delete(g, key, std::move(done), everywhere); });
}

Status StripeIo::WriteHead(const Redundancy& red, const WireShardKey& key, std::span<const std::byte> bytes,
                           uint64_t version, std::chrono::steady_clock::time_point give_up_at) {
  auto late = [&] {
    return DeadlineExceeded("the head of the object was not written in time (its data was written too long ago "
                            "and may have been collected as orphans); put it again");
  };
  if (Clock::now() > give_up_at) return late();
  auto data = std::make_shared<const AlignedBuffer>(AlignedBuffer::CopyOf(bytes));
  const auto first = Clock::now();
  bool refetched = false;
  // One attempt at a time (the unprotected head too), so that none starts after `give_up_at`.
  for (int attempt = 0;; ++attempt) {
    if (attempt > 0 && Clock::now() > give_up_at) return late();
    // The protected write's own stale-map retries stop at `give_up_at` too (the policy retries
    // nothing transient: `wanted` is false, this loop backs off).
    Status s = red.protected_()
                   ? Await<Status>([&](auto done) {
                       Write(StripeGeometry::For(HeadRedundancy(red), 0), key, data, version, std::move(done),
                             RetryPolicy{give_up_at, [] { return false; }});
                     })
                   : Await<Status>([&](auto done) { shards_->StartWrite(key, data->span(), version, std::move(done)); });
    if (s.ok()) return s;
    if (!refetched && (s.code() == StatusCode::kPermissionDenied || s.code() == StatusCode::kUnauthenticated)) {
      refetched = true;
      continue;
    }
    // An unprotected head's one target down for mgmt: nothing to wait for (as ShardClient).
    if (red.protected_() ? !shards_->Backoff(s, first, attempt) : !shards_->ShouldRetry(s, key, first, attempt)) {
      return s;
    }
  }
}

Status StripeIo::DeleteHead(const Redundancy& red, const WireShardKey& key, uint64_t version) {
  if (!red.protected_()) {
    // Where an earlier placement put it first (as DeleteOnce): every copy must go, or a read
    // would find it there.
    PS_ASSIGN_OR_RETURN(bool was_earlier, DeleteEarlier(1, key, /*everywhere=*/true));
    Status s = shards_->Delete(key);
    if (s.code() == StatusCode::kNotFound && was_earlier) return OkStatus();  // not moved yet
    return s;
  }
  return WriteHead(red, key, {}, version);  // tombstone
}

}  // namespace penstock

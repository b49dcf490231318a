// stripe_earlier.cc — the earlier-placement fallback: where a shard may still be while a
// join is not settled.
//
// When a target joins, placement moves some slots to it, and repair moves the shards there
// later. Until then a slot's target may hold nothing (kNotFound) while the shard sits where an
// earlier placement put it (ClusterView::EarlierSlots). Shard reads and stats (ReadShardTo,
// StatShardTo) then ask those earlier holders, newest placement first; their versions are
// compared as any other copy's are. Deletes reach them too (stripe_delete.cc), so a read that
// falls back there cannot find what was deleted.
#include "client/stripe_io.h"

#include <algorithm>

#include "client/stripe_io_internal.h"

namespace penstock {

using stripe_io_internal::Ordinal;

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

}  // namespace

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

}  // namespace penstock

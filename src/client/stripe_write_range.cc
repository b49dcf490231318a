// stripe_write_range.cc — range writes (StripeIo::WriteRange): `data` written at byte `begin`
// of a stripe, its other bytes left as they are (shard range writes, kWriteRange).
//
// none: the one shard is patched; while a join is not settled, a shard its target does not
//       hold yet is first moved there from where an earlier placement put it
//       (MoveFromEarlier), so that the patch does not hide the rest of it.
// rep:  every copy is patched over the newest version the readable copies hold (asked first
//       with kStat, AskCopyVersions, unless the lease holder's StripeKnowledge knows it), with
//       kWriteIfVersion: a copy that missed a write refuses and counts as a missed shard.
// ec:   read-modify-write of one cell with a parity delta, in stripe_write_ec_range.cc.
#include "client/stripe_io.h"

#include <algorithm>

#include "client/stripe_io_internal.h"

namespace penstock {

using stripe_io_internal::Ordinal;
using stripe_io_internal::SlotList;

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
  if (!g.red.protected_()) return PatchUnprotected(key, begin, std::move(data), version, std::move(done));
  if (g.red.kind == Redundancy::Kind::kErasure) {
    return WriteEcRange(g, key, begin, data, version, std::move(done), std::move(known));
  }
  PatchReplicas(g, key, begin, std::move(data), version, std::move(done), std::move(known));
}

// ---------------------------------------------------------------------------------------------
// Unprotected stripes

void StripeIo::PatchUnprotected(const WireShardKey& key, uint64_t begin, std::shared_ptr<const AlignedBuffer> data,
                                uint64_t version, std::function<void(Status)> done) {
  if (!view_->has_earlier_placements()) {
    shards_->StartWriteRange(key, begin, data->span(), version,
                             [data, done = std::move(done)](Status s) { done(std::move(s)); });
    return;
  }
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
  MoveFromEarlier(*at, key, [patch_at, done = std::move(done)](Status moved) mutable {
    if (!moved.ok()) return done(std::move(moved));
    patch_at(std::move(done));
  });
}

void StripeIo::MoveFromEarlier(const TargetRef& at, const WireShardKey& key, std::function<void(Status)> done) {
  shards_->StartStatTo(at, key, [this, key, at, done = std::move(done)](Result<ShardData> r) mutable {
    if (r.ok()) return done(OkStatus());
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
        [this, key, at, source, done = std::move(done)](Result<ShardData> old) mutable {
          if (!old.ok()) {
            if (old.status().code() == StatusCode::kNotFound) return done(OkStatus());  // a new stripe
            return done(old.status());
          }
          CopyFromEarlier(at, key, source, std::make_shared<ShardData>(std::move(*old)), std::move(done));
        });
  });
}

void StripeIo::CopyFromEarlier(const TargetRef& at, const WireShardKey& key, std::shared_ptr<TargetRef> source,
                               std::shared_ptr<ShardData> held, std::function<void(Status)> done) {
  shards_->StartWriteTo(at, key, held->data.span(), held->version, /*only_if_not_older=*/true,
                        [this, key, at, source, held, done = std::move(done)](Status w) mutable {
    // kAborted: the target holds a newer version already.
    if (!w.ok() && w.code() != StatusCode::kAborted) return done(std::move(w));
    if (!w.ok()) return done(OkStatus());
    // A delete (a truncate) that removed the source after it was read would miss
    // this copy: then it goes too (at its version), and the patch lands on nothing.
    shards_->StartStatTo(*source, key, [this, key, at, held, done = std::move(done)](Result<ShardData> src) mutable {
      if (src.ok() || src.status().code() != StatusCode::kNotFound) return done(OkStatus());
      shards_->StartDeleteTo(at, key, [done = std::move(done)](Status) mutable { done(OkStatus()); }, held->version);
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Replicated stripes

void StripeIo::PatchReplicas(const StripeGeometry& g, const WireShardKey& key, uint64_t begin,
                             std::shared_ptr<const AlignedBuffer> data, uint64_t version,
                             std::function<void(Status)> done, std::shared_ptr<StripeKnowledge> known) {
  // Every copy is patched only over the newest version among the copies that may be read: one
  // that missed a write refuses (kFailedPrecondition), counts as a missed shard and is repaired
  // whole. So first the versions (kStat, no data), unless the lease holder knows them.
  if (known && known->uniform_version != 0 && known->epoch == view_->epoch()) {
    stats_.known_version_patches++;
    return PatchCopies(g, key, begin, data, version, known->uniform_version, known,
                       [this, g, key, begin, data, version, known, done = std::move(done)](Status s) mutable {
      // Every copy refused the known version: the stripe changed without the lease (a truncate
      // deleted it). Asked again, the copies say what they hold now.
      if (s.code() != StatusCode::kFailedPrecondition) return done(std::move(s));
      *known = {};
      WriteRangeOnce(g, key, begin, data, version, std::move(done), known);
    });
  }
  auto slots = ReadSlots(key, g.red.width());
  if (!slots.ok()) return done(slots.status());
  SlotList asks;
  for (uint32_t i = 0; i < slots->size(); ++i) {
    if ((*slots)[i].up) asks.emplace_back(i, (*slots)[i]);
  }
  if (asks.empty()) return done(Unavailable("no target of " + Ordinal(key) + " is up"));
  AskCopyVersions(key, asks, [this, g, key, begin, data, version, known, done = std::move(done)](
                                 const Status& error, uint64_t newest, bool some_missing) {
    if (!error.ok()) return done(error.WithContext("reading the versions of " + Ordinal(key)));
    if (some_missing && view_->has_earlier_placements()) {
      // A slot does not hold it, but a target joined since it may have been written: that copy
      // may be where an earlier placement put it, and a patch would hide the rest of it (or be
      // refused and count as missed). Read and written whole instead.
      return done(FailedPrecondition(std::string(kWholeUnitNeeded) + " for " + Ordinal(key) +
                                     ": a slot does not hold it, and a target joined since it may have been written"));
    }
    PatchCopies(g, key, begin, data, version, newest, known, done);
  });
}

void StripeIo::AskCopyVersions(const WireShardKey& key, const SlotList& asks, CopyVersions decided) {
  struct Versions {
    std::mutex mu;
    size_t pending = 0;
    bool decided = false;  // `decided` ran (all answered, or the straggler timer fired)
    uint64_t newest = 0;
    bool some_missing = false;  // a copy answered kNotFound
    Status error;
    std::map<uint32_t, TargetRef> waiting;
  };
  auto v = std::make_shared<Versions>();
  v->pending = asks.size();
  for (auto& [i, t] : asks) v->waiting[i] = t;
  auto after_stats = [v, decided = std::move(decided)]() { decided(v->error, v->newest, v->some_missing); };
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

void StripeIo::PatchCopies(const StripeGeometry& g, const WireShardKey& key, uint64_t begin,
                           std::shared_ptr<const AlignedBuffer> data, uint64_t requested_version, uint64_t expected,
                           std::shared_ptr<StripeKnowledge> known, std::function<void(Status)> done) {
  auto st = std::make_shared<WriteState>();
  st->data = data;
  st->done = std::move(done);
  st->version = NewerThan(requested_version, expected);  // see PatchEcCells
  st->known = known;
  WriteSlots(g, key, st, [this, key, begin, data, version = st->version, expected](
                             uint32_t i, const TargetRef& t, std::function<void(Status)> cb) {
    shards_->StartWriteRangeTo(t, WithShard(key, i), begin, data->span(), version, expected, std::move(cb));
  });
}

}  // namespace penstock

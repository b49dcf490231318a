// stripe_read.cc — reads (StripeIo::Read): the unprotected stripe's one shard, and replicated
// stripes (rep:N). Erasure-coded stripes are read in stripe_read_ec.cc.
//
// A replicated read takes the data from the first up replica and asks every other up replica
// for its version (kStat, no data), so a replica that missed a degraded write never answers
// alone (DecideReplicaRead). When another replica is newer, or the first fails or is late by
// `straggler`, the others are read one after the other, newest first (ReadReplicaChain); a
// replica that failed its checksum gets the good bytes back (read repair). An answer given
// without every replica's version waits for mgmt to confirm the map (stripe_map_confirm.cc).
#include "client/stripe_io.h"

#include <algorithm>

#include "client/stripe_io_internal.h"
#include "common/await.h"
#include "common/log.h"

namespace penstock {

using stripe_io_internal::Ordinal;
using stripe_io_internal::SlotList;

// A read of a replicated stripe, phase 1: the data from the first replica in `order`, the
// versions of the other up ones.
struct StripeIo::ReplicaRead {
  StripeGeometry g;
  WireShardKey key;
  uint64_t begin = 0, length = 0;
  uint64_t placed_at = 0;  // the map epoch the slots were taken at

  std::mutex mu;
  std::function<void(Result<ShardData>)> done;
  SlotList order;
  std::optional<Result<ShardData>> data;
  std::vector<std::optional<Result<ShardData>>> stats;  // by order index
  uint32_t pending = 0;
  bool decided = false;
};

// Phase 2 (ReadReplicaChain): replicas read one after the other until one answers.
struct StripeIo::ReplicaChain {
  size_t width = 0;
  WireShardKey key;
  uint64_t begin = 0, length = 0;
  uint64_t min_version = 0;  // older answers missed a write

  std::mutex mu;
  std::function<void(Result<ShardData>)> done;
  SlotList order;
  size_t next = 0;
  uint32_t pending = 0;
  bool finished = false, all_not_found = true;
  Status first_error;
  SlotList corrupt;  // replicas that failed their checksum
};

namespace {

// The order replicas are read in: up slots first, in slot order; down ones last (the map may be
// behind), except those a write to this container is known to have missed (unless
// `read_recovering`): their copy may be old, and with no other copy answering nothing would
// show it.
SlotList ReplicaOrder(const std::vector<TargetRef>& slots, uint64_t container, bool read_recovering) {
  SlotList order;
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t i = 0; i < slots.size(); ++i) {
      const TargetRef& t = slots[i];
      if (t.up != (pass == 0)) continue;
      if (!t.up && !read_recovering && t.MissedWritesIn(container)) continue;
      order.emplace_back(i, t);
    }
  }
  return order;
}

// The replica known to hold the newest version, and that version: 0 for the one read (`data`),
// i for the version `stats[i]` told; SIZE_MAX when none answered.
std::pair<size_t, uint64_t> NewestReplica(const std::optional<Result<ShardData>>& data,
                                          const std::vector<std::optional<Result<ShardData>>>& stats) {
  uint64_t best_version = 0;
  size_t best = SIZE_MAX;
  if (data && data->ok()) {
    best_version = (*data)->version;
    best = 0;
  }
  for (size_t i = 1; i < stats.size(); ++i) {
    auto& r = stats[i];
    if (r && r->ok() && (best == SIZE_MAX || (*r)->version > best_version)) {
      best_version = (*r)->version;
      best = i;
    }
  }
  return {best, best_version};
}

// The replicas to read when the first (`order[0]`, which gave `data`) did not answer alone: the
// others, newest first, then the first again unless it failed for good (and was not late).
// A first that failed its checksum goes in `corrupt`.
SlotList RetryOrder(const SlotList& order, const std::optional<Result<ShardData>>& data,
                    const std::vector<std::optional<Result<ShardData>>>& stats, bool data_late, SlotList& corrupt) {
  SlotList chain;
  if (data && !data->ok() && data->status().code() == StatusCode::kDataLoss) {
    corrupt.push_back(order[0]);
  }
  std::vector<size_t> rest;
  for (size_t i = 1; i < order.size(); ++i) rest.push_back(i);
  auto ver = [&](size_t i) -> uint64_t {
    auto& r = stats[i];
    return r && r->ok() ? (*r)->version : 0;
  };
  std::stable_sort(rest.begin(), rest.end(), [&](size_t a, size_t b) { return ver(a) > ver(b); });
  for (size_t i : rest) chain.push_back(order[i]);
  const bool first_failed_for_good = data && !data->ok();
  if (!first_failed_for_good || data_late) chain.push_back(order[0]);
  return chain;
}

}  // namespace

void StripeIo::Read(const StripeGeometry& g, const WireShardKey& key, uint64_t begin, uint64_t length,
                    std::function<void(Result<ShardData>)> done, std::optional<RetryPolicy> retry,
                    std::shared_ptr<StripeDestination> into) {
  auto attempt = std::make_shared<std::function<void(std::function<void(Result<ShardData>)>)>>(
      [this, g, key, begin, length, into = std::move(into)](std::function<void(Result<ShardData>)> cb) {
        ReadOnce(g, key, begin, length, std::move(cb), into);
      });
  WithRetries<Result<ShardData>>(std::move(attempt), std::move(done), RetriesFor(g, key, std::move(retry)));
}

Result<ShardData> StripeIo::ReadSync(const StripeGeometry& g, const WireShardKey& key, uint64_t begin,
                                     uint64_t length) {
  return Await<Result<ShardData>>([&](auto done) { Read(g, key, begin, length, std::move(done)); });
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

void StripeIo::ReadReplica(const StripeGeometry& g, const WireShardKey& key, uint64_t begin, uint64_t length,
                           std::function<void(Result<ShardData>)> done, std::shared_ptr<StripeDestination> into) {
  const uint64_t placed_at = view_->epoch();  // before the slots: a newer map only fails the check
  auto slots = ReadSlots(key, g.red.width());
  if (!slots.ok()) return done(slots.status());
  SlotList order = ReplicaOrder(*slots, key.container, read_recovering_);
  if (order.empty()) return done(Unavailable("no target holds " + Ordinal(key)));
  // Phase 1: the data from the first replica, and the versions of the other up ones (a replica
  // that missed a degraded write is older and must not answer alone).
  auto st = std::make_shared<ReplicaRead>();
  st->g = g;
  st->key = key;
  st->begin = begin;
  st->length = length;
  st->placed_at = placed_at;
  st->done = std::move(done);
  st->order = std::move(order);
  st->stats.resize(st->order.size());
  std::vector<size_t> stat_idx;
  for (size_t i = 1; i < st->order.size(); ++i) {
    if (st->order[i].second.up) stat_idx.push_back(i);
  }
  st->pending = static_cast<uint32_t>(1 + stat_idx.size());
  timer_.After(straggler_, [this, st] {
    std::unique_lock<std::mutex> l(st->mu);
    if (st->decided) return;
    if (!st->data) Suspect(st->order[0].second);
    for (size_t i = 1; i < st->stats.size(); ++i) {
      if (!st->stats[i] && st->order[i].second.up) Suspect(st->order[i].second);
    }
    DecideReplicaRead(st, l, !st->data.has_value());
  });
  ReadShardTo(g.red.width(), st->order[0].second, WithShard(key, st->order[0].first), begin, length,
              [this, st](Result<ShardData> r) {
                std::unique_lock<std::mutex> l(st->mu);
                st->data = std::move(r);
                if (--st->pending == 0) DecideReplicaRead(st, l, false);
              },
              std::move(into));
  for (size_t i : stat_idx) {
    StatShardTo(g.red.width(), st->order[i].second, WithShard(key, st->order[i].first),
                [this, st, i](Result<ShardData> r) {
                  std::unique_lock<std::mutex> l(st->mu);
                  st->stats[i] = std::move(r);
                  if (--st->pending == 0) DecideReplicaRead(st, l, false);
                });
  }
}

void StripeIo::DecideReplicaRead(const std::shared_ptr<ReplicaRead>& st, std::unique_lock<std::mutex>& lock,
                                 bool data_late) {
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
  auto finish = [this, key = st->key, placed_at = st->placed_at, all_checked](
                    std::function<void(Result<ShardData>)> done, Result<ShardData> r) {
    Answer(placed_at, key, !all_checked, std::move(done), std::move(r));
  };
  const auto [best, best_version] = NewestReplica(st->data, st->stats);
  auto done = std::move(st->done);
  if (best == 0) {
    auto data = std::move(*st->data);
    lock.unlock();
    return finish(std::move(done), std::move(data));
  }
  // Another replica is newer, or the first failed or is late: try the others, newest first.
  SlotList corrupt;
  SlotList chain = RetryOrder(st->order, st->data, st->stats, data_late, corrupt);
  lock.unlock();
  ReadReplicaChain(st->g.red.width(), st->key, st->begin, st->length, std::move(chain), std::move(corrupt),
                   best_version,
                   [finish, done = std::move(done)](Result<ShardData> r) mutable { finish(std::move(done), std::move(r)); });
}

void StripeIo::ReadReplicaChain(size_t width, const WireShardKey& key, uint64_t begin, uint64_t length,
                                std::vector<std::pair<uint32_t, TargetRef>> order,
                                std::vector<std::pair<uint32_t, TargetRef>> corrupt, uint64_t min_version,
                                std::function<void(Result<ShardData>)> done) {
  auto st = std::make_shared<ReplicaChain>();
  st->width = width;
  st->key = key;
  st->begin = begin;
  st->length = length;
  st->min_version = min_version;
  st->done = std::move(done);
  st->order = std::move(order);
  st->corrupt = std::move(corrupt);
  if (!st->corrupt.empty()) st->all_not_found = false;
  if (st->order.empty()) {
    return st->done(DataLoss("no replica of " + Ordinal(key) + " is readable"));
  }
  // Tries the next replica; a late one (straggler) makes the next start too, and the first
  // good answer wins.
  TryNextReplica(st);
}

void StripeIo::TryNextReplica(const std::shared_ptr<ReplicaChain>& st) {
  std::unique_lock<std::mutex> lock(st->mu);
  if (st->finished || st->next >= st->order.size()) return;
  const auto [shard, target] = st->order[st->next++];
  ++st->pending;
  lock.unlock();
  // This attempt's answer came (under st->mu): a replica that failed fast is not late.
  auto answered = std::make_shared<bool>(false);
  timer_.After(straggler_, [this, st, target, answered] {
    std::unique_lock<std::mutex> l(st->mu);
    if (st->finished || *answered) return;
    l.unlock();
    Suspect(target);
    TryNextReplica(st);
  });
  ReadShardTo(st->width, target, WithShard(st->key, shard), st->begin, st->length,
              [this, st, shard, target, answered](Result<ShardData> r) {
                std::unique_lock<std::mutex> l(st->mu);
                *answered = true;
                --st->pending;
                if (st->finished) return;
                OnReplicaReply(st, shard, target, std::move(r), l);
              });
}

void StripeIo::OnReplicaReply(const std::shared_ptr<ReplicaChain>& st, uint32_t shard, const TargetRef& target,
                              Result<ShardData> r, std::unique_lock<std::mutex>& l) {
  const WireShardKey& key = st->key;
  if (r.ok() && r->version < st->min_version) {
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
    if (!corrupt.empty() && st->begin == 0 && r->data.size() == r->length) {
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
  if (more) TryNextReplica(st);
}

}  // namespace penstock

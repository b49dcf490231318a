// stripe_delete.cc — deletes (StripeIo::Delete): every shard of a stripe, on its slots and
// where earlier placements put it while a join is not settled.
//
// Best effort by default: shards on down or late targets stay behind as garbage no head names.
// With `everywhere` (a stripe a head still names: truncate) a copy that cannot be reached
// fails the delete retryably instead, since a read would find the old bytes there. An
// unprotected stripe's one copy is deleted after the earlier placements' copies, its transient
// failures retried within the client's retry budget, on the timer thread.
#include "client/stripe_io.h"

#include <algorithm>

#include "client/stripe_io_internal.h"
#include "common/await.h"
#include "common/log.h"

namespace penstock {

using stripe_io_internal::Clock;
using stripe_io_internal::Ordinal;
using stripe_io_internal::SlotList;

namespace {

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

}  // namespace

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

Status StripeIo::DeleteSync(const StripeGeometry& g, const WireShardKey& key, bool everywhere) {
  return Await<Status>([&](auto done) { Delete(g, key, std::move(done), everywhere); });
}

void StripeIo::DeleteOnce(const StripeGeometry& g, const WireShardKey& key, bool everywhere,
                          std::function<void(Status)> done) {
  if (!g.red.protected_()) return DeleteUnprotected(key, everywhere, std::move(done));
  // Best effort: shards on down or late targets stay behind as garbage (no head refers to them).
  size_t slot_requests = 0;
  Result<SlotList> targets = DeleteTargets(g, key, everywhere, slot_requests);
  if (!targets.ok()) return done(targets.status());
  const SlotList send = std::move(*targets);  // (shard, target): the slots', then earlier placements'
  if (send.empty()) return done(OkStatus());
  struct State {
    std::mutex mu;
    bool finished = false;
    Status first_error;
    std::map<uint32_t, std::pair<uint32_t, TargetRef>> waiting;  // by request: (shard, target)
    std::function<void(Status)> done;
  };
  auto st = std::make_shared<State>();
  st->done = std::move(done);
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

Result<SlotList> StripeIo::DeleteTargets(const StripeGeometry& g, const WireShardKey& key, bool everywhere,
                                         size_t& slot_requests) {
  auto slots = Slots(key, g.red.width());
  if (!slots.ok()) return slots.status();
  SlotList send;
  for (uint32_t i = 0; i < slots->size(); ++i) {
    const TargetRef& t = (*slots)[i];
    if (t.up) {
      send.emplace_back(i, t);
    } else if (everywhere && t.id != 0 && !t.lost) {
      // Its copy would outlive the delete, and a head still names the stripe: a read would
      // find the old bytes where there should be none.
      return Unavailable("target " + std::to_string(t.id) + " holding shard " + std::to_string(i) + " of " +
                         Ordinal(key) + " is down; the delete must reach every copy; retry when it is back");
    }
  }
  slot_requests = send.size();
  // Copies where earlier placements put them too (a join not settled yet), so that a read
  // looking there cannot find them: best effort, as for down targets, unless `everywhere`.
  for (auto& [i, t] : EarlierCopies(g.red.width(), key)) {
    if (t.up && Suspected(t.id)) t.up = false;  // late before: as the slots show it (Slots)
    if (t.up) {
      if (everywhere) send.emplace_back(i, std::move(t));
      else shards_->StartDeleteTo(t, WithShard(key, i), [](Status) {});
    } else if (everywhere) {
      return EarlierHolderDown(t, i, key);
    }
  }
  return send;
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

}  // namespace penstock

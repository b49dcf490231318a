// stripe_write.cc — whole-stripe writes: encoding a stripe's shards (ec: data cells, then
// parity), sending shard i to slot i, and deciding the write as stripe_io.h's class comment
// says: acknowledged when every shard on a reachable target is durable and at least K are,
// degraded (the targets it missed reported to mgmt first) when some are not. Repair's rewrite
// of some shards of a stripe (RepairShards) encodes them the same way.
//
// WriteSlots serves range writes too (stripe_write_range.cc, stripe_write_ec_range.cc): they
// differ only in what each shard's request carries.
#include "client/stripe_io.h"

#include <cstring>

#include "client/stripe_io_internal.h"
#include "common/await.h"

namespace penstock {

using stripe_io_internal::Ordinal;
using stripe_io_internal::SawReplaced;
using stripe_io_internal::SlotList;

namespace {

// The up slots a protected write sends shard i to, by shard; why the first shard left out has
// no target goes in `first_error` (unless it holds one already).
SlotList WriteTargets(const std::vector<TargetRef>& slots, uint32_t width, Status& first_error) {
  SlotList sends;
  for (uint32_t i = 0; i < width; ++i) {
    if (i >= slots.size()) {
      if (first_error.ok()) first_error = Unavailable("no target for shard " + std::to_string(i));
      continue;
    }
    const TargetRef& t = slots[i];
    if (!t.up) {
      if (first_error.ok()) {
        first_error = t.id == 0 ? Unavailable("no usable target is left for shard " + std::to_string(i))
                                : Unavailable("target " + std::to_string(t.id) + " (" + t.address + ") is down");
      }
      continue;
    }
    sends.emplace_back(i, t);
  }
  return sends;
}

// "rep:3 acknowledges a write once 2 shards are durable (its write quorum)".
std::string QuorumPhrase(const Redundancy& red) {
  return red.ToString() + " acknowledges a write once " + std::to_string(red.quorum()) +
         " shards are durable (its write quorum, min_durable)";
}

}  // namespace

void ReplacedHead::Saw(ShardData d) {
  std::lock_guard<std::mutex> lock(mu_);
  answered_ = true;
  if (d.version == 0 || d.version >= write_version_) return;  // none, ours, or newer than ours
  if (!newest_ || d.version > newest_->version) newest_ = std::move(d);
}

bool ReplacedHead::answered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return answered_;
}

std::optional<ShardData> ReplacedHead::Newest() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!newest_) return std::nullopt;
  return ShardData{AlignedBuffer::CopyOf(newest_->data.span()), newest_->version, newest_->length, 0};
}

std::optional<ObjectHead> ReplacedHead::OtherObject(uint64_t data_hi, uint64_t data_lo) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!newest_) return std::nullopt;
  auto old = DecodeObjectHeadPrefix(newest_->data.span());
  if (!old.ok() || (old->data_hi == data_hi && old->data_lo == data_lo) || old->stripe_count() == 0) {
    return std::nullopt;
  }
  return std::move(*old);
}

void StripeIo::Write(const StripeGeometry& g, const WireShardKey& key, std::shared_ptr<const AlignedBuffer> data,
                     uint64_t version, std::function<void(Status)> done, std::optional<RetryPolicy> retry,
                     std::shared_ptr<StripeKnowledge> known, std::shared_ptr<ReplacedHead> replaced) {
  auto attempt = std::make_shared<std::function<void(std::function<void(Status)>)>>(
      [this, g, key, data = std::move(data), version, known = std::move(known),
       replaced = std::move(replaced)](std::function<void(Status)> cb) {
        WriteOnce(g, key, data, version, std::move(cb), known, replaced);
      });
  WithRetries<Status>(std::move(attempt), std::move(done), RetriesFor(g, key, std::move(retry)));
}

Status StripeIo::WriteSync(const StripeGeometry& g, const WireShardKey& key,
                           std::shared_ptr<const AlignedBuffer> data, uint64_t version) {
  return Await<Status>([&](auto done) { Write(g, key, std::move(data), version, std::move(done)); });
}

void StripeIo::WriteOnce(const StripeGeometry& g, const WireShardKey& key, std::shared_ptr<const AlignedBuffer> data,
                         uint64_t version, std::function<void(Status)> done, std::shared_ptr<StripeKnowledge> known,
                         std::shared_ptr<ReplacedHead> replaced) {
  if (!g.red.protected_()) {
    shards_->StartWrite(key, data->span(), version, [data, done = std::move(done)](Status s) { done(std::move(s)); },
                        SawReplaced(replaced));
    return;
  }
  auto st = std::make_shared<WriteState>();
  st->data = data;
  st->done = std::move(done);
  st->version = version;
  st->known = std::move(known);
  st->replaced = std::move(replaced);
  const std::vector<std::span<const std::byte>> shard_bytes = EncodeShards(g, data->span(), st->owned);
  st->give_up.resize(g.red.width());
  for (auto& a : st->give_up) a = std::make_shared<CallAbandon>();
  WriteSlots(g, key, st, [this, key, shard_bytes, version, st](uint32_t i, const TargetRef& t, std::function<void(Status)> cb) {
    shards_->StartWriteTo(t, WithShard(key, i), shard_bytes[i], version, true, std::move(cb), st->give_up[i],
                          SawReplaced(st->replaced));
  });
}

void StripeIo::WriteSlots(const StripeGeometry& g, const WireShardKey& key, std::shared_ptr<WriteState> st,
                          const ShardSender& send) {
  if (st->known) st->known->uniform_version = 0;  // until this write is decided
  st->epoch = view_->epoch();  // before the slots: a map changing between gives an older epoch
  auto slots = Slots(key, g.red.width());
  if (!slots.ok()) return st->done(slots.status());
  st->width = g.red.width();
  st->red = g.red;
  st->need = g.red.quorum();  // the write quorum: never acknowledged on fewer durable shards
  st->written.assign(st->width, false);
  st->targets.assign(st->width, 0);
  for (uint32_t i = 0; i < st->width && i < slots->size(); ++i) {
    if (!(*slots)[i].lost) st->targets[i] = (*slots)[i].id;
  }

  const SlotList sends = WriteTargets(*slots, st->width, st->first_error);
  if (sends.size() < st->need) {
    return st->done(Unavailable("only " + std::to_string(sends.size()) + " of the " + std::to_string(st->width) +
                                " targets of " + Ordinal(key) + " are up; " + QuorumPhrase(g.red) + ": " +
                                st->first_error.message()));
  }
  st->pending = static_cast<uint32_t>(sends.size());
  for (auto& [i, t] : sends) st->waiting[i] = t;
  for (auto& [i, t] : sends) {
    send(i, t, [this, st, key, i = i](Status s) {
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
      DecideWrite(key, st, lock);
    });
  }
}

void StripeIo::DecideWrite(const WireShardKey& key, const std::shared_ptr<WriteState>& st,
                           std::unique_lock<std::mutex>& lock) {
  if (st->finished) return;
  Status result;
  bool finish = false;
  if (!st->aborted.ok()) {
    finish = true;
    result = st->aborted;
  } else if (st->ok + st->pending < st->need) {
    finish = true;
    result = st->first_error.WithContext("wrote " + std::to_string(st->ok) + " of " + std::to_string(st->width) +
                                         " shards of " + Ordinal(key) + "; " + QuorumPhrase(st->red));
  } else if (st->pending == 0) {
    finish = true;
  } else if (st->ok >= st->need && !st->timer_armed) {
    st->timer_armed = true;
    // The timer holds the write weakly: a write whose requests all ended is decided already,
    // and its state (the stripe's bytes, maybe the caller's lent buffer) goes at once.
    timer_.After(straggler_, [this, weak = std::weak_ptr<WriteState>(st), key] {
      const std::shared_ptr<WriteState> st = weak.lock();
      if (!st) return;
      std::unique_lock<std::mutex> l(st->mu);
      if (st->finished) return;
      st->finished = true;
      for (auto& [i, t] : st->waiting) Suspect(t);
      GiveUpWaiting(*st, key, "within the straggler delay");
      stats_.degraded_writes++;
      auto done = std::move(st->done);
      auto written = st->written;
      l.unlock();
      ReportMissedThen(key, st->targets, written, std::move(done));
    });
  }
  if (!finish) return;
  st->finished = true;
  if (!result.ok()) GiveUpWaiting(*st, key, "before the write failed");  // decided without them
  if (result.ok() && st->ok < st->width) stats_.degraded_writes++;
  if (result.ok() && st->ok == st->width && st->known) *st->known = {st->version, st->epoch};
  auto done = std::move(st->done);
  auto written = st->written;
  lock.unlock();
  if (result.ok() && st->ok < st->width) return ReportMissedThen(key, st->targets, written, std::move(done));
  done(result);
}

void StripeIo::GiveUpWaiting(WriteState& st, const WireShardKey& key, const std::string& when) {
  // Decided without them: their requests no longer hold the stripe's bytes (the caller's, when
  // lent) until the targets answer or the transport times out. One may have landed all the
  // same; a degraded write reports it as missed either way.
  for (auto& [i, t] : st.waiting) {
    if (i >= st.give_up.size() || !st.give_up[i]) continue;
    st.give_up[i]->GiveUp(Unavailable("target " + std::to_string(t.id) + " (" + t.address + ") answered no write of shard " +
                                      std::to_string(i) + " of " + Ordinal(key) + " " + when + "; given up"));
  }
}

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

}  // namespace penstock

// stripe_read_ec.cc — reads of erasure-coded stripes (ec:K+M), fast and degraded.
//
// The fast path (ReadEc) reads the touched data cells and asks every other up slot for its
// version (kStat, no data); it answers when the data cells agree, at least K shards hold their
// version and none holds a newer one (DecideEcRead). A read of all K data cells of a scheme
// with M < K asks nothing else (DataCellsSettleTheVersion says why that is enough). A data cell that is missing, fails, is of
// another version or late by `straggler` turns the read degraded (ReadEcDegraded): the same
// cell range is read from every up slot and the missing cells are decoded from any K of one
// version, the newest that K hold. A shard that failed its checksum and was read whole is
// written back (read repair). Answers given without every cell's version wait for mgmt to
// confirm the map (stripe_map_confirm.cc).
#include "client/stripe_io.h"

#include <algorithm>
#include <cstring>

#include "client/stripe_io_internal.h"
#include "common/log.h"

namespace penstock {

using stripe_io_internal::Ordinal;

// A read of an ec stripe in flight, fast or degraded: the request and the replies by shard.
struct StripeIo::EcRead {
  EcRead(const StripeGeometry& g, const WireShardKey& key, uint64_t begin, uint64_t length, uint64_t placed_at,
         std::vector<TargetRef> slots, std::function<void(Result<ShardData>)> done)
      : g(g),
        key(key),
        begin(begin),
        length(length),
        placed_at(placed_at),
        slots(std::move(slots)),
        j0(static_cast<uint32_t>(begin / g.cell)),
        j1(static_cast<uint32_t>((begin + length - 1) / g.cell)),
        done(std::move(done)) {}

  const StripeGeometry g;
  const WireShardKey key;
  const uint64_t begin, length;
  const uint64_t placed_at;            // the map epoch the slots were taken at
  const std::vector<TargetRef> slots;  // as placed
  const uint32_t j0, j1;               // the data cells touched
  uint64_t lo = 0, hi = 0;                  // degraded: the range read of every cell
  std::shared_ptr<StripeDestination> into;  // fast path: where data cells may be placed
  bool settled = false;  // fast path: the data cells alone decide (no kStat sent)

  std::mutex mu;
  std::function<void(Result<ShardData>)> done;
  bool finished = false;
  bool degraded = false;  // the ec fast path gave up
  uint32_t pending = 0;
  std::vector<std::optional<Result<ShardData>>> replies;
};

namespace {

using Replies = std::vector<std::optional<Result<ShardData>>>;

// What the fast path answers with: the version of data cells j0..j1, and how many of them the
// transport placed straight into the caller's memory.
struct FastAnswer {
  uint64_t version = 0;
  uint32_t placed = 0;
};

// With every data cell in: usable when they agree, at least K shards hold that version, and no
// other shard holds a newer one (a cell that missed a degraded write is older).
// A cell placed into the caller's memory (`into`) counts only when every cell was (the others'
// bytes would have to be assembled around them). Nothing: the read turns degraded.
std::optional<FastAnswer> UsableDataCells(const Replies& replies, uint32_t j0, uint32_t j1, uint32_t k, bool into) {
  FastAnswer a;
  for (uint32_t j = j0; j <= j1; ++j) {
    auto& rep = replies[j];
    if (!rep || !rep->ok()) return std::nullopt;
    if (j == j0) a.version = (*rep)->version;
    if ((*rep)->version != a.version) return std::nullopt;
    if (into && ((*rep)->placed > 0 || (*rep)->data.empty())) ++a.placed;
  }
  if (a.placed != 0 && a.placed != j1 - j0 + 1) return std::nullopt;
  uint32_t holding = 0;  // shards known to hold that version
  for (uint32_t i = 0; i < replies.size(); ++i) {
    auto& rep = replies[i];
    if ((i < j0 || i > j1) && rep && rep->ok() && (*rep)->version > a.version) return std::nullopt;
    if (rep && rep->ok() && (*rep)->version == a.version) ++holding;
  }
  // Fewer than K: a write that failed part way (never acknowledged) left these cells, or the
  // versions are not all in; the degraded read takes the newest version K shards hold.
  if (holding < k) return std::nullopt;
  return a;
}

// The bytes [begin, begin + length) of the stripe from its data cells j0..j1 (`replies`), of
// `a.version`: in `into` when every cell was placed there (what a short cell did not fill is
// zeroed), else copied into the answer's buffer (zeros past a short cell).
ShardData JoinDataCells(const StripeGeometry& g, uint64_t begin, uint64_t length, uint32_t j0, uint32_t j1,
                        const Replies& replies, const FastAnswer& a, StripeDestination* into) {
  ShardData out;
  out.version = a.version;
  out.length = length;
  if (a.placed != 0) {
    // Every cell is in `into`; what a short cell did not fill reads as zeros.
    for (uint32_t c = j0; c <= j1; ++c) {
      const uint64_t at = std::max(begin, c * g.cell) - begin;
      const uint64_t want = std::min(begin + length, (c + 1) * g.cell) - begin - at;
      const uint64_t got = (*replies[c])->placed;
      if (got < want) into->Zero(at + got, want - got);
    }
    out.placed = length;
    return out;
  }
  out.data = AlignedBuffer(length);
  std::memset(out.data.data(), 0, length);
  for (uint32_t c = j0; c <= j1; ++c) {
    const uint64_t at = std::max(begin, c * g.cell) - begin;
    const auto& d = (*replies[c])->data;
    std::memcpy(out.data.data() + at, d.data(), std::min<uint64_t>(d.size(), length - at));
  }
  return out;
}

// The replies of a degraded read, counted.
struct ReplyTally {
  std::map<uint64_t, uint32_t> by_version;  // shards holding each version
  bool all_not_found = true, any_unavailable = false;
  uint32_t absent = 0;  // shards their slots (and earlier placements) do not hold
  Status first_error;
};

ReplyTally Tally(const Replies& replies) {
  ReplyTally t;
  for (auto& r : replies) {
    if (!r) continue;
    if (r->ok()) {
      t.by_version[(*r)->version]++;
      t.all_not_found = false;
    } else {
      if (r->status().code() == StatusCode::kNotFound) ++t.absent;
      if (r->status().code() != StatusCode::kNotFound) t.all_not_found = false;
      if (r->status().code() == StatusCode::kUnavailable || r->status().code() == StatusCode::kDeadlineExceeded) {
        t.any_unavailable = true;
      }
      if (t.first_error.ok() && r->status().code() != StatusCode::kNotFound) t.first_error = r->status();
    }
  }
  return t;
}

// The newest version at least `k` shards hold (`have` of them; none: have 0), and how many
// shards hold newer versions.
struct Chosen {
  uint64_t version = 0;
  uint32_t have = 0, newer = 0;
};

Chosen NewestWithK(const std::map<uint64_t, uint32_t>& by_version, uint32_t k) {
  Chosen c;
  for (auto it = by_version.rbegin(); it != by_version.rend(); ++it) {
    if (it->second >= k) {
      c.version = it->first;
      c.have = it->second;
      break;
    }
    c.newer += it->second;
  }
  return c;
}

// The answer of a degraded read that found no version K shards hold.
Status NoVersionWithK(const ReplyTally& t, const StripeGeometry& g, const WireShardKey& key) {
  const uint32_t width = g.red.width();
  // No shard anywhere, or none readable and more than M known absent: fewer than K could
  // exist, so no write of it was acknowledged (a sparse stripe, read while a target is down).
  if (t.all_not_found || (t.by_version.empty() && t.absent > width - g.red.k)) {
    return NotFound(Ordinal(key) + " has no shards");
  }
  uint32_t ok = 0;
  for (auto& [v, n] : t.by_version) ok = std::max(ok, n);
  std::string msg = "only " + std::to_string(ok) + " of the " + std::to_string(width) + " shards of " +
                    Ordinal(key) + " are readable and agree; " + std::to_string(g.red.k) + " are needed" +
                    (t.first_error.ok() ? std::string() : ": " + t.first_error.ToString());
  return t.any_unavailable ? Unavailable(msg) : DataLoss(msg);
}

// The cells of one version for a degraded read of cell range [lo, hi): those read, padded to
// the range, and those to rebuild.
struct EcCells {
  std::vector<AlignedBuffer> padded;    // by shard: the cells read at that version
  std::vector<const std::byte*> cells;  // by shard: into `padded`, null where none
  uint64_t shard_len = 0;               // the length of that version's shards
  std::vector<uint32_t> want;           // shards to rebuild
  std::vector<uint32_t> repair;         // corrupt shards read whole: written back
  std::vector<AlignedBuffer> rebuilt;   // by index in `want`

  const std::byte* data(uint32_t i) const {
    if (cells[i]) return cells[i];
    for (size_t w = 0; w < want.size(); ++w) {
      if (want[w] == i) return rebuilt[w].data();
    }
    return nullptr;
  }
};

EcCells CellsOfVersion(const Replies& replies, uint64_t version, uint64_t lo, uint64_t hi, uint32_t j0,
                       uint32_t j1) {
  const uint32_t width = static_cast<uint32_t>(replies.size());
  const uint64_t span = hi - lo;
  EcCells c;
  c.padded.resize(width);
  c.cells.assign(width, nullptr);
  for (uint32_t i = 0; i < width; ++i) {
    auto& r = replies[i];
    if (!r || !r->ok() || (*r)->version != version) continue;
    c.padded[i] = AlignedBuffer(span);
    std::memset(c.padded[i].data(), 0, span);
    std::memcpy(c.padded[i].data(), (*r)->data.data(), std::min<uint64_t>((*r)->data.size(), span));
    c.cells[i] = c.padded[i].data();
  }
  // Shards to rebuild: touched data cells, and any cell that failed its checksum when the
  // whole shard was read (read repair).
  for (auto& r : replies) {
    if (r && r->ok() && (*r)->version == version) c.shard_len = (*r)->length;
  }
  const bool whole = lo == 0 && hi >= c.shard_len;
  for (uint32_t i = 0; i < width; ++i) {
    if (c.cells[i] != nullptr) continue;
    const bool corrupt = replies[i] && !replies[i]->ok() && replies[i]->status().code() == StatusCode::kDataLoss;
    if (corrupt && whole) c.repair.push_back(i);
    if ((i >= j0 && i <= j1) || (corrupt && whole)) c.want.push_back(i);
  }
  c.rebuilt.resize(c.want.size());
  for (auto& b : c.rebuilt) b = AlignedBuffer(span);
  return c;
}

// Whether the data cells j0..j1 of a read, all of one version, settle what it answers without
// the other shards' versions (kStat): when they are all K data cells and M < K. Then
// - K shards (these cells) hold that version v: no write that failed part way is read;
// - no acknowledged write is newer than v: a write is acknowledged only once quorum >= K of
//   its shards are durable, and only M < K of them are not data cells, so at least one of
//   these cells took it and answers its version or a newer one (kWriteIfNotOlder never
//   replaces a newer version; a cell's target that did not take it answers older or nothing,
//   which is a disagreement and turns the read degraded);
// - a newer version on a parity cell alone is held by fewer than K shards: the degraded read
//   would answer v too.
// So asking the parity cells could only confirm v. A cell the map shows down, recovering (a
// write to the container missed it) or that this client suspects is not read here at all
// (ReadSlots: the read is degraded from the start). Partial reads (fewer cells) and M >= K
// ask every shard, as before.
bool DataCellsSettleTheVersion(const Redundancy& red, uint32_t j0, uint32_t j1) {
  return red.m < red.k && j0 == 0 && j1 + 1 == red.k;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The fast path

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
  auto st = std::make_shared<EcRead>(g, key, begin, length, placed_at, *slots, std::move(done));
  st->into = into;
  const uint32_t cells = j1 - j0 + 1;
  st->replies.resize(g.red.width());  // data cells j0..j1 at their index; versions of the others
  std::vector<uint32_t> stat;
  st->settled = DataCellsSettleTheVersion(g.red, j0, j1);
  if (st->settled) stats_.ec_reads_without_stat++;
  for (uint32_t i = 0; i < g.red.width() && i < slots->size() && !st->settled; ++i) {
    if ((i < j0 || i > j1) && (*slots)[i].up) stat.push_back(i);
  }
  st->pending = cells + static_cast<uint32_t>(stat.size());
  timer_.After(straggler_, [this, st] {
    std::unique_lock<std::mutex> l(st->mu);
    if (st->finished || st->degraded) return;
    for (uint32_t i = 0; i < st->replies.size() && i < st->slots.size(); ++i) {
      const bool asked = !st->settled || (i >= st->j0 && i <= st->j1);
      if (asked && !st->replies[i] && st->slots[i].up) Suspect(st->slots[i]);
    }
    for (uint32_t j = st->j0; j <= st->j1; ++j) {
      if (!st->replies[j]) return GiveUpEcRead(st, l);  // a data cell is late
    }
    DecideEcRead(st, l);  // only versions of other shards are late: go with what is known
  });
  auto on_reply = [this, st](uint32_t i, Result<ShardData> r) {
    std::unique_lock<std::mutex> l(st->mu);
    st->replies[i] = std::move(r);
    if (--st->pending > 0 || st->degraded || st->finished) return;
    DecideEcRead(st, l);
  };
  for (uint32_t j = j0; j <= j1; ++j) {
    const uint64_t cb = std::max(begin, j * g.cell) - j * g.cell;
    const uint64_t ce = std::min(end, (j + 1) * g.cell) - j * g.cell;
    ReadShardTo(g.red.width(), (*slots)[j], WithShard(key, j), cb, ce - cb,
                [on_reply, j](Result<ShardData> r) { on_reply(j, std::move(r)); }, into, j * g.cell + cb - begin);
  }
  for (uint32_t i : stat) {
    StatShardTo(g.red.width(), (*slots)[i], WithShard(key, i),
                [on_reply, i](Result<ShardData> r) { on_reply(i, std::move(r)); });
  }
}

void StripeIo::GiveUpEcRead(const std::shared_ptr<EcRead>& st, std::unique_lock<std::mutex>& lock) {
  st->degraded = true;
  auto done = std::move(st->done);
  lock.unlock();
  ReadEcDegraded(st->g, st->key, st->begin, st->length, std::move(done));
}

void StripeIo::DecideEcRead(const std::shared_ptr<EcRead>& st, std::unique_lock<std::mutex>& lock) {
  // As for replica reads: an answer without every cell's version (one late or failing, or
  // suspected and not asked) stands only once mgmt confirms the map it was placed with (a cell
  // that missed a write is marked there before the write is acknowledged).
  // Only cells of unknown version enough to hold a newer version (K) need it: fewer could not
  // have made a write acknowledged without a known cell showing it.
  uint32_t unknown = 0;
  for (uint32_t i = 0; i < st->slots.size() && i < st->replies.size(); ++i) {
    unknown += !Checked(st->slots[i], st->replies[i]);
  }
  const bool all_checked = unknown < st->g.red.k;
  const auto usable = UsableDataCells(st->replies, st->j0, st->j1, st->g.red.k, st->into != nullptr);
  if (!usable) return GiveUpEcRead(st, lock);
  st->finished = true;
  ShardData out = JoinDataCells(st->g, st->begin, st->length, st->j0, st->j1, st->replies, *usable, st->into.get());
  auto done = std::move(st->done);
  lock.unlock();
  Answer(st->placed_at, st->key, !all_checked, std::move(done), std::move(out));
}

// ---------------------------------------------------------------------------------------------
// Degraded reads

void StripeIo::ReadEcDegraded(const StripeGeometry& g, const WireShardKey& key, uint64_t begin, uint64_t length,
                              std::function<void(Result<ShardData>)> done) {
  stats_.degraded_reads++;
  const uint64_t placed_at = view_->epoch();  // before the slots: a newer map only fails the check
  auto slots = ReadSlots(key, g.red.width());
  if (!slots.ok()) return done(slots.status());
  const uint64_t end = begin + length;
  auto st = std::make_shared<EcRead>(g, key, begin, length, placed_at, *slots, std::move(done));
  st->lo = st->j0 == st->j1 ? begin - st->j0 * g.cell : 0;
  st->hi = st->j0 == st->j1 ? end - st->j0 * g.cell : g.cell;
  const uint32_t width = g.red.width();
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
  if (send.empty()) {
    std::unique_lock<std::mutex> l(st->mu);
    return DecideEcDegraded(st, l, /*final=*/true, /*late=*/false);
  }
  timer_.After(straggler_, [this, st, send] {
    std::unique_lock<std::mutex> l(st->mu);
    for (uint32_t i : send) {
      if (!st->replies[i]) Suspect(st->slots[i]);
    }
    DecideEcDegraded(st, l, /*final=*/false, /*late=*/true);
  });
  for (uint32_t i : send) {
    ReadShardTo(width, (*slots)[i], WithShard(key, i), st->lo, st->hi - st->lo, [this, st, i](Result<ShardData> r) {
      std::unique_lock<std::mutex> l(st->mu);
      st->replies[i] = std::move(r);
      --st->pending;
      DecideEcDegraded(st, l, /*final=*/st->pending == 0, /*late=*/false);
    });
  }
}

void StripeIo::DecideEcDegraded(const std::shared_ptr<EcRead>& st, std::unique_lock<std::mutex>& lock, bool final,
                                bool late) {
  if (st->finished) return;
  const StripeGeometry& g = st->g;
  const ReplyTally tally = Tally(st->replies);
  const Chosen chosen = NewestWithK(tally.by_version, g.red.k);
  // Before the straggler timer, an older version that K cells hold waits while the replies to
  // come could still give a newer one K (with M >= K, the cells that missed a write can be K).
  if (chosen.have > 0 && !final && !late && chosen.newer + st->pending >= g.red.k) return;
  if (chosen.have == 0) {
    if (!final) return;
    st->finished = true;
    auto done = std::move(st->done);
    lock.unlock();
    return done(NoVersionWithK(tally, g, st->key));
  }
  st->finished = true;
  // Decided without every cell's version (late, failing, suspected): as in ReadEc, the answer
  // waits for mgmt to confirm the map (with M >= K, the cells that missed an acknowledged
  // write can be K and answer first).
  uint32_t unknown = 0;
  for (uint32_t i = 0; i < st->slots.size() && i < g.red.width(); ++i) {
    unknown += !Checked(st->slots[i], st->replies[i]);
  }
  const bool all_checked = chosen.newer + unknown < g.red.k;  // no newer version K cells could hold
  DecodeEcDegraded(st, chosen.version, all_checked, lock);
}

void StripeIo::DecodeEcDegraded(const std::shared_ptr<EcRead>& st, uint64_t version, bool all_checked,
                                std::unique_lock<std::mutex>& lock) {
  const StripeGeometry& g = st->g;
  const WireShardKey& key = st->key;
  // Cells of the chosen version, padded to the range; rebuild the touched data cells missing.
  EcCells c = CellsOfVersion(st->replies, version, st->lo, st->hi, st->j0, st->j1);
  std::vector<std::byte*> out_ptrs;
  for (auto& b : c.rebuilt) out_ptrs.push_back(b.data());
  Status s = Coder(g.red).Reconstruct(st->hi - st->lo, c.cells, c.want, out_ptrs);
  auto done = std::move(st->done);
  lock.unlock();
  if (!s.ok()) return done(s.WithContext(Ordinal(key)));
  // (Not before the map is confirmed: the version may turn out stale; repair rewrites it.)
  for (uint32_t i : all_checked ? c.repair : std::vector<uint32_t>{}) {
    auto bytes = std::make_shared<AlignedBuffer>(AlignedBuffer::CopyOf({c.data(i), c.shard_len}));
    PS_LOG_WARN("read repair: rewriting corrupt shard {} of {} on target {}", i, Ordinal(key), st->slots[i].id);
    WriteBack(st->slots[i], WithShard(key, i), bytes, version);
  }
  ShardData out;
  out.version = version;
  out.length = st->length;
  out.data = AlignedBuffer(st->length);
  for (uint32_t j = st->j0; j <= st->j1; ++j) {
    const uint64_t cb = std::max(st->begin, j * g.cell) - j * g.cell;  // within the cell
    const uint64_t ce = std::min(st->begin + st->length, (j + 1) * g.cell) - j * g.cell;
    std::memcpy(out.data.data() + (j * g.cell + cb - st->begin), c.data(j) + (cb - st->lo), ce - cb);
  }
  Answer(st->placed_at, key, !all_checked, std::move(done), std::move(out));
}

}  // namespace penstock

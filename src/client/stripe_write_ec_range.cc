// stripe_write_ec_range.cc — a range write of an ec stripe as a read-modify-write of one cell.
//
// It reads the old bytes of the range from the written data cell and from every parity cell,
// and the version and length of every other cell (kStat); when every cell is full and all hold
// one version, it updates parity by the delta (old data XOR new data, ErasureCoder::Update) and
// writes the range of those cells, every other cell getting only the new version, each over
// the version all had (kWriteIfVersion). Anything else (a write spanning cells, a short or
// missing cell, versions that differ, a target not up or late) answers kFailedPrecondition
// with kWholeUnitNeeded: the caller reads and rewrites the unit instead.
#include "client/stripe_io.h"

#include "client/stripe_io_internal.h"

namespace penstock {

using stripe_io_internal::Ordinal;

// A range write of one cell of an ec stripe: the request, and what the old cells answered.
struct StripeIo::EcRangeWrite {
  StripeGeometry g;
  WireShardKey key;
  uint32_t cell = 0;  // the data cell written
  uint64_t lo = 0;    // where in it the range begins
  std::shared_ptr<const AlignedBuffer> data;
  uint64_t requested_version = 0;
  std::shared_ptr<StripeKnowledge> known;
  std::function<void(Status)> done;

  std::mutex mu;
  size_t pending = 0;
  bool decided = false;  // PatchEcCells ran (all answered, or the straggler timer fired)
  std::vector<std::optional<ShardData>> cells;  // by shard: the old range, or only the version
  Status error;
};

namespace {

// The version every cell of the unit holds, when every cell answered, is full and gave the
// whole range asked of it (`len` bytes, from the written cell and the parity cells); else why
// the unit must be rewritten whole.
Result<uint64_t> PatchedVersion(const StripeGeometry& g, const WireShardKey& key, uint32_t cell, uint64_t len,
                                const std::vector<std::optional<ShardData>>& cells) {
  std::optional<uint64_t> v;
  for (uint32_t i = 0; i < cells.size(); ++i) {
    const auto& d = cells[i];
    if (!d || d->length != g.cell || (v && d->version != *v) ||
        ((i == cell || i >= g.red.k) && d->data.size() != len)) {
      return FailedPrecondition(std::string(kWholeUnitNeeded) + " for " + Ordinal(key) +
                                ": its cells are not all full and of one version");
    }
    if (d) v = d->version;
  }
  return *v;
}

// The parity cells' range after `data` replaces the range of data cell `cell`, from their old
// range (`old`, by shard): new parity = old parity + the contribution of (old data XOR new data).
std::vector<std::shared_ptr<AlignedBuffer>> PatchedParity(const ErasureCoder& coder, const Redundancy& red,
                                                          uint32_t cell,
                                                          const std::vector<std::optional<ShardData>>& old,
                                                          const AlignedBuffer& data) {
  const uint64_t len = data.size();
  AlignedBuffer delta(len);
  const std::byte* before = old[cell]->data.data();
  for (uint64_t j = 0; j < len; ++j) delta.data()[j] = before[j] ^ data.data()[j];
  std::vector<std::shared_ptr<AlignedBuffer>> parity;
  std::vector<std::byte*> ptrs;
  for (uint32_t i = red.k; i < red.width(); ++i) {
    parity.push_back(std::make_shared<AlignedBuffer>(AlignedBuffer::CopyOf(old[i]->data.span())));
    ptrs.push_back(parity.back()->data());
  }
  coder.Update(len, cell, delta.data(), ptrs);
  return parity;
}

}  // namespace

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
  auto w = std::make_shared<EcRangeWrite>();
  w->g = g;
  w->key = key;
  w->cell = cell;
  w->lo = begin - uint64_t{cell} * c;
  w->data = std::move(data);
  w->requested_version = version;
  w->known = std::move(known);
  w->done = std::move(done);
  const uint32_t width = g.red.width();
  w->cells.resize(width);
  w->pending = width;
  // A cell late by `straggler` (a stopped target): its target is suspected and the unit is
  // read and rewritten instead (degraded).
  timer_.After(straggler_, [this, w, slots = *slots] {
    std::unique_lock<std::mutex> lock(w->mu);
    if (w->decided) return;
    w->decided = true;
    for (uint32_t i = 0; i < w->cells.size(); ++i) {
      if (!w->cells[i]) Suspect(slots[i]);
    }
    w->error = FailedPrecondition(std::string(kWholeUnitNeeded) + " for " + Ordinal(w->key) +
                                  ": a cell did not answer within " + std::to_string(straggler_.count()) + " ms");
    lock.unlock();
    PatchEcCells(w);
  });
  for (uint32_t i = 0; i < width; ++i) {
    auto got = [this, w, i](Result<ShardData> r) {
      std::unique_lock<std::mutex> lock(w->mu);
      if (w->decided) return;
      if (r.ok()) {
        w->cells[i] = std::move(*r);
      } else if (w->error.ok()) {
        w->error = r.status().code() == StatusCode::kNotFound
                       ? FailedPrecondition(std::string(kWholeUnitNeeded) + ": a cell is missing")
                       : r.status();
      }
      if (--w->pending > 0) return;
      w->decided = true;
      lock.unlock();
      PatchEcCells(w);
    };
    if (i == cell || i >= g.red.k) {
      shards_->StartReadTo((*slots)[i], WithShard(key, i), w->lo, w->data->size(), std::move(got));
    } else {
      shards_->StartStatTo((*slots)[i], WithShard(key, i), std::move(got));
    }
  }
}

void StripeIo::PatchEcCells(const std::shared_ptr<EcRangeWrite>& w) {
  if (!w->error.ok()) return w->done(w->error);
  const Result<uint64_t> expected = PatchedVersion(w->g, w->key, w->cell, w->data->size(), w->cells);
  if (!expected.ok()) return w->done(expected.status());
  auto st = std::make_shared<WriteState>();
  st->data = w->data;
  st->done = w->done;
  st->owned = PatchedParity(Coder(w->g.red), w->g.red, w->cell, w->cells, *w->data);
  // Above the version patched, whatever this client's clock says: a lower one would make the
  // copies that missed the patch look newer (NewerThan).
  const uint64_t version = NewerThan(w->requested_version, *expected);
  st->version = version;
  st->known = w->known;
  const StripeGeometry& g = w->g;
  WriteSlots(g, w->key, st, [this, g, key = w->key, cell = w->cell, lo = w->lo, data = w->data, st, version,
                             expected = *expected](uint32_t i, const TargetRef& t, std::function<void(Status)> cb) {
    // Every cell takes the new version; the untouched data cells only that (no bytes).
    std::span<const std::byte> bytes;
    if (i == cell) bytes = data->span();
    if (i >= g.red.k) bytes = st->owned[i - g.red.k]->span();
    shards_->StartWriteRangeTo(t, WithShard(key, i), bytes.empty() ? 0 : lo, bytes, version, expected, std::move(cb));
  });
}

}  // namespace penstock

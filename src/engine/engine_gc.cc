// engine_gc.cc — garbage collection: relocating live shards out of partly dead segments.
//
// A pass picks the sealed segment with the fewest live bytes and pins it in the same step
// (SegmentTable::PickAndPinVictim: it cannot be freed and reused while GC reads it), finds its
// live shards by scanning the index, and moves them in groups: read, verify every block's
// crc32c, append to the GC stream's open segment (no flush), then queue one kRelocate per shard
// to the committer, which flushes once and commits the group in one batch, moving each block
// the key's record still keeps where GC read it (a concurrent write, range write or delete wins
// for the blocks it wrote; their copies are garbage), so a shard range-written meanwhile still
// leaves. Shards are taken in offset order, a group's span read with one I/O and its copies
// written in contiguous runs (one I/O per run), so small shards do not cost an I/O each.
// A shard written in ranges (a block map of several runs, block_map.h) with runs in the victim
// has those runs moved, on their own: under its key lock look up its current record and pin
// its segments, read the runs in the victim, verify them, write them to one place and relocate
// them; its other runs stay where they are (moving whole shards could need more
// landing space than the victim frees, and GC would stall on a full device). A pass rescans the
// victim (a few times at most) while range writes that landed meanwhile left blocks in it.
// When the last live block has moved the segment frees itself (SegmentTable), once unpinned.
// A shard that fails its checksum is recorded as corrupt (CorruptShards) and moved as it is,
// with the checksums its record had: it still reads as corrupt (kDataLoss) until repair
// rewrites it, and its segment frees like any other. (Left in place, it kept its segment in
// use after GC had spent room on the rest of it; on a full device that room was the reserve.)
// A pass never runs out of room half way: SegmentTable picks only a victim whose live bytes fit
// in GC's room. A pass that fails (a read error) leaves its victim out of later passes until
// the retry below, so background GC does not spin on it.
//
// When it runs: the GC thread cleans segments at least gc_min_dead_fraction dead (3/4 while
// half the device is free: BackgroundGcMinDead), paced to gc_rate_bytes_per_sec; when free
// segments drop below gc_free_segments_low it takes any segment at least 1/8 dead and does not
// pace. A writer that finds no space runs passes itself on segments at least 1/8 dead
// (AllocateForWrite) before giving up with kResourceExhausted; pacing stops while one waits.
// Passes are serialised by gc_mu_.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "common/log.h"
#include "engine/block_map.h"
#include "engine/commit_request.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "engine/index.h"
#include "engine/pacer.h"
#include "engine/segment_owners.h"
#include "engine/segment_table.h"

namespace penstock {

using engine::CommitRequest;
using engine::kBlockSize;
using engine::kNoSegment;
using engine::ShardRecord;

namespace {

constexpr uint64_t kGroupBytes = 8ull << 20;  // relocated per committer batch
constexpr int kScansPerVictim = 3;  // rescans while range writes leave blocks in the victim
constexpr auto kIdlePoll = std::chrono::milliseconds(100);

// The end of the group that starts at live[next] (sorted by offset): shards whose span in the
// victim is at most kGroupBytes (or one larger shard), read with one I/O, then written to the
// GC stream in contiguous runs.
size_t GroupEnd(const std::vector<std::pair<ShardKey, ShardRecord>>& live, size_t next) {
  size_t end = next + 1;
  const uint64_t span_start = live[next].second.runs[0].offset;
  while (end < live.size()) {
    const ShardRecord& r = live[end].second;
    if (r.runs[0].offset + r.stored_bytes() - span_start > kGroupBytes) break;
    ++end;
  }
  return end;
}

// The kRelocate of `key`'s blocks in `victim`, copied to `extent` (unsynced), against
// `record`, the key's record GC read.
std::unique_ptr<CommitRequest> Relocation(const ShardKey& key, ShardRecord record, uint32_t victim,
                                          const engine::Extent& extent) {
  auto req = std::make_unique<CommitRequest>();
  req->kind = CommitRequest::Kind::kRelocate;
  req->key = key;
  req->record = engine::Relocated(record, victim, extent.segment, extent.offset);
  req->extent = extent;
  req->from = victim;
  req->expected = std::move(record);
  return req;
}

}  // namespace

namespace engine {

// One GC pass over a victim (Engine::CleanVictim): what its steps share.
struct GcPass {
  uint32_t victim = kNoSegment;  // picked and pinned
  bool throttled = false;        // paced to gc_rate_bytes_per_sec while no writer waits for space
  Pacer pacer;
  std::set<ShardKey> corrupt;  // found corrupt in this pass (counted once, moved all the same)
};

}  // namespace engine

Result<engine::Extent> Engine::AllocateForWrite(uint64_t bytes) {
  // While writers wait for GC to make room, a new one queues behind them (space_mu_) instead of
  // taking the room they wait for.
  Result<engine::Extent> extent = ResourceExhausted("writers are waiting for GC to make room");
  if (gc_waiters_.load(std::memory_order_relaxed) == 0) {
    extent = AllocateSpace(bytes, engine::AppendStream::kUser);
    if (extent.ok() || extent.status().code() != StatusCode::kResourceExhausted || !options_.gc_enabled) {
      return extent;
    }
  }
  gc_waiters_.fetch_add(1);  // (only with GC on: without it nobody waits)
  {
    // One writer at a time cleans for space, and each first tries the space the one before it
    // freed. Without this, every writer that found the device full went on to clean a segment
    // of its own once it got its turn: a herd of 64 writers moved mostly-live segments for
    // nothing (write amplification 3 to 6 instead of 1.25) and writes stalled for seconds.
    std::lock_guard lock(space_mu_);
    extent = AllocateSpace(bytes, engine::AppendStream::kUser);
    // Only a victim with at least an eighth of a segment dead (and room for this write) is
    // worth cleaning for: a device full of live data with a few dead blocks in every segment
    // (rewritten object heads) had each writer move segment after segment of live data to win
    // a few KiB, which GC's own open segment then kept; writes waited minutes and timed out
    // instead of being told "no space".
    const uint64_t worth = std::max<uint64_t>(bytes, segment_bytes_ / 8);
    // Each pass frees at most one segment; a full device may need a few before one is spare.
    for (uint32_t pass = 0; pass < table_->segment_count() && !extent.ok() &&
                            extent.status().code() == StatusCode::kResourceExhausted;
         ++pass) {
      auto cleaned = CleanOneSegment(worth, /*throttled=*/false);
      // Even with no victim: the GC thread may have freed one.
      extent = AllocateSpace(bytes, engine::AppendStream::kUser);
      if (!cleaned.ok() || !*cleaned) break;
    }
  }
  gc_waiters_.fetch_sub(1);
  return extent;
}

Result<uint64_t> Engine::CollectGarbage(uint64_t max_segments) {
  WaitApplied();  // the space acknowledged overwrites and deletes released
  {
    std::lock_guard lock(gc_mu_);
    gc_stuck_.clear();
  }
  uint64_t before = gc_segments_cleaned_.load();
  // Bounded: a pass either empties its victim or excludes it from later passes.
  for (uint64_t pass = 0; pass < 2ull * table_->segment_count(); ++pass) {
    if (gc_segments_cleaned_.load() - before >= max_segments) break;
    PS_ASSIGN_OR_RETURN(bool did, CleanOneSegment(kBlockSize, /*throttled=*/false));
    if (!did) break;
  }
  return gc_segments_cleaned_.load() - before;
}

void Engine::GcLoop() {
  uint64_t idle_polls = 0;
  for (;;) {
    const engine::SegmentTableStats st = table_->Stats();
    const bool pressure = st.free_segments < options_.gc_free_segments_low;
    auto did = CleanOneSegment(engine::BackgroundGcMinDead(st, segment_bytes_, options_.gc_min_dead_fraction,
                                                           options_.gc_free_segments_low),
                               !pressure);
    if (!did.ok()) {
      PS_LOG_WARN("engine GC: {}", did.status().ToString());
    }
    if (did.ok() && *did) {
      std::lock_guard lock(bg_mu_);
      if (bg_stop_) return;
      continue;
    }
    if (++idle_polls % 100 == 0) {  // now and then, retry segments a pass could not empty
      std::lock_guard lock(gc_mu_);
      gc_stuck_.clear();
    }
    if (!SleepUntil(std::chrono::steady_clock::now() + kIdlePoll)) return;
  }
}

Result<bool> Engine::CleanOneSegment(uint64_t min_dead_bytes, bool throttled) {
  std::lock_guard gc_lock(gc_mu_);
  {
    // Once the index failed nothing commits: copies would only fill the GC stream.
    std::lock_guard lock(pipeline_->mu);
    if (!pipeline_->index_failed.ok()) return pipeline_->index_failed;
  }
  uint32_t victim = table_->PickAndPinVictim(min_dead_bytes, gc_stuck_);
  if (victim == kNoSegment) return false;
  struct Unpin {
    engine::SegmentTable& t;
    uint32_t s;
    ~Unpin() { t.Unpin(s); }
  } unpin{*table_, victim};
  auto cleaned = CleanVictim(victim, throttled);
  // A read error: not picked again until a retry (the GC thread would spin on it).
  if (!cleaned.ok()) gc_stuck_.insert(victim);
  return cleaned;
}

Result<bool> Engine::CleanVictim(uint32_t victim, bool throttled) {
  engine::GcPass pass{.victim = victim, .throttled = throttled,
                      .pacer = engine::Pacer(throttled ? options_.gc_rate_bytes_per_sec : 0), .corrupt = {}};
  for (int scan = 0; scan < kScansPerVictim && table_->live_bytes(victim) > 0; ++scan) {
    // Shards in one extent (in the victim), and shards in several runs (one of them in it).
    std::vector<std::pair<ShardKey, ShardRecord>> live, mapped;
    PS_RETURN_IF_ERROR(ScanVictim(victim, live, mapped));
    PS_ASSIGN_OR_RETURN(bool going_on, MoveWholeShards(pass, live));
    if (!going_on) return true;  // stopping
    PS_ASSIGN_OR_RETURN(going_on, MoveMappedShards(pass, mapped));
    if (!going_on) return true;  // stopping
  }
  if (table_->live_bytes(victim) == 0) {
    gc_segments_cleaned_.fetch_add(1, std::memory_order_relaxed);
  } else {
    gc_stuck_.insert(victim);  // blocks written meanwhile stay; do not pick it again until a retry
  }
  return true;
}

Status Engine::ScanVictim(uint32_t victim, std::vector<std::pair<ShardKey, ShardRecord>>& live,
                          std::vector<std::pair<ShardKey, ShardRecord>>& mapped) {
  std::set<ShardKey> seen;
  for (const ShardKey& key : owners_->Owners(victim)) {
    if (!seen.insert(key).second) continue;
    PS_ASSIGN_OR_RETURN(std::optional<ShardRecord> record,
                        index_->Get(key, /*memory_only=*/false, /*fill_cache=*/false));
    // Rewritten or deleted since the owners were listed: nothing of it to move.
    if (!record || std::none_of(record->runs.begin(), record->runs.end(),
                                [&](const engine::BlockRun& run) { return run.segment == victim; })) {
      continue;
    }
    (record->contiguous() ? live : mapped).emplace_back(key, std::move(*record));
  }
  return OkStatus();
}

Result<bool> Engine::MoveWholeShards(engine::GcPass& pass, std::vector<std::pair<ShardKey, ShardRecord>>& live) {
  std::sort(live.begin(), live.end(), [](const auto& x, const auto& y) {
    return x.second.runs[0].offset < y.second.runs[0].offset;
  });
  size_t next = 0;
  while (next < live.size()) {
    const size_t end = GroupEnd(live, next);
    PS_ASSIGN_OR_RETURN(uint64_t written,
                        MoveGroup(pass, std::span<const std::pair<ShardKey, ShardRecord>>(live).subspan(next, end - next)));
    next = end;
    if (!PaceGc(pass, written)) return false;
  }
  return true;
}

Result<uint64_t> Engine::MoveGroup(engine::GcPass& pass,
                                   std::span<const std::pair<ShardKey, ShardRecord>> group) {
  const uint32_t victim = pass.victim;
  const uint64_t span_start = group.front().second.runs[0].offset;
  const uint64_t span_end = group.back().second.runs[0].offset + group.back().second.stored_bytes();
  AlignedBuffer in(span_end - span_start);
  PS_RETURN_IF_ERROR(device_->Read(DeviceOffset(victim, span_start), {in.data(), in.size()})
                         .WithContext(fmt::format("GC of segment {}", victim)));
  AlignedBuffer out(span_end - span_start);
  struct Run {
    uint64_t device_offset, out_offset, length;
  };
  std::vector<Run> runs;
  std::vector<std::unique_ptr<CommitRequest>> moves;
  uint64_t cursor = 0;
  Status failed;
  for (const auto& [key, record] : group) {
    const uint64_t bytes = record.stored_bytes();
    std::span<const std::byte> blocks(in.data() + (record.runs[0].offset - span_start), bytes);
    // The victim is pinned, so these bytes are what the record named at scan time.
    if (device_->persistent() && engine::BlockChecksums(blocks) != record.block_crcs) {
      NoteCorruptInGc(key, victim, pass.corrupt);
    }
    auto extent = AllocateSpace(bytes, engine::AppendStream::kGc);
    if (!extent.ok()) {
      failed = extent.status();
      break;
    }
    std::memcpy(out.data() + cursor, blocks.data(), bytes);
    uint64_t at = DeviceOffset(extent->segment, extent->offset);
    if (!runs.empty() && runs.back().device_offset + runs.back().length == at) {
      runs.back().length += bytes;
    } else {
      runs.push_back({at, cursor, bytes});
    }
    cursor += bytes;
    moves.push_back(Relocation(key, record, victim, *extent));
  }
  for (const Run& run : runs) {
    if (!failed.ok()) break;
    failed = device_->WriteUnsynced(run.device_offset, {out.data() + run.out_offset, run.length});
  }
  if (!failed.ok()) {
    for (auto& r : moves) table_->Abandon(r->extent);
    return failed.WithContext(fmt::format("GC of segment {}", victim));
  }
  device_bytes_written_.fetch_add(cursor, std::memory_order_relaxed);
  CommitMoves(moves);  // kAborted for shards overwritten meanwhile: fine
  return cursor;
}

Result<bool> Engine::MoveMappedShards(engine::GcPass& pass,
                                      const std::vector<std::pair<ShardKey, ShardRecord>>& mapped) {
  // Block-mapped shards, their moves committed in groups like the others.
  std::vector<std::unique_ptr<CommitRequest>> moves;
  uint64_t moved = 0;
  for (size_t m = 0; m < mapped.size(); ++m) {
    PS_ASSIGN_OR_RETURN(std::unique_ptr<CommitRequest> move, MoveRuns(pass.victim, mapped[m].first, pass.corrupt));
    if (move) {
      moved += move->extent.length;
      moves.push_back(std::move(move));
    }
    if (moved < kGroupBytes && m + 1 < mapped.size()) continue;
    CommitMoves(moves);  // kAborted for shards written meanwhile: fine
    moves.clear();
    if (!PaceGc(pass, moved)) return false;
    moved = 0;
  }
  return true;
}

void Engine::CommitMoves(const std::vector<std::unique_ptr<CommitRequest>>& moves) {
  std::vector<CommitRequest*> queued;
  for (auto& r : moves) queued.push_back(r.get());
  if (queued.empty()) return;
  (void)Commit(queued);
  for (CommitRequest* r : queued) {
    if (r->status.ok()) gc_bytes_moved_.fetch_add(r->extent.length, std::memory_order_relaxed);
  }
}

bool Engine::PaceGc(engine::GcPass& pass, uint64_t bytes) {
  if (!pass.throttled || gc_waiters_.load() != 0) return true;
  return SleepUntil(pass.pacer.Account(bytes));
}

void Engine::NoteCorruptInGc(const ShardKey& key, uint32_t victim, std::set<ShardKey>& corrupt) {
  if (!corrupt.insert(key).second) return;  // a rescan of the same pass: counted once
  checksum_errors_.fetch_add(1, std::memory_order_relaxed);
  MarkCorrupt(key);
  PS_LOG_WARN("engine GC: shard {} in segment {} fails its checksum; moved as it is (it reads as "
              "corrupt until repaired)", key.ToString(), victim);
}

Result<std::unique_ptr<CommitRequest>> Engine::MoveRuns(uint32_t victim, const ShardKey& key,
                                                        std::set<ShardKey>& corrupt) {
  engine::SegmentPins pins(*table_);
  // The record as it is now (a range write may have changed it since the scan), pinned.
  PS_ASSIGN_OR_RETURN(std::optional<ShardRecord> record, LookUpAndPin(key, pins));
  if (!record) return nullptr;
  const uint64_t bytes = engine::StoredBytesIn(*record, victim);
  if (bytes == 0) return nullptr;
  AlignedBuffer data(bytes);
  // The shard's runs in the victim, read together, in block order into `data`.
  std::vector<const engine::BlockRun*> moved;
  std::vector<engine::DeviceRead> reads;
  uint64_t at = 0;
  for (const engine::BlockRun& run : record->runs) {
    if (run.segment != victim) continue;
    std::span<std::byte> piece(data.data() + at, run.block_count * kBlockSize);
    reads.push_back({DeviceOffset(run.segment, run.offset), piece});
    moved.push_back(&run);
    at += piece.size();
  }
  PS_RETURN_IF_ERROR(device_->ReadAll(reads).WithContext(
      fmt::format("GC of segment {}: read shard {}", victim, key.ToString())));
  for (size_t i = 0; i < moved.size() && device_->persistent(); ++i) {
    const engine::BlockRun& run = *moved[i];
    std::vector<uint32_t> crcs = engine::BlockChecksums(reads[i].out);
    if (!std::equal(crcs.begin(), crcs.end(), record->block_crcs.begin() + static_cast<std::ptrdiff_t>(run.first_block))) {
      NoteCorruptInGc(key, victim, corrupt);
      break;
    }
  }
  pins.Clear();
  auto allocated = AllocateSpace(bytes, engine::AppendStream::kGc);
  if (!allocated.ok()) return allocated.status().WithContext(fmt::format("GC of segment {}", victim));
  const engine::Extent extent = *allocated;
  Status written = device_->WriteUnsynced(DeviceOffset(extent.segment, extent.offset), {data.data(), bytes});
  if (!written.ok()) {
    table_->Abandon(extent);
    return written.WithContext(fmt::format("GC of segment {}", victim));
  }
  device_bytes_written_.fetch_add(bytes, std::memory_order_relaxed);
  return Relocation(key, std::move(*record), victim, extent);
}

}  // namespace penstock

// engine_decide.cc — group commit, step 1: the committer decides each request of a batch
// against the index (engine_commit.cc describes the whole pipeline).
//
// A request is decided against its key's record as the batches before it leave it (those still
// in flight, CommitPipeline::in_flight_records; those handed to the applier and not yet
// applied, CommitPipeline::pending; the committer's RecordCache; else the index) plus the
// batch's own earlier updates (two writes of one key in a batch: the later wins). Its verdict
// is OK with the key's record after it (an IndexUpdate), or why it does not apply:
//   kWrite       kAborted when `not_older` and the stored version is newer; with
//                `expected_version`, as kWriteRange's (VersionVerdict);
//   kDelete      kNotFound when absent, kAborted when `expected_version` is not the stored one;
//   kRelocate    moves only the blocks still where GC read them (ApplyMove, block_map.h), and is
//                kAborted when none are;
//   kWriteRange  its record is composed here from the key's record as it stands then
//                (ApplyRangeWrite, block_map.h): kAborted / kFailedPrecondition when
//                `expected_version` is not the stored one (VersionVerdict), kAborted when its
//                key changed since its writer read it (a conditional one), or when the record
//                would have more than kMaxRuns runs; a merge_edges one has its edge blocks
//                filled with the old bytes here (MergeEdges).
// Version conditions are decided here, in queue order, so no other lock orders them.
// Committer thread only.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "common/buffer.h"
#include "engine/block_map.h"
#include "engine/commit_request.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "engine/index.h"

namespace penstock {

using engine::CommitRequest;
using engine::ShardRecord;

namespace {

// kWriteRange with expected_version: OK when the stored shard version is `expected`.
Status VersionVerdict(const ShardKey& key, const engine::SharedRecord& old, uint64_t expected) {
  const uint64_t stored = old ? old->version : 0;
  if (stored > expected) {
    return Aborted(fmt::format("shard {} holds version {}, newer than the {} this write expects; a "
                               "later write won", key.ToString(), stored, expected));
  }
  if (stored < expected) {
    return FailedPrecondition(fmt::format("shard {} {}, older than the {} this write expects: this copy "
                                          "missed a write and must be repaired whole", key.ToString(),
                                          old ? fmt::format("holds version {}", stored) : "is missing", expected));
  }
  return OkStatus();
}

// kWrite: its record replaces the old one (u.old), unless a newer version is stored and it
// must not be older.
Status DecideWrite(CommitRequest& r, engine::IndexUpdate& u) {
  const engine::SharedRecord& old = u.old;
  if (r.not_older && old && old->version > r.record.version) {
    r.version_refused = true;
    return Aborted(fmt::format("shard {} holds version {}, newer than {}; a later write won",
                               r.key.ToString(), old->version, r.record.version));
  }
  if (r.expected_version) {
    if (Status v = VersionVerdict(r.key, old, *r.expected_version); !v.ok()) {
      r.version_refused = true;
      return v;
    }
  }
  u.record = r.record;
  return OkStatus();
}

// kDelete: the key's record (`old`) goes, if there is one of the expected version.
Status DecideDelete(CommitRequest& r, const engine::SharedRecord& old) {
  if (!old) {
    return NotFound(fmt::format("shard {} not found on this target", r.key.ToString()));
  }
  if (r.expected_version && old->version != *r.expected_version) {
    r.version_refused = true;
    return Aborted(fmt::format("shard {} holds version {}, not the {} this delete is for; it was "
                               "rewritten and stays", r.key.ToString(), old->version,
                               *r.expected_version));
  }
  return OkStatus();
}

// kRelocate: the blocks the key's record (u.old) still keeps where GC read them move to their
// copies.
Status DecideRelocate(CommitRequest& r, engine::IndexUpdate& u) {
  const engine::SharedRecord& old = u.old;
  if (old) u.record = engine::ApplyMove(*old, *r.expected, r.record, r.from);
  if (!old || *u.record == *old) {
    return Aborted(fmt::format("shard {} was rewritten while GC moved it; the "
                               "newer data stays", r.key.ToString()));
  }
  return OkStatus();
}

}  // namespace

bool Engine::DecideBatch(engine::DecidedBatch& d) {
  const size_t n = d.requests.size();
  d.applies.resize(n, false);
  d.update_of.resize(n);
  d.verdict.resize(n);
  // Decide each request against the index as the batches before it (in flight, handed over
  // or applied) and this batch's own earlier updates leave it.
  std::map<ShardKey, size_t> overlay;  // key -> its latest update in this batch
  bool has_data = false;
  for (size_t i = 0; i < n; ++i) {
    CommitRequest& r = *d.requests[i];
    engine::IndexUpdate u;
    u.key = r.key;
    u.range_write = r.kind == CommitRequest::Kind::kWriteRange;
    // u.old: shared with where it came from, no copy of its block map.
    if (auto it = overlay.find(r.key); it != overlay.end()) {
      u.old = d.updates[it->second].record;
    } else {
      Result<engine::SharedRecord> old = RecordBeforeBatch(r.key);
      if (!old.ok()) {
        d.verdict[i] = old.status();
        continue;
      }
      u.old = std::move(*old);
    }
    Status verdict;
    switch (r.kind) {
      case CommitRequest::Kind::kWrite:
        verdict = DecideWrite(r, u);
        break;
      case CommitRequest::Kind::kDelete:
        verdict = DecideDelete(r, u.old);
        break;
      case CommitRequest::Kind::kRelocate:
        verdict = DecideRelocate(r, u);
        break;
      case CommitRequest::Kind::kWriteRange:
        verdict = DecideRangeWrite(r, std::span<CommitRequest* const>(d.requests.data(), i), u);
        break;
    }
    if (!verdict.ok()) {
      d.verdict[i] = std::move(verdict);
      continue;
    }
    d.applies[i] = true;
    has_data |= r.extent.length > 0;
    overlay[r.key] = d.update_of[i] = static_cast<uint32_t>(d.updates.size());
    d.updates.push_back(std::move(u));
  }
  return has_data;
}

Result<engine::SharedRecord> Engine::RecordBeforeBatch(const ShardKey& key) {
  engine::CommitPipeline& p = *pipeline_;
  if (auto fit = p.in_flight_records.find(key); fit != p.in_flight_records.end()) {
    return fit->second.second;
  }
  {
    // Only this thread hands batches over, so a key not pending now is in the index.
    std::lock_guard lock(p.mu);
    if (auto pit = p.pending.find(key); pit != p.pending.end()) return pit->second.second;
  }
  if (const engine::SharedRecord* cached = p.cache.Find(key)) return *cached;
  PS_ASSIGN_OR_RETURN(std::optional<ShardRecord> record,
                      index_->Get(key, /*memory_only=*/false, /*fill_cache=*/false));
  return engine::SharedRecord(std::move(record));
}

Status Engine::DecideRangeWrite(CommitRequest& r, std::span<CommitRequest* const> earlier,
                                engine::IndexUpdate& u) {
  const engine::SharedRecord& old = u.old;
  if (r.expected_version) {
    if (Status v = VersionVerdict(r.key, old, *r.expected_version); !v.ok()) {
      r.version_refused = true;
      return v;
    }
  }
  const bool unchanged = (!r.conditional || old == r.expected) &&
                         (!r.max_old_length || (old ? old->length : 0) <= *r.max_old_length);
  if (!unchanged) {
    return Aborted(fmt::format("shard {} changed while a range write merged its "
                               "edge blocks; retry the write", r.key.ToString()));
  }
  if (r.merge_edges) {
    // Requests whose buffers hold data not yet durable, oldest first: those of the
    // batches in flight, then this batch's earlier ones (old blocks may be there).
    std::vector<CommitRequest*> carriers;
    for (const auto& f : pipeline_->in_flight) {
      carriers.insert(carriers.end(), f->d->requests.begin(), f->d->requests.end());
    }
    carriers.insert(carriers.end(), earlier.begin(), earlier.end());
    if (Status merged = MergeEdges(r, old, carriers); !merged.ok()) return merged;
  }
  u.record = engine::ApplyRangeWrite(old.get(), r.first_block, r.extent.segment, r.extent.offset,
                                     r.record.block_crcs, r.record.length, r.record.version);
  if (u.record->runs.size() > engine::kMaxRuns) {
    r.fragmented = true;
    return Aborted(fmt::format("shard {} would be in more than {} runs; rewrite "
                               "it whole", r.key.ToString(), engine::kMaxRuns));
  }
  u.written_begin = r.first_block;
  u.written_end = r.first_block + r.record.block_crcs.size();
  return OkStatus();
}

Status Engine::MergeEdges(CommitRequest& r, const engine::SharedRecord& old,
                          std::span<CommitRequest* const> earlier) {
  const uint64_t old_length = old ? old->length : 0;
  const uint64_t blocks = r.merge_blocks.size() / engine::kBlockSize;
  AlignedBuffer block(engine::kBlockSize);
  for (uint64_t j = 0; j < blocks; ++j) {
    const uint64_t b = r.first_block + j;
    const uint64_t begin = b * engine::kBlockSize, end = begin + engine::kBlockSize;
    if (r.range_begin <= begin && end <= r.range_end) continue;
    // Block b of the old record: zeros past its end or in a hole, data an earlier request of
    // this batch carries, or durable data (the record is the newest decided, so nothing has
    // released its space). Decided again after a failed data write, so always rewritten whole.
    std::span<std::byte> old_block(block.data(), engine::kBlockSize);
    std::memset(old_block.data(), 0, old_block.size());
    auto place = begin < old_length ? engine::BlockPlace(*old, b) : std::nullopt;
    if (place) {
      const CommitRequest* carrier = nullptr;
      for (const CommitRequest* e : earlier) {
        if (e && !e->data.empty() && e->extent.segment == place->first &&
            place->second >= e->extent.offset && place->second < e->extent.offset + e->data.size()) {
          carrier = e;
        }
      }
      if (carrier) {
        std::memcpy(old_block.data(), carrier->data.data() + (place->second - carrier->extent.offset),
                    engine::kBlockSize);
      } else {
        PS_RETURN_IF_ERROR(device_->Read(DeviceOffset(place->first, place->second), old_block)
                               .WithContext(fmt::format("merge a range write into shard {}",
                                                        r.key.ToString())));
        if (device_->persistent()) PS_RETURN_IF_ERROR(VerifyBlocks(r.key, *old, old_block, b));
      }
    }
    std::span<std::byte> out = r.merge_blocks.subspan(j * engine::kBlockSize, engine::kBlockSize);
    if (r.range_begin > begin) {
      std::memcpy(out.data(), old_block.data(), std::min(r.range_begin, end) - begin);
    }
    if (r.range_end < end) {
      const uint64_t from = std::max(r.range_end, begin) - begin;
      std::memcpy(out.data() + from, old_block.data() + from, engine::kBlockSize - from);
    }
    r.record.block_crcs[j] = engine::BlockChecksums(out)[0];
  }
  return OkStatus();
}

}  // namespace penstock

// commit_request.h — one index mutation handed to the engine's committer (group commit).
//
// A writer (or GC) fills a CommitRequest on its own stack, queues it with Engine::Commit and
// blocks until the committer has made it durable or failed it (or, for
// Engine::WriteRangeAsync, queues one on the heap with `on_done` and returns). The committer
// owns the request between queueing and `done`; it sets `status` and `done` under `mu` and
// notifies while still holding it, so the owner cannot return (and destroy the request) before
// the committer is done touching it.
//
// Kinds:
//   kWrite       put `record`, whose bytes `data` the committer writes to pending `extent` (with
//                the rest of the batch); the old record's space dies.
//   kDelete      remove the key; kNotFound if it has no record.
//   kRelocate    GC: the blocks `expected` (the record GC read) has in segment `from` are
//                already copied (unsynced) to `extent`, as `record` maps them. The committer
//                moves each block the key's record still keeps where `expected` had it to its
//                copy (ApplyMove, block_map.h); blocks written since stay (a write, range write or
//                delete that raced with GC wins), and the copy's pieces no block uses are
//                released with the old places. kAborted (`extent` abandoned) when no block moves.
//   kWriteRange  a range write (Engine::WriteRange): `data` (whole blocks, written to `extent`
//                like kWrite's) replaces blocks [first_block, first_block + n) of the key's
//                record as the batch leaves it, which the committer composes then
//                (ApplyRangeWrite, block_map.h): length max(old length, record.length), version
//                record.version, record.block_crcs the new blocks' checksums. The replaced
//                blocks' space dies. With `conditional` / `max_old_length` set it applies only if
//                the key's record is still `expected` / no longer than that (the writer merged
//                old bytes into its edge blocks, or relied on the shard ending before them);
//                otherwise kAborted, and the writer retries. With `merge_edges` (a writer that
//                kept losing that race) the committer itself fills the bytes of `merge_blocks`
//                (the same buffer as `data`) outside shard bytes [range_begin, range_end) with
//                the key's old bytes, read at decision time, and checksums those blocks again.
//                kAborted with `fragmented` set: the record would have had more than kMaxRuns
//                runs; the writer rewrites the shard.
// On any failure the committer abandons `extent`, so the owner never cleans up space.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <span>
#include <utility>
#include <vector>

#include "common/buffer.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "engine/format.h"
#include "engine/segment_table.h"

namespace penstock::engine {

struct CommitRequest {
  enum class Kind : uint8_t { kWrite, kDelete, kRelocate, kWriteRange };

  Kind kind = Kind::kWrite;
  ShardKey key;
  ShardRecord record;         // kWrite, kRelocate; kWriteRange: see above (runs unused)
  Extent extent;              // kWrite, kRelocate, kWriteRange: pending space holding the data
  uint64_t first_block = 0;   // kWriteRange
  uint32_t from = kNoSegment;  // kRelocate: the GC victim
  // Conditions (kWriteRange); when one fails the request is kAborted. kRelocate: `expected`.
  bool conditional = false;
  std::optional<ShardRecord> expected;     // conditional: the key's record (nullopt: absent)
  std::optional<uint64_t> max_old_length;  // the key's length at most this (absent: 0)
  // kWriteRange, kWrite: the key's stored shard version must be exactly this (absent: 0). A newer one
  // fails the request kAborted, an older one (or none) kFailedPrecondition. kDelete: any other
  // stored version fails it kAborted.
  std::optional<uint64_t> expected_version;
  // kWrite: a stored shard version newer than record.version fails the request kAborted.
  bool not_older = false;
  bool version_refused = false;  // set by the committer: a version condition failed (final)
  bool fragmented = false;  // kWriteRange: set by the committer (see above)
  bool merge_edges = false;  // kWriteRange (see above)
  uint64_t range_begin = 0, range_end = 0;
  std::span<std::byte> merge_blocks;
  // kWrite, kWriteRange: whole 4 KiB blocks for `extent`, owned by the caller until done. Empty
  // when the data is already on the device (unsynced), as for kRelocate.
  std::span<const std::byte> data;

  // Set for a request nobody waits for (Engine::WriteRangeAsync): the committer or applier
  // calls it instead of setting `done`, and it owns (and frees) the request from then on.
  std::function<void(CommitRequest&, Status)> on_done;

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;  // guarded by mu
  Status status;      // valid once done
};

// Ends `r` with `s` (committer or applier): hands it to its `on_done`, or sets `status` and
// `done` under `mu` and wakes its owner.
inline void Finish(CommitRequest& r, Status s) {
  if (r.on_done) {  // nobody waits: the callback owns the request from here
    auto on_done = std::move(r.on_done);
    on_done(r, std::move(s));
    return;
  }
  std::lock_guard lock(r.mu);
  r.status = std::move(s);
  r.done = true;
  r.cv.notify_one();
}

// A batch the committer has decided and written, on its way to the applier, which commits it
// to the index, moves its space accounting and finishes its requests (engine_apply.cc).
struct DecidedBatch {
  uint64_t number = 0;  // order of hand-over (the pending overlay's tag)
  std::vector<CommitRequest*> requests;
  // Per request, what the applier needs of it: a request the committer acknowledged itself
  // (`acked`) may be gone by the time the applier runs, so the applier reads this, never it.
  struct Copy {
    CommitRequest::Kind kind;
    ShardKey key;
    Extent extent;
    bool acked = false;
  };
  std::vector<Copy> copies;
  std::vector<IndexUpdate> updates;  // their `old` and `record`: the key's record before and after
  std::vector<bool> applies;         // per request: it has an update
  std::vector<uint32_t> update_of;   // per request that applies: its index in `updates`
  std::vector<Status> verdict;                  // per request that does not apply: why
  bool journaled = false;    // the journal holds it: apply unsynced, carrying `position`
  JournalPosition position;  // journaled: after its record; else: the journal's position
  bool wrap = false;         // not a batch: wrap the journal, once everything before is applied
};

// The committer's own memory of the records the batches it handed over left their keys
// (nullopt: deleted), so deciding a write to a key written lately skips the index lookup (a
// RocksDB memtable search, the larger part of deciding). Every change to a record passes
// through the committer, so an entry stays true until the key's next batch replaces it. Two
// generations of at most kGenerationBytes each (approximate record sizes): when the newer is
// full it becomes the older and the older is dropped. Committer thread only.
class RecordCache {
 public:
  static constexpr size_t kGenerationBytes = 16u << 20;
  // The cached record of `key`, or null when the cache has none.
  const SharedRecord* Find(const ShardKey& key) const {
    if (auto it = newer_.find(key); it != newer_.end()) return &it->second;
    if (auto it = older_.find(key); it != older_.end()) return &it->second;
    return nullptr;
  }
  void Put(const ShardKey& key, const SharedRecord& record) {
    // Sizes count once per key: a key written again replaces its entry (a generation sized by
    // puts dropped keys still in use under a small working set, and each miss costs a lookup).
    auto [it, added] = newer_.insert_or_assign(key, record);
    if (added) {
      newer_bytes_ += 160 + (record ? record->runs.size() * sizeof(BlockRun) +
                                          record->block_crcs.size() * sizeof(uint32_t)
                                    : 0);
    }
    if (newer_bytes_ > kGenerationBytes) {
      older_ = std::move(newer_);
      newer_ = {};
      newer_bytes_ = 0;
    }
  }

 private:
  using Map = std::unordered_map<ShardKey, SharedRecord, ShardKeyHash>;
  Map newer_, older_;
  size_t newer_bytes_ = 0;
};

// A batch the committer has decided and whose data and journal record it has started writing
// (Device::StartWriteAll), not yet known durable. Committer thread only.
struct InFlightBatch {
  std::unique_ptr<DecidedBatch> d;
  std::vector<DeviceWrite> writes;
  std::vector<size_t> data_of;       // writes[k] holds the data of d->requests[data_of[k]]
  AlignedBuffer record;              // its journal record (journaled)
  JournalPosition start;             // the journal's position before the record
  uint64_t tag = 0;                  // its entries' tag in CommitPipeline::in_flight_records
  // Its writes: the early ones while it is decided (Device::StartEarlyWrites), then all of
  // them (ContinueWriteAll). Null: nothing to write.
  std::unique_ptr<Device::PendingWrites> io;
  // Set by the completion thread (under Engine::commit_mu_) once `io` is finished.
  bool io_done = false;
  Status io_status;
};

// What the committer and the applier share.
struct CommitPipeline {
  std::mutex mu;
  std::condition_variable work_cv;      // the applier waits here
  std::condition_variable progress_cv;  // a batch applied, an index sync or a wrap done
  std::deque<std::unique_ptr<DecidedBatch>> queue;  // guarded by mu
  // Updates handed to the applier and not yet in the index: key -> (batch number, record or
  // nullopt for a delete). The committer decides against these before the index.
  // Readers look here before the index too (Engine::PendingRecord): a write is acknowledged
  // once durable, before the applier has put it in the index.
  std::map<ShardKey, std::pair<uint64_t, SharedRecord>> pending;  // guarded by mu
  std::atomic<size_t> pending_size{0};  // pending.size(), read without mu (readers' fast path)
  uint64_t handed = 0;          // guarded by mu
  uint64_t applied = 0;         // guarded by mu; batches (and wraps) the applier is done with
  bool stop = false;            // guarded by mu; the committer has handed over its last batch
  bool sync_requested = false;  // guarded by mu
  uint64_t syncs_done = 0;      // guarded by mu
  bool wrap_done = false;       // guarded by mu
  Status wrap_status;           // guarded by mu
  Status index_failed;          // guarded by mu; an index batch failed after its record was durable
  RecordCache cache;            // the committer's alone (no lock)
  // The committer's alone: batches started and not yet finished, oldest first, and the
  // records their updates leave (key -> (batch tag, record or nullopt for a delete)), which
  // the next batches are decided against before `pending`.
  std::deque<std::unique_ptr<InFlightBatch>> in_flight;
  std::unordered_map<ShardKey, std::pair<uint64_t, SharedRecord>, ShardKeyHash> in_flight_records;
  uint64_t in_flight_tags = 0;
  // The committer's alone: a batch too large for the journal was started and the next batch
  // must wait until it is applied (Engine::AdmitBatch).
  bool unjournaled_in_flight = false;
};

}  // namespace penstock::engine

// engine_apply.cc — group commit, steps 3 to 5: the applier thread puts the batches the
// committer handed over into the index (engine_commit.cc describes the whole pipeline).
//
// In hand-over order, for each batch the applier:
//   3. applies all updates to the index in one RocksDB WriteBatch: unsynced for a journaled
//      batch, recording the journal position, so the index always knows which records it holds;
//      synced for a batch too large for the journal (durable only then);
//   4. moves space accounting (new extents live, the space of replaced blocks dead: ReleasedSpace)
//      under each key's lock, so a reader that looked up the old record has pinned its segments
//      first; space released here is reused only once the index is durable through this batch
//      (SegmentTable);
//   5. acknowledges GC's moves (GC then counts the victim's live bytes) and the requests of a
//      batch too large for the journal; removes the batch's updates from `pending`.
// A failure in step 3 fails every later batch (the index no longer matches the journal until
// Open replays it); writes already acknowledged stay readable from `pending`.
// Between batches it syncs the index (SyncIndex): every index_sync_interval_ms while it holds
// batches not yet durable, when asked (space waiting for it: RequestIndexSync, AllocateSpace),
// and when stopping; and it wraps the journal when the committer asks (a wrap "batch").
// The applier thread owns applied_seq_, durable_seq_ and last_index_sync_. WaitApplied,
// PendingRecord, RequestIndexSync and AllocateSpace may be called from any thread but the
// applier's.
#include <fmt/format.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <vector>

#include "common/log.h"
#include "engine/block_map.h"
#include "engine/commit_request.h"
#include "engine/engine.h"
#include "engine/index.h"
#include "engine/journal.h"
#include "engine/segment_owners.h"
#include "engine/segment_table.h"

namespace penstock {

using engine::CommitRequest;
using engine::ShardRecord;

void Engine::ApplyLoop() {
  using Clock = std::chrono::steady_clock;
  const auto interval = std::chrono::milliseconds(options_.index_sync_interval_ms);
  engine::CommitPipeline& p = *pipeline_;
  for (;;) {
    std::unique_ptr<engine::DecidedBatch> batch;
    bool sync_now = false, stop = false;
    {
      std::unique_lock lock(p.mu);
      auto ready = [&] { return p.stop || p.sync_requested || !p.queue.empty(); };
      if (durable_seq_ < applied_seq_) {
        p.work_cv.wait_until(lock, last_index_sync_ + interval, ready);
      } else {
        p.work_cv.wait(lock, ready);
      }
      if (!p.queue.empty()) {
        batch = std::move(p.queue.front());
        p.queue.pop_front();
      }
      stop = p.stop && p.queue.empty();  // the committer has stopped; this is the last
      sync_now = stop || p.sync_requested || Clock::now() >= last_index_sync_ + interval;
      if (sync_now) p.sync_requested = false;
    }
    if (batch && batch->wrap) {
      Status wrapped = journal_->Wrap().WithContext("wrap the index journal");
      if (wrapped.ok()) {
        applied_seq_ = durable_seq_ = journal_->position().seq;
        table_->SetDurableSeq(durable_seq_);
        index_syncs_.fetch_add(1, std::memory_order_relaxed);
      }
      {
        std::lock_guard lock(p.mu);
        p.wrap_done = true;
        p.wrap_status = wrapped;
      }
      p.progress_cv.notify_all();
    } else if (batch) {
      ApplyBatch(*batch);
    }
    if (batch) {
      {
        std::lock_guard lock(p.mu);
        p.applied = batch->number;
      }
      p.progress_cv.notify_all();
    }
    if (sync_now) SyncIndex();
    if (stop) return;
  }
}

void Engine::ApplyBatch(engine::DecidedBatch& batch) {
  engine::CommitPipeline& p = *pipeline_;
  const Status committed = WriteIndexBatch(batch);
  if (committed.ok()) owners_->Apply(batch.updates);
  commit_batches_.fetch_add(1, std::memory_order_relaxed);
  commit_ops_.fetch_add(batch.updates.size(), std::memory_order_relaxed);
  for (size_t i = 0; i < batch.requests.size(); ++i) {
    const engine::DecidedBatch::Copy& c = batch.copies[i];
    if (!batch.applies[i]) {
      table_->Abandon(c.extent);
      engine::Finish(*batch.requests[i], batch.verdict[i]);
      continue;
    }
    if (!committed.ok()) {
      // Its space is kept (never reused before a reopen): a journal record, durable, may name
      // it (GC's moves are in the record too, unacknowledged), and `pending` does, for readers.
      if (!c.acked) engine::Finish(*batch.requests[i], committed);
      continue;  // acknowledged (durable in the journal): Open replays it
    }
    CommitSpace(batch, i);
    if (!c.acked) engine::Finish(*batch.requests[i], OkStatus());
  }
  // Once the index failed, acknowledged records stay in `pending`, where readers find them.
  if (!committed.ok()) return;
  std::lock_guard lock(p.mu);
  for (const engine::IndexUpdate& u : batch.updates) {
    auto it = p.pending.find(u.key);
    if (it != p.pending.end() && it->second.first == batch.number) p.pending.erase(it);
  }
  p.pending_size.store(p.pending.size(), std::memory_order_release);
}

Status Engine::WriteIndexBatch(const engine::DecidedBatch& batch) {
  engine::CommitPipeline& p = *pipeline_;
  Status committed;
  {
    std::lock_guard lock(p.mu);
    committed = p.index_failed;
  }
  if (!committed.ok() || batch.updates.empty()) return committed;
  if (batch.journaled) {
    committed = index_->Apply(batch.updates, batch.position, /*sync=*/false);
    if (committed.ok()) {
      applied_seq_ = batch.position.seq;
      table_->SetJournalSeq(applied_seq_);  // what this batch releases waits for an index sync
    } else {
      committed = committed.WithContext("the index failed after the journal took a batch; "
                                        "reopen the engine to replay it");
      std::lock_guard lock(p.mu);
      p.index_failed = committed;
    }
    return committed;
  }
  std::optional<engine::JournalPosition> position;
  if (journal_) position = batch.position;
  committed = index_->Apply(batch.updates, position, /*sync=*/true);
  if (committed.ok() && journal_) {
    applied_seq_ = durable_seq_ = batch.position.seq;
    table_->SetDurableSeq(durable_seq_);
  } else if (!committed.ok()) {
    // Nothing more can be committed safely (later batches would be decided against
    // records the index may or may not hold): writes and GC stop until a reopen.
    committed = committed.WithContext("the index failed to take a batch; reopen the engine");
    std::lock_guard lock(p.mu);
    p.index_failed = committed;
  }
  return committed;
}

void Engine::CommitSpace(const engine::DecidedBatch& batch, size_t i) {
  const engine::DecidedBatch::Copy& c = batch.copies[i];
  const engine::IndexUpdate& u = batch.updates[batch.update_of[i]];
  if (!u.old) {
    table_->Commit(c.extent);
    return;
  }
  // A range write moved only its blocks (to fresh space): their old places, found by search.
  std::vector<engine::Extent> released =
      u.range_write ? engine::RangeWriteReleasedSpace(*u.old, u.written_begin, u.written_end)
                    : engine::ReleasedSpace(*u.old, u.record.get());
  if (c.kind == CommitRequest::Kind::kRelocate) {  // copies of blocks written since
    for (const engine::Extent& x : engine::UnusedSpace(c.extent, u.record.get())) released.push_back(x);
  }
  std::unique_lock lock(KeyLock(c.key));
  table_->Commit(c.extent, released);
}

void Engine::SyncIndex() {
  engine::CommitPipeline& p = *pipeline_;
  Status failed;
  {
    std::lock_guard lock(p.mu);
    failed = p.index_failed;
  }
  if (journal_ && failed.ok() && durable_seq_ < applied_seq_) {
    const uint64_t through = applied_seq_;
    Status synced = index_->SyncWal();
    if (synced.ok()) {
      durable_seq_ = through;
      table_->SetDurableSeq(through);
      index_syncs_.fetch_add(1, std::memory_order_relaxed);
    } else {
      PS_LOG_WARN("engine: {}; released space waits for the next index sync", synced.ToString());
    }
  }
  last_index_sync_ = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(p.mu);
    ++p.syncs_done;
  }
  p.progress_cv.notify_all();
}

void Engine::WaitApplied() const {
  engine::CommitPipeline& p = *pipeline_;
  std::unique_lock lock(p.mu);
  const uint64_t handed = p.handed;
  p.progress_cv.wait(lock, [&] { return p.applied >= handed || !p.index_failed.ok(); });
}

std::optional<std::optional<ShardRecord>> Engine::PendingRecord(const ShardKey& key) const {
  engine::CommitPipeline& p = *pipeline_;
  if (p.pending_size.load(std::memory_order_acquire) == 0) return std::nullopt;
  std::lock_guard lock(p.mu);
  auto it = p.pending.find(key);
  if (it == p.pending.end()) return std::nullopt;
  return std::optional<std::optional<ShardRecord>>(it->second.second.ToOptional());
}

void Engine::RequestIndexSync() {
  engine::CommitPipeline& p = *pipeline_;
  std::unique_lock lock(p.mu);
  const uint64_t seen = p.syncs_done;
  p.sync_requested = true;
  p.work_cv.notify_one();
  p.progress_cv.wait(lock, [&] { return p.syncs_done != seen || p.stop; });
}

Result<engine::Extent> Engine::AllocateSpace(uint64_t bytes, engine::AppendStream stream) {
  auto extent = table_->Allocate(bytes, stream);
  if (!extent.ok() && extent.status().code() == StatusCode::kResourceExhausted) {
    WaitApplied();  // acknowledged deletes and overwrites may not have released their space yet
    extent = table_->Allocate(bytes, stream);
  }
  if (!extent.ok() && extent.status().code() == StatusCode::kResourceExhausted &&
      table_->Stats().awaiting_sync_segments > 0) {
    RequestIndexSync();
    extent = table_->Allocate(bytes, stream);
  }
  return extent;
}

}  // namespace penstock

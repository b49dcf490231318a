// engine_commit.cc — group commit: the committer thread, the only mutator of the index.
//
// Writers append data with Device::WriteUnsynced and queue a CommitRequest. The committer takes
// everything queued at once (what piled up while it was busy is the next batch), and:
//   1. decides each request against the index plus the batch's own earlier updates (two writes
//      of one key in a batch: the later wins; a relocation whose key moved is aborted);
//   2. writes the batch's updates as the next index journal record (journal.h) and flushes the
//      device once (Sync): data and record durable together. (When no request carries data
//      not yet durable — a writer that is alone writes durably itself, RWF_DSYNC — the record
//      is written durably instead, without the flush.) A batch too large for one record
//      instead flushes the device, then commits with a synced index batch;
//   3. applies all updates to the index in one unsynced RocksDB WriteBatch that also records
//      the journal position, so the index always knows which records it holds;
//   4. moves space accounting (new extents live, replaced ones dead) under each key's lock, so a
//      reader that looked up the old record has pinned its segment first; space released here
//      is reused only once the index is durable through this batch (SegmentTable);
//   5. wakes the writers. A write is acknowledged only after steps 2 and 3 succeeded.
// A failure in step 2 fails every request of the batch and abandons their extents (the journal
// does not advance: the next record overwrites a partly written one). A failure in step 3 after
// the record is durable fails the batch and every later one: the index no longer matches the
// journal until Open replays it.
// Between batches the committer syncs the index (SyncIndex): every index_sync_interval_ms while
// it holds batches not yet durable, when asked (space waiting for it), and when stopping. When
// the next record does not fit the journal region, the journal wraps (a synced index write).
#include <fmt/format.h>

#include <map>
#include <mutex>
#include <optional>

#include "engine/commit_request.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "common/log.h"
#include "engine/index.h"
#include "engine/journal.h"
#include "engine/segment_table.h"

namespace penstock {

using engine::CommitRequest;
using engine::ShardRecord;

namespace {

void Finish(CommitRequest& r, Status s) {
  std::lock_guard lock(r.mu);
  r.status = std::move(s);
  r.done = true;
  r.cv.notify_one();
}

engine::Extent ExtentOf(const ShardRecord& r) {
  return {r.segment, r.offset, r.allocated_bytes()};
}

}  // namespace

Status Engine::Commit(std::span<CommitRequest* const> requests) {
  {
    std::lock_guard lock(commit_mu_);
    commit_queue_.insert(commit_queue_.end(), requests.begin(), requests.end());
  }
  commit_cv_.notify_one();
  Status first;
  for (CommitRequest* r : requests) {
    std::unique_lock lock(r->mu);
    r->cv.wait(lock, [&] { return r->done; });
    if (first.ok() && !r->status.ok()) first = r->status;
  }
  return first;
}

void Engine::CommitLoop() {
  using Clock = std::chrono::steady_clock;
  const auto interval = std::chrono::milliseconds(options_.index_sync_interval_ms);
  std::vector<CommitRequest*> batch;
  for (;;) {
    bool sync_now = false, stop = false;
    {
      std::unique_lock lock(commit_mu_);
      auto ready = [&] { return commit_stop_ || sync_requested_ || !commit_queue_.empty(); };
      const bool dirty = journal_ && durable_seq_ < journal_->position().seq;
      if (dirty) {
        commit_cv_.wait_until(lock, last_index_sync_ + interval, ready);
      } else {
        commit_cv_.wait(lock, ready);
      }
      batch.swap(commit_queue_);
      stop = commit_stop_ && batch.empty();  // stopping, and everything queued is done
      sync_now = stop || sync_requested_ || Clock::now() >= last_index_sync_ + interval;
      sync_requested_ = false;
    }
    if (!batch.empty()) CommitBatch(batch);
    batch.clear();
    if (sync_now) SyncIndex();
    if (stop) return;
  }
}

void Engine::SyncIndex() {
  if (journal_ && index_failed_.ok() && durable_seq_ < journal_->position().seq) {
    const uint64_t through = journal_->position().seq;
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
    std::lock_guard lock(commit_mu_);
    ++syncs_done_;
  }
  sync_cv_.notify_all();
}

void Engine::RequestIndexSync() {
  std::unique_lock lock(commit_mu_);
  const uint64_t seen = syncs_done_;
  sync_requested_ = true;
  commit_cv_.notify_one();
  sync_cv_.wait(lock, [&] { return syncs_done_ != seen || commit_stop_; });
}

Result<engine::Extent> Engine::AllocateSpace(uint64_t bytes, engine::AppendStream stream) {
  auto extent = table_->Allocate(bytes, stream);
  if (!extent.ok() && extent.status().code() == StatusCode::kResourceExhausted &&
      table_->Stats().awaiting_sync_segments > 0) {
    RequestIndexSync();
    extent = table_->Allocate(bytes, stream);
  }
  return extent;
}

Status Engine::CommitUpdates(const std::vector<engine::IndexUpdate>& updates, bool has_data,
                             bool& journaled) {
  journaled = false;
  const uint64_t bytes = journal_ ? engine::JournalRecordBytes(updates) : 0;
  if (!journal_ || bytes > engine::kMaxJournalRecordBytes) {
    // No journal (the null device) or a batch too large for one record: data durable first,
    // then a synced index batch (which makes every earlier batch durable too).
    if (has_data) {
      PS_RETURN_IF_ERROR(device_->Sync().WithContext("flush shard data before committing its "
                                                     "index record"));
    }
    std::optional<engine::JournalPosition> position;
    if (journal_) position = journal_->position();
    PS_RETURN_IF_ERROR(index_->Apply(updates, position, /*sync=*/true));
    if (journal_) {
      durable_seq_ = journal_->position().seq;
      table_->SetDurableSeq(durable_seq_);
    }
    return OkStatus();
  }
  if (!journal_->Fits(bytes)) {
    PS_RETURN_IF_ERROR(journal_->Wrap().WithContext("wrap the index journal"));
    durable_seq_ = journal_->position().seq;
    table_->SetDurableSeq(durable_seq_);
    index_syncs_.fetch_add(1, std::memory_order_relaxed);
  }
  std::string record = journal_->Encode(updates);
  PS_ASSIGN_OR_RETURN(engine::JournalPosition next, journal_->Write(record, /*durable=*/!has_data));
  if (has_data) {
    PS_RETURN_IF_ERROR(device_->Sync().WithContext("flush shard data and its index journal record"));
  }
  journaled = true;
  PS_RETURN_IF_ERROR(index_->Apply(updates, next, /*sync=*/false));
  journal_->Advance(next);
  table_->SetJournalSeq(next.seq);  // what this batch releases waits for an index sync
  return OkStatus();
}

void Engine::CommitBatch(std::vector<CommitRequest*>& batch) {
  if (!index_failed_.ok()) {
    for (CommitRequest* r : batch) {
      table_->Abandon(r->extent);
      Finish(*r, index_failed_);
    }
    return;
  }

  // Decide each request against the index as the batch leaves it so far.
  std::map<ShardKey, std::optional<ShardRecord>> overlay;
  std::vector<engine::IndexUpdate> updates;
  std::vector<std::optional<ShardRecord>> old(batch.size());
  std::vector<bool> applies(batch.size(), false);
  std::vector<Status> verdict(batch.size());
  bool has_data = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    CommitRequest& r = *batch[i];
    if (auto it = overlay.find(r.key); it != overlay.end()) {
      old[i] = it->second;
    } else {
      auto got = index_->Get(r.key);
      if (!got.ok()) {
        verdict[i] = got.status();
        continue;
      }
      old[i] = std::move(*got);
    }
    switch (r.kind) {
      case CommitRequest::Kind::kWrite:
        break;
      case CommitRequest::Kind::kDelete:
        if (!old[i]) {
          verdict[i] = NotFound(fmt::format("shard {} not found on this target", r.key.ToString()));
          continue;
        }
        break;
      case CommitRequest::Kind::kRelocate:
        if (!old[i] || ExtentOf(*old[i]) != r.expected || old[i]->version != r.expected_version) {
          verdict[i] = Aborted(fmt::format("shard {} changed while GC moved it; the newer "
                                           "version stays", r.key.ToString()));
          continue;
        }
        break;
    }
    applies[i] = true;
    has_data |= r.extent.length > 0 && !r.data_durable;
    std::optional<ShardRecord> next;
    if (r.kind != CommitRequest::Kind::kDelete) next = r.record;
    updates.push_back({r.key, next, old[i]});
    overlay[r.key] = std::move(next);
  }

  Status committed;
  if (!updates.empty()) {
    bool journaled = false;
    committed = CommitUpdates(updates, has_data, journaled);
    if (!committed.ok() && journaled) {
      index_failed_ = committed.WithContext("the index failed after the journal took a batch; "
                                            "reopen the engine to replay it");
      committed = index_failed_;
    }
  }
  commit_batches_.fetch_add(1, std::memory_order_relaxed);
  commit_ops_.fetch_add(updates.size(), std::memory_order_relaxed);
  for (size_t i = 0; i < batch.size(); ++i) {
    CommitRequest& r = *batch[i];
    if (!applies[i] || !committed.ok()) {
      table_->Abandon(r.extent);
      Finish(r, applies[i] ? committed : verdict[i]);
      continue;
    }
    table_->Commit(r.extent);
    {
      std::unique_lock lock(KeyLock(r.key));
      if (old[i]) table_->Release(ExtentOf(*old[i]));
    }
    if (r.kind == CommitRequest::Kind::kDelete) {
      shards_.fetch_sub(1, std::memory_order_relaxed);
    } else if (!old[i]) {
      shards_.fetch_add(1, std::memory_order_relaxed);
    }
    if (r.kind != CommitRequest::Kind::kRelocate) {
      std::lock_guard lock(corrupt_mu_);
      corrupt_.erase(r.key);
    }
    Finish(r, OkStatus());
  }
}

}  // namespace penstock

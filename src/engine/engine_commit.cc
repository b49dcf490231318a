// engine_commit.cc — group commit: the committer thread, the only mutator of the index.
//
// Writers reserve space for their data and queue a CommitRequest holding it (GC queues
// relocations whose copies it has already written, unsynced). The committer takes everything
// queued at once (what piled up while it was busy is the next batch), and:
//   1. decides each request against the index plus the batch's own earlier updates (two writes
//      of one key in a batch: the later wins; a relocation whose key moved is aborted);
//   2. writes the batch's data and its updates, as the next index journal record (journal.h),
//      in one submission followed by one flush (Device::WriteAll): data and record durable
//      together. A batch too large for one record writes and flushes its data only, and
//      commits with a synced index batch in step 3 instead;
//   3. applies all updates to the index in one unsynced RocksDB WriteBatch that also records
//      the journal position, so the index always knows which records it holds;
//   4. moves space accounting (new extents live, replaced ones dead) under each key's lock, so a
//      reader that looked up the old record has pinned its segment first; space released here
//      is reused only once the index is durable through this batch (SegmentTable);
//   5. wakes the writers. A write is acknowledged only after steps 2 and 3 succeeded.
// A request whose data write fails in step 2 fails alone: the rest of the batch is decided and
// written again (the new journal record overwrites the old one, which the journal never
// advanced past). Any other failure in step 2 fails every request of the batch and abandons
// their extents. A failure in step 3 fails the batch and every later one: the index no longer
// matches the journal until Open replays it.
// Between batches the committer syncs the index (SyncIndex): every index_sync_interval_ms while
// it holds batches not yet durable, when asked (space waiting for it), and when stopping. When
// the next record does not fit the journal region, the journal wraps (a synced index write).
#include <fmt/format.h>

#include <map>
#include <numeric>
#include <mutex>
#include <optional>

#include "engine/commit_request.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "common/buffer.h"
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

void Engine::CommitBatch(std::vector<CommitRequest*>& batch) {
  auto fail = [&](CommitRequest& r, const Status& s) {
    table_->Abandon(r.extent);
    Finish(r, s);
  };
  if (!index_failed_.ok()) {
    for (CommitRequest* r : batch) fail(*r, index_failed_);
    return;
  }
  std::vector<CommitRequest*> todo = batch;
  for (;;) {  // again without the requests whose data write failed, if any did
    // Decide each request against the index as the batch leaves it so far.
    std::map<ShardKey, std::optional<ShardRecord>> overlay;
    std::vector<engine::IndexUpdate> updates;
    std::vector<std::optional<ShardRecord>> old(todo.size());
    std::vector<bool> applies(todo.size(), false);
    std::vector<Status> verdict(todo.size());
    bool has_data = false;
    for (size_t i = 0; i < todo.size(); ++i) {
      CommitRequest& r = *todo[i];
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
      has_data |= r.extent.length > 0;
      std::optional<ShardRecord> next;
      if (r.kind != CommitRequest::Kind::kDelete) next = r.record;
      updates.push_back({r.key, next, old[i]});
      overlay[r.key] = std::move(next);
    }

    // Data and journal record in one submission, then one flush.
    std::vector<engine::DeviceWrite> writes;
    std::vector<size_t> data_of;  // writes[k] holds the data of todo[data_of[k]]
    for (size_t i = 0; i < todo.size(); ++i) {
      if (!applies[i] || todo[i]->data.empty()) continue;
      writes.push_back({.offset = DeviceOffset(todo[i]->extent.segment, todo[i]->extent.offset),
                        .data = todo[i]->data, .status = OkStatus()});
      data_of.push_back(i);
    }
    const uint64_t record_bytes = journal_ ? engine::JournalRecordBytes(updates) : 0;
    const bool journaled = journal_ && !updates.empty() &&
                           record_bytes <= engine::kMaxJournalRecordBytes;
    Status io;
    if (journaled && !journal_->Fits(record_bytes)) {
      io = journal_->Wrap().WithContext("wrap the index journal");
      if (io.ok()) {
        durable_seq_ = journal_->position().seq;
        table_->SetDurableSeq(durable_seq_);
        index_syncs_.fetch_add(1, std::memory_order_relaxed);
      }
    }
    AlignedBuffer record;
    if (io.ok() && journaled) {
      record = journal_->Encode(updates);
      writes.push_back({.offset = journal_->position().offset,
                        .data = std::span<const std::byte>(record.data(), record_bytes),
                        .status = OkStatus()});
    }
    if (io.ok() && !writes.empty()) {
      io = device_->WriteAll(writes, /*sync=*/has_data || journaled)
               .WithContext(journaled ? "write shard data and its index journal record"
                                      : "flush shard data before committing its index record");
    }
    bool retry = false;
    for (size_t k = 0; k < data_of.size(); ++k) {
      if (writes[k].status.ok()) continue;
      CommitRequest& r = *todo[data_of[k]];
      fail(r, writes[k].status.WithContext(fmt::format("write shard {}", r.key.ToString())));
      todo[data_of[k]] = nullptr;
      retry = true;
    }
    if (retry) {  // their journal record (if written) is overwritten by the next one
      std::erase(todo, nullptr);
      if (todo.empty()) return;
      continue;
    }
    if (io.ok()) {
      device_bytes_written_.fetch_add(
          std::accumulate(data_of.begin(), data_of.end(), uint64_t{0},
                          [&](uint64_t sum, size_t i) { return sum + todo[i]->data.size(); }),
          std::memory_order_relaxed);
    }

    // The index: unsynced when the journal holds the batch, else synced.
    Status committed = io;
    if (committed.ok() && !updates.empty()) {
      if (journaled) {
        const engine::JournalPosition next = journal_->After(record_bytes);
        committed = index_->Apply(updates, next, /*sync=*/false);
        if (committed.ok()) {
          journal_->Advance(next);
          table_->SetJournalSeq(next.seq);  // what this batch releases waits for an index sync
        } else {
          index_failed_ = committed.WithContext("the index failed after the journal took a "
                                                "batch; reopen the engine to replay it");
          committed = index_failed_;
        }
      } else {
        std::optional<engine::JournalPosition> position;
        if (journal_) position = journal_->position();
        committed = index_->Apply(updates, position, /*sync=*/true);
        if (committed.ok() && journal_) {
          durable_seq_ = journal_->position().seq;
          table_->SetDurableSeq(durable_seq_);
        }
      }
    }
    commit_batches_.fetch_add(1, std::memory_order_relaxed);
    commit_ops_.fetch_add(updates.size(), std::memory_order_relaxed);
    for (size_t i = 0; i < todo.size(); ++i) {
      CommitRequest& r = *todo[i];
      if (!applies[i] || !committed.ok()) {
        fail(r, applies[i] ? committed : verdict[i]);
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
    return;
  }
}

}  // namespace penstock

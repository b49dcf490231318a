// engine_commit.cc — group commit: the committer thread, the only mutator of the index.
//
// Writers append data with Device::WriteUnsynced and queue a CommitRequest. The committer takes
// everything queued at once (what piled up while it was busy is the next batch), and:
//   1. flushes the device once (Sync) if any request carries data not yet durable — data
//      durable first. (A writer that is alone writes durably itself, RWF_DSYNC, which is a
//      cheap FUA write on most devices, and the committer skips the flush.)
//   2. decides each request against the index plus the batch's own earlier updates (two writes
//      of one key in a batch: the later wins; a relocation whose key moved is aborted);
//   3. commits all updates in one synced RocksDB WriteBatch;
//   4. moves space accounting (new extents live, replaced ones dead) under each key's lock, so a
//      reader that looked up the old record has pinned its segment first;
//   5. wakes the writers. A write is acknowledged only after steps 1 and 3 succeeded.
// A failure in step 1 or 3 fails every request of the batch and abandons their extents.
#include <fmt/format.h>

#include <map>
#include <mutex>
#include <optional>

#include "engine/commit_request.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "engine/index.h"
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
  std::vector<CommitRequest*> batch;
  for (;;) {
    {
      std::unique_lock lock(commit_mu_);
      commit_cv_.wait(lock, [&] { return commit_stop_ || !commit_queue_.empty(); });
      if (commit_queue_.empty()) return;  // stopping, and everything queued is done
      batch.swap(commit_queue_);
    }
    CommitBatch(batch);
    batch.clear();
  }
}

void Engine::CommitBatch(std::vector<CommitRequest*>& batch) {
  bool has_data = false;
  for (CommitRequest* r : batch) has_data |= r->extent.length > 0 && !r->data_durable;
  if (has_data) {
    Status synced = device_->Sync();
    if (!synced.ok()) {
      for (CommitRequest* r : batch) {
        table_->Abandon(r->extent);
        Finish(*r, synced.WithContext("flush shard data before committing its index record"));
      }
      return;
    }
  }

  // Decide each request against the index as the batch leaves it so far.
  std::map<ShardKey, std::optional<ShardRecord>> overlay;
  std::vector<engine::Index::Update> updates;
  std::vector<std::optional<ShardRecord>> old(batch.size());
  std::vector<bool> applies(batch.size(), false);
  std::vector<Status> verdict(batch.size());
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
    std::optional<ShardRecord> next;
    if (r.kind != CommitRequest::Kind::kDelete) next = r.record;
    updates.push_back({r.key, next, old[i]});
    overlay[r.key] = std::move(next);
  }

  Status committed = index_->Apply(updates);
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

// engine_commit.cc — group commit: the committer and applier threads, the only mutators of the
// index.
//
// Writers reserve space for their data and queue a CommitRequest holding it (GC queues
// relocations whose copies it has already written, unsynced). The committer takes everything
// queued at once (what piled up while it was busy is the next batch; with none in flight, a
// batch of fewer than recent batches held first waits briefly for requests still arriving:
// commit_gather.h), and:
//   1. decides each request against the index as the batches before it leave it (including
//      those still in flight, CommitPipeline::in_flight_records, and those handed to the
//      applier and not yet applied, CommitPipeline::pending) plus the batch's own earlier
//      updates (two writes of one key in a batch: the later wins; a
//      relocation moves only the blocks still where GC read them, and is aborted when none
//      are; a range write's record is composed here from the key's record as it stands then,
//      block_map.h, and a conditional one whose key changed since its writer read it is
//      aborted; version conditions, a write's not_older and a range write's expected_version,
//      are decided here too, so no other lock orders them);
//   2. starts writing the batch's data and its updates, as the next index journal record
//      (journal.h), in one submission followed by one flush (Device::StartWriteAll): data and
//      record durable together. A batch too large for one record writes and flushes its data
//      only, and is committed with a synced index batch in step 3 instead. The batch is now in
//      flight; the committer goes on with the next (up to commit_batches_in_flight at once; a
//      new one while one is in flight only with commit_overlap_min_requests queued). A
//      completion thread (CommitIoLoop) waits for each batch's I/O, in order, and wakes it;
//   once the oldest batch's I/O is done, the committer hands it to the applier (its updates
//   join `pending`, where readers look before the index: Engine::PendingRecord) and, for a
//   journaled batch, acknowledges its writes and deletes: they are durable and visible. It goes on with the next batch, waiting only when
//   kMaxUnappliedBatches are handed over and not applied. The applier, in order:
//   3. applies all updates to the index in one unsynced RocksDB WriteBatch that also records
//      the journal position, so the index always knows which records it holds;
//   4. moves space accounting (new extents live, the space of replaced blocks dead: ReleasedSpace)
//      under each key's lock, so a reader that looked up the old record has pinned its segments
//      first; space released here
//      is reused only once the index is durable through this batch (SegmentTable);
//   5. acknowledges GC's moves (GC then counts the victim's live bytes) and the requests of a
//      batch too large for the journal; removes the batch's updates from `pending`.
// So batch N+1 is written and flushed while batch N is applied. What reads the index or the
// space accounting as a whole (Stats, List, CollectGarbage, Scrub) or needs space released
// (an allocation that found none) first waits for the applier to catch up (WaitApplied).
// A request whose data write fails in step 2 fails alone: the rest of the batch is decided and
// written again. Any other failure in step 2 fails every request of the batch and abandons
// their extents. Either way the batches in flight after it were decided against it: they are
// finished (their I/O) and decided and written again after it. The journal goes back to the
// failed batch's record (the next overwrites it) when no later record was written; otherwise
// it wraps first (the sequence numbers go on above every record written), since a later
// record may lie whole past the new ones and must never pass for one of them. A failure in
// step 3 fails every later batch (the index no longer matches the journal until Open replays
// it); writes already acknowledged stay readable from `pending`.
// Between batches the applier syncs the index (SyncIndex): every index_sync_interval_ms while it
// holds batches not yet durable, when asked (space waiting for it), and when stopping. When the
// next record does not fit the journal region, the committer has the applier wrap the journal
// (a synced index write, after everything before it is applied) and waits for it.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <mutex>
#include <optional>

#include "engine/block_map.h"
#include "engine/commit_request.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "common/buffer.h"
#include "common/log.h"
#include "engine/index.h"
#include "engine/journal.h"
#include "engine/segment_owners.h"
#include "engine/segment_table.h"

namespace penstock {

using engine::CommitRequest;
using engine::ShardRecord;

namespace {

// Batches handed to the applier and not yet applied, at most (their writes are acknowledged).
constexpr uint64_t kMaxUnappliedBatches = 4;

// kWriteRange with expected_version: OK when the stored shard version is `expected`.
Status VersionVerdict(const ShardKey& key, const engine::SharedRecord& old, uint64_t expected) {
  const uint64_t stored = old ? old->version : 0;
  if (stored > expected) {
    return Aborted(fmt::format("shard {} holds version {}, newer than the {} this range write patches; a "
                               "later write won", key.ToString(), stored, expected));
  }
  if (stored < expected) {
    return FailedPrecondition(fmt::format("shard {} {}, older than the {} this range write patches: this copy "
                                          "missed a write and must be repaired whole", key.ToString(),
                                          old ? fmt::format("holds version {}", stored) : "is missing", expected));
  }
  return OkStatus();
}

void Finish(CommitRequest& r, Status s) {
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

}  // namespace

void Engine::Enqueue(CommitRequest* request) {
  {
    std::lock_guard lock(commit_mu_);
    commit_queue_.push_back(request);
    gather_.Arrived(engine::CommitGather::Clock::now());
  }
  commit_cv_.notify_one();
}

Status Engine::Commit(std::span<CommitRequest* const> requests) {
  {
    std::lock_guard lock(commit_mu_);
    commit_queue_.insert(commit_queue_.end(), requests.begin(), requests.end());
    gather_.Arrived(engine::CommitGather::Clock::now());
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
  engine::CommitPipeline& p = *pipeline_;
  std::vector<CommitRequest*> batch;
  for (;;) {
    bool finish = false;
    {
      std::unique_lock lock(commit_mu_);
      // Finish the oldest batch once its writes are done; start the next from what piled up
      // meanwhile, while fewer than commit_batches_in_flight_ are in flight. While a batch is in
      // flight the next starts only once it has enough requests (fewer wait for the oldest to
      // finish): each batch costs a device flush and a turn of every thread involved, which
      // small ones do not earn back.
      auto may_start = [&] {
        return p.in_flight.empty() ? !commit_queue_.empty()
                                   : p.in_flight.size() < commit_batches_in_flight_ &&
                                         commit_queue_.size() >= options_.commit_overlap_min_requests;
      };
      commit_cv_.wait(lock, [&] {
        return (!p.in_flight.empty() && p.in_flight.front()->io_done) || may_start() ||
               (commit_stop_ && p.in_flight.empty());
      });
      if (!p.in_flight.empty() && p.in_flight.front()->io_done) {
        finish = true;
      } else if (may_start()) {
        if (p.in_flight.empty()) GatherLocked(lock);
        gather_.Started(commit_queue_.size());
        batch.swap(commit_queue_);
      } else {
        return;  // stopping, and everything queued is handed over
      }
    }
    if (finish) {
      FinishOldestBatch();
      continue;
    }
    StartBatch(std::move(batch));
    batch.clear();
  }
}

void Engine::GatherLocked(std::unique_lock<std::mutex>& lock) {
  using std::chrono::microseconds;
  const auto start = engine::CommitGather::Clock::now();
  for (;;) {
    const auto waited = std::chrono::duration_cast<microseconds>(engine::CommitGather::Clock::now() - start);
    const microseconds wait = gather_.NextWait(commit_queue_.size(), waited);
    if (wait.count() == 0) return;
    const size_t before = commit_queue_.size();
    const bool arrived = commit_cv_.wait_for(lock, wait, [&] { return commit_queue_.size() > before || commit_stop_; });
    if (!arrived || commit_stop_) return;  // none came within the gap: go with what is here
  }
}

void Engine::CommitIoLoop() {
  for (;;) {
    engine::InFlightBatch* b = nullptr;
    {
      std::unique_lock lock(commit_mu_);
      commit_io_cv_.wait(lock, [&] { return commit_io_stop_ || !commit_io_.empty(); });
      if (commit_io_.empty()) return;
      b = commit_io_.front();
      commit_io_.pop_front();
    }
    Status io = device_->FinishWriteAll(std::move(b->io));
    {
      std::lock_guard lock(commit_mu_);
      b->io_status = std::move(io);
      b->io_done = true;
    }
    commit_cv_.notify_one();
  }
}

void Engine::HandOver(std::unique_ptr<engine::DecidedBatch> batch) {
  engine::CommitPipeline& p = *pipeline_;
  {
    std::lock_guard lock(p.mu);
    batch->number = ++p.handed;
    for (const engine::IndexUpdate& u : batch->updates) p.pending[u.key] = {batch->number, u.record};
    p.pending_size.store(p.pending.size(), std::memory_order_release);
    p.queue.push_back(std::move(batch));
  }
  p.work_cv.notify_one();
}

void Engine::FailRequest(CommitRequest& r, const Status& s) {
  table_->Abandon(r.extent);
  Finish(r, s);
}

void Engine::StartBatch(std::vector<CommitRequest*> todo) {
  engine::CommitPipeline& p = *pipeline_;
  Status index_failed;
  {
    std::lock_guard lock(p.mu);
    index_failed = p.index_failed;
  }
  if (!index_failed.ok()) {
    for (CommitRequest* r : todo) FailRequest(*r, index_failed);
    return;
  }
  {
    // Acknowledged batches wait in memory (and in `pending`) until applied: bound them.
    std::unique_lock lock(p.mu);
    p.progress_cv.wait(lock, [&] { return p.handed - p.applied < kMaxUnappliedBatches; });
  }
  if (p.unjournaled_in_flight) {
    // A batch too large for the journal is durable only once the applier has written it
    // (synced) into the index. A batch decided against its records could be journaled,
    // acknowledged, and after a crash replayed onto a base that never became durable (a range
    // write patching a shard the index does not hold). So nothing is decided until it is in.
    p.unjournaled_in_flight = false;
    std::vector<CommitRequest*> redo = FinishAllBatches();
    if (!redo.empty()) {
      redo.insert(redo.end(), todo.begin(), todo.end());
      todo = std::move(redo);
    }
    WaitApplied();
  }
  for (;;) {  // again when the batches before it had to be decided again
    auto b = std::make_unique<engine::InFlightBatch>();
    // In a batch of commit_overlap_min_requests or more, requests whose data is final are
    // written while the batch is decided: the device works while the committer does. A request
    // that turns out not to apply has its extent abandoned (by the applier, once this I/O is
    // done), so what was written there is never read.
    const bool write_early = todo.size() >= options_.commit_overlap_min_requests;
    b->writes.reserve(todo.size() + 1);
    auto write_data = [&](size_t i) {
      const CommitRequest& r = *todo[i];
      b->writes.push_back({.offset = DeviceOffset(r.extent.segment, r.extent.offset), .data = r.data,
                           .status = OkStatus()});
      b->data_of.push_back(i);
    };
    for (size_t i = 0; write_early && i < todo.size(); ++i) {
      // merge_edges: its data is filled while deciding
      if (!todo[i]->data.empty() && !todo[i]->merge_edges) write_data(i);
    }
    std::unique_ptr<engine::Device::PendingWrites> early;
    if (!b->writes.empty()) early = device_->StartEarlyWrites(b->writes);
    // Waits for the early writes (the requests own their buffers), for a path that does not
    // start this batch.
    auto drop_early = [&] {
      if (early) (void)device_->FinishWriteAll(device_->ContinueWriteAll(std::move(early), b->writes, false));
    };
    auto& d = b->d = std::make_unique<engine::DecidedBatch>();
    d->requests = todo;
    d->applies.resize(todo.size(), false);
    d->update_of.resize(todo.size());
    d->verdict.resize(todo.size());
    // Decide each request against the index as the batches before it (in flight, handed over
    // or applied) and this batch's own earlier updates leave it.
    std::map<ShardKey, size_t> overlay;  // key -> its latest update in this batch
    bool has_data = false;
    for (size_t i = 0; i < todo.size(); ++i) {
      CommitRequest& r = *todo[i];
      engine::SharedRecord old;  // shared with where it came from: no copy of its block map
      bool known = false;
      if (auto it = overlay.find(r.key); it != overlay.end()) {
        old = d->updates[it->second].record;
        known = true;
      } else if (auto fit = p.in_flight_records.find(r.key); fit != p.in_flight_records.end()) {
        old = fit->second.second;
        known = true;
      } else {
        // Only this thread hands batches over, so a key not pending now is in the index.
        std::lock_guard lock(p.mu);
        if (auto pit = p.pending.find(r.key); pit != p.pending.end()) {
          old = pit->second.second;
          known = true;
        }
      }
      if (!known) {
        if (const engine::SharedRecord* cached = p.cache.Find(r.key)) {
          old = *cached;
          known = true;
        }
      }
      if (!known) {
        auto got = index_->Get(r.key, /*memory_only=*/false, /*fill_cache=*/false);
        if (!got.ok()) {
          d->verdict[i] = got.status();
          continue;
        }
        old = std::move(*got);
      }
      const bool unchanged = (!r.conditional || old == r.expected) &&
                             (!r.max_old_length || (old ? old->length : 0) <= *r.max_old_length);
      engine::SharedRecord next;
      uint64_t written_begin = 0, written_end = UINT64_MAX;
      switch (r.kind) {
        case CommitRequest::Kind::kWrite:
          if (r.not_older && old && old->version > r.record.version) {
            r.version_refused = true;
            d->verdict[i] = Aborted(fmt::format("shard {} holds version {}, newer than {}; a later write won",
                                                r.key.ToString(), old->version, r.record.version));
            continue;
          }
          next = r.record;
          break;
        case CommitRequest::Kind::kDelete:
          if (!old) {
            d->verdict[i] = NotFound(fmt::format("shard {} not found on this target", r.key.ToString()));
            continue;
          }
          if (r.expected_version && old->version != *r.expected_version) {
            r.version_refused = true;
            d->verdict[i] = Aborted(fmt::format("shard {} holds version {}, not the {} this delete is for; it was "
                                                "rewritten and stays", r.key.ToString(), old->version,
                                                *r.expected_version));
            continue;
          }
          break;
        case CommitRequest::Kind::kRelocate:
          if (old) next = engine::ApplyMove(*old, *r.expected, r.record, r.from);
          if (!old || *next == *old) {
            d->verdict[i] = Aborted(fmt::format("shard {} was rewritten while GC moved it; the "
                                                "newer data stays", r.key.ToString()));
            continue;
          }
          break;
        case CommitRequest::Kind::kWriteRange:
          if (r.expected_version) {
            if (Status v = VersionVerdict(r.key, old, *r.expected_version); !v.ok()) {
              r.version_refused = true;
              d->verdict[i] = std::move(v);
              continue;
            }
          }
          if (!unchanged) {
            d->verdict[i] = Aborted(fmt::format("shard {} changed while a range write merged its "
                                                "edge blocks; retry the write", r.key.ToString()));
            continue;
          }
          if (r.merge_edges) {
            // Requests whose buffers hold data not yet durable, oldest first: those of the
            // batches in flight, then this batch's earlier ones (old blocks may be there).
            std::vector<CommitRequest*> carriers;
            for (const auto& f : p.in_flight) {
              carriers.insert(carriers.end(), f->d->requests.begin(), f->d->requests.end());
            }
            carriers.insert(carriers.end(), todo.begin(), todo.begin() + static_cast<std::ptrdiff_t>(i));
            if (Status merged = MergeEdges(r, old, carriers); !merged.ok()) {
              d->verdict[i] = merged;
              continue;
            }
          }
          next = engine::ApplyRangeWrite(old.get(), r.first_block, r.extent.segment, r.extent.offset,
                                         r.record.block_crcs, r.record.length, r.record.version);
          if (next->runs.size() > engine::kMaxRuns) {
            r.fragmented = true;
            d->verdict[i] = Aborted(fmt::format("shard {} would be in more than {} runs; rewrite "
                                                "it whole", r.key.ToString(), engine::kMaxRuns));
            continue;
          }
          written_begin = r.first_block;
          written_end = r.first_block + r.record.block_crcs.size();
          break;
      }
      d->applies[i] = true;
      has_data |= r.extent.length > 0;
      overlay[r.key] = d->update_of[i] = static_cast<uint32_t>(d->updates.size());
      d->updates.push_back({.key = r.key, .record = std::move(next), .old = std::move(old),
                            .written_begin = written_begin, .written_end = written_end,
                            .range_write = r.kind == CommitRequest::Kind::kWriteRange});
    }

    // The other data and the journal record, then one flush after all of them.
    for (size_t i = 0; i < todo.size(); ++i) {
      if (d->applies[i] && !todo[i]->data.empty() && (!write_early || todo[i]->merge_edges)) write_data(i);
    }
    const uint64_t record_bytes = journal_ ? engine::JournalRecordBytes(d->updates) : 0;
    d->journaled = journal_ && !d->updates.empty() &&
                   record_bytes <= engine::kMaxJournalRecordBytes;
    if (d->journaled && !journal_->Fits(record_bytes)) {
      // The applier wraps the journal once everything before is in the index: finish the
      // batches in flight first. Should one of them fail, this batch follows it and is decided
      // again with it.
      drop_early();
      std::vector<CommitRequest*> redo = FinishAllBatches();
      if (!redo.empty()) {
        redo.insert(redo.end(), todo.begin(), todo.end());
        todo = std::move(redo);
        continue;
      }
      if (Status wrapped = WrapJournal(); !wrapped.ok()) {
        for (CommitRequest* r : todo) FailRequest(*r, wrapped);
        return;
      }
    }
    if (journal_) b->start = journal_->position();
    if (d->journaled) {
      b->record = journal_->Encode(d->updates);
      b->writes.push_back({.offset = journal_->position().offset,
                           .data = std::span<const std::byte>(b->record.data(), record_bytes),
                           .status = OkStatus()});
      d->position = journal_->After(record_bytes);
      journal_->Advance(d->position);  // the next record goes after it, written or not
    } else if (journal_) {
      d->position = journal_->position();
      if (!d->updates.empty()) p.unjournaled_in_flight = true;
    }
    if (!p.in_flight.empty()) commit_overlapped_.fetch_add(1, std::memory_order_relaxed);
    engine::InFlightBatch* started = b.get();
    // With data but nothing to write (GC's relocations, their copies written unsynced, in a
    // batch too large for the journal) the I/O is the flush alone: the applier names the
    // copies in the index right after.
    const bool has_io = !b->writes.empty() || has_data;
    // A small batch with none in flight (a lightly loaded engine) waits for its own I/O here:
    // nothing could overlap it, and the completion thread's two wake-ups a batch would cost
    // more CPU than they save (13% of a 3-target cluster's random writes). Others are finished
    // by the completion thread while the next batches are decided against their records.
    const bool wait_here = has_io && p.in_flight.empty() &&
                           (commit_batches_in_flight_ == 1 || todo.size() < options_.commit_overlap_min_requests);
    b->tag = ++p.in_flight_tags;
    if (!wait_here) {
      for (const engine::IndexUpdate& u : d->updates) p.in_flight_records[u.key] = {b->tag, u.record};
    }
    if (has_io) b->io = device_->ContinueWriteAll(std::move(early), b->writes, /*sync=*/has_data || d->journaled);
    if (wait_here) b->io_status = device_->FinishWriteAll(std::move(b->io));
    {
      std::lock_guard lock(commit_mu_);
      p.in_flight.push_back(std::move(b));
      if (has_io && !wait_here) {
        commit_io_.push_back(started);
      } else {
        started->io_done = true;
      }
    }
    if (has_io && !wait_here) commit_io_cv_.notify_one();
    return;
  }
}

std::vector<CommitRequest*> Engine::FinishAllBatches() {
  std::vector<CommitRequest*> redo;
  while (redo.empty() && !pipeline_->in_flight.empty()) redo = FinishOldestBatch(/*start_redo=*/false);
  return redo;
}

Status Engine::WrapJournal() {
  engine::CommitPipeline& p = *pipeline_;
  auto wrap = std::make_unique<engine::DecidedBatch>();
  wrap->wrap = true;
  HandOver(std::move(wrap));
  std::unique_lock lock(p.mu);
  p.progress_cv.wait(lock, [&] { return p.wrap_done; });
  p.wrap_done = false;
  return p.wrap_status;
}

std::unique_ptr<engine::InFlightBatch> Engine::TakeOldestBatch() {
  engine::CommitPipeline& p = *pipeline_;
  std::unique_lock lock(commit_mu_);
  if (p.in_flight.empty()) return nullptr;
  std::unique_ptr<engine::InFlightBatch> b = std::move(p.in_flight.front());
  p.in_flight.pop_front();
  commit_cv_.wait(lock, [&] { return b->io_done; });
  return b;
}

std::vector<CommitRequest*> Engine::FinishOldestBatch(bool start_redo) {
  engine::CommitPipeline& p = *pipeline_;
  std::unique_ptr<engine::InFlightBatch> b = TakeOldestBatch();
  engine::DecidedBatch& d = *b->d;
  std::vector<CommitRequest*>& todo = d.requests;
  Status io = b->io_status;
  if (!io.ok()) {
    io = io.WithContext(d.journaled ? "write shard data and its index journal record"
                                    : "flush shard data before committing its index record");
  }
  bool write_failed = false;
  for (size_t k = 0; k < b->data_of.size(); ++k) write_failed |= !b->writes[k].status.ok();
  if (write_failed || !io.ok()) {
    // The batches after this one were decided against it, and their records follow its
    // record: let them finish, and decide and write them again. A request whose data write
    // failed fails alone (the rest of its batch goes again too); any other failure fails the
    // whole batch and abandons its extents.
    std::vector<CommitRequest*> redo;
    if (write_failed) {
      for (size_t k = 0; k < b->data_of.size(); ++k) {
        if (b->writes[k].status.ok()) continue;
        CommitRequest& r = *todo[b->data_of[k]];
        FailRequest(r, b->writes[k].status.WithContext(fmt::format("write shard {}", r.key.ToString())));
        todo[b->data_of[k]] = nullptr;
      }
      std::erase(todo, nullptr);
      redo = todo;
    } else {
      for (CommitRequest* r : todo) FailRequest(*r, io);
    }
    bool later_records = false;
    while (std::unique_ptr<engine::InFlightBatch> later = TakeOldestBatch()) {
      later_records |= later->d->journaled;
      redo.insert(redo.end(), later->d->requests.begin(), later->d->requests.end());
    }
    p.in_flight_records.clear();
    if (journal_) {
      if (!later_records) {
        journal_->Advance(b->start);  // this batch's record (if written) is overwritten by the next
      } else if (Status wrapped = WrapJournal(); !wrapped.ok()) {
        // Records of later batches may lie past this one's, whole: the next record must not
        // take their sequence numbers. Wrapping (seq continues above theirs) does that; without
        // it nothing more can be acknowledged.
        for (CommitRequest* r : redo) FailRequest(*r, wrapped);
        return {};
      }
    }
    commit_redone_.fetch_add(redo.size(), std::memory_order_relaxed);
    if (redo.empty() || !start_redo) return redo;
    StartBatch(std::move(redo));
    return {};
  }
  device_bytes_written_.fetch_add(
      std::accumulate(b->data_of.begin(), b->data_of.end(), uint64_t{0},
                      [&](uint64_t sum, size_t i) { return sum + todo[i]->data.size(); }),
      std::memory_order_relaxed);
  // A journaled batch is durable now: its writes and deletes are acknowledged as soon as
  // readers can find them (in `pending`, at hand-over), before the applier has indexed them.
  // GC's moves wait for the applier (GC then counts the victim's live bytes); so does a
  // batch too large for the journal (durable only once its synced index batch is written).
  std::vector<CommitRequest*> acked;
  d.copies.resize(todo.size());
  for (size_t i = 0; i < todo.size(); ++i) {
    CommitRequest& r = *todo[i];
    d.copies[i] = {.kind = r.kind, .key = r.key, .extent = r.extent,
                   .acked = d.journaled && d.applies[i] && r.kind != CommitRequest::Kind::kRelocate};
    if (d.copies[i].acked) acked.push_back(&r);
    if (!d.applies[i]) continue;
    const engine::IndexUpdate& u = d.updates[d.update_of[i]];
    if (r.kind == CommitRequest::Kind::kDelete) {
      shards_.fetch_sub(1, std::memory_order_relaxed);
    } else if (!u.old) {
      shards_.fetch_add(1, std::memory_order_relaxed);
    }
    // A shard found corrupt stays so until all of its blocks are rewritten (or it is deleted).
    const bool rewritten_whole =
        r.kind == CommitRequest::Kind::kWrite || r.kind == CommitRequest::Kind::kDelete ||
        (r.kind == CommitRequest::Kind::kWriteRange && r.first_block == 0 &&
         r.record.block_crcs.size() == u.record->block_crcs.size());
    if (rewritten_whole) {
      std::lock_guard lock(corrupt_mu_);
      corrupt_.erase(r.key);
    }
  }
  for (const engine::IndexUpdate& u : d.updates) {
    p.cache.Put(u.key, u.record);
    auto it = p.in_flight_records.find(u.key);
    if (it != p.in_flight_records.end() && it->second.first == b->tag) p.in_flight_records.erase(it);
  }
  HandOver(std::move(b->d));
  for (CommitRequest* r : acked) Finish(*r, OkStatus());
  return {};
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
  Status committed;
  {
    std::lock_guard lock(p.mu);
    committed = p.index_failed;
  }
  if (committed.ok() && !batch.updates.empty()) {
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
    } else {
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
    }
  }
  if (committed.ok()) owners_->Apply(batch.updates);
  commit_batches_.fetch_add(1, std::memory_order_relaxed);
  commit_ops_.fetch_add(batch.updates.size(), std::memory_order_relaxed);
  for (size_t i = 0; i < batch.requests.size(); ++i) {
    const engine::DecidedBatch::Copy& c = batch.copies[i];
    if (!batch.applies[i]) {
      table_->Abandon(c.extent);
      Finish(*batch.requests[i], batch.verdict[i]);
      continue;
    }
    if (!committed.ok()) {
      // Its space is kept (never reused before a reopen): a journal record, durable, may name
      // it (GC's moves are in the record too, unacknowledged), and `pending` does, for readers.
      if (!c.acked) Finish(*batch.requests[i], committed);
      continue;  // acknowledged (durable in the journal): Open replays it
    }
    const engine::IndexUpdate& u = batch.updates[batch.update_of[i]];
    if (u.old) {
      // A range write moved only its blocks (to fresh space): their old places, found by search.
      std::vector<engine::Extent> released =
          u.range_write ? engine::RangeWriteReleasedSpace(*u.old, u.written_begin, u.written_end)
                        : engine::ReleasedSpace(*u.old, u.record.get());
      if (c.kind == CommitRequest::Kind::kRelocate) {  // copies of blocks written since
        for (const engine::Extent& x : engine::UnusedSpace(c.extent, u.record.get())) released.push_back(x);
      }
      std::unique_lock lock(KeyLock(c.key));
      table_->Commit(c.extent, released);
    } else {
      table_->Commit(c.extent);
    }
    if (!c.acked) Finish(*batch.requests[i], OkStatus());
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

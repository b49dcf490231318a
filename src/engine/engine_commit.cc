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
//
// Where it lives: step 1 in engine_decide.cc (DecideBatch), the applier (steps 3 to 5, index
// syncs, journal wraps) in engine_apply.cc; this file holds the committer: its queue and
// thread, starting batches (step 2), their completion thread, and finishing them (acknowledged
// and handed over, or unwound and decided again after a failure).
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <numeric>
#include <vector>

#include "engine/commit_request.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "engine/journal.h"
#include "engine/segment_table.h"

namespace penstock {

using engine::CommitRequest;

namespace {

// Batches handed to the applier and not yet applied, at most (their writes are acknowledged).
constexpr uint64_t kMaxUnappliedBatches = 4;

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
  engine::Finish(r, s);
}

void Engine::StartBatch(std::vector<CommitRequest*> todo) {
  if (!AdmitBatch(todo)) return;
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
    if (!b->writes.empty()) b->io = device_->StartEarlyWrites(b->writes);
    engine::DecidedBatch& d = *(b->d = std::make_unique<engine::DecidedBatch>());
    d.requests = todo;
    const bool has_data = DecideBatch(d);

    // The other data and the journal record, then one flush after all of them.
    for (size_t i = 0; i < todo.size(); ++i) {
      if (d.applies[i] && !todo[i]->data.empty() && (!write_early || todo[i]->merge_edges)) write_data(i);
    }
    const uint64_t record_bytes = journal_ ? engine::JournalRecordBytes(d.updates) : 0;
    d.journaled = journal_ && !d.updates.empty() &&
                  record_bytes <= engine::kMaxJournalRecordBytes;
    if (d.journaled && !journal_->Fits(record_bytes)) {
      // The applier wraps the journal once everything before is in the index: finish the
      // batches in flight first. Should one of them fail, this batch follows it and is decided
      // again with it.
      // Waits for the early writes (the requests own their buffers): this batch does not start.
      if (b->io) (void)device_->FinishWriteAll(device_->ContinueWriteAll(std::move(b->io), b->writes, false));
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
    PlaceJournalRecord(*b, record_bytes);
    LaunchBatch(std::move(b), has_data);
    return;
  }
}

bool Engine::AdmitBatch(std::vector<CommitRequest*>& todo) {
  engine::CommitPipeline& p = *pipeline_;
  Status index_failed;
  {
    std::lock_guard lock(p.mu);
    index_failed = p.index_failed;
  }
  if (!index_failed.ok()) {
    for (CommitRequest* r : todo) FailRequest(*r, index_failed);
    return false;
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
  return true;
}

void Engine::PlaceJournalRecord(engine::InFlightBatch& b, uint64_t record_bytes) {
  engine::DecidedBatch& d = *b.d;
  if (journal_) b.start = journal_->position();
  if (d.journaled) {
    b.record = journal_->Encode(d.updates);
    b.writes.push_back({.offset = journal_->position().offset,
                        .data = std::span<const std::byte>(b.record.data(), record_bytes),
                        .status = OkStatus()});
    d.position = journal_->After(record_bytes);
    journal_->Advance(d.position);  // the next record goes after it, written or not
  } else if (journal_) {
    d.position = journal_->position();
    if (!d.updates.empty()) pipeline_->unjournaled_in_flight = true;
  }
}

void Engine::LaunchBatch(std::unique_ptr<engine::InFlightBatch> b, bool has_data) {
  engine::CommitPipeline& p = *pipeline_;
  const engine::DecidedBatch& d = *b->d;
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
                         (commit_batches_in_flight_ == 1 || d.requests.size() < options_.commit_overlap_min_requests);
  b->tag = ++p.in_flight_tags;
  if (!wait_here) {
    for (const engine::IndexUpdate& u : d.updates) p.in_flight_records[u.key] = {b->tag, u.record};
  }
  if (has_io) b->io = device_->ContinueWriteAll(std::move(b->io), b->writes, /*sync=*/has_data || d.journaled);
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
  std::unique_ptr<engine::InFlightBatch> b = TakeOldestBatch();
  const engine::DecidedBatch& d = *b->d;
  Status io = b->io_status;
  if (!io.ok()) {
    io = io.WithContext(d.journaled ? "write shard data and its index journal record"
                                    : "flush shard data before committing its index record");
  }
  bool write_failed = false;
  for (size_t k = 0; k < b->data_of.size(); ++k) write_failed |= !b->writes[k].status.ok();
  if (write_failed || !io.ok()) {
    std::vector<CommitRequest*> redo = UnwindFailedBatch(*b, io, write_failed);
    commit_redone_.fetch_add(redo.size(), std::memory_order_relaxed);
    if (redo.empty() || !start_redo) return redo;
    StartBatch(std::move(redo));
    return {};
  }
  AcknowledgeBatch(std::move(b));
  return {};
}

std::vector<CommitRequest*> Engine::UnwindFailedBatch(engine::InFlightBatch& b, const Status& io,
                                                      bool write_failed) {
  engine::CommitPipeline& p = *pipeline_;
  std::vector<CommitRequest*>& todo = b.d->requests;
  // The batches after this one were decided against it, and their records follow its
  // record: let them finish, and decide and write them again. A request whose data write
  // failed fails alone (the rest of its batch goes again too); any other failure fails the
  // whole batch and abandons its extents.
  std::vector<CommitRequest*> redo;
  if (write_failed) {
    for (size_t k = 0; k < b.data_of.size(); ++k) {
      if (b.writes[k].status.ok()) continue;
      CommitRequest& r = *todo[b.data_of[k]];
      FailRequest(r, b.writes[k].status.WithContext(fmt::format("write shard {}", r.key.ToString())));
      todo[b.data_of[k]] = nullptr;
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
      journal_->Advance(b.start);  // this batch's record (if written) is overwritten by the next
    } else if (Status wrapped = WrapJournal(); !wrapped.ok()) {
      // Records of later batches may lie past this one's, whole: the next record must not
      // take their sequence numbers. Wrapping (seq continues above theirs) does that; without
      // it nothing more can be acknowledged.
      for (CommitRequest* r : redo) FailRequest(*r, wrapped);
      return {};
    }
  }
  return redo;
}

void Engine::AcknowledgeBatch(std::unique_ptr<engine::InFlightBatch> b) {
  engine::CommitPipeline& p = *pipeline_;
  engine::DecidedBatch& d = *b->d;
  const std::vector<CommitRequest*>& todo = d.requests;
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
    if (d.applies[i]) CountCommitted(r, d.updates[d.update_of[i]]);
  }
  for (const engine::IndexUpdate& u : d.updates) {
    p.cache.Put(u.key, u.record);
    auto it = p.in_flight_records.find(u.key);
    if (it != p.in_flight_records.end() && it->second.first == b->tag) p.in_flight_records.erase(it);
  }
  HandOver(std::move(b->d));
  for (CommitRequest* r : acked) engine::Finish(*r, OkStatus());
}

void Engine::CountCommitted(const CommitRequest& r, const engine::IndexUpdate& u) {
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

}  // namespace penstock

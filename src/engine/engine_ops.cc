// engine_ops.cc — the Engine's data path: Write, WriteRange, Read, Delete, Stat, List.
//
// Write: bytes in whole, aligned 4 KiB blocks (a target's received payload, AlignedBuffer) go to
// the device as they are; others are copied into an aligned, zero-padded buffer first. Checksum
// each 4 KiB block; reserve space in the open segment (running GC first if there is none); then
// hand the data and its index record to the committer (engine_commit.cc), which writes the
// batch's data and journal record at once, flushes, commits and moves the space accounting. A
// failure before the index commit leaves only garbage behind. Delete goes through the committer
// too. Read: under the key's lock, look the record up and pin the segments of its runs; read
// outside the lock (one device read per run, zeros for holes); verify every block.
// WriteRange: only the blocks the range touches are written, as one new run; the committer
// composes the key's new record from its record at decision time (block_map.h). A range of
// whole blocks reads nothing. An edge block the range covers only in part is merged: when it
// holds old bytes (it is within the old length) the writer reads it (pinned, verified) and the
// request is conditional on the record it read; when it does not, on the shard still ending
// before it. The committer aborts a request whose condition fails and the writer retries, so a
// concurrent Write, Delete, WriteRange or GC of the key is never half-merged; after a few lost
// races the committer merges the old bytes itself (MergeEdges), so the writer always gets
// through. A record that would exceed kMaxRuns runs is rewritten whole instead (read, patch,
// write in one run).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <mutex>
#include <shared_mutex>

#include "common/log.h"
#include "engine/block_map.h"
#include "engine/commit_request.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "engine/format.h"
#include "engine/index.h"
#include "engine/io_ring.h"
#include "engine/segment_table.h"

namespace penstock {

using engine::kBlockSize;
using engine::kNoSegment;
using engine::ShardRecord;

namespace {

Status NotFoundStatus(const ShardKey& key) {
  return NotFound(fmt::format("shard {} not found on this target", key.ToString()));
}

// What a read of [offset, offset + length) of a shard touches: bytes [begin, end) (clipped to
// the shard's length) and the whole 4 KiB blocks [first_block, end_block) holding them, the
// unit of I/O alignment and of checksums.
struct ReadSpan {
  uint64_t begin = 0, end = 0, first_block = 0, end_block = 0;
  uint64_t block_bytes() const { return (end_block - first_block) * kBlockSize; }
};

ReadSpan SpanOf(const ShardRecord& record, uint64_t offset, uint64_t length) {
  ReadSpan s;
  s.begin = std::min(offset, record.length);
  s.end = length >= record.length - s.begin ? record.length : s.begin + length;
  s.first_block = s.begin / kBlockSize;
  s.end_block = engine::BlocksFor(s.end);
  return s;
}

// `blocks` (the span's whole blocks, read) cut down to the span's bytes.
AlignedBuffer Trimmed(AlignedBuffer blocks, const ReadSpan& s) {
  const uint64_t skip = s.begin - s.first_block * kBlockSize;
  if (skip) std::memmove(blocks.data(), blocks.data() + skip, s.end - s.begin);
  blocks.resize_within_capacity(s.end - s.begin);
  return blocks;
}

// A range write that must merge old bytes reads them itself this many times; when its key
// changed every time, it has the committer merge them (a device read on the committer thread,
// so only then). It gives up with kAborted after kMaxRangeAttempts in all (a rewrite whole that
// keeps meeting a longer shard).
constexpr int kOptimisticAttempts = 4;
constexpr int kMaxRangeAttempts = 100;

// WriteRangeAsync's verdict for a shard past kMaxRuns (MustRewriteWhole looks for it).
constexpr std::string_view kTooManyRuns = "has too many runs for a range write: rewrite it whole (WriteRange)";

}  // namespace

Status Engine::Write(const ShardKey& key, std::span<const std::byte> data, uint64_t version, bool not_older,
                     std::optional<uint64_t> expected_version) {
  if (data.size() > segment_bytes_) {
    return InvalidArgument(fmt::format("shard {} is {} bytes, larger than the segment size {}; "
                                       "split it into smaller shards", key.ToString(),
                                       data.size(), segment_bytes_));
  }
  engine::CommitRequest req;
  req.kind = engine::CommitRequest::Kind::kWrite;
  req.key = key;
  req.record.length = data.size();
  req.record.version = version;
  req.not_older = not_older;
  req.expected_version = expected_version;
  AlignedBuffer padded;  // lives until the committer has written it
  if (!data.empty()) {
    std::span<const std::byte> blocks = data;
    if (reinterpret_cast<uintptr_t>(data.data()) % kBlockSize != 0 || data.size() % kBlockSize != 0) {
      padded = AlignedBuffer::CopyOf(data);
      padded.ZeroPadding();
      blocks = std::span<const std::byte>(padded.data(), padded.capacity());
    }
    PS_ASSIGN_OR_RETURN(req.extent, AllocateForWrite(blocks.size()));
    req.data = blocks;  // the committer writes it with the rest of the batch
    req.record = ShardRecord::Contiguous(req.extent.segment, req.extent.offset, data.size(),
                                         version, engine::BlockChecksums(blocks));
  }
  engine::CommitRequest* one = &req;
  PS_RETURN_IF_ERROR(Commit({&one, 1}));
  CountWrite(data.size());
  return OkStatus();
}

Result<AlignedBuffer> Engine::Read(const ShardKey& key) {
  PS_ASSIGN_OR_RETURN(AlignedBuffer out, ReadShard(key));
  CountRead(out.size());
  return out;
}

Result<AlignedBuffer> Engine::ReadRange(const ShardKey& key, uint64_t offset, uint64_t length,
                                        ShardInfo* info) {
  PS_ASSIGN_OR_RETURN(AlignedBuffer out, ReadShard(key, offset, length, info));
  CountRead(out.size());
  return out;
}

void Engine::CountRead(uint64_t bytes) {
  reads_.fetch_add(1, std::memory_order_relaxed);
  bytes_read_.fetch_add(bytes, std::memory_order_relaxed);
}

Status Engine::WriteRange(const ShardKey& key, uint64_t offset, std::span<const std::byte> data,
                          uint64_t version, std::optional<uint64_t> expected_version) {
  PS_RETURN_IF_ERROR(CheckRange(key, offset, data.size()));
  const uint64_t end = offset + data.size();
  const uint64_t first_block = offset / kBlockSize;
  const uint64_t end_block = data.empty() ? first_block : engine::BlocksFor(end);
  const bool head_partial = !data.empty() && offset % kBlockSize != 0;
  const bool tail_partial = !data.empty() && end % kBlockSize != 0;
  Status aborted;
  for (int attempt = 0; attempt < kMaxRangeAttempts; ++attempt) {
    engine::CommitRequest req;
    req.kind = engine::CommitRequest::Kind::kWriteRange;
    req.key = key;
    req.first_block = first_block;
    req.record.length = end;
    req.record.version = version;
    req.expected_version = expected_version;
    AlignedBuffer buffer;  // lives until the committer has written it
    std::span<const std::byte> blocks = data;
    if (!head_partial && !tail_partial) {
      // Whole blocks: nothing of the shard's old bytes is needed.
      if (reinterpret_cast<uintptr_t>(data.data()) % kBlockSize != 0) {
        buffer = AlignedBuffer::CopyOf(data);
        blocks = std::span<const std::byte>(buffer.data(), buffer.size());
      }
    } else if (attempt >= kOptimisticAttempts) {
      buffer = AlignedBuffer((end_block - first_block) * kBlockSize);
      std::memset(buffer.data(), 0, buffer.size());
      std::memcpy(buffer.data() + (offset - first_block * kBlockSize), data.data(), data.size());
      req.merge_edges = true;
      req.range_begin = offset;
      req.range_end = end;
      req.merge_blocks = std::span<std::byte>(buffer.data(), buffer.size());
      blocks = req.merge_blocks;
    } else {
      engine::SegmentPins pins(*table_);
      PS_ASSIGN_OR_RETURN(std::optional<ShardRecord> seen,
                          LookUpAndPin(key, pins, first_block * kBlockSize,
                                       (end_block - first_block) * kBlockSize));
      const uint64_t old_length = seen ? seen->length : 0;
      buffer = AlignedBuffer((end_block - first_block) * kBlockSize);
      std::memset(buffer.data(), 0, buffer.size());
      std::span<std::byte> out(buffer.data(), buffer.size());
      // An edge block holds old bytes when it starts within the old length (past it, zeros).
      const bool merge_head = head_partial && first_block * kBlockSize < old_length;
      const bool merge_tail = tail_partial && end < old_length && !(merge_head && end_block - 1 == first_block);
      if (merge_head) PS_RETURN_IF_ERROR(ReadBlocks(key, *seen, first_block, out.first(kBlockSize)));
      if (merge_tail) PS_RETURN_IF_ERROR(ReadBlocks(key, *seen, end_block - 1, out.last(kBlockSize)));
      pins.Clear();
      std::memcpy(buffer.data() + (offset - first_block * kBlockSize), data.data(), data.size());
      if (merge_head || merge_tail) {
        req.conditional = true;  // the merged bytes are those of this record
        req.expected = std::move(seen);
      } else {  // the edges' other bytes are zeros as long as the shard ends before them
        uint64_t limit = UINT64_MAX;
        if (head_partial) limit = first_block * kBlockSize;
        if (tail_partial) limit = std::min(limit, end);
        req.max_old_length = limit;
      }
      blocks = std::span<const std::byte>(buffer.data(), buffer.size());
    }
    Status s = CommitRange(req, blocks, data.size());
    if (s.code() != StatusCode::kAborted || req.version_refused) return s;
    if (req.fragmented) return RewriteWithRange(key, offset, data, version, expected_version);
    aborted = s;
  }
  return Aborted(fmt::format("shard {} changed during each of {} attempts to merge a write of "
                             "range [{}, {}) into it ({}); retry the write", key.ToString(),
                             kMaxRangeAttempts, offset, end, aborted.message()));
}

bool Engine::MustRewriteWhole(const Status& status) {
  return status.code() == StatusCode::kAborted && status.message().find(kTooManyRuns) != std::string::npos;
}

bool Engine::WholeBlocks(uint64_t offset, uint64_t size) {
  return size > 0 && offset % kBlockSize == 0 && size % kBlockSize == 0;
}

void Engine::WriteRangeAsync(const ShardKey& key, uint64_t offset, std::span<const std::byte> data,
                             uint64_t version, std::function<void(Status)> done,
                             std::optional<uint64_t> expected_version) {
  StartRangeAsync(key, offset, data, version, done, /*may_wait=*/true, expected_version);
}

bool Engine::TryWriteRangeAsync(const ShardKey& key, uint64_t offset, std::span<const std::byte> data,
                                uint64_t version, std::function<void(Status)>& done,
                                std::optional<uint64_t> expected_version) {
  return StartRangeAsync(key, offset, data, version, done, /*may_wait=*/false, expected_version);
}

struct Engine::AsyncWrite {
  engine::CommitRequest req;
  AlignedBuffer copy;  // the data, when the caller's is not 4 KiB aligned (or whole blocks)
  std::function<void(Status)> done;
};

bool Engine::StartRangeAsync(const ShardKey& key, uint64_t offset, std::span<const std::byte> data,
                             uint64_t version, std::function<void(Status)>& done, bool may_wait,
                             std::optional<uint64_t> expected_version) {
  if (!WholeBlocks(offset, data.size())) {
    done(InvalidArgument(fmt::format("asynchronous range write [{}, {}) of shard {} is not whole 4 KiB "
                                     "blocks; use WriteRange", offset, offset + data.size(), key.ToString())));
    return true;
  }
  if (Status range = CheckRange(key, offset, data.size()); !range.ok()) {
    done(std::move(range));
    return true;
  }
  // Writers wait while GC cleans for them: the room a pass makes is theirs first. Taken from
  // here, it went to whoever came next, and on a full device under load a waiting writer could
  // clean pass after pass for others (a request held for a minute, its client timed out).
  if (!may_wait && gc_waiters_.load(std::memory_order_relaxed) > 0) return false;
  auto w = std::make_unique<AsyncWrite>();
  w->req.kind = engine::CommitRequest::Kind::kWriteRange;
  w->req.key = key;
  w->req.first_block = offset / kBlockSize;
  w->req.record.length = offset + data.size();
  w->req.record.version = version;
  w->req.expected_version = expected_version;
  std::span<const std::byte> blocks = data;
  if (reinterpret_cast<uintptr_t>(data.data()) % kBlockSize != 0) {
    w->copy = AlignedBuffer::CopyOf(data);
    blocks = std::span<const std::byte>(w->copy.data(), w->copy.size());
  }
  w->req.record.block_crcs = engine::BlockChecksums(blocks);
  // Without waiting: only space at hand (no GC pass, no index sync, no segment being zeroed).
  auto extent = may_wait ? AllocateForWrite(blocks.size())
                         : table_->Allocate(blocks.size(), engine::AppendStream::kUser, /*may_wait=*/false);
  if (!extent.ok()) {
    if (!may_wait && extent.status().code() == StatusCode::kResourceExhausted) return false;
    done(extent.status());
    return true;
  }
  w->req.extent = *extent;
  w->req.data = blocks;
  w->done = std::move(done);
  EnqueueAsync(std::move(w), data.size());
  return true;
}

bool Engine::TryWriteAsync(const ShardKey& key, std::span<const std::byte> data, uint64_t version, bool not_older,
                           std::function<void(Status)>& done, std::optional<uint64_t> expected_version) {
  if (data.size() > segment_bytes_) {
    done(InvalidArgument(fmt::format("shard {} is {} bytes, larger than the segment size {}; split it into "
                                     "smaller shards", key.ToString(), data.size(), segment_bytes_)));
    return true;
  }
  if (gc_waiters_.load(std::memory_order_relaxed) > 0) return false;  // as StartRangeAsync
  auto w = std::make_unique<AsyncWrite>();
  w->req.kind = engine::CommitRequest::Kind::kWrite;
  w->req.key = key;
  w->req.record.length = data.size();
  w->req.record.version = version;
  w->req.not_older = not_older;
  w->req.expected_version = expected_version;
  if (!data.empty()) {
    std::span<const std::byte> blocks = data;
    if (reinterpret_cast<uintptr_t>(data.data()) % kBlockSize != 0 || data.size() % kBlockSize != 0) {
      w->copy = AlignedBuffer::CopyOf(data);
      w->copy.ZeroPadding();
      blocks = std::span<const std::byte>(w->copy.data(), w->copy.capacity());
    }
    auto extent = table_->Allocate(blocks.size(), engine::AppendStream::kUser, /*may_wait=*/false);
    if (!extent.ok()) {
      if (extent.status().code() == StatusCode::kResourceExhausted) return false;
      done(extent.status());
      return true;
    }
    w->req.extent = *extent;
    w->req.data = blocks;
    w->req.record = ShardRecord::Contiguous(extent->segment, extent->offset, data.size(), version,
                                            engine::BlockChecksums(blocks));
  }
  w->done = std::move(done);
  EnqueueAsync(std::move(w), data.size());
  return true;
}

void Engine::EnqueueAsync(std::unique_ptr<AsyncWrite> w, uint64_t bytes) {
  AsyncWrite* raw = w.release();
  raw->req.on_done = [this, raw, bytes](engine::CommitRequest& r, Status s) {
    std::unique_ptr<AsyncWrite> owned(raw);
    if (s.ok()) {
      CountWrite(bytes);
    } else if (r.fragmented) {
      s = Aborted(fmt::format("shard {} {}", r.key.ToString(), kTooManyRuns));
    }
    auto done = std::move(owned->done);
    owned.reset();
    done(std::move(s));
  };
  Enqueue(&raw->req);
}

Status Engine::CommitRange(engine::CommitRequest& req, std::span<const std::byte> blocks, uint64_t bytes) {
  req.record.block_crcs = engine::BlockChecksums(blocks);
  if (!blocks.empty()) {
    PS_ASSIGN_OR_RETURN(req.extent, AllocateForWrite(blocks.size()));
    req.data = blocks;
  }
  engine::CommitRequest* one = &req;
  PS_RETURN_IF_ERROR(Commit({&one, 1}));
  CountWrite(bytes);
  return OkStatus();
}

Status Engine::CheckRange(const ShardKey& key, uint64_t offset, uint64_t size) const {
  if (offset <= segment_bytes_ && size <= segment_bytes_ - offset) return OkStatus();
  return InvalidArgument(fmt::format("range [{}, {}) of shard {} ends past the segment size {}, the largest a "
                                     "shard can be; split it into smaller shards",
                                     offset, offset + size, key.ToString(), segment_bytes_));
}

void Engine::CountWrite(uint64_t bytes) {
  writes_.fetch_add(1, std::memory_order_relaxed);
  bytes_written_.fetch_add(bytes, std::memory_order_relaxed);
}

Status Engine::RewriteWithRange(const ShardKey& key, uint64_t offset,
                                std::span<const std::byte> data, uint64_t version,
                                std::optional<uint64_t> expected_version) {
  const uint64_t end = offset + data.size();
  Status aborted;
  for (int attempt = 0; attempt < kMaxRangeAttempts; ++attempt) {
    engine::SegmentPins pins(*table_);
    const bool optimistic = attempt < kOptimisticAttempts;
    PS_ASSIGN_OR_RETURN(std::optional<ShardRecord> seen,
                        optimistic ? LookUpAndPin(key, pins) : LookUpAndPin(key, pins, 0, 0));
    const uint64_t old_length = seen ? seen->length : 0;
    const uint64_t length = std::max(old_length, end);
    AlignedBuffer buffer(engine::BlocksFor(length) * kBlockSize);
    std::memset(buffer.data(), 0, buffer.size());
    if (optimistic && old_length > 0) {
      PS_RETURN_IF_ERROR(ReadBlocks(key, *seen, 0, {buffer.data(), engine::BlocksFor(old_length) * kBlockSize}));
    }
    pins.Clear();
    if (!data.empty()) std::memcpy(buffer.data() + offset, data.data(), data.size());
    engine::CommitRequest req;
    req.kind = engine::CommitRequest::Kind::kWriteRange;
    req.key = key;
    req.first_block = 0;
    req.record.length = length;
    req.record.version = version;
    req.expected_version = expected_version;
    if (optimistic) {
      req.conditional = true;
      req.expected = std::move(seen);
    } else {  // kept losing the race: the committer merges the old bytes
      req.merge_edges = true;
      req.range_begin = offset;
      req.range_end = end;
      req.merge_blocks = std::span<std::byte>(buffer.data(), buffer.size());
    }
    Status s = CommitRange(req, std::span<const std::byte>(buffer.data(), buffer.size()), data.size());
    if (s.code() != StatusCode::kAborted || req.version_refused) return s;
    aborted = s;  // changed meanwhile, or (merged by the committer) longer than it was
  }
  return Aborted(fmt::format("shard {} changed during each of {} attempts to rewrite it with "
                             "range [{}, {}) ({}); retry the write", key.ToString(),
                             kMaxRangeAttempts, offset, end, aborted.message()));
}

Result<std::optional<ShardRecord>> Engine::CurrentRecord(const ShardKey& key, bool memory_only) {
  if (auto pending = PendingRecord(key)) return std::move(*pending);  // not yet in the index
  return index_->Get(key, memory_only);
}

Result<std::optional<ShardRecord>> Engine::LookUpAndPin(const ShardKey& key,
                                                        engine::SegmentPins& pins,
                                                        uint64_t offset, uint64_t length,
                                                        bool memory_only) {
  std::shared_lock lock(KeyLock(key));
  PS_ASSIGN_OR_RETURN(std::optional<ShardRecord> record, CurrentRecord(key, memory_only));
  if (record && length > 0 && offset < record->length) {
    const uint64_t end = length >= record->length - offset ? record->length : offset + length;
    for (uint32_t segment : engine::SegmentsOf(*record, offset / kBlockSize, engine::BlocksFor(end))) {
      pins.Add(segment);
    }
  }
  return record;
}

Status Engine::ReadBlocks(const ShardKey& key, const ShardRecord& record, uint64_t first_block,
                          std::span<std::byte> out) {
  const uint64_t end_block = first_block + out.size() / kBlockSize;
  std::vector<engine::DeviceRead> reads;  // one per run that holds data, read together
  for (const engine::BlockRun& run : record.runs) {
    const uint64_t begin = std::max(run.first_block, first_block);
    const uint64_t end = std::min(run.end_block(), end_block);
    if (begin >= end) continue;
    std::span<std::byte> piece = out.subspan((begin - first_block) * kBlockSize, (end - begin) * kBlockSize);
    if (run.hole()) {
      std::memset(piece.data(), 0, piece.size());
      continue;
    }
    reads.push_back({DeviceOffset(run.segment, run.offset + (begin - run.first_block) * kBlockSize), piece});
  }
  PS_RETURN_IF_ERROR(device_->ReadAll(reads).WithContext(fmt::format("read shard {}", key.ToString())));
  if (device_->persistent()) PS_RETURN_IF_ERROR(VerifyBlocks(key, record, out, first_block));
  return OkStatus();
}

Result<AlignedBuffer> Engine::ReadShard(const ShardKey& key, uint64_t offset, uint64_t length,
                                        ShardInfo* info) {
  engine::SegmentPins pins(*table_);
  PS_ASSIGN_OR_RETURN(std::optional<ShardRecord> record, LookUpAndPin(key, pins, offset, length));
  if (!record) return NotFoundStatus(key);
  if (info) *info = ShardInfo{record->length, record->version};
  const ReadSpan span = SpanOf(*record, offset, length);
  if (span.begin == span.end) return AlignedBuffer(0);
  AlignedBuffer out(span.block_bytes());
  PS_RETURN_IF_ERROR(ReadBlocks(key, *record, span.first_block, out.span()));
  pins.Clear();
  return Trimmed(std::move(out), span);
}

std::function<void()> Engine::CompleteReadsOnThisThread(const WatchFd& watch) {
  auto queue = engine::IoRing::ThreadQueue::Create(256);
  if (!queue.ok()) {
    PS_LOG_WARN("engine: reads complete on the device's completion thread: {}", queue.status().ToString());
    return {};
  }
  std::shared_ptr<engine::IoRing::ThreadQueue> q = std::move(queue).value();
  engine::IoRing::UseOnThisThread(q.get());
  watch(q->event_fd(), [raw = q.get()] { return raw->Reap() > 0 || raw->has_queued(); });
  return [q]() mutable {
    engine::IoRing::UseOnThisThread(nullptr);
    q.reset();  // waits for its reads
  };
}

bool Engine::TryReadRangeAsync(const ShardKey& key, uint64_t offset, uint64_t length, ReadDone& done) {
  struct AsyncRead {
    explicit AsyncRead(engine::SegmentTable& table) : pins(table) {}
    engine::SegmentPins pins;  // the segments stay intact until the read is checked
    ShardRecord record;
    ShardInfo info;
    ReadSpan span;
    AlignedBuffer blocks;
    ReadDone done;
  };
  auto op = std::make_shared<AsyncRead>(*table_);
  auto looked = LookUpAndPin(key, op->pins, offset, length, /*memory_only=*/true);
  if (!looked.ok()) return false;  // not in memory (or failing: ReadRange reports it)
  if (!*looked) {
    done(NotFoundStatus(key), ShardInfo{});
    return true;
  }
  op->record = std::move(**looked);
  const ShardRecord& record = op->record;
  op->info = ShardInfo{record.length, record.version};
  const ReadSpan& span = op->span = SpanOf(record, offset, length);
  if (span.begin == span.end) {
    CountRead(0);
    done(AlignedBuffer(0), op->info);
    return true;
  }
  // One device read: the blocks lie in one run that holds data.
  const engine::BlockRun* run = engine::RunHolding(record, span.first_block);
  if (run == nullptr || run->hole() || run->end_block() < span.end_block) return false;
  const uint64_t device_offset = DeviceOffset(run->segment, run->offset + (span.first_block - run->first_block) * kBlockSize);
  op->blocks = AlignedBuffer(span.block_bytes());
  op->done = std::move(done);
  std::function<void(Status)> read_done = [this, key, op](Status s) {
    if (s.ok() && device_->persistent()) {
      s = VerifyBlocks(key, op->record, op->blocks.span(), op->span.first_block);
    } else if (!s.ok()) {
      s = s.WithContext(fmt::format("read shard {}", key.ToString()));
    }
    op->pins.Clear();
    auto finish = std::move(op->done);
    if (!s.ok()) return finish(std::move(s), op->info);
    CountRead(op->span.end - op->span.begin);
    finish(Trimmed(std::move(op->blocks), op->span), op->info);
  };
  if (device_->ReadAsync(device_offset, op->blocks.span(), read_done)) return true;
  done = std::move(op->done);
  return false;
}

Status Engine::VerifyBlocks(const ShardKey& key, const ShardRecord& record,
                            std::span<const std::byte> padded, size_t first_block) {
  std::vector<uint32_t> actual = engine::BlockChecksums(padded);
  for (size_t j = 0; j < actual.size(); ++j) {
    const size_t i = first_block + j;
    if (i >= record.block_crcs.size()) {
      return Internal(fmt::format("shard {}: block {} is past its {} checksums", key.ToString(), i,
                                  record.block_crcs.size()));
    }
    if (actual[j] == record.block_crcs[i]) continue;
    checksum_errors_.fetch_add(1, std::memory_order_relaxed);
    MarkCorrupt(key);
    uint64_t shard_offset = i * kBlockSize;
    auto place = engine::BlockPlace(record, i);
    return DataLoss(fmt::format(
        "shard {}: the 4 KiB block at shard offset {} (device '{}' offset {}) fails its crc32c "
        "check (stored {:08x}, read {:08x}); this copy is lost, rebuild it from another replica "
        "or from parity", key.ToString(), shard_offset, device_->name(),
        place ? DeviceOffset(place->first, place->second) : 0, record.block_crcs[i], actual[j]));
  }
  return OkStatus();
}

Status Engine::Delete(const ShardKey& key, std::optional<uint64_t> expected_version) {
  engine::CommitRequest req;
  req.kind = engine::CommitRequest::Kind::kDelete;
  req.key = key;
  req.expected_version = expected_version;
  engine::CommitRequest* one = &req;
  PS_RETURN_IF_ERROR(Commit({&one, 1}));
  deletes_.fetch_add(1, std::memory_order_relaxed);
  return OkStatus();
}

Result<ShardInfo> Engine::Stat(const ShardKey& key) {
  PS_ASSIGN_OR_RETURN(std::optional<ShardRecord> record, CurrentRecord(key));
  if (!record) return NotFoundStatus(key);
  return ShardInfo{record->length, record->version};
}

Result<std::vector<std::pair<ShardKey, ShardInfo>>> Engine::List(
    uint64_t container, std::optional<ObjectId> object, std::optional<ShardKey> start_after,
    size_t limit) {
  std::vector<std::pair<ShardKey, ShardInfo>> out;
  if (limit == 0) return out;
  WaitApplied();  // acknowledged writes and deletes are in the index
  std::string prefix = object ? engine::ObjectPrefix(container, *object)
                              : engine::ContainerPrefix(container);
  PS_RETURN_IF_ERROR(index_->Scan(prefix, start_after,
                                  [&](const ShardKey& key, const ShardRecord& record) {
                                    out.emplace_back(key, ShardInfo{record.length, record.version});
                                    return out.size() < limit;
                                  }));
  return out;
}

Result<std::vector<uint64_t>> Engine::Containers(std::optional<uint64_t> after, size_t limit) {
  std::vector<uint64_t> out;
  WaitApplied();
  while (out.size() < limit && after != UINT64_MAX) {
    // The last key a container can have: the scan starts after it, at the next container's first.
    std::optional<ShardKey> past;
    if (after) past = ShardKey{*after, ObjectId{UINT64_MAX, UINT64_MAX}, UINT64_MAX, UINT32_MAX};
    std::optional<uint64_t> next;
    PS_RETURN_IF_ERROR(index_->Scan(engine::Index::AllShardsPrefix(), past, [&](const ShardKey& key, const ShardRecord&) {
      next = key.container;
      return false;
    }));
    if (!next) break;
    out.push_back(*next);
    after = next;
  }
  return out;
}

}  // namespace penstock

// engine.h — the storage engine of a target: shards in, shards out, on one data device.
//
// An Engine owns one data device (a file or block device, driven by io_uring with O_DIRECT)
// and one RocksDB index. Shard data is appended, 4 KiB aligned, to the open segment of the
// device; the index maps each ShardKey to where its bytes are plus a crc32c per 4 KiB block.
// A shard written whole lies in one extent; WriteRange writes only the blocks a range touches,
// so a shard written in ranges is a block map: runs of blocks in several places, holes reading
// as zeros (block_map.h).
// The index is the truth: data reaches the device (durably) before its index record is
// committed, so after a crash Open rebuilds everything from the index and data that was written
// but not indexed is garbage.
//
// Group commit (engine_commit.cc, engine_decide.cc, engine_apply.cc): writers reserve space for
// their data and queue it with their index record; a committer thread takes everything queued,
// decides it against the index, writes the batch's data and its index updates (one record of the
// index journal, journal.h, in the device's header region) in one submission followed by one flush
// (data and journal record durable together), acknowledges its writes and deletes (readers find
// their records in the pipeline's pending map until they are indexed) and hands the batch to an
// applier thread, which applies it to RocksDB unsynced (while the committer writes the next
// batch). RocksDB is synced lazily (every index_sync_interval_ms while it changes, when the
// journal region is full, when space waits for it, and at close); Open replays the journal records
// the index lacks before anything reads the index. Space a batch releases is not reused until the
// index is durable through that batch, so every record Open may replay still names intact data.
// The committer and the applier are the only threads that mutate the index.
// Space is reclaimed one whole segment at a time. Garbage collection (engine_gc.cc) relocates
// the live blocks of the emptiest sealed segments (a concurrent write of a block wins)
// so they become free: in a background thread at a rate limit, without limit when free segments
// run low, and inline before a Write would fail with "no space".
// Background zeroing (engine_zero.cc) writes zeros over the free segments a fresh data file
// has never written, ahead of the log.
// Scrub (engine_scrub.cc) re-reads every live shard at a rate limit and records those whose
// checksums fail (CorruptShards).
//
// Thread safety: every method may be called from any number of threads at once. Writes and
// deletes of one key are ordered by the committer (queue order): of calls on one key that
// overlap in time either may win, and a call that starts after another returned wins over it.
// Ownership: Open returns the sole owner; destroying the Engine stops its threads (committer,
// applier, GC, scrub, zeroing; the index is synced first) and closes device and index (no call may be in
// flight then).
#pragma once

#include <array>
#include <chrono>
#include <atomic>
#include <compare>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/buffer.h"
#include "engine/commit_gather.h"
#include "penstock/status.h"

namespace penstock {

struct ObjectId {
  uint64_t hi = 0, lo = 0;
  auto operator<=>(const ObjectId&) const = default;
};

struct ShardKey {
  uint64_t container = 0;
  ObjectId object;
  uint64_t stripe = 0;  // stripe index within the object; kHeadStripe = the object's head record
  uint32_t shard = 0;   // shard index within the stripe (0 for unprotected data)
  static constexpr uint64_t kHeadStripe = UINT64_MAX;
  auto operator<=>(const ShardKey&) const = default;
  // "c=3 obj=0123456789abcdef:0123456789abcdef stripe=2 shard=0" (stripe=head for kHeadStripe).
  std::string ToString() const;
};

// For hash maps keyed by ShardKey (and the engine's key-lock stripes).
struct ShardKeyHash {
  size_t operator()(const ShardKey& k) const {
    uint64_t h = k.container * 0x9E3779B97F4A7C15ull;
    h ^= k.object.hi + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
    h ^= k.object.lo + 0x85157AF5ull + (h << 6) + (h >> 2);
    h ^= k.stripe * 0xC2B2AE3D27D4EB4Full + (h << 6) + (h >> 2);
    return h ^ (k.shard + (h << 6) + (h >> 2));
  }
};

struct ShardInfo {
  uint64_t length = 0;
  uint64_t version = 0;
  friend bool operator==(const ShardInfo&, const ShardInfo&) = default;
};

struct EngineOptions {
  std::string data_path;  // file (created and preallocated to capacity_bytes if absent) or block device
  std::string index_dir;  // RocksDB directory (created if absent)
  uint64_t capacity_bytes = 1ull << 30;  // for a new file; a block device uses its own size.
                                         // The first 1 MiB holds the device header.
  uint64_t segment_bytes = 64ull << 20;  // multiple of 4 KiB; fixed when the device is formatted
  unsigned queue_depth = 64;             // io_uring entries (I/Os in flight at once)
  // A new data file is written with zeros instead of fallocated (slower to create, at disk
  // bandwidth; but on ext4/xfs the first write to a fallocated block changes file metadata, so
  // its flush commits the filesystem journal). No effect on block devices or existing files.
  bool zero_fill_new_file = false;
  // Background zeroing (engine_zero.cc): free segments of a file the filesystem reports as
  // never written (fallocated, or holes) are written with zeros ahead of the log, so the group
  // commit's flushes stop carrying the filesystem's metadata. Paced to this rate while the
  // engine served I/O in the last second, unpaced while it is idle; 0 = off.
  uint64_t zero_rate_bytes_per_sec = 64ull << 20;
  // "file" (data_path is a file or block device) or "null": no media; writes are accounted and
  // dropped, reads return zeros and are not checksum-verified, the index is not synced. For
  // benchmarks of the layers above the engine; nothing it stores survives (see null_device.h).
  std::string device_kind = "file";

  // Garbage collection. With gc_enabled = false the engine behaves as v1: a segment comes back
  // only when every shard in it is gone, and no segment is held in reserve.
  bool gc_enabled = true;
  bool gc_background = true;           // false: GC runs only inline (no space) and on demand
  uint32_t gc_reserve_segments = 1;    // free segments writers may not take (GC's landing room)
  uint32_t gc_free_segments_low = 2;   // fewer free segments than this: GC runs unthrottled
  double gc_min_dead_fraction = 0.5;   // background GC cleans segments at least this dead
                                       // (at least 3/4 while half the segments are free)
  uint64_t gc_rate_bytes_per_sec = 64ull << 20;  // background relocation rate; 0 = unlimited

  // Index journal (journal.h): the index is synced at least this often while it changes (and
  // when the journal region is full); a crash replays at most what came since.
  uint64_t index_sync_interval_ms = 200;
  // Group commit: batches whose data, journal record and flush are in flight at once (1 = one
  // at a time; at most Journal::kMaxRecordsInFlight), and the requests a batch needs to start
  // while another is in flight (fewer wait for it: each batch costs a device flush), which is
  // also the size from which a batch's data is written while it is decided (a smaller one is
  // decided quickly, and its data goes with its journal record in one submission: each
  // submission notifies the device, a VM exit on a virtual disk). 0 = 3 on a host with at
  // least 4 CPUs, else 1: overlapping costs a thread hand-off per batch, which on 2 cores took
  // more than it saved (docs/performance.md, twelfth session).
  uint32_t commit_batches_in_flight = 0;
  uint32_t commit_overlap_min_requests = 16;
  // Group commit gathering (commit_gather.h): with no batch in flight, a batch of fewer
  // requests than recent batches held waits for more while they arrive closely, at most this
  // long; 0 = start at once. Never for a lone writer.
  uint32_t commit_gather_us = 300;
  // Bytes of the device's header region used for the journal; 0 = all of it (1 MiB less the
  // header block). At least 256 KiB; tests use little so that the journal wraps often.
  uint64_t journal_bytes = 0;

  // Background scrub: re-reads and verifies every live shard at this rate; 0 = off (Scrub()
  // still runs a pass on demand).
  uint64_t scrub_rate_bytes_per_sec = 0;
};

struct EngineStats {
  uint64_t capacity_bytes = 0;  // total_segments * segment_bytes
  uint64_t used_bytes = 0;      // bytes in non-free segments
  uint64_t live_bytes = 0;      // bytes (4 KiB rounded) of live shards
  uint64_t dead_bytes = 0;      // bytes in non-free segments that hold no live shard and cannot
                                // be reused without GC (excludes the open segment's unwritten tail)
  uint64_t free_segments = 0;
  uint64_t total_segments = 0;
  uint64_t shards = 0;
  uint64_t segment_owner_entries = 0;  // runs GC can find by segment (in memory, ~56 bytes each)
  uint64_t index_lookups = 0;     // index record lookups (reads, stats, the committer's misses, GC)
  uint64_t index_cache_hits = 0;  // of those, answered by the index's record cache
  uint64_t reads = 0, writes = 0, deletes = 0, checksum_errors = 0;
  uint64_t bytes_read = 0, bytes_written = 0;  // logical shard bytes
  // Bytes (4 KiB rounded) written to the data device by writes and by GC relocation.
  uint64_t device_bytes_written = 0;
  double write_amplification = 0;  // device_bytes_written / bytes_written (0 before any write)
  uint64_t commit_batches = 0;     // group commits (one device flush each)
  uint64_t commit_ops = 0;         // writes, deletes and relocations those batches carried
  uint64_t commit_overlapped = 0;  // batches started while an earlier one was still in flight
  uint64_t commit_redone = 0;      // requests written again: a write of their batch or one before failed
  uint64_t index_syncs = 0;        // lazy index syncs (each makes the journal so far unneeded)
  uint64_t journal_replayed = 0;   // journal records Open replayed into the index
  uint64_t gc_segments_cleaned = 0;  // segments GC emptied
  uint64_t gc_bytes_moved = 0;       // bytes (4 KiB rounded) GC relocated
  uint64_t scrub_bytes_verified = 0;  // bytes (4 KiB rounded) scrub read and checked
  uint64_t scrub_corrupt_shards = 0;  // corrupt shards scrub found (each counted once per find)
  uint64_t zero_pending_segments = 0;  // segments background zeroing has still to look at
  uint64_t zeroed_bytes = 0;           // bytes background zeroing wrote
  // Device reads and writes from registered buffers (IoRing::registered_buffer_ios: the
  // process's, counted since it started).
  uint64_t registered_buffer_ios = 0;
};

namespace engine {
struct CommitPipeline;
struct CommitRequest;
struct DecidedBatch;
struct InFlightBatch;
struct Extent;
struct GcPass;
struct IndexUpdate;
class Device;
class Index;
class Journal;
enum class AppendStream : uint8_t;
class SegmentOwners;
class SegmentPins;
class SegmentTable;
struct ShardRecord;
class SharedRecord;
}  // namespace engine

class Engine {
 public:
  // Opens (formatting on first use) the device at options.data_path and the index at
  // options.index_dir. Errors: kInvalidArgument (bad options, segment_bytes differs from the
  // formatted one), kPermissionDenied (path not writable; the message says which), kFailedPrecondition
  // (device and index do not belong together), kDataLoss (corrupt index or device header),
  // kUnavailable (already open elsewhere).
  static Result<std::unique_ptr<Engine>> Open(const EngineOptions& options);
  // Same, over a caller-supplied device (fault-injection tests; later a null device).
  // options.data_path is used only in messages.
  static Result<std::unique_ptr<Engine>> Open(const EngineOptions& options,
                                              std::unique_ptr<engine::Device> device);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Stores `data` (any length up to segment_bytes, 0 allowed) under `key`, replacing any
  // previous version. Durable when it returns OK (survives kill -9 and power loss).
  // Errors: kInvalidArgument (larger than a segment), kResourceExhausted "no space" (delete
  // shards, then retry), I/O errors from the device or index. With `not_older`, kAborted (and
  // nothing changes) when the stored shard's version is newer than `version`, decided in queue
  // order with every other write of the key. With `expected_version`, only over that stored
  // version, as WriteRangeAsync's (newer: kAborted; older or none: kFailedPrecondition).
  Status Write(const ShardKey& key, std::span<const std::byte> data, uint64_t version, bool not_older = false,
               std::optional<uint64_t> expected_version = std::nullopt);
  // Writes `data` at byte `offset` of shard `key`, leaving its other bytes as they were; creates
  // the shard when absent. Bytes between the shard's old end and `offset` read as zeros. The
  // shard's length becomes max(old length, offset + data.size()) and its version `version`.
  // Durable when it returns OK; atomic (a reader sees the shard wholly before or wholly after).
  // Writes only the 4 KiB blocks the range touches (plus the index record), not the whole shard.
  // Errors: kInvalidArgument (offset + size larger than a segment), kResourceExhausted "no space",
  // I/O errors, kDataLoss when an edge block it must merge fails its checksum.
  // (data.size() == 0 with offset beyond the end just extends the length with zeros; with
  // offset <= length just sets the version.) Ordered against other writes of the key like Write;
  // a range with unaligned edges that hold old bytes is retried when the key changes meanwhile
  // (kAborted only if it changed on every one of many attempts).
  // With `expected_version`: only over that stored shard version, as WriteRangeAsync's.
  Status WriteRange(const ShardKey& key, uint64_t offset, std::span<const std::byte> data,
                    uint64_t version, std::optional<uint64_t> expected_version = std::nullopt);
  // WriteRange without a thread waiting for it, for ranges of whole 4 KiB blocks (offset and
  // size multiples of 4096, size > 0: nothing old is merged): queues the write with the group
  // commit and returns. `done` runs exactly once: at once on the calling thread for an error
  // found before queueing (kInvalidArgument: not whole blocks or past a segment;
  // kResourceExhausted "no space"), otherwise on an engine thread when the write is durable or
  // failed; there it must not call blocking Engine methods. kAborted: the shard has too many
  // runs for a range write and must be rewritten whole (MustRewriteWhole); call WriteRange
  // from another thread.
  // `data` must stay valid until `done` runs. Ordered against other writes like WriteRange.
  // With `expected_version`, the write applies only over that stored shard version (decided
  // in queue order with every other write of the key): a newer one fails it kAborted, an older
  // one or none kFailedPrecondition (the copy missed a write), and nothing changes.
  void WriteRangeAsync(const ShardKey& key, uint64_t offset, std::span<const std::byte> data, uint64_t version,
                       std::function<void(Status)> done, std::optional<uint64_t> expected_version = std::nullopt);
  // WriteRangeAsync for a thread that must never block (a transport thread): returns false,
  // without calling `done` (left as it was), when the write would first wait for space (a GC
  // pass or an index sync); call WriteRangeAsync from a thread that may block then. Otherwise
  // as WriteRangeAsync (`done` taken, and run exactly once), and true.
  bool TryWriteRangeAsync(const ShardKey& key, uint64_t offset, std::span<const std::byte> data,
                          uint64_t version, std::function<void(Status)>& done,
                          std::optional<uint64_t> expected_version = std::nullopt);
  // Write for a thread that must never block (a transport thread): queues the whole-shard
  // write with the group commit and returns true, `done` taken and run exactly once (at once
  // on this thread for an error found before queueing, else on an engine thread when the
  // write is durable or failed, as WriteRangeAsync's). False, `done` untouched, when the
  // write would first wait for space (a GC pass or an index sync): call Write from a thread
  // that may block then. `data` must stay valid until `done` runs; `not_older` as Write's.
  bool TryWriteAsync(const ShardKey& key, std::span<const std::byte> data, uint64_t version, bool not_older,
                     std::function<void(Status)>& done, std::optional<uint64_t> expected_version = std::nullopt);
  // True for WriteRangeAsync's "too many runs" kAborted (rewrite the shard with WriteRange),
  // as opposed to a version condition's kAborted (a newer version is stored).
  static bool MustRewriteWhole(const Status& status);
  // True when [offset, offset + size) is whole 4 KiB blocks and not empty (what
  // WriteRangeAsync takes).
  static bool WholeBlocks(uint64_t offset, uint64_t size);
  // Returns exactly the bytes last written. Errors: kNotFound; kDataLoss when a 4 KiB block
  // fails its crc32c (the message names the key and the block offset) — never wrong bytes.
  Result<AlignedBuffer> Read(const ShardKey& key);
  // Bytes [offset, offset + length) of the shard, fewer when the shard is shorter (none when
  // offset is past its end). Reads and verifies only the 4 KiB blocks that hold the range.
  // `info` (optional) receives the shard's length and version. Errors as Read().
  Result<AlignedBuffer> ReadRange(const ShardKey& key, uint64_t offset, uint64_t length,
                                  ShardInfo* info = nullptr);
  // ReadRange for a thread that must never block (a target's transport thread). Looks the
  // shard up in the index's memory and starts the device read, and returns true; `done`
  // (taken) then runs once with ReadRange's result and the shard's length and version, on the
  // device's completion thread, or at once on the calling thread when no device read is needed
  // (absent shard, empty range) or one could not start (an error); on the calling thread
  // itself when it has made CompleteReadsOnThisThread's queue. Returns false, leaving
  // `done` to the caller, when the read would have to wait or take several device reads (the
  // record is not in memory, the range spans several runs or holes, the device takes no
  // asynchronous read now): call ReadRange from a thread that may block then.
  using ReadDone = std::function<void(Result<AlignedBuffer> data, ShardInfo info)>;
  bool TryReadRangeAsync(const ShardKey& key, uint64_t offset, uint64_t length, ReadDone& done);

  // For a thread with an event loop (a target's transport thread): the asynchronous reads it
  // starts (TryReadRangeAsync, on any engine) complete on it rather than on the device's
  // completion thread, sparing a hand-off per read. Makes a completion queue for the calling
  // thread and hands `watch` its event fd and its reap function: the loop must call reap once
  // the fd is readable (after reading it, an eventfd, to re-arm it) and after each round of
  // work that may have started reads, before it sleeps: the reads started since are submitted
  // then, together (one system call and one device notification for the lot). It returns
  // whether it ran anything or still holds reads the kernel had no room for (the loop must
  // then not sleep); cheap when there is nothing to do. Returns what the thread must call
  // before it exits (waits for its reads, running their callbacks); an empty function when the
  // queue could not be made (reads then complete on the completion thread, as without it).
  using WatchFd = std::function<void(int fd, std::function<bool()> reap)>;
  static std::function<void()> CompleteReadsOnThisThread(const WatchFd& watch);
  // kNotFound if absent. With `expected_version`, only when the stored shard version is that
  // (kAborted otherwise: the shard was rewritten).
  Status Delete(const ShardKey& key, std::optional<uint64_t> expected_version = std::nullopt);
  Result<ShardInfo> Stat(const ShardKey& key);  // kNotFound if absent
  // Shards of `container` (all objects, or one `object`) in key order, at most `limit`,
  // starting after `start_after` if given.
  Result<std::vector<std::pair<ShardKey, ShardInfo>>> List(uint64_t container,
                                                           std::optional<ObjectId> object,
                                                           std::optional<ShardKey> start_after,
                                                           size_t limit);
  // The containers this engine holds shards of, in id order, at most `limit`, starting after
  // container `after` if given (one index seek per container).
  Result<std::vector<uint64_t>> Containers(std::optional<uint64_t> after, size_t limit);
  // Tests: the index, to make it fail (Index::FailApplies).
  engine::Index& index_for_tests() { return *index_; }
  EngineStats Stats() const;

  // Runs GC now: cleans sealed segments holding any dead space (emptiest first) until none is
  // left or `max_segments` are done, without rate limit. Returns the number cleaned. Safe
  // alongside all other calls (GC passes are serialised).
  Result<uint64_t> CollectGarbage(uint64_t max_segments = UINT64_MAX);
  // Verifies every live shard once, now, without rate limit; corrupt ones are recorded.
  // Returns the bytes verified.
  Result<uint64_t> Scrub();
  // Shards found corrupt (by scrub, GC or a read) and not rewritten or deleted since, in key
  // order.
  std::vector<ShardKey> CorruptShards() const;

  uint64_t segment_bytes() const { return segment_bytes_; }

 private:
  Engine(EngineOptions options, std::unique_ptr<engine::Device> device,
         std::unique_ptr<engine::Index> index, std::unique_ptr<engine::Journal> journal,
         std::unique_ptr<engine::SegmentTable> table, uint64_t data_offset);
  Status Recover();
  uint64_t DeviceOffset(uint32_t segment, uint64_t offset) const {
    return data_offset_ + uint64_t{segment} * segment_bytes_ + offset;
  }
  // Checks `padded` (whole 4 KiB blocks of the shard starting at block `first_block`) against
  // the record's checksums.
  Status VerifyBlocks(const ShardKey& key, const engine::ShardRecord& record,
                      std::span<const std::byte> padded, size_t first_block = 0);
  // Under the key's lock: its record (nullopt: absent), with the segments holding the blocks of
  // bytes [offset, offset + length) pinned in `pins`, so they stay intact while read.
  // With `memory_only`, kUnavailable when the record is not in the index's memory.
  Result<std::optional<engine::ShardRecord>> LookUpAndPin(const ShardKey& key,
                                                          engine::SegmentPins& pins,
                                                          uint64_t offset = 0,
                                                          uint64_t length = UINT64_MAX,
                                                          bool memory_only = false);
  // Reads blocks [first_block, first_block + out.size() / 4 KiB) of `record` (within its
  // blocks; segments pinned) into `out`, zeros for holes, and verifies them (persistent device).
  Status ReadBlocks(const ShardKey& key, const engine::ShardRecord& record, uint64_t first_block,
                    std::span<std::byte> out);
  // An asynchronous write (TryWriteAsync, StartRangeAsync): its request, the data's aligned
  // copy when the caller's is not, and the caller's `done`.
  struct AsyncWrite;
  // Queues `w` (its request complete but for on_done) with the group commit; `done` gets the
  // outcome, `bytes` counted as written when it succeeds.
  void EnqueueAsync(std::unique_ptr<AsyncWrite> w, uint64_t bytes);
  // WriteRangeAsync and TryWriteRangeAsync: with !may_wait, false (done untouched) when space
  // is not at hand.
  bool StartRangeAsync(const ShardKey& key, uint64_t offset, std::span<const std::byte> data,
                       uint64_t version, std::function<void(Status)>& done, bool may_wait,
                       std::optional<uint64_t> expected_version);
  // WriteRange by rewriting the shard whole, in one run (a record with too many runs).
  Status RewriteWithRange(const ShardKey& key, uint64_t offset, std::span<const std::byte> data,
                          uint64_t version, std::optional<uint64_t> expected_version);
  std::shared_mutex& KeyLock(const ShardKey& key);
  void StartThreads();
  void StopThreads();
  // Read without the client counters (used by Read and by scrub): the whole shard, or
  // [offset, offset + length) of it.
  Result<AlignedBuffer> ReadShard(const ShardKey& key, uint64_t offset = 0,
                                  uint64_t length = UINT64_MAX, ShardInfo* info = nullptr);
  void MarkCorrupt(const ShardKey& key);

  // A range write's last step: checksums `blocks` (whole blocks for the request's range),
  // reserves space for them, commits `req` and waits; counts `bytes` written when it succeeds.
  Status CommitRange(engine::CommitRequest& req, std::span<const std::byte> blocks, uint64_t bytes);
  // kInvalidArgument (naming the key) when [offset, offset + size) ends past a segment.
  Status CheckRange(const ShardKey& key, uint64_t offset, uint64_t size) const;
  void CountWrite(uint64_t bytes);  // a write or range write of `bytes` succeeded
  void CountRead(uint64_t bytes);   // a client read (Read, ReadRange, async) of `bytes` succeeded
  // The key's record as acknowledged (nullopt: absent): PendingRecord, else the index's. With
  // `memory_only`, kUnavailable when that means reading the index from disk.
  Result<std::optional<engine::ShardRecord>> CurrentRecord(const ShardKey& key, bool memory_only = false);

  // Group commit: the committer (engine_commit.cc).
  Status Commit(std::span<engine::CommitRequest* const> requests);  // queue, wait until done
  void Enqueue(engine::CommitRequest* request);  // queue one with on_done set; no wait
  void CommitLoop();
  // Committer, under commit_mu_ (`lock`), no batch in flight: waits while more requests are
  // on their way to a batch of few (CommitGather).
  void GatherLocked(std::unique_lock<std::mutex>& lock);
  // The committer's completion thread: finishes the writes of batches in flight, in order
  // (Device::FinishWriteAll blocks), and wakes the committer for each.
  void CommitIoLoop();
  // Committer: the oldest batch in flight, taken off the list once its writes are finished
  // (null when none is in flight).
  std::unique_ptr<engine::InFlightBatch> TakeOldestBatch();
  // Committer: decides `todo` and starts writing its data and journal record (the batch is
  // then in flight: CommitPipeline::in_flight).
  void StartBatch(std::vector<engine::CommitRequest*> todo);
  // Committer, before deciding `todo`: once the index failed, fails all of it and returns
  // false. Otherwise waits while kMaxUnappliedBatches are handed over and not applied, and
  // after a batch too large for the journal finishes the batches in flight (the requests to
  // decide again go before `todo`) and waits until it is applied.
  bool AdmitBatch(std::vector<engine::CommitRequest*>& todo);
  // Committer: notes in `b` where the journal stands before it; for a journaled batch (of
  // `record_bytes`) encodes its record after its data writes and moves the journal past it.
  void PlaceJournalRecord(engine::InFlightBatch& b, uint64_t record_bytes);
  // Committer: starts the I/O of `b` (decided, its writes laid out; `has_data`: a request that
  // applies holds an extent, which needs a flush even with nothing to write) and puts it in
  // flight, its records in CommitPipeline::in_flight_records; a small batch with none in
  // flight waits for its own I/O here.
  void LaunchBatch(std::unique_ptr<engine::InFlightBatch> b, bool has_data);
  // Committer: waits for the oldest batch in flight; hands it over and acknowledges it. When
  // its writes failed: fails what must fail, finishes the batches after it and returns their
  // requests (and its own that may go again) to be decided again, or with `start_redo` starts
  // them as a batch itself and returns nothing.
  std::vector<engine::CommitRequest*> FinishOldestBatch(bool start_redo = true);
  // Committer: the writes of `b`, the oldest batch, failed (`io`, with context, or a data
  // write of its own: `write_failed`). Fails what must fail, finishes the batches after it,
  // sets the journal back (or wraps it) and returns the requests to decide again; empty when
  // none may go again (a failed wrap fails them all too).
  std::vector<engine::CommitRequest*> UnwindFailedBatch(engine::InFlightBatch& b, const Status& io,
                                                        bool write_failed);
  // Committer: `b`, the oldest batch, is durable: counts it, hands it to the applier and
  // acknowledges what a journaled batch may (its writes and deletes).
  void AcknowledgeBatch(std::unique_ptr<engine::InFlightBatch> b);
  // Committer: the shard count and corrupt-shard list after `r`, which applies as `u`.
  void CountCommitted(const engine::CommitRequest& r, const engine::IndexUpdate& u);
  // Committer: finishes every batch in flight, stopping at a failed one (returns as above).
  std::vector<engine::CommitRequest*> FinishAllBatches();
  // Committer: has the applier wrap the journal once everything handed over is applied.
  Status WrapJournal();
  void FailRequest(engine::CommitRequest& r, const Status& s);  // abandons its extent too
  // Committer: hands `batch` to the applier.
  void HandOver(std::unique_ptr<engine::DecidedBatch> batch);

  // Group commit: deciding a batch (engine_decide.cc). Committer thread only.
  // Decides every request of `d` (d.requests set) against the index as the batches before it
  // and its own earlier requests leave it: fills d.applies, d.verdict, d.updates, d.update_of.
  // Returns whether a request that applies holds an extent.
  bool DecideBatch(engine::DecidedBatch& d);
  // The record of `key` as the batches before this one leave it (nullopt inside: absent): in
  // flight, handed over, cached, else the index's. Errors: the index's.
  Result<engine::SharedRecord> RecordBeforeBatch(const ShardKey& key);
  // Decides kWriteRange `r` against u.old (`earlier`: the requests before it in its batch):
  // OK with its record, written blocks, in `u`, or why it does not apply.
  Status DecideRangeWrite(engine::CommitRequest& r, std::span<engine::CommitRequest* const> earlier,
                          engine::IndexUpdate& u);
  // Fills the bytes of a merge_edges range write's blocks outside its range from
  // `old` (its key's record as the batch leaves it; blocks not yet durable, written by a batch
  // in flight or earlier in this one, come from `earlier` requests' buffers) and checksums them
  // again. Errors: kDataLoss (an old block
  // fails its checksum), device errors.
  Status MergeEdges(engine::CommitRequest& r, const engine::SharedRecord& old,
                    std::span<engine::CommitRequest* const> earlier);

  // Group commit: the applier (engine_apply.cc).
  void ApplyLoop();
  void ApplyBatch(engine::DecidedBatch& batch);
  // Applier: writes `batch`'s updates to the index (unsynced with its journal position when
  // journaled, else synced) unless the index failed before. Returns the index's state after
  // it; a failure is kept in CommitPipeline::index_failed, and fails every later batch.
  Status WriteIndexBatch(const engine::DecidedBatch& batch);
  // Applier: moves the space accounting for request `i` of `batch` (applied): its extent live,
  // the space its key's old record no longer uses dead (under the key's lock).
  void CommitSpace(const engine::DecidedBatch& batch, size_t i);
  // Applier: syncs the index if it holds batches not yet durable, then lets released space
  // be reused and wakes RequestIndexSync callers.
  void SyncIndex();
  // Any thread: asks the applier for an index sync and waits for it.
  void RequestIndexSync();
  // Waits until the applier has applied every batch handed to it before the call (their writes
  // may be acknowledged already): for callers that look at the index or the space accounting
  // rather than a key (Stats, List, GC, scrub), and for the committer after a batch too large
  // for the journal (as it waits for a journal wrap: the applier never waits for it). Not on
  // the applier thread.
  void WaitApplied() const;
  // The record a batch handed to the applier gives `key` (nullopt inside: deleted), if one
  // does and is not yet in the index. Readers look here first.
  std::optional<std::optional<engine::ShardRecord>> PendingRecord(const ShardKey& key) const;
  // SegmentTable::Allocate, after an index sync if space only waits for one.
  Result<engine::Extent> AllocateSpace(uint64_t bytes, engine::AppendStream stream);

  // GC (engine_gc.cc).
  Result<engine::Extent> AllocateForWrite(uint64_t bytes);
  // Picks a victim (at least `min_dead_bytes` dead, fitting GC's room) and cleans it; false
  // when there is none. Passes are serialised by gc_mu_.
  Result<bool> CleanOneSegment(uint64_t min_dead_bytes, bool throttled);
  // Moves the live shards out of `victim` (picked and pinned; gc_mu_ held).
  Result<bool> CleanVictim(uint32_t victim, bool throttled);
  // The shards the owners list of `victim` names whose records, in the index, still have
  // blocks there: in one extent (`live`) or in several runs (`mapped`).
  Status ScanVictim(uint32_t victim, std::vector<std::pair<ShardKey, engine::ShardRecord>>& live,
                    std::vector<std::pair<ShardKey, engine::ShardRecord>>& mapped);
  // Moves the shards of `live` (each in one extent in the victim) in groups, in offset order
  // (sorts `live`). False when stopping (as PaceGc).
  Result<bool> MoveWholeShards(engine::GcPass& pass, std::vector<std::pair<ShardKey, engine::ShardRecord>>& live);
  // Moves one group (MoveWholeShards): reads its span of the victim with one I/O, verifies each
  // shard, copies them to the GC stream (unsynced, in contiguous runs) and commits their
  // relocations. Returns the bytes written.
  Result<uint64_t> MoveGroup(engine::GcPass& pass,
                             std::span<const std::pair<ShardKey, engine::ShardRecord>> group);
  // Moves the runs block-mapped shards have in the victim (MoveRuns), committed in groups of
  // about kGroupBytes. False when stopping (as PaceGc).
  Result<bool> MoveMappedShards(engine::GcPass& pass,
                                const std::vector<std::pair<ShardKey, engine::ShardRecord>>& mapped);
  // Commits GC's relocations `moves` as one batch and counts the bytes of those that applied
  // (a shard written meanwhile keeps its new blocks: kAborted, fine).
  void CommitMoves(const std::vector<std::unique_ptr<engine::CommitRequest>>& moves);
  // A throttled pass with no writer waiting for space sleeps `bytes` off at GC's rate. False
  // when the engine is stopping.
  bool PaceGc(engine::GcPass& pass, uint64_t bytes);
  // Copies the blocks `key` (a shard in several runs) has in `victim` to one place (unsynced)
  // and returns the kRelocate to commit, or null when it has none there. A shard failing its
  // checksum is noted (NoteCorruptInGc) and moved all the same.
  Result<std::unique_ptr<engine::CommitRequest>> MoveRuns(uint32_t victim, const ShardKey& key,
                                                          std::set<ShardKey>& corrupt);
  // GC found `key` failing its checksum in `victim`: counted and recorded once per pass
  // (`corrupt`), logged.
  void NoteCorruptInGc(const ShardKey& key, uint32_t victim, std::set<ShardKey>& corrupt);
  void GcLoop();
  // Waits until `until` or until StopThreads; false when stopping.
  bool SleepUntil(std::chrono::steady_clock::time_point until);

  // Scrub (engine_scrub.cc).
  Result<uint64_t> ScrubPass(bool throttled);
  void ScrubLoop();

  // Background zeroing (engine_zero.cc).
  void ZeroLoop();
  // Writes zeros over the unwritten ranges of `segment` (taken with BeginZeroing) and syncs
  // them, calling `pace` before each chunk (false: stop). True when done; false when it
  // stopped early (`pace` said so, or an allocation wants the segment).
  Result<bool> ZeroSegment(uint32_t segment, const std::function<bool(uint64_t bytes)>& pace);

  static constexpr size_t kKeyLockStripes = 1024;

  const EngineOptions options_;
  const uint64_t segment_bytes_;
  const uint32_t commit_batches_in_flight_;  // options_.commit_batches_in_flight, 0 resolved
  const uint64_t data_offset_;
  std::unique_ptr<engine::Device> device_;
  std::unique_ptr<engine::Index> index_;
  // Null without a persistent device. Owned by the committer (the applier wraps it while the
  // committer waits).
  std::unique_ptr<engine::Journal> journal_;
  std::unique_ptr<engine::SegmentTable> table_;
  std::unique_ptr<engine::SegmentOwners> owners_;  // GC's list of each segment's shards
  // Held shared while a reader looks a key up and pins its segments; exclusive while the
  // applier returns the space a key's new record no longer uses.
  std::array<std::shared_mutex, kKeyLockStripes> key_locks_;

  std::atomic<uint64_t> shards_{0};
  std::atomic<uint64_t> reads_{0}, writes_{0}, deletes_{0}, checksum_errors_{0};
  std::atomic<uint64_t> bytes_read_{0}, bytes_written_{0};
  std::atomic<uint64_t> device_bytes_written_{0}, commit_batches_{0}, commit_ops_{0};
  std::atomic<uint64_t> commit_overlapped_{0}, commit_redone_{0};
  std::atomic<uint64_t> index_syncs_{0}, journal_replayed_{0};
  std::atomic<uint64_t> gc_segments_cleaned_{0}, gc_bytes_moved_{0};
  std::atomic<uint64_t> scrub_bytes_verified_{0}, scrub_corrupt_shards_{0};
  std::atomic<uint64_t> zero_pending_segments_{0}, zeroed_bytes_{0};

  // Group commit queue: writers push, the committer thread drains.
  std::mutex commit_mu_;
  std::condition_variable commit_cv_;     // the committer waits here
  std::condition_variable commit_io_cv_;  // its completion thread waits here
  // Batches whose writes the completion thread is to finish, oldest first (guarded by
  // commit_mu_; the committer owns them), and its stop flag.
  std::deque<engine::InFlightBatch*> commit_io_;
  bool commit_io_stop_ = false;
  std::thread commit_io_thread_;
  std::vector<engine::CommitRequest*> commit_queue_;  // guarded by commit_mu_
  bool commit_stop_ = false;                          // guarded by commit_mu_
  engine::CommitGather gather_;                       // guarded by commit_mu_
  std::thread committer_;
  // The committer hands decided, written batches to the applier thread.
  std::unique_ptr<engine::CommitPipeline> pipeline_;
  std::thread applier_;
  // Owned by the applier thread.
  uint64_t applied_seq_ = 0;  // the index holds the journal through this record
  uint64_t durable_seq_ = 0;  // ... durably through this one
  std::chrono::steady_clock::time_point last_index_sync_;

  // Background GC and scrub threads sleep on bg_cv_.
  std::mutex bg_mu_;
  std::condition_variable bg_cv_;
  bool bg_stop_ = false;  // guarded by bg_mu_
  std::thread gc_thread_, scrub_thread_, zero_thread_;
  std::mutex gc_mu_;                       // one GC pass at a time
  std::mutex space_mu_;                    // one writer at a time cleans for space (AllocateForWrite)
  std::set<uint32_t> gc_stuck_;            // guarded by gc_mu_; victims a pass could not empty
  std::atomic<uint32_t> gc_waiters_{0};    // writers waiting for space: GC stops pacing

  mutable std::mutex corrupt_mu_;
  std::set<ShardKey> corrupt_;  // guarded by corrupt_mu_
};

}  // namespace penstock

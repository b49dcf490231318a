// index.h — the engine's page mapping table: ShardKey -> ShardRecord, kept in RocksDB.
//
// The index is the truth about which shards exist and where their bytes are, once the index
// journal (journal.h) has been replayed into it. The engine's batches are written unsynced
// (Apply with sync = false), each with the JournalPosition of the journal record that repeats
// it: the record, durable on the data device first, is what makes the batch durable. RocksDB
// buffers its WAL in memory (manual_wal_flush) until SyncWal or a synced write, so a crash
// keeps a prefix of the batches — exactly those up to the recorded JournalPosition — and the
// journal supplies the rest. Keys and values are encoded by format.h. Also holds the
// superblock, the index's copy of the device header.
//
// Get keeps the records it decodes in a bounded in-memory cache (kRecordCacheBytes; each read of a
// 4 KiB block otherwise looks its shard's record up in RocksDB and decodes it: ~11% of a
// cluster's CPU under random 4 KiB reads). Apply drops the records of the keys it writes, so a
// Get that starts after an Apply returned sees what it wrote; a Get racing an Apply of the same
// key returns the old or the new record, never caches the old one over the new (each cache
// stripe counts its changes, and a Get caches what it read only when none happened since it
// looked).
//
// Apply writes a range write onto an existing record (IndexUpdate::range_write with `old`, its
// written blocks in one extent) as a RocksDB merge operand holding only the written blocks
// (format.h, RangeOperandHeader); the index's merge operator applies operands to the record
// below them when a Get, a scan, a flush or a compaction meets them. Every kMaxMergesPerKey-th
// update of a key is written whole, so a read merges only a few.
//
// Thread safety: every method may be called from any number of threads at once. The Index does
// not order a Get against a concurrent Put of the same key; the engine's key locks do.
#pragma once

#include <functional>
#include <memory>
#include <atomic>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <string>
#include <string_view>
#include <vector>

#include "engine/format.h"
#include "penstock/status.h"

namespace rocksdb {
class DB;
}

namespace penstock::engine {

class Index {
 public:
  static constexpr size_t kRecordCacheBytes = size_t{32} << 20;
  // Range-write operands in a row for one key before Apply writes the whole record again.
  static constexpr uint32_t kMaxMergesPerKey = 16;
  // Keys whose operands Apply counts (the count map is cleared beyond this).
  static constexpr size_t kMaxCountedKeys = 1 << 16;

  // Opens the RocksDB directory `dir`, creating it (and its parents) if absent.
  // Errors name the directory: kPermissionDenied, kUnavailable (locked by another engine).
  // `sync` = false makes mutations unsynced (the null device, where nothing survives anyway).
  // `record_cache_bytes` bounds the record cache (0: none).
  static Result<std::unique_ptr<Index>> Open(const std::string& dir, bool sync = true,
                                             size_t record_cache_bytes = kRecordCacheBytes);
  ~Index();
  Index(const Index&) = delete;
  Index& operator=(const Index&) = delete;

  // nullopt when the key has no record. Errors: kDataLoss (corrupt record), RocksDB errors.
  // With `memory_only`, RocksDB reads nothing from disk: kUnavailable when the answer is not in
  // its memtables and block cache (for a caller that must not wait; retry without).
  // With `fill_cache` false a record read from RocksDB is not cached (for the committer and GC,
  // which look up records they are about to replace).
  Result<std::optional<ShardRecord>> Get(const ShardKey& key, bool memory_only = false,
                                         bool fill_cache = true) const;
  using Update = IndexUpdate;
  // Applies `updates` in order, and sets the journal position to `journal` when given, as one
  // atomic RocksDB WriteBatch (the engine's group commit); all or nothing. Durable on return
  // when `sync` (and then every earlier batch is too); otherwise after the next SyncWal.
  Status Apply(const std::vector<Update>& updates,
               std::optional<JournalPosition> journal = std::nullopt, bool sync = true);
  // Tests: while `failure` is an error, Apply fails with it and changes nothing (an index on a
  // file system that filled up); OkStatus() ends that.
  void FailApplies(Status failure);
  // Makes every batch applied so far durable (one WAL write and sync).
  Status SyncWal();
  // Flushes the memtable and compacts the whole index now (merge operands meet their records).
  Status Compact();
  // The journal position of the last batch that carried one; nullopt for an index that never
  // had one.
  Result<std::optional<JournalPosition>> GetJournalPosition() const;
  Status PutJournalPosition(const JournalPosition& position);  // synced

  // Visits shard records whose key starts with `prefix` (ContainerPrefix, ObjectPrefix, or the
  // one-byte shard tag for all shards), in key order, beginning after `start_after` if given,
  // until `visit` returns false. Reads a consistent snapshot.
  using Visitor = std::function<bool(const ShardKey&, const ShardRecord&)>;
  Status Scan(std::string_view prefix, const std::optional<ShardKey>& start_after,
              const Visitor& visit) const;
  // Prefix matching every shard key.
  static std::string AllShardsPrefix() { return std::string(1, kShardTag); }

  // Removes the segment entries ((segment, offset) -> shard key) an older version kept here
  // (SegmentOwners holds them in memory now), and the marker that said they were complete, so
  // that an older version opening this index again writes them afresh. A no-op when there are
  // none; returns whether there were.
  Result<bool> DropSegmentEntries();

  Result<std::optional<DeviceHeader>> GetSuperblock() const;
  Status PutSuperblock(const DeviceHeader& header);

  const std::string& dir() const { return dir_; }
  // Gets so far, and those the record cache answered (metrics, tests).
  struct CacheCounts {
    uint64_t gets = 0, hits = 0;
  };
  CacheCounts cache_counts() const;
  uint64_t cache_hits() const { return cache_counts().hits; }

 private:
  Index(std::string dir, std::unique_ptr<rocksdb::DB> db, bool sync, size_t record_cache_bytes);

  std::atomic<bool> failing_{false};  // FailApplies; `failure_` guarded by failure_mu_
  std::mutex failure_mu_;
  Status failure_;

  // One stripe of the record cache: records by key, their approximate bytes, and a count of
  // changes (Apply's puts and erases) that lets a Get tell whether what it read may be stale.
  struct CacheStripe {
    std::mutex mu;
    std::unordered_map<ShardKey, SharedRecord, ShardKeyHash> records;  // never none
    size_t bytes = 0;
    uint64_t changes = 0;
    uint64_t hits = 0, gets = 0;
  };
  static constexpr size_t kCacheStripes = 64;
  CacheStripe& StripeOf(const ShardKey& key) const;
  // Under the stripe's lock: sets (or, with none, drops) `key`'s cached record, evicting
  // others while the stripe is over its share of kRecordCacheBytes.
  void CacheLocked(CacheStripe& s, const ShardKey& key, const SharedRecord& record) const;

  const std::string dir_;
  const bool sync_;
  std::unique_ptr<rocksdb::DB> db_;
  const size_t cache_share_;  // bytes per stripe
  mutable std::unique_ptr<CacheStripe[]> cache_;
  std::mutex merges_mu_;
  // Operands Apply wrote per key since its last whole record (or since the map was cleared).
  std::unordered_map<ShardKey, uint32_t, ShardKeyHash> merges_;
};

}  // namespace penstock::engine

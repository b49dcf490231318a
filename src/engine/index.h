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
// Thread safety: every method may be called from any number of threads at once. The Index does
// not order a Get against a concurrent Put of the same key; the engine's key locks do.
#pragma once

#include <functional>
#include <memory>
#include <optional>
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
  // Opens the RocksDB directory `dir`, creating it (and its parents) if absent.
  // Errors name the directory: kPermissionDenied, kUnavailable (locked by another engine).
  // `sync` = false makes mutations unsynced (the null device, where nothing survives anyway).
  static Result<std::unique_ptr<Index>> Open(const std::string& dir, bool sync = true);
  ~Index();
  Index(const Index&) = delete;
  Index& operator=(const Index&) = delete;

  // nullopt when the key has no record. Errors: kDataLoss (corrupt record), RocksDB errors.
  // With `memory_only`, RocksDB reads nothing from disk: kUnavailable when the answer is not in
  // its memtables and block cache (for a caller that must not wait; retry without).
  Result<std::optional<ShardRecord>> Get(const ShardKey& key, bool memory_only = false) const;
  using Update = IndexUpdate;
  // Applies `updates` in order, and sets the journal position to `journal` when given, as one
  // atomic RocksDB WriteBatch (the engine's group commit); all or nothing. Durable on return
  // when `sync` (and then every earlier batch is too); otherwise after the next SyncWal.
  Status Apply(const std::vector<Update>& updates,
               std::optional<JournalPosition> journal = std::nullopt, bool sync = true);
  // Makes every batch applied so far durable (one WAL write and sync).
  Status SyncWal();
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

 private:
  Index(std::string dir, std::unique_ptr<rocksdb::DB> db, bool sync);

  const std::string dir_;
  const bool sync_;
  std::unique_ptr<rocksdb::DB> db_;
};

}  // namespace penstock::engine

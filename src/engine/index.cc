#include "engine/index.h"

#include <fmt/format.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <system_error>

#include "engine/block_map.h"

namespace penstock::engine {
namespace {

Status ToStatus(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return OkStatus();
  std::string msg = fmt::format("{}: {}", what, s.ToString());
  if (s.IsCorruption()) return DataLoss(msg + "; the index is corrupt, rebuild this target");
  if (s.IsNotFound()) return NotFound(msg);
  if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
    return Unavailable(msg + "; is another engine using this index_dir? stop it first");
  }
  if (s.IsNoSpace()) return ResourceExhausted(msg + "; free space on the index filesystem");
  if (s.IsBusy() || s.IsTryAgain() || s.IsTimedOut()) return Unavailable(msg);
  return Internal(msg);
}

uint64_t GetBigEndian64(std::string_view bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(bytes[i]);
  return v;
}

rocksdb::WriteOptions SyncedWrite(bool sync = true) {
  rocksdb::WriteOptions w;
  w.sync = sync;
  return w;
}

}  // namespace

Index::Index(std::string dir, std::unique_ptr<rocksdb::DB> db, bool sync)
    : dir_(std::move(dir)), sync_(sync), db_(std::move(db)) {}

Index::~Index() {
  if (db_) db_->Close().PermitUncheckedError();
}

Result<std::unique_ptr<Index>> Index::Open(const std::string& dir, bool sync) {
  if (dir.empty()) return InvalidArgument("index_dir is empty; set it to a directory");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return ErrnoStatus(ec.value(), fmt::format("cannot create index directory '{}' (make its "
                                               "parent writable by this user or point index_dir "
                                               "elsewhere)", dir));
  }
  rocksdb::Options options;
  options.create_if_missing = true;
  options.paranoid_checks = true;
  options.max_background_jobs = 2;
  // Unsynced batches stay in RocksDB's buffer until SyncWal: the journal makes them durable,
  // and a crash then loses exactly a suffix of them (which Open replays from the journal).
  options.manual_wal_flush = sync;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, &raw);
  if (!s.ok()) {
    Status st = ToStatus(s, fmt::format("cannot open index '{}'", dir));
    if (s.IsIOError() && st.code() == StatusCode::kInternal &&
        s.ToString().find("ermission") != std::string::npos) {
      return PermissionDenied(st.message() + "; make it writable by this user");
    }
    return st;
  }
  return std::unique_ptr<Index>(new Index(dir, std::unique_ptr<rocksdb::DB>(raw), sync));
}

Result<std::optional<ShardRecord>> Index::Get(const ShardKey& key, bool memory_only) const {
  std::string value;
  rocksdb::ReadOptions read;
  if (memory_only) read.read_tier = rocksdb::kBlockCacheTier;
  rocksdb::Status s = db_->Get(read, EncodeShardKey(key), &value);
  if (s.IsNotFound()) return std::optional<ShardRecord>();
  if (memory_only && s.IsIncomplete()) {
    return Unavailable(fmt::format("index '{}': the record of {} is not in memory", dir_, key.ToString()));
  }
  if (!s.ok()) return ToStatus(s, fmt::format("index '{}': get {}", dir_, key.ToString()));
  PS_ASSIGN_OR_RETURN(ShardRecord record, DecodeShardRecord(key, value));
  return std::optional<ShardRecord>(std::move(record));
}


Status Index::Apply(const std::vector<Update>& updates, std::optional<JournalPosition> journal,
                    bool sync) {
  if (updates.empty() && !journal) return OkStatus();
  // The batch's entries go in key order (stable: two of one key keep theirs): RocksDB's
  // memtable keeps the skip-list position of the previous insert, so sorted inserts reuse most
  // of each search. Random keys in batch order cost a full search each, the leading cost of a
  // small-write workload in a profile.
  struct Entry {
    std::string key;
    std::optional<std::string> value;  // nullopt: a delete
  };
  std::vector<Entry> entries;
  entries.reserve(updates.size() * 3);
  for (const Update& u : updates) {
    std::string key = EncodeShardKey(u.key);
    // The entries of the old record's runs go and the new one's are put; a run start both have
    // keeps its entry (a range write changes a few runs of a shard that may have many).
    const std::vector<BlockRun> none;
    const std::vector<BlockRun>& old_runs = u.old ? u.old->runs : none;
    const std::vector<BlockRun>& new_runs = u.record ? u.record->runs : none;
    for (const BlockRun& run : RunsStartingElsewhere(old_runs, new_runs)) {
      entries.push_back({EncodeSegmentKey(run.segment, run.offset), {}});
    }
    for (const BlockRun& run : RunsStartingElsewhere(new_runs, old_runs)) {
      entries.push_back({EncodeSegmentKey(run.segment, run.offset), key});
    }
    std::optional<std::string> value;
    if (u.record) value = EncodeShardRecord(*u.record);
    entries.push_back({std::move(key), std::move(value)});
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.key < b.key; });
  rocksdb::WriteBatch batch;
  for (const Entry& e : entries) {
    rocksdb::Status s = e.value ? batch.Put(e.key, *e.value) : batch.Delete(e.key);
    if (!s.ok()) return ToStatus(s, fmt::format("index '{}': batch of {} updates", dir_, updates.size()));
  }
  if (journal) {
    rocksdb::Status s = batch.Put(rocksdb::Slice(kMetaJournalKey.data(), kMetaJournalKey.size()),
                                  EncodeJournalPosition(*journal));
    if (!s.ok()) return ToStatus(s, fmt::format("index '{}': batch journal position", dir_));
  }
  // (Messages are formatted only on failure: this runs once per group commit.)
  rocksdb::Status s = db_->Write(SyncedWrite(sync && sync_), &batch);
  if (!s.ok()) return ToStatus(s, fmt::format("index '{}': commit a batch of {} updates", dir_, updates.size()));
  return OkStatus();
}

Status Index::Scan(std::string_view prefix, const std::optional<ShardKey>& start_after,
                   const Visitor& visit) const {
  std::string seek(prefix);
  std::string after;
  if (start_after) {
    after = EncodeShardKey(*start_after);
    if (after > seek) seek = after;
  }
  rocksdb::ReadOptions read;
  read.total_order_seek = true;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read));
  for (it->Seek(seek); it->Valid(); it->Next()) {
    rocksdb::Slice k = it->key();
    std::string_view key(k.data(), k.size());
    if (!key.starts_with(prefix)) break;
    if (!after.empty() && key == after) continue;
    std::optional<ShardKey> shard = DecodeShardKey(key);
    if (!shard) {
      return DataLoss(fmt::format("index '{}' holds a malformed shard key of {} bytes; the index "
                                  "is corrupt, rebuild this target", dir_, key.size()));
    }
    rocksdb::Slice v = it->value();
    PS_ASSIGN_OR_RETURN(ShardRecord record,
                        DecodeShardRecord(*shard, std::string_view(v.data(), v.size())));
    if (!visit(*shard, record)) return OkStatus();
  }
  return ToStatus(it->status(), fmt::format("index '{}': scan", dir_));
}

Status Index::ScanSegment(uint32_t segment, const Visitor& visit) const {
  const std::string prefix = SegmentPrefix(segment);
  rocksdb::ReadOptions read;
  read.total_order_seek = true;
  const rocksdb::Snapshot* snap = db_->GetSnapshot();  // entries and records of one moment
  read.snapshot = snap;
  struct Release {
    rocksdb::DB* db;
    const rocksdb::Snapshot* s;
    ~Release() { db->ReleaseSnapshot(s); }
  } release{db_.get(), snap};
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read));
  for (it->Seek(prefix); it->Valid(); it->Next()) {
    rocksdb::Slice k = it->key();
    std::string_view key(k.data(), k.size());
    if (!key.starts_with(prefix)) break;
    rocksdb::Slice v = it->value();
    std::optional<ShardKey> shard = DecodeShardKey(std::string_view(v.data(), v.size()));
    if (key.size() != kSegmentKeyBytes || !shard) {
      return DataLoss(fmt::format("index '{}' holds a malformed entry for segment {}; the index is "
                                  "corrupt, rebuild this target", dir_, segment));
    }
    std::string value;
    rocksdb::Status s = db_->Get(read, EncodeShardKey(*shard), &value);
    if (s.IsNotFound()) continue;  // cannot happen (one batch writes both); nothing to move
    if (!s.ok()) return ToStatus(s, fmt::format("index '{}': get {}", dir_, shard->ToString()));
    PS_ASSIGN_OR_RETURN(ShardRecord record, DecodeShardRecord(*shard, value));
    const uint64_t offset = GetBigEndian64(key.substr(kSegmentKeyBytes - 8));
    if (std::none_of(record.runs.begin(), record.runs.end(), [&](const BlockRun& run) {
          return run.segment == segment && run.offset == offset;
        })) {
      continue;  // likewise
    }
    if (!visit(*shard, record)) return OkStatus();
  }
  return ToStatus(it->status(), fmt::format("index '{}': scan segment {}", dir_, segment));
}

Result<uint64_t> Index::EnsureSegmentEntries() {
  const rocksdb::Slice marker(kMetaSegmentIndexKey.data(), kMetaSegmentIndexKey.size());
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), marker, &value);
  if (s.ok()) return uint64_t{0};
  if (!s.IsNotFound()) PS_RETURN_IF_ERROR(ToStatus(s, fmt::format("index '{}': get segment-index marker", dir_)));
  // Entries are keyed by location, so writing one twice (an interrupted earlier run) is harmless.
  rocksdb::WriteBatch batch;
  uint64_t written = 0;
  Status failed;
  PS_RETURN_IF_ERROR(Scan(AllShardsPrefix(), std::nullopt, [&](const ShardKey& key, const ShardRecord& record) {
    if (record.runs.empty()) return true;
    for (const BlockRun& run : record.runs) {
      if (!run.hole()) batch.Put(EncodeSegmentKey(run.segment, run.offset), EncodeShardKey(key));
    }
    if (++written % 10000 == 0) {
      failed = ToStatus(db_->Write(SyncedWrite(sync_), &batch), fmt::format("index '{}': segment entries", dir_));
      batch.Clear();
    }
    return failed.ok();
  }));
  PS_RETURN_IF_ERROR(failed);
  batch.Put(marker, "1");
  PS_RETURN_IF_ERROR(ToStatus(db_->Write(SyncedWrite(sync_), &batch), fmt::format("index '{}': segment entries", dir_)));
  return written;
}

Status Index::SyncWal() {
  if (!sync_) return OkStatus();
  return ToStatus(db_->FlushWAL(/*sync=*/true), fmt::format("index '{}': sync the WAL", dir_));
}

Result<std::optional<JournalPosition>> Index::GetJournalPosition() const {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(),
                               rocksdb::Slice(kMetaJournalKey.data(), kMetaJournalKey.size()), &value);
  if (s.IsNotFound()) return std::optional<JournalPosition>();
  PS_RETURN_IF_ERROR(ToStatus(s, fmt::format("index '{}': get journal position", dir_)));
  std::optional<JournalPosition> position = DecodeJournalPosition(value);
  if (!position) {
    return DataLoss(fmt::format("index '{}' journal position is malformed; the index is corrupt, "
                                "rebuild this target", dir_));
  }
  return position;
}

Status Index::PutJournalPosition(const JournalPosition& position) {
  return Apply({}, position, /*sync=*/true);
}

Result<std::optional<DeviceHeader>> Index::GetSuperblock() const {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), rocksdb::Slice(kMetaSuperblockKey.data(),
                                                                      kMetaSuperblockKey.size()),
                               &value);
  if (s.IsNotFound()) return std::optional<DeviceHeader>();
  PS_RETURN_IF_ERROR(ToStatus(s, fmt::format("index '{}': get superblock", dir_)));
  auto header = DecodeDeviceHeader(std::as_bytes(std::span(value.data(), value.size())));
  if (!header.ok()) return header.status().WithContext(fmt::format("index '{}' superblock", dir_));
  if (!header->has_value()) {
    return DataLoss(fmt::format("index '{}' superblock is malformed; the index is corrupt", dir_));
  }
  return *header;
}

Status Index::PutSuperblock(const DeviceHeader& header) {
  return ToStatus(db_->Put(SyncedWrite(),
                           rocksdb::Slice(kMetaSuperblockKey.data(), kMetaSuperblockKey.size()),
                           EncodeDeviceHeader(header)),
                  fmt::format("index '{}': put superblock", dir_));
}

}  // namespace penstock::engine

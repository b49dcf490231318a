#include "engine/index.h"

#include <fmt/format.h>
#include <rocksdb/db.h>
#include <rocksdb/merge_operator.h>
#include <rocksdb/options.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <system_error>

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

rocksdb::WriteOptions SyncedWrite(bool sync = true) {
  rocksdb::WriteOptions w;
  w.sync = sync;
  return w;
}

// Applies range-write operands (format.h, RangeOperandHeader) to a shard's record: when a Get
// meets them, and when a flush or compaction meets them with the record below. A failure
// (malformed record or operand) makes the read or compaction fail with Corruption, which
// ToStatus turns into kDataLoss.
class RangeWriteMerge final : public rocksdb::MergeOperator {
 public:
  const char* Name() const override { return "penstock.RangeWrite"; }
  bool FullMergeV2(const MergeOperationInput& in, MergeOperationOutput* out) const override {
    std::optional<ShardKey> key = DecodeShardKey(std::string_view(in.key.data(), in.key.size()));
    if (!key) return false;
    std::optional<ShardRecord> record;
    if (in.existing_value != nullptr) {
      Result<ShardRecord> base =
          DecodeShardRecord(*key, std::string_view(in.existing_value->data(), in.existing_value->size()));
      if (!base.ok()) return false;
      record = std::move(*base);
    }
    for (const rocksdb::Slice& operand : in.operand_list) {
      Result<ShardRecord> next =
          ApplyRangeOperand(*key, record, std::string_view(operand.data(), operand.size()));
      if (!next.ok()) return false;
      record = std::move(*next);
    }
    out->new_value = EncodeShardRecord(*record);
    return true;
  }
};

}  // namespace

Index::Index(std::string dir, std::unique_ptr<rocksdb::DB> db, bool sync, size_t record_cache_bytes)
    : dir_(std::move(dir)),
      sync_(sync),
      db_(std::move(db)),
      cache_share_(record_cache_bytes / kCacheStripes),
      cache_(new CacheStripe[kCacheStripes]) {}

namespace {

size_t RecordBytes(const ShardRecord& r) {
  return sizeof(ShardKey) + sizeof(ShardRecord) + r.runs.size() * sizeof(BlockRun) +
         r.block_crcs.size() * sizeof(uint32_t) + 64;  // + the hash node
}

}  // namespace

Index::CacheStripe& Index::StripeOf(const ShardKey& key) const {
  return cache_[(ShardKeyHash{}(key) >> 7) % kCacheStripes];
}

void Index::CacheLocked(CacheStripe& s, const ShardKey& key, const SharedRecord& record) const {
  auto it = s.records.find(key);
  if (it != s.records.end()) {
    s.bytes -= RecordBytes(*it->second);
    if (record && RecordBytes(*record) <= cache_share_ - std::min(cache_share_, s.bytes)) {
      it->second = record;  // replaced in place: no node freed and allocated again
      s.bytes += RecordBytes(*record);
      return;
    }
    s.records.erase(it);
  }
  if (!record) return;
  const size_t bytes = RecordBytes(*record);
  if (bytes > cache_share_) return;
  while (s.bytes + bytes > cache_share_ && !s.records.empty()) {  // evict whatever the table holds first
    auto victim = s.records.begin();
    s.bytes -= RecordBytes(*victim->second);
    s.records.erase(victim);
  }
  s.records.emplace(key, record);
  s.bytes += bytes;
}

Index::CacheCounts Index::cache_counts() const {
  CacheCounts n;
  for (size_t i = 0; i < kCacheStripes; ++i) {
    std::lock_guard lock(cache_[i].mu);
    n.gets += cache_[i].gets;
    n.hits += cache_[i].hits;
  }
  return n;
}

Index::~Index() {
  if (db_) db_->Close().PermitUncheckedError();
}

Result<std::unique_ptr<Index>> Index::Open(const std::string& dir, bool sync, size_t record_cache_bytes) {
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
  options.merge_operator = std::make_shared<RangeWriteMerge>();
  // The memtable keeps, per shard key, where its last entry went in the skip list (~250 bytes
  // of the memtable's arena per key written), and inserts the key's next entry from there:
  // a key written again (range writes into a shard: whole records and operands) skips the
  // search from the top. Measured: the skip list search fell from 6.5% to 1.4% of a cluster's
  // CPU under random 4 KiB writes, +3% IOPS; whole-shard writes of distinct keys level.
  options.memtable_insert_with_hint_prefix_extractor.reset(rocksdb::NewFixedPrefixTransform(kShardKeyBytes));
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
  return std::unique_ptr<Index>(new Index(dir, std::unique_ptr<rocksdb::DB>(raw), sync, record_cache_bytes));
}

Result<std::optional<ShardRecord>> Index::Get(const ShardKey& key, bool memory_only, bool fill_cache) const {
  CacheStripe& stripe = StripeOf(key);
  uint64_t changes;
  {
    std::lock_guard lock(stripe.mu);
    ++stripe.gets;
    auto it = stripe.records.find(key);
    if (it != stripe.records.end()) {
      ++stripe.hits;
      return std::optional<ShardRecord>(*it->second);
    }
    changes = stripe.changes;
  }
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
  {
    std::lock_guard lock(stripe.mu);
    if (fill_cache && stripe.changes == changes) CacheLocked(stripe, key, SharedRecord(record));  // else it may be stale
  }
  return std::optional<ShardRecord>(std::move(record));
}


void Index::FailApplies(Status failure) {
  std::lock_guard lock(failure_mu_);
  failing_ = !failure.ok();
  failure_ = std::move(failure);
}

Status Index::Apply(const std::vector<Update>& updates, std::optional<JournalPosition> journal,
                    bool sync) {
  if (updates.empty() && !journal) return OkStatus();
  if (failing_.load(std::memory_order_relaxed)) {
    std::lock_guard lock(failure_mu_);
    if (!failure_.ok()) return failure_;
  }
  // The batch's entries go in key order (stable: two of one key keep theirs): RocksDB's
  // memtable keeps the skip-list position of the previous insert, so sorted inserts reuse most
  // of each search. Random keys in batch order cost a full search each, the leading cost of a
  // small-write workload in a profile.
  struct Entry {
    std::string key;
    std::optional<std::string> value;  // nullopt: a delete
    bool merge = false;                // value is a range-write operand
  };
  std::vector<Entry> entries;
  entries.reserve(updates.size());
  {
    std::lock_guard lock(merges_mu_);
    for (const Update& u : updates) {
      std::optional<std::string> value;
      bool merge = false;
      if (u.record) {
        // A range write onto a record goes in as its written blocks (~50 bytes for 4 KiB)
        // rather than the whole record (~3 KiB for a fragmented 1 MiB shard): RocksDB's memtable
        // and WAL copy every byte, and the skip list's nodes stay dense. Every
        // kMaxMergesPerKey-th write of a key is whole, so a Get merges a bounded number.
        // (Only range writes look at the counts: a whole record or a delete leaves its key's
        // count as it was, which can only make the next whole record come sooner.)
        std::optional<BlockRun> run = RangeEntryRun(u);
        uint32_t* since_whole = run ? &merges_[u.key] : nullptr;
        if (since_whole != nullptr && *since_whole < kMaxMergesPerKey) {
          value = EncodeRangeOperand(u, *run);
          merge = true;
          ++*since_whole;
        } else {
          value = EncodeShardRecord(*u.record);
          if (since_whole != nullptr) *since_whole = 0;
        }
      }
      entries.push_back({EncodeShardKey(u.key), std::move(value), merge});
    }
    // The counts bound operands per key between two clears; a clear lets each key take up to
    // kMaxMergesPerKey more, and needs kMaxCountedKeys other keys written first.
    if (merges_.size() > kMaxCountedKeys) merges_.clear();
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.key < b.key; });
  rocksdb::WriteBatch batch;
  for (const Entry& e : entries) {
    rocksdb::Status s = !e.value ? batch.Delete(e.key)
                        : e.merge ? batch.Merge(e.key, *e.value)
                                  : batch.Put(e.key, *e.value);
    if (!s.ok()) return ToStatus(s, fmt::format("index '{}': batch of {} updates", dir_, updates.size()));
  }
  if (journal) {
    rocksdb::Status s = batch.Put(rocksdb::Slice(kMetaJournalKey.data(), kMetaJournalKey.size()),
                                  EncodeJournalPosition(*journal));
    if (!s.ok()) return ToStatus(s, fmt::format("index '{}': batch journal position", dir_));
  }
  // (Messages are formatted only on failure: this runs once per group commit.)
  rocksdb::Status s = db_->Write(SyncedWrite(sync && sync_), &batch);
  // The keys the batch wrote now hold its records: a cached one is replaced by the batch's (a
  // SharedRecord, so no copy: copying every record in here once cost random writes ~6%), which is
  // what a Get would decode and merge from the index now; and Gets under way are told. After a
  // failed write they are forgotten instead.
  for (const Update& u : updates) {
    CacheStripe& stripe = StripeOf(u.key);
    std::lock_guard lock(stripe.mu);
    ++stripe.changes;
    CacheLocked(stripe, u.key, s.ok() ? u.record : SharedRecord());
  }
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

Result<bool> Index::DropSegmentEntries() {
  const std::string begin(1, kSegmentTag), end(1, static_cast<char>(kSegmentTag + 1));
  rocksdb::ReadOptions read;
  read.total_order_seek = true;
  bool any = false;
  {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read));
    it->Seek(begin);
    PS_RETURN_IF_ERROR(ToStatus(it->status(), fmt::format("index '{}': look for segment entries", dir_)));
    any = it->Valid() && it->key().compare(end) < 0;
  }
  const rocksdb::Slice marker(kMetaSegmentIndexKey.data(), kMetaSegmentIndexKey.size());
  std::string value;
  rocksdb::Status got = db_->Get(rocksdb::ReadOptions(), marker, &value);
  if (!got.ok() && !got.IsNotFound()) {
    return ToStatus(got, fmt::format("index '{}': get segment-index marker", dir_));
  }
  if (!any && got.IsNotFound()) return false;
  rocksdb::WriteBatch batch;
  rocksdb::Status s = batch.DeleteRange(begin, end);
  if (s.ok()) s = batch.Delete(marker);
  if (s.ok()) s = db_->Write(SyncedWrite(sync_), &batch);
  PS_RETURN_IF_ERROR(ToStatus(s, fmt::format("index '{}': drop segment entries", dir_)));
  return any;
}

Status Index::SyncWal() {
  if (!sync_) return OkStatus();
  return ToStatus(db_->FlushWAL(/*sync=*/true), fmt::format("index '{}': sync the WAL", dir_));
}

Status Index::Compact() {
  rocksdb::Status s = db_->Flush(rocksdb::FlushOptions());
  if (s.ok()) s = db_->CompactRange(rocksdb::CompactRangeOptions(), nullptr, nullptr);
  return ToStatus(s, fmt::format("index '{}': compact", dir_));
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

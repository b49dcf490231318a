#include "engine/index.h"

#include <fmt/format.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <filesystem>
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

Result<std::optional<ShardRecord>> Index::Get(const ShardKey& key) const {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), EncodeShardKey(key), &value);
  if (s.IsNotFound()) return std::optional<ShardRecord>();
  PS_RETURN_IF_ERROR(ToStatus(s, fmt::format("index '{}': get {}", dir_, key.ToString())));
  PS_ASSIGN_OR_RETURN(ShardRecord record, DecodeShardRecord(key, value));
  return std::optional<ShardRecord>(std::move(record));
}

Status Index::Put(const ShardKey& key, const ShardRecord& record) {
  return ToStatus(db_->Put(SyncedWrite(sync_), EncodeShardKey(key), EncodeShardRecord(record)),
                  fmt::format("index '{}': put {}", dir_, key.ToString()));
}

Status Index::Delete(const ShardKey& key) {
  return ToStatus(db_->Delete(SyncedWrite(sync_), EncodeShardKey(key)),
                  fmt::format("index '{}': delete {}", dir_, key.ToString()));
}

Status Index::Apply(const std::vector<Update>& updates) {
  if (updates.empty()) return OkStatus();
  rocksdb::WriteBatch batch;
  for (const Update& u : updates) {
    rocksdb::Status s = u.record ? batch.Put(EncodeShardKey(u.key), EncodeShardRecord(*u.record))
                                 : batch.Delete(EncodeShardKey(u.key));
    PS_RETURN_IF_ERROR(ToStatus(s, fmt::format("index '{}': batch {}", dir_, u.key.ToString())));
  }
  return ToStatus(db_->Write(SyncedWrite(sync_), &batch),
                  fmt::format("index '{}': commit a batch of {} updates", dir_, updates.size()));
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

#include "mgmt/rocksdb_meta_store.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace penstock::mgmt {
namespace {

// Written next to RocksDB's LOCK so that "in use" errors can name the holder.
constexpr const char* kPidFile = "mgmt.pid";

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return OkStatus();
  std::string msg = what + ": " + s.ToString();
  if (s.IsNotFound()) return NotFound(msg);
  if (s.IsCorruption()) return DataLoss(msg);
  if (s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) return Unavailable(msg);
  if (s.IsInvalidArgument()) return InvalidArgument(msg);
  return Internal(msg);
}

std::string ReadPid(const std::string& dir) {
  std::ifstream in(dir + "/" + kPidFile);
  std::string pid;
  if (in) std::getline(in, pid);
  return pid;
}

}  // namespace

RocksDbMetaStore::RocksDbMetaStore(std::string dir, std::unique_ptr<rocksdb::DB> db)
    : dir_(std::move(dir)), db_(std::move(db)) {}

RocksDbMetaStore::~RocksDbMetaStore() {
  if (db_) {
    std::error_code ec;
    std::filesystem::remove(dir_ + "/" + kPidFile, ec);
    db_->Close().PermitUncheckedError();
  }
}

Result<std::unique_ptr<MetaStore>> RocksDbMetaStore::Open(const std::string& dir) {
  if (dir.empty()) {
    return InvalidArgument("mgmt data dir is empty; pass --data-dir");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return ErrnoStatus(ec.value(), "cannot create mgmt data dir '" + dir +
                                       "'; choose a writable --data-dir");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return ErrnoStatus(errno, "mgmt data dir '" + dir +
                                  "' is not writable; fix its permissions or choose another "
                                  "--data-dir");
  }

  rocksdb::Options options;
  options.create_if_missing = true;
  options.keep_log_file_num = 4;
  options.max_manifest_file_size = 16 << 20;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, &raw);
  if (!s.ok()) {
    std::string text = s.ToString();
    if (s.IsIOError() && (text.find("lock") != std::string::npos ||
                          text.find("LOCK") != std::string::npos)) {
      std::string pid = ReadPid(dir);
      return Unavailable("mgmt data dir '" + dir + "' is in use by another penstock mgmt (pid " +
                         (pid.empty() ? std::string("unknown") : pid) +
                         "); stop it or use another --data-dir");
    }
    if (text.find("Permission denied") != std::string::npos ||
        text.find("Read-only file system") != std::string::npos) {
      return PermissionDenied("mgmt data dir '" + dir + "' is not writable (" + text +
                              "); fix its permissions or choose another --data-dir");
    }
    return FromRocks(s, "cannot open mgmt metadata in '" + dir + "'");
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  {
    std::ofstream out(dir + "/" + kPidFile, std::ios::trunc);
    out << ::getpid() << "\n";
  }
  return std::unique_ptr<MetaStore>(new RocksDbMetaStore(dir, std::move(db)));
}

Result<std::optional<std::string>> RocksDbMetaStore::Get(const std::string& key) {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), key, &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  PS_RETURN_IF_ERROR(FromRocks(s, "mgmt metadata read of '" + key + "' in " + dir_));
  return std::optional<std::string>(std::move(value));
}

Status RocksDbMetaStore::Put(const std::string& key, const std::string& value) {
  WriteBatch batch;
  batch.Put(key, value);
  return Commit(batch);
}

Status RocksDbMetaStore::Delete(const std::string& key) {
  WriteBatch batch;
  batch.Delete(key);
  return Commit(batch);
}

Result<std::vector<std::pair<std::string, std::string>>> RocksDbMetaStore::Scan(
    const std::string& prefix) {
  std::vector<std::pair<std::string, std::string>> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    out.emplace_back(it->key().ToString(), it->value().ToString());
  }
  PS_RETURN_IF_ERROR(FromRocks(it->status(), "mgmt metadata scan of '" + prefix + "' in " + dir_));
  return out;
}

Status RocksDbMetaStore::Commit(const WriteBatch& batch) {
  rocksdb::WriteBatch wb;
  for (const auto& [k, v] : batch.puts) {
    PS_RETURN_IF_ERROR(FromRocks(wb.Put(k, v), "mgmt metadata batch"));
  }
  for (const auto& k : batch.deletes) {
    PS_RETURN_IF_ERROR(FromRocks(wb.Delete(k), "mgmt metadata batch"));
  }
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return FromRocks(db_->Write(wo, &wb), "mgmt metadata write in " + dir_);
}

}  // namespace penstock::mgmt

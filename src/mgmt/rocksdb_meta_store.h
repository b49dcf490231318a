// rocksdb_meta_store.h — MetaStore on an embedded RocksDB in mgmt's --data-dir.
//
// The default backend for a single mgmt. Every write is synced (WriteOptions::sync) before it
// returns, so an acknowledged RPC survives power loss. RocksDB's LOCK file makes a data dir
// exclusive to one process; a second Open of the same dir fails with kUnavailable.
//
// Thread safety: all methods are thread-safe (RocksDB is). Owned by the caller via unique_ptr.
#pragma once

#include <memory>
#include <string>

#include "mgmt/meta_store.h"

namespace rocksdb {
class DB;
}

namespace penstock::mgmt {

class RocksDbMetaStore final : public MetaStore {
 public:
  // Opens (creating if needed) the store in directory `dir`.
  // Errors: kInvalidArgument for an empty dir; kPermissionDenied when `dir` cannot be created
  // or written; kUnavailable when another process (another penstock mgmt) holds the dir.
  static Result<std::unique_ptr<MetaStore>> Open(const std::string& dir);

  ~RocksDbMetaStore() override;

  Result<std::optional<std::string>> Get(const std::string& key) override;
  Status Put(const std::string& key, const std::string& value) override;
  Status Delete(const std::string& key) override;
  Result<std::vector<std::pair<std::string, std::string>>> Scan(
      const std::string& prefix) override;
  Status Commit(const WriteBatch& batch) override;

 private:
  RocksDbMetaStore(std::string dir, std::unique_ptr<rocksdb::DB> db);

  std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
};

}  // namespace penstock::mgmt

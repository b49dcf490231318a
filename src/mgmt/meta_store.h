// meta_store.h — the durable key-value store under the mgmt state machine.
//
// MetaStore is deliberately small and storage-neutral so that the embedded RocksDB backend
// (rocksdb_meta_store.h) and the etcd backend (etcd_meta_store.h; HA, several mgmt instances) fit it:
// byte-string keys and values, point reads, prefix scans, and one atomic multi-key commit.
// Every successful write is durable before it returns.
//
// Thread safety: every method of every implementation is safe to call from any thread.
// Ownership: callers own the store through std::unique_ptr; it closes on destruction.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "penstock/status.h"

namespace penstock::mgmt {

// A set of writes applied all or nothing by MetaStore::Commit. Deletes apply after puts, so a
// key in both ends up deleted.
struct WriteBatch {
  std::vector<std::pair<std::string, std::string>> puts;
  std::vector<std::string> deletes;

  void Put(std::string key, std::string value) {
    puts.emplace_back(std::move(key), std::move(value));
  }
  void Delete(std::string key) { deletes.push_back(std::move(key)); }
  bool empty() const { return puts.empty() && deletes.empty(); }
};

class MetaStore {
 public:
  virtual ~MetaStore() = default;

  // The value of `key`, or std::nullopt when it is absent.
  // Errors: kUnavailable / kInternal / kDataLoss from the backend.
  virtual Result<std::optional<std::string>> Get(const std::string& key) = 0;

  // Sets `key` to `value` durably.
  virtual Status Put(const std::string& key, const std::string& value) = 0;

  // Removes `key` durably; removing an absent key is OK.
  virtual Status Delete(const std::string& key) = 0;

  // Every (key, value) whose key starts with `prefix`, in ascending key order.
  virtual Result<std::vector<std::pair<std::string, std::string>>> Scan(
      const std::string& prefix) = 0;

  // Applies `batch` atomically and durably: after a crash either all of it or none is visible.
  virtual Status Commit(const WriteBatch& batch) = 0;
};

}  // namespace penstock::mgmt

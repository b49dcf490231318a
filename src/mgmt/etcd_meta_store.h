// etcd_meta_store.h — MetaStore over etcd (several mgmt instances share one etcd cluster).
//
// Keys live under a prefix, "/penstock/<cluster>/" by default, so several clusters can share
// one etcd. Every write (Put, Delete, Commit) is one etcd transaction; Commit puts and deletes
// all of a WriteBatch atomically (deletes after puts, as the interface says; a key both put
// and deleted is only deleted, since etcd refuses a txn that touches a key twice).
//
// Fencing: after SetFence(key, rev), every write is conditioned on `key` still having
// create_revision `rev` — the election key this mgmt created when it became leader. Once the
// lease behind that key has expired (or another instance holds the key), writes fail with
//   kUnavailable "this mgmt is no longer the leader (...)"
// and nothing is written, so a stale leader cannot overwrite its successor's state.
// Reads are never fenced.
//
// Limits: one Commit is one etcd txn, so it may hold at most etcd's --max-txn-ops operations
// (128 by default; e.g. CheckLiveness marking more than 127 targets DOWN at once needs a
// higher setting) and --max-request-bytes (1.5 MiB by default).
//
// Thread safety: all methods are thread-safe. Ownership: owns its EtcdClient.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "mgmt/etcd_client.h"
#include "mgmt/meta_store.h"

namespace penstock::mgmt {

class EtcdMetaStore final : public MetaStore {
 public:
  // `spec` is "etcd://host:port[,host:port...]"; `prefix` is prepended to every key.
  // Checks that etcd answers.
  // Errors: kInvalidArgument for a bad spec; kUnavailable "etcd at H:P is unreachable (...);
  // check --meta".
  static Result<std::unique_ptr<EtcdMetaStore>> Open(const std::string& spec,
                                                     const std::string& prefix);

  // Conditions every later write on `fence_key` (a full etcd key) having create_revision
  // `rev`; rev 0 turns fencing off.
  void SetFence(const std::string& fence_key, int64_t rev);

  Result<std::optional<std::string>> Get(const std::string& key) override;
  Status Put(const std::string& key, const std::string& value) override;
  Status Delete(const std::string& key) override;
  Result<std::vector<std::pair<std::string, std::string>>> Scan(const std::string& prefix) override;
  Status Commit(const WriteBatch& batch) override;

  EtcdClient& client() { return *client_; }
  const std::string& prefix() const { return prefix_; }

 private:
  EtcdMetaStore(std::unique_ptr<EtcdClient> client, std::string prefix);

  const std::unique_ptr<EtcdClient> client_;
  const std::string prefix_;
  std::mutex mu_;
  std::string fence_key_;  // guarded by mu_
  int64_t fence_rev_ = 0;  // guarded by mu_
};

}  // namespace penstock::mgmt

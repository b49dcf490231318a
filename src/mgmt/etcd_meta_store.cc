#include "mgmt/etcd_meta_store.h"

#include <set>

namespace penstock::mgmt {

using json = nlohmann::json;

EtcdMetaStore::EtcdMetaStore(std::unique_ptr<EtcdClient> client, std::string prefix)
    : client_(std::move(client)), prefix_(std::move(prefix)) {}

Result<std::unique_ptr<EtcdMetaStore>> EtcdMetaStore::Open(const std::string& spec,
                                                           const std::string& prefix) {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> client, EtcdClient::Create(spec));
  // One read proves that etcd answers.
  PS_RETURN_IF_ERROR(client->Get(prefix + "mgmt/v1/epoch").status());
  return std::unique_ptr<EtcdMetaStore>(new EtcdMetaStore(std::move(client), prefix));
}

void EtcdMetaStore::SetFence(const std::string& fence_key, int64_t rev) {
  std::lock_guard<std::mutex> lock(mu_);
  fence_key_ = fence_key;
  fence_rev_ = rev;
}

Result<std::optional<std::string>> EtcdMetaStore::Get(const std::string& key) {
  PS_ASSIGN_OR_RETURN(std::vector<EtcdKv> kvs, client_->Get(prefix_ + key));
  if (kvs.empty()) return std::optional<std::string>();
  return std::optional<std::string>(std::move(kvs.front().value));
}

Status EtcdMetaStore::Put(const std::string& key, const std::string& value) {
  WriteBatch b;
  b.Put(key, value);
  return Commit(b);
}

Status EtcdMetaStore::Delete(const std::string& key) {
  WriteBatch b;
  b.Delete(key);
  return Commit(b);
}

Result<std::vector<std::pair<std::string, std::string>>> EtcdMetaStore::Scan(
    const std::string& prefix) {
  PS_ASSIGN_OR_RETURN(std::vector<EtcdKv> kvs, client_->Get(prefix_ + prefix, /*prefix=*/true));
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(kvs.size());
  for (EtcdKv& kv : kvs) out.emplace_back(kv.key.substr(prefix_.size()), std::move(kv.value));
  return out;
}

Status EtcdMetaStore::Commit(const WriteBatch& batch) {
  if (batch.empty()) return OkStatus();
  std::string fence_key;
  int64_t fence_rev = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fence_key = fence_key_;
    fence_rev = fence_rev_;
  }
  const std::set<std::string> deleted(batch.deletes.begin(), batch.deletes.end());
  // etcd refuses a txn that puts one key twice: the last put of a key wins, as in RocksDB.
  std::map<std::string, std::string> puts;
  for (const auto& [k, v] : batch.puts) {
    if (deleted.count(k) == 0) puts[k] = v;
  }
  json ops = json::array();
  for (const auto& [k, v] : puts) ops.push_back(etcd::Put(prefix_ + k, v));
  for (const std::string& k : deleted) ops.push_back(etcd::DeleteKey(prefix_ + k));
  json compare = json::array();
  if (fence_rev != 0) compare.push_back(etcd::CreateRevisionIs(fence_key, fence_rev));
  PS_ASSIGN_OR_RETURN(EtcdTxnResult r, client_->Txn(compare, ops));
  if (!r.succeeded) {
    return Unavailable("this mgmt is no longer the leader (its election key " + fence_key +
                       " expired or was taken over); the write was not applied; retry on the "
                       "new leader");
  }
  return OkStatus();
}

}  // namespace penstock::mgmt

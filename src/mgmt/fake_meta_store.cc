#include "mgmt/fake_meta_store.h"

namespace penstock::mgmt {

Result<std::optional<std::string>> FakeMetaStore::Get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = data_.find(key);
  if (it == data_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

Status FakeMetaStore::Put(const std::string& key, const std::string& value) {
  WriteBatch b;
  b.Put(key, value);
  return Commit(b);
}

Status FakeMetaStore::Delete(const std::string& key) {
  WriteBatch b;
  b.Delete(key);
  return Commit(b);
}

Result<std::vector<std::pair<std::string, std::string>>> FakeMetaStore::Scan(
    const std::string& prefix) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fail_scans_) return Unavailable("fake meta store: injected scan failure");
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = data_.lower_bound(prefix); it != data_.end() && it->first.starts_with(prefix);
       ++it) {
    out.emplace_back(it->first, it->second);
  }
  return out;
}

Status FakeMetaStore::Commit(const WriteBatch& batch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fail_writes_) return Unavailable("fake meta store: injected write failure");
  for (const auto& [k, v] : batch.puts) data_[k] = v;
  for (const auto& k : batch.deletes) data_.erase(k);
  ++writes_;
  return OkStatus();
}

void FakeMetaStore::set_fail_scans(bool fail) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_scans_ = fail;
}

void FakeMetaStore::set_fail_writes(bool fail) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_writes_ = fail;
}

int FakeMetaStore::writes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writes_;
}

}  // namespace penstock::mgmt

// fake_meta_store.h — an in-memory MetaStore for tests, with a switch that makes writes fail
// so tests can check that a failed commit leaves the state unchanged.
// Thread-safe (one mutex). Test-only: not part of penstock_mgmt.
#pragma once

#include <map>
#include <mutex>

#include "mgmt/meta_store.h"

namespace penstock::mgmt {

class FakeMetaStore final : public MetaStore {
 public:
  Result<std::optional<std::string>> Get(const std::string& key) override;
  Status Put(const std::string& key, const std::string& value) override;
  Status Delete(const std::string& key) override;
  Result<std::vector<std::pair<std::string, std::string>>> Scan(
      const std::string& prefix) override;
  Status Commit(const WriteBatch& batch) override;

  // While true, every write fails with kUnavailable and changes nothing.
  void set_fail_writes(bool fail);
  // While true, every Scan fails with kUnavailable (a store unreachable while state loads).
  void set_fail_scans(bool fail);
  // Number of successful writes (Put, Delete, Commit) so far.
  int writes() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::string> data_;
  bool fail_writes_ = false;
  bool fail_scans_ = false;
  int writes_ = 0;
};

}  // namespace penstock::mgmt

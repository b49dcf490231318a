// container_cache.h — the client's cache of container lookups (name → id, redundancy, stripe
// unit), so that opening, putting or deleting an object costs no mgmt round trip.
//
// A container's properties never change once created, and a name deleted and created again
// gets a new id; mgmt bumps the cluster map epoch when it deletes a container. So an entry
// stands while the client's map is at the epoch it was looked up in: any newer map (pushed by
// mgmt's map watch, or fetched after a target error) sends the next lookup of every name to
// mgmt again. A client whose map lags mgmt's may write to a container deleted since, as an
// operation in flight at the deletion would; mgmt's repair service removes what targets still
// hold of a deleted container's id. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "penstock/client.h"

namespace penstock {

class ContainerCache {
 public:
  using Fetch = std::function<Result<ContainerInfo>(const std::string& name)>;
  // `fetch` asks mgmt; `epoch` reads the client's current map epoch.
  ContainerCache(Fetch fetch, std::function<uint64_t()> epoch)
      : fetch_(std::move(fetch)), epoch_(std::move(epoch)) {}

  // The container named `name`, from the cache when looked up at the current map epoch.
  Result<ContainerInfo> Lookup(const std::string& name);
  // Drops `name` (this client deleted it).
  void Forget(const std::string& name);

 private:
  static constexpr size_t kMaxEntries = 4096;
  struct Entry {
    ContainerInfo info;
    uint64_t epoch = 0;
  };
  Fetch fetch_;
  std::function<uint64_t()> epoch_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

}  // namespace penstock

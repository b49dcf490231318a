#include "client/container_cache.h"

namespace penstock {

Result<ContainerInfo> ContainerCache::Lookup(const std::string& name) {
  // The epoch is read before asking mgmt: a deletion that lands meanwhile bumps the map past
  // it, so the entry is not trusted beyond that push.
  const uint64_t epoch = epoch_();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(name);
    if (it != entries_.end() && it->second.epoch == epoch) return it->second.info;
  }
  PS_ASSIGN_OR_RETURN(ContainerInfo info, fetch_(name));
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.size() >= kMaxEntries) entries_.clear();
  entries_[name] = Entry{info, epoch};
  return info;
}

void ContainerCache::Forget(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.erase(name);
}

}  // namespace penstock

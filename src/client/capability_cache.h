// capability_cache.h — the client's capability tokens, one per container, fetched from mgmt
// (GetCapability, read|write) with the client's API key and reused until shortly before they
// expire (refreshed when less than a fifth of their lifetime, at most 60 s, is left).
//
// Without an API key the cache is disabled: Get returns an empty token and requests go
// without one (clusters running without --auth). Thread-safe; `mgmt` is borrowed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "penstock/status.h"

namespace penstock {

class MgmtClient;

class CapabilityCache {
 public:
  CapabilityCache(MgmtClient* mgmt, bool enabled) : mgmt_(mgmt), enabled_(enabled) {}

  bool enabled() const { return enabled_; }

  // The token for `container` (empty when disabled). Blocks on mgmt when none is cached or
  // the cached one is about to expire. Errors: those of GetCapability (kUnauthenticated for an
  // unknown key, kPermissionDenied for another tenant's container, kNotFound).
  Result<std::vector<std::byte>> Get(uint64_t container);

  // Forgets the token for `container` (after a target refused it).
  void Invalidate(uint64_t container);

 private:
  struct Entry {
    std::vector<std::byte> token;
    int64_t refresh_at_ms = 0;
  };
  MgmtClient* const mgmt_;
  const bool enabled_;
  std::mutex mu_;
  std::map<uint64_t, Entry> tokens_;  // guarded by mu_
};

}  // namespace penstock

// registration_cache.h — memory an RpcClient registered with UCX (RpcClient::Register), found by
// address when a reply payload lands in it.
//
// Registering memory (ucp_mem_map) pins it and gives each UCX context a handle (memh) for it, so
// transfers into it skip per-transfer registration on transports that need it (RDMA). The
// client registers once and reuses the handles across calls: a call engine asks Find() for the
// handle of the memory a reply destination lent (rpc_call_engine.h, ReceiveInto). Not UCX's own
// registration cache (rcache), which registers other memory per transfer (README.md).
//
// Ownership: the RpcClient holds the cache (shared); each RpcClient::Registration holds it too,
// and takes its region out of it when destroyed (which must happen before the client is).
// Thread-safe: Find runs on the transport threads, Register and ~Registration on any thread.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>
#include <span>
#include <utility>
#include <vector>

#include "penstock/status.h"
#include "transport/rpc_client.h"

namespace penstock {

class RegistrationCache {
 public:
  // One registered range and its handle in each context.
  struct Region {
    uintptr_t begin = 0, end = 0;
    std::vector<std::pair<ucp_context_h, ucp_mem_h>> memh;  // one per distinct context
  };

  // Registers [data, data + size) with every distinct context of `contexts` and adds it to
  // `cache`. Errors: kInvalidArgument for an empty range or one that overlaps a registered one,
  // kResourceExhausted when UCX cannot pin it.
  static Result<std::shared_ptr<RpcClient::Registration>> Register(
      const std::shared_ptr<RegistrationCache>& cache, std::span<const ucp_context_h> contexts,
      void* data, size_t size);

  // The handle of `ctx` for memory [p, p + n), or null when no registration covers it.
  ucp_mem_h Find(ucp_context_h ctx, const std::byte* p, size_t n);

 private:
  friend class RpcClient::Registration;

  std::shared_mutex mu_;
  std::map<uintptr_t, const Region*> regions_;  // by begin; never overlapping; guarded by mu_
};

// What RpcClient::Register returns: unmaps its region (in every context) when destroyed.
class RpcClient::Registration {
 public:
  Registration(std::shared_ptr<RegistrationCache> cache, RegistrationCache::Region region)
      : cache_(std::move(cache)), region_(std::move(region)) {}
  ~Registration();
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
  const RegistrationCache::Region& region() const { return region_; }

 private:
  std::shared_ptr<RegistrationCache> cache_;
  RegistrationCache::Region region_;
};

}  // namespace penstock

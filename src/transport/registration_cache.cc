// registration_cache.cc — RpcClient::Register's memory registrations and their lookup by address.
#include "transport/registration_cache.h"

#include <iterator>
#include <mutex>
#include <string>

namespace penstock {
namespace {

void Unmap(const RegistrationCache::Region& region) {
  for (auto [c, h] : region.memh) ucp_mem_unmap(c, h);
}

// Maps `region` with every distinct context of `contexts` (adding each handle to it); on a
// failure unmaps what it mapped.
Status MapInEveryContext(RegistrationCache::Region& region, std::span<const ucp_context_h> contexts,
                         void* data, size_t size) {
  for (ucp_context_h ctx : contexts) {
    bool seen = false;
    for (auto [c, h] : region.memh) seen |= c == ctx;
    if (seen) continue;
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = data;
    mp.length = size;
    ucp_mem_h memh = nullptr;
    ucs_status_t st = ucp_mem_map(ctx, &mp, &memh);
    if (st != UCS_OK) {
      Unmap(region);
      return ResourceExhausted("cannot register " + std::to_string(size) + " bytes with UCX: " +
                               ucs_status_string(st) + "; check the locked-memory limit (ulimit -l)");
    }
    region.memh.emplace_back(ctx, memh);
  }
  return OkStatus();
}

}  // namespace

Result<std::shared_ptr<RpcClient::Registration>> RegistrationCache::Register(
    const std::shared_ptr<RegistrationCache>& cache, std::span<const ucp_context_h> contexts,
    void* data, size_t size) {
  if (data == nullptr || size == 0) return InvalidArgument("cannot register an empty memory range");
  Region region;
  region.begin = reinterpret_cast<uintptr_t>(data);
  region.end = region.begin + size;
  PS_RETURN_IF_ERROR(MapInEveryContext(region, contexts, data, size));
  std::unique_lock lock(cache->mu_);
  auto next = cache->regions_.lower_bound(region.begin);
  const bool overlaps_next = next != cache->regions_.end() && next->second->begin < region.end;
  const bool overlaps_prev = next != cache->regions_.begin() && std::prev(next)->second->end > region.begin;
  if (overlaps_next || overlaps_prev) {
    lock.unlock();
    Unmap(region);
    return InvalidArgument("memory range overlaps one already registered; unregister that one first");
  }
  auto reg = std::make_shared<RpcClient::Registration>(cache, std::move(region));
  cache->regions_[reg->region().begin] = &reg->region();
  return reg;
}

ucp_mem_h RegistrationCache::Find(ucp_context_h ctx, const std::byte* p, size_t n) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::shared_lock lock(mu_);
  auto it = regions_.upper_bound(at);
  if (it == regions_.begin()) return nullptr;
  --it;
  if (at + n > it->second->end) return nullptr;
  for (auto [c, h] : it->second->memh) {
    if (c == ctx) return h;
  }
  return nullptr;
}

RpcClient::Registration::~Registration() {
  {
    std::unique_lock lock(cache_->mu_);
    cache_->regions_.erase(region_.begin);
  }
  Unmap(region_);
}

}  // namespace penstock

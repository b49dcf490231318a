#include "client/capability_cache.h"

#include <algorithm>
#include <chrono>

#include "client/write_version.h"
#include "mgmt_client/mgmt_client.h"

namespace penstock {

Result<std::vector<std::byte>> CapabilityCache::Get(uint64_t container) {
  if (!enabled_) return std::vector<std::byte>();
  const int64_t now = WallClockMs();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tokens_.find(container);
    if (it != tokens_.end() && now < it->second.refresh_at_ms) return it->second.token;
  }
  v1::GetCapabilityRequest req;
  req.set_container_id(container);
  auto cap = mgmt_->GetCapability(req);
  if (!cap.ok()) {
    return cap.status().WithContext("getting a capability for container " + std::to_string(container));
  }
  Entry e;
  const auto* p = reinterpret_cast<const std::byte*>(cap->token().data());
  e.token.assign(p, p + cap->token().size());
  const int64_t life = cap->expiry_ms() - now;
  e.refresh_at_ms = cap->expiry_ms() - std::min<int64_t>(60'000, std::max<int64_t>(life / 5, 0));
  std::lock_guard<std::mutex> lock(mu_);
  tokens_[container] = e;
  return e.token;
}

void CapabilityCache::Invalidate(uint64_t container) {
  std::lock_guard<std::mutex> lock(mu_);
  tokens_.erase(container);
}

}  // namespace penstock

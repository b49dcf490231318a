#include "protocol/capability.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstring>

namespace penstock {

namespace {

void Mac(const ClusterKey& key, std::span<const std::byte> body, unsigned char out[32]) {
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.secret.data(), static_cast<int>(key.secret.size()),
       reinterpret_cast<const unsigned char*>(body.data()), body.size(), out, &len);
}

}  // namespace

std::vector<std::byte> SignCapability(Capability cap, const ClusterKey& key) {
  CapabilityBody b{};
  b.version = kCapabilityVersion;
  b.rights = cap.rights;
  b.key_id = key.id;
  b.tenant = cap.tenant;
  b.container = cap.container;
  b.expiry_ms = cap.expiry_ms;
  b.map_epoch = cap.map_epoch;
  std::vector<std::byte> out(kCapabilityBytes);
  std::memcpy(out.data(), &b, sizeof(b));
  unsigned char mac[32];
  Mac(key, std::span<const std::byte>(out.data(), sizeof(b)), mac);
  std::memcpy(out.data() + sizeof(b), mac, sizeof(mac));
  return out;
}

Result<Capability> PeekCapability(std::span<const std::byte> token) {
  if (token.size() != kCapabilityBytes) {
    return Unauthenticated("capability token is " + std::to_string(token.size()) + " bytes, expected " +
                           std::to_string(kCapabilityBytes) + "; ask mgmt for a new one");
  }
  CapabilityBody b;
  std::memcpy(&b, token.data(), sizeof(b));
  if (b.version != kCapabilityVersion) {
    return Unauthenticated("capability token has version " + std::to_string(b.version) +
                           ", this build speaks " + std::to_string(kCapabilityVersion));
  }
  Capability c;
  c.tenant = b.tenant;
  c.container = b.container;
  c.rights = b.rights;
  c.expiry_ms = b.expiry_ms;
  c.map_epoch = b.map_epoch;
  c.key_id = b.key_id;
  return c;
}

Result<Capability> VerifyCapability(std::span<const std::byte> token, const CapabilityKeySet& keys,
                                    uint64_t container, uint8_t right, int64_t now_ms) {
  PS_ASSIGN_OR_RETURN(Capability c, PeekCapability(token));
  auto key = std::find_if(keys.keys.begin(), keys.keys.end(),
                          [&](const ClusterKey& k) { return k.id == c.key_id; });
  if (key == keys.keys.end()) {
    return Unauthenticated("capability token signed by unknown cluster key " + std::to_string(c.key_id) +
                           " (rotated out?); ask mgmt for a new one");
  }
  unsigned char mac[32];
  Mac(*key, token.first(sizeof(CapabilityBody)), mac);
  if (CRYPTO_memcmp(mac, token.data() + sizeof(CapabilityBody), sizeof(mac)) != 0) {
    return Unauthenticated("capability token signature does not verify; ask mgmt for a new one");
  }
  if (std::find(keys.revoked_tenants.begin(), keys.revoked_tenants.end(), c.tenant) !=
      keys.revoked_tenants.end()) {
    return PermissionDenied("tenant " + std::to_string(c.tenant) + " has been revoked");
  }
  if (now_ms >= c.expiry_ms) {
    return PermissionDenied("capability token expired " + std::to_string(now_ms - c.expiry_ms) +
                            " ms ago; ask mgmt for a new one");
  }
  if (c.container != container) {
    return PermissionDenied("capability token is for container " + std::to_string(c.container) +
                            ", not container " + std::to_string(container));
  }
  if ((c.rights & right) != right) {
    return PermissionDenied("capability token grants " + RightsName(c.rights) + ", the operation needs " +
                            RightsName(right));
  }
  return c;
}

std::string RightsName(uint8_t rights) {
  std::string s;
  auto add = [&](uint8_t bit, const char* name) {
    if (!(rights & bit)) return;
    if (!s.empty()) s += "|";
    s += name;
  };
  add(kRightRead, "read");
  add(kRightWrite, "write");
  add(kRightAdmin, "admin");
  return s.empty() ? "none" : s;
}

}  // namespace penstock

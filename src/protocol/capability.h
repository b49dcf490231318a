// capability.h — capability tokens: what a client shows a target to be allowed to touch one
// container, and the check a target runs on every shard request.
//
// Format (version 1, little-endian, 72 bytes): a packed CapabilityBody (40 bytes) followed by
// HMAC-SHA256(cluster key, body) (32 bytes). Mgmt signs with its current key; targets hold the
// key set (keys by id, revoked tenants, whether tokens are required) from registration and each
// heartbeat reply. The token is a bearer credential: whoever holds it has its rights until it
// expires (there is no TLS on the data plane in v1).
//
// Pure values and functions (OpenSSL HMAC, no I/O, no clock: `now_ms` is passed in);
// thread-safe. Errors of Verify:
//   kUnauthenticated — garbled, truncated, wrong version, unknown key id, forged MAC (the
//                      caller should get a new token from mgmt; retrying the same one is useless)
//   kPermissionDenied — expired, another container, missing right, revoked tenant
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "penstock/status.h"

namespace penstock {

inline constexpr uint8_t kCapabilityVersion = 1;
inline constexpr size_t kCapabilityMacBytes = 32;
inline constexpr size_t kClusterKeyBytes = 32;

enum CapabilityRight : uint8_t {
  kRightRead = 1,
  kRightWrite = 2,
  kRightAdmin = 4,
};

#pragma pack(push, 1)
struct CapabilityBody {
  uint8_t version;   // kCapabilityVersion
  uint8_t rights;    // CapabilityRight bits
  uint16_t reserved;
  uint32_t key_id;   // the cluster key that signed it
  uint64_t tenant;
  uint64_t container;
  int64_t expiry_ms;  // unix ms; refused at or after this instant
  uint64_t map_epoch;  // cluster-map epoch at issue (informational in v1)
};
static_assert(sizeof(CapabilityBody) == 40);
#pragma pack(pop)

inline constexpr size_t kCapabilityBytes = sizeof(CapabilityBody) + kCapabilityMacBytes;

struct Capability {
  uint64_t tenant = 0;
  uint64_t container = 0;
  uint8_t rights = 0;
  int64_t expiry_ms = 0;
  uint64_t map_epoch = 0;
  uint32_t key_id = 0;
};

struct ClusterKey {
  uint32_t id = 0;
  std::string secret;  // kClusterKeyBytes random bytes
};

// What a target checks tokens against.
struct CapabilityKeySet {
  bool auth_enabled = false;  // true: a request without a token is refused
  std::vector<ClusterKey> keys;
  std::vector<uint64_t> revoked_tenants;
};

// The signed token for `cap` under `key` (cap.key_id is set to key.id).
std::vector<std::byte> SignCapability(Capability cap, const ClusterKey& key);

// The fields of `token` WITHOUT checking its MAC (for logs and client caches).
// Errors: kUnauthenticated when it is not a well-formed version-1 token.
Result<Capability> PeekCapability(std::span<const std::byte> token);

// Checks `token` for an operation needing `right` on `container` at `now_ms`; returns the
// verified fields. Errors: see the header comment.
Result<Capability> VerifyCapability(std::span<const std::byte> token, const CapabilityKeySet& keys,
                                    uint64_t container, uint8_t right, int64_t now_ms);

// "read", "write", "read|write", ...
std::string RightsName(uint8_t rights);

}  // namespace penstock

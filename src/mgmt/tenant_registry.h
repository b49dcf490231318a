// tenant_registry.h — mgmt's security state: tenants and their API keys, the revoked-tenant
// list, and the cluster keys that sign capability tokens (protocol/capability.h).
//
// API keys are 32 random bytes shown once (hex, prefixed "psk_"); only their SHA-256 is stored.
// The admin key (MgmtServerOptions.admin_key, given to mgmt at start, never stored) acts for
// the built-in "default" tenant (id 0) and may touch every container. With auth disabled a
// caller presenting no key is treated as the admin, so clusters without keys behave as before.
//
// Cluster keys: 32 random bytes each with an id; the newest signs, the previous one still
// verifies (tokens signed before a rotation stay valid until the next one). Targets get the
// key set (ClusterKeySet) at registration and in every heartbeat reply.
//
// MetaStore layout (version 1):
//   mgmt/v1/tenant/<name>            v1::Tenant
//   mgmt/v1/next_tenant_id           decimal uint64 (from 1)
//   mgmt/v1/revoked/<id, 20 digits>  empty
//   mgmt/v1/clusterkey/<id, 10 digits> v1::ClusterKey
// Every change is committed before it is applied in memory.
//
// Thread safety: all methods are thread-safe (one mutex). The MetaStore is borrowed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "mgmt/cluster_state.h"
#include "mgmt/meta_store.h"
#include "penstock/mgmt.pb.h"
#include "penstock/status.h"

namespace penstock::mgmt {

// Who is calling mgmt, from the API key in the request metadata.
struct Caller {
  uint64_t tenant = 0;  // 0: the default tenant
  bool admin = false;   // may manage tenants and keys and see every container
};

struct TenantRegistryOptions {
  bool auth_enabled = false;
  std::string admin_key;  // empty: no admin key (then only auth-disabled callers are admins)
  NowMsFn now_ms = SystemNowMs;
};

class TenantRegistry {
 public:
  // Loads the records in `store`, creating the first cluster key when there is none.
  static Result<std::unique_ptr<TenantRegistry>> Load(MetaStore* store, TenantRegistryOptions options);

  // Re-reads everything from the store (a new HA leader).
  Status Reload();

  bool auth_enabled() const { return options_.auth_enabled; }

  // The caller named by `api_key` ("" when none was sent).
  // Errors: kUnauthenticated for an unknown key, or no key while auth is enabled.
  Result<Caller> Authenticate(const std::string& api_key) const;

  // Errors: kInvalidArgument (name rules, "default" is reserved); kAlreadyExists.
  Result<v1::CreateTenantResponse> CreateTenant(const std::string& name);
  std::vector<v1::Tenant> ListTenants() const;
  // Revokes: the key stops working and the tenant's tokens are refused by targets.
  // Errors: kNotFound. Returns the tenant's id.
  Result<uint64_t> DeleteTenant(const std::string& name);

  // The key set for targets.
  v1::ClusterKeySet KeySet() const;
  // Adds a new signing key and drops all but the previous one. Returns the new key id.
  Result<uint32_t> RotateKey();

  // A token for `tenant` on `container` with `rights`, expiring `ttl_ms` from now.
  v1::Capability Issue(uint64_t tenant, uint64_t container, uint8_t rights, uint64_t epoch,
                       int64_t ttl_ms) const;

 private:
  TenantRegistry(MetaStore* store, TenantRegistryOptions options);
  Status LoadLocked();

  MetaStore* const store_;
  const TenantRegistryOptions options_;
  std::string admin_key_sha256_;  // hex; empty when there is no admin key

  mutable std::mutex mu_;
  uint64_t next_tenant_id_ = 1;                      // guarded by mu_
  std::map<std::string, v1::Tenant> tenants_;        // by name; guarded by mu_
  std::map<std::string, uint64_t> tenant_by_hash_;   // guarded by mu_
  std::set<uint64_t> revoked_;                       // guarded by mu_
  std::map<uint32_t, v1::ClusterKey> keys_;          // by id; guarded by mu_
};

// Hex SHA-256 of `s`.
std::string Sha256Hex(const std::string& s);
// `bytes` random bytes from the OS CSPRNG (OpenSSL RAND_bytes).
std::string RandomBytes(size_t bytes);
// A fresh API key: "psk_" + 64 hex digits.
std::string NewApiKey();

}  // namespace penstock::mgmt

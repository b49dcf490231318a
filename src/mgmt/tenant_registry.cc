#include "mgmt/tenant_registry.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <cstdio>
#include <stdexcept>

#include "common/log.h"
#include "mgmt/container_rules.h"
#include "protocol/capability.h"

namespace penstock::mgmt {
namespace {

constexpr const char* kTenantPrefix = "mgmt/v1/tenant/";
constexpr const char* kNextTenantIdKey = "mgmt/v1/next_tenant_id";
constexpr const char* kRevokedPrefix = "mgmt/v1/revoked/";
constexpr const char* kKeyPrefix = "mgmt/v1/clusterkey/";

std::string Hex(const unsigned char* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

std::string KeyKey(uint32_t id) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%010u", id);
  return kKeyPrefix + std::string(buf);
}

std::string RevokedKey(uint64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%020llu", static_cast<unsigned long long>(id));
  return kRevokedPrefix + std::string(buf);
}

}  // namespace

std::string Sha256Hex(const std::string& s) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), md);
  return Hex(md, sizeof(md));
}

std::string RandomBytes(size_t bytes) {
  std::string out(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(bytes)) != 1) {
    throw std::runtime_error("RAND_bytes failed");  // no entropy: nothing safe to do
  }
  return out;
}

std::string NewApiKey() {
  std::string r = RandomBytes(32);
  return "psk_" + Hex(reinterpret_cast<const unsigned char*>(r.data()), r.size());
}

TenantRegistry::TenantRegistry(MetaStore* store, TenantRegistryOptions options)
    : store_(store), options_(std::move(options)) {
  if (!options_.admin_key.empty()) admin_key_sha256_ = Sha256Hex(options_.admin_key);
}

Result<std::unique_ptr<TenantRegistry>> TenantRegistry::Load(MetaStore* store,
                                                             TenantRegistryOptions options) {
  if (!options.now_ms) options.now_ms = SystemNowMs;
  std::unique_ptr<TenantRegistry> r(new TenantRegistry(store, std::move(options)));
  std::lock_guard<std::mutex> lock(r->mu_);
  PS_RETURN_IF_ERROR(r->LoadLocked());
  return r;
}

Status TenantRegistry::Reload() {
  std::lock_guard<std::mutex> lock(mu_);
  return LoadLocked();
}

Status TenantRegistry::LoadLocked() {
  tenants_.clear();
  tenant_by_hash_.clear();
  revoked_.clear();
  keys_.clear();
  PS_ASSIGN_OR_RETURN(auto next, store_->Get(kNextTenantIdKey));
  next_tenant_id_ = 1;
  if (next) {
    try {
      next_tenant_id_ = std::stoull(*next);
    } catch (const std::exception&) {
      return DataLoss(std::string("mgmt metadata key '") + kNextTenantIdKey + "' is not a number");
    }
  }
  PS_ASSIGN_OR_RETURN(auto rows, store_->Scan(kTenantPrefix));
  for (const auto& [k, v] : rows) {
    v1::Tenant t;
    if (!t.ParseFromString(v)) return DataLoss("mgmt metadata record '" + k + "' is not a tenant");
    tenant_by_hash_[t.api_key_sha256()] = t.id();
    tenants_[t.name()] = std::move(t);
  }
  PS_ASSIGN_OR_RETURN(auto revoked, store_->Scan(kRevokedPrefix));
  for (const auto& [k, v] : revoked) revoked_.insert(std::stoull(k.substr(std::string(kRevokedPrefix).size())));
  PS_ASSIGN_OR_RETURN(auto keys, store_->Scan(kKeyPrefix));
  for (const auto& [k, v] : keys) {
    v1::ClusterKey key;
    if (!key.ParseFromString(v)) return DataLoss("mgmt metadata record '" + k + "' is not a cluster key");
    keys_[key.id()] = std::move(key);
  }
  if (keys_.empty()) {
    v1::ClusterKey key;
    key.set_id(1);
    key.set_secret(RandomBytes(kClusterKeyBytes));
    key.set_created_ms(options_.now_ms());
    PS_RETURN_IF_ERROR(store_->Put(KeyKey(1), key.SerializeAsString()));
    keys_[1] = std::move(key);
  }
  return OkStatus();
}

Result<Caller> TenantRegistry::Authenticate(const std::string& api_key) const {
  if (api_key.empty()) {
    if (options_.auth_enabled) {
      return Unauthenticated("this cluster requires an API key; pass --api-key or set PENSTOCK_API_KEY");
    }
    return Caller{0, true};
  }
  const std::string hash = Sha256Hex(api_key);
  if (!admin_key_sha256_.empty() &&
      CRYPTO_memcmp(hash.data(), admin_key_sha256_.data(), hash.size()) == 0) {
    return Caller{0, true};
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tenant_by_hash_.find(hash);  // a hash of a random key: timing reveals nothing useful
  if (it == tenant_by_hash_.end()) {
    return Unauthenticated("unknown API key (revoked, or for another cluster?)");
  }
  return Caller{it->second, false};
}

Result<v1::CreateTenantResponse> TenantRegistry::CreateTenant(const std::string& name) {
  PS_RETURN_IF_ERROR(ValidateContainerName(name).WithContext("tenant name"));
  if (name == "default") return InvalidArgument("tenant name 'default' is reserved");
  std::lock_guard<std::mutex> lock(mu_);
  if (tenants_.count(name)) return AlreadyExists("tenant '" + name + "' already exists");
  v1::CreateTenantResponse resp;
  std::string key = NewApiKey();
  v1::Tenant* t = resp.mutable_tenant();
  t->set_id(next_tenant_id_);
  t->set_name(name);
  t->set_api_key_sha256(Sha256Hex(key));
  t->set_created_ms(options_.now_ms());
  WriteBatch batch;
  batch.Put(kTenantPrefix + name, t->SerializeAsString());
  batch.Put(kNextTenantIdKey, std::to_string(next_tenant_id_ + 1));
  PS_RETURN_IF_ERROR(store_->Commit(batch));
  ++next_tenant_id_;
  tenant_by_hash_[t->api_key_sha256()] = t->id();
  tenants_[name] = *t;
  PS_LOG_INFO("tenant '{}' created (id {})", name, t->id());
  t->clear_api_key_sha256();
  resp.set_api_key(key);
  return resp;
}

std::vector<v1::Tenant> TenantRegistry::ListTenants() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::Tenant> out;
  for (const auto& [name, t] : tenants_) {
    out.push_back(t);
    out.back().clear_api_key_sha256();
  }
  return out;
}

Result<uint64_t> TenantRegistry::DeleteTenant(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tenants_.find(name);
  if (it == tenants_.end()) return NotFound("tenant '" + name + "' does not exist; see `penstock tenant ls`");
  const uint64_t id = it->second.id();
  WriteBatch batch;
  batch.Put(RevokedKey(id), "");
  batch.Delete(kTenantPrefix + name);
  PS_RETURN_IF_ERROR(store_->Commit(batch));
  tenant_by_hash_.erase(it->second.api_key_sha256());
  tenants_.erase(it);
  revoked_.insert(id);
  PS_LOG_INFO("tenant '{}' (id {}) deleted and revoked", name, id);
  return id;
}

v1::ClusterKeySet TenantRegistry::KeySet() const {
  v1::ClusterKeySet ks;
  ks.set_auth_enabled(options_.auth_enabled);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, k] : keys_) *ks.add_keys() = k;
  if (!keys_.empty()) ks.set_current_key_id(keys_.rbegin()->first);
  for (uint64_t t : revoked_) ks.add_revoked_tenants(t);
  return ks;
}

Result<uint32_t> TenantRegistry::RotateKey() {
  std::lock_guard<std::mutex> lock(mu_);
  const uint32_t id = keys_.empty() ? 1 : keys_.rbegin()->first + 1;
  v1::ClusterKey key;
  key.set_id(id);
  key.set_secret(RandomBytes(kClusterKeyBytes));
  key.set_created_ms(options_.now_ms());
  WriteBatch batch;
  batch.Put(KeyKey(id), key.SerializeAsString());
  std::vector<uint32_t> drop;
  // Keep the newest existing key (it still verifies); drop the older ones.
  for (auto it = keys_.begin(); it != keys_.end(); ++it) {
    if (std::next(it) != keys_.end()) drop.push_back(it->first);
  }
  for (uint32_t d : drop) batch.Delete(KeyKey(d));
  PS_RETURN_IF_ERROR(store_->Commit(batch));
  for (uint32_t d : drop) keys_.erase(d);
  keys_[id] = std::move(key);
  PS_LOG_INFO("cluster key rotated: key {} signs now", id);
  return id;
}

v1::Capability TenantRegistry::Issue(uint64_t tenant, uint64_t container, uint8_t rights,
                                     uint64_t epoch, int64_t ttl_ms) const {
  ClusterKey key;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const v1::ClusterKey& k = keys_.rbegin()->second;
    key.id = k.id();
    key.secret = k.secret();
  }
  Capability cap;
  cap.tenant = tenant;
  cap.container = container;
  cap.rights = rights;
  cap.expiry_ms = options_.now_ms() + ttl_ms;
  cap.map_epoch = epoch;
  std::vector<std::byte> token = SignCapability(cap, key);
  v1::Capability out;
  out.set_token(reinterpret_cast<const char*>(token.data()), token.size());
  out.set_expiry_ms(cap.expiry_ms);
  return out;
}

}  // namespace penstock::mgmt

// etcd_client.h — a small client of the etcd v3 API over its JSON gRPC gateway (HTTP/1.1).
//
// Covers what mgmt needs: range (point and prefix reads), put, delete, multi-operation
// transactions with compares, and leases (grant, keep-alive, revoke). Requests are POSTs of
// JSON to /v3/...; keys and values travel base64-encoded and int64s as decimal strings, as the
// gateway expects. The caller builds transactions with the EtcdOp / EtcdCompare helpers.
//
// Endpoints: "etcd://h1:p1,h2:p2" (or the bare list). A request goes to the endpoint that
// answered last; on a connection failure the next one is tried, until all have failed once:
//   kUnavailable "etcd at h1:p1,h2:p2 is unreachable (...); check --meta".
// An error reported by etcd itself keeps etcd's gRPC code (e.g. kNotFound for an unknown
// lease) and message.
//
// Thread safety: all methods are thread-safe (one HTTP connection per request; loopback
// control-plane traffic does not need keep-alive).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "penstock/status.h"

namespace penstock::mgmt {

// One key-value as etcd returns it.
struct EtcdKv {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

// Result of EtcdClient::Txn.
struct EtcdTxnResult {
  bool succeeded = false;
  // The kvs of each range operation of the branch taken, in order (empty for puts/deletes).
  std::vector<std::vector<EtcdKv>> ranges;
};

// Builders of transaction pieces (JSON objects in the gateway's format).
namespace etcd {
nlohmann::json Put(const std::string& key, const std::string& value, int64_t lease = 0);
nlohmann::json DeleteKey(const std::string& key);
nlohmann::json Range(const std::string& key);
// Passes when `key`'s create_revision equals `rev` (0: the key is absent).
nlohmann::json CreateRevisionIs(const std::string& key, int64_t rev);
}  // namespace etcd

std::string Base64Encode(const std::string& in);
// Errors: kDataLoss for malformed input.
Result<std::string> Base64Decode(const std::string& in);

class EtcdClient {
 public:
  // `spec` is "etcd://host:port[,host:port...]" or "host:port[,...]".
  // Errors: kInvalidArgument for a malformed spec (names --meta).
  static Result<std::unique_ptr<EtcdClient>> Create(const std::string& spec,
                                                    std::chrono::milliseconds timeout =
                                                        std::chrono::milliseconds(3000));

  // "h1:p1,h2:p2", for messages.
  std::string endpoints() const;

  // The key itself, or with `prefix` every key starting with it, in key order.
  Result<std::vector<EtcdKv>> Get(const std::string& key, bool prefix = false);
  Status Put(const std::string& key, const std::string& value, int64_t lease = 0);
  Status Delete(const std::string& key);
  // compare / success / failure are arrays of etcd::... pieces.
  Result<EtcdTxnResult> Txn(const nlohmann::json& compare, const nlohmann::json& success,
                            const nlohmann::json& failure = nlohmann::json::array());

  // A new lease of `ttl_s` seconds (etcd may round up to its minimum). Returns its id.
  Result<int64_t> LeaseGrant(int64_t ttl_s);
  // Refreshes the lease; returns the remaining TTL in seconds, 0 when it has expired.
  Result<int64_t> LeaseKeepAlive(int64_t lease);
  Status LeaseRevoke(int64_t lease);

  // POSTs `body` to `path` ("/v3/kv/range") and returns the parsed JSON answer.
  Result<nlohmann::json> Call(const std::string& path, const nlohmann::json& body);

 private:
  EtcdClient(std::vector<std::pair<std::string, int>> endpoints,
             std::chrono::milliseconds timeout);

  const std::vector<std::pair<std::string, int>> endpoints_;
  const std::chrono::milliseconds timeout_;
  std::atomic<size_t> current_{0};  // endpoint that answered last
};

}  // namespace penstock::mgmt

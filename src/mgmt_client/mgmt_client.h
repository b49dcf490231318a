// mgmt_client.h — the client side of the penstock.v1.Mgmt gRPC service, used by targets, the
// client library and the CLI.
//
// Every call carries a deadline (the `timeout` given to Connect) and returns penstock::Status
// codes equal to gRPC's; kUnavailable and kDeadlineExceeded name the mgmt address and are
// worth retrying (a target retries registration and heartbeats; a client retries map fetches).
// Results are the generated proto messages (penstock/mgmt.pb.h).
//
// Several mgmt instances (HA over etcd): Connect("h1:p1,h2:p2,h3:p3") finds the leader (asking
// each instance's GetStatus and following its leader hint). A call that fails UNAVAILABLE
// (connection lost, or "not the leader") re-discovers the leader and is retried until the
// call's `timeout` has passed, so heartbeats and map fetches carry on across a failover.
// Retried calls may run twice: RegisterTarget, Heartbeat and the reads are idempotent; a
// retried CreateContainer / DeleteContainer may answer ALREADY_EXISTS / NOT_FOUND when the
// first attempt landed just before the failover. With one address nothing is retried (as
// before): the caller owns the retry policy.
//
// TLS (tls.h): Connect's `tls` names the CA to verify mgmt with and this client's certificate;
// every channel (each mgmt instance with several addresses) uses the same credentials. A
// handshake refused either way (plaintext against TLS, no or a foreign client certificate,
// mgmt's certificate not from tls.ca) is kUnavailable naming the address and the --tls-*
// settings to check.
//
// Thread safety: all methods are thread-safe (gRPC channels shared, leader under a mutex).
// Ownership: the client owns its channel; destroy it after the last call returns.
// Namespace: penstock (not penstock::mgmt) — this is the component's public entry point.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mgmt_client/cluster_map_watch.h"
#include "mgmt_client/tls.h"
#include "penstock/mgmt.grpc.pb.h"
#include "penstock/status.h"

namespace penstock {

class MgmtClient {
 public:
  // With several addresses ("h1:p1,h2:p2,..."): waits up to `timeout` for one of them to
  // report itself leader (kUnavailable "no mgmt leader found among ..." otherwise).
  // With one: connects to mgmt at `address` ("host:port") and waits up to `timeout` for the channel to
  // become ready; a refused connection fails at once rather than at the deadline (the caller
  // owns the retry policy). `timeout` is also the deadline of every later call. After Connect,
  // the channel reconnects by itself (backoff 100 ms .. 1 s) if mgmt restarts.
  // `tls` empty: plaintext.
  // Errors: kInvalidArgument for a malformed address or unusable TLS files (naming the file);
  // kUnavailable "mgmt at H:P is unreachable (...); is `penstock mgmt` running? check --mgmt",
  // or, when mgmt answers but the TLS handshake fails, "...; check --tls-ca/--tls-cert ...".
  static Result<std::unique_ptr<MgmtClient>> Connect(
      const std::string& address,
      std::chrono::milliseconds timeout = std::chrono::milliseconds(5000),
      const TlsOptions& tls = {});

  // Sends `api_key` with every later call (metadata `x-penstock-api-key`); "" sends none.
  // Call before sharing the client between threads.
  void set_api_key(std::string api_key) { api_key_ = std::move(api_key); }

  // The address(es) given to Connect.
  const std::string& address() const { return address_; }
  // The instance calls go to now (the leader once found; the only one with one address).
  std::string current_address() const;

  // One method per RPC of penstock.v1.Mgmt (see proto/penstock/mgmt.proto for the semantics
  // and error codes of each): the request message in, the response message out.
  Result<v1::RegisterTargetResponse> RegisterTarget(const v1::RegisterTargetRequest& req);
  // kNotFound means: register again.
  Result<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& req);
  Result<v1::ClusterMap> GetClusterMap(const v1::GetClusterMapRequest& req = {});
  // Empty redundancy means "none"; stripe_unit 0 means 1 MiB.
  Result<v1::Container> CreateContainer(const v1::CreateContainerRequest& req);
  Result<v1::Container> GetContainer(const v1::GetContainerRequest& req);
  Result<v1::ListContainersResponse> ListContainers(const v1::ListContainersRequest& req = {});
  Result<v1::DeleteContainerResponse> DeleteContainer(const v1::DeleteContainerRequest& req);
  Result<v1::CreateTenantResponse> CreateTenant(const v1::CreateTenantRequest& req);
  Result<v1::ListTenantsResponse> ListTenants(const v1::ListTenantsRequest& req = {});
  Result<v1::DeleteTenantResponse> DeleteTenant(const v1::DeleteTenantRequest& req);
  Result<v1::Capability> GetCapability(const v1::GetCapabilityRequest& req);
  Result<v1::RotateClusterKeyResponse> RotateClusterKey(const v1::RotateClusterKeyRequest& req = {});
  Result<v1::MarkTargetLostResponse> MarkTargetLost(const v1::MarkTargetLostRequest& req);
  Result<v1::LossReport> AssessTargetLoss(const v1::AssessTargetLossRequest& req);
  Result<v1::ListLostObjectsResponse> ListLostObjects(const v1::ListLostObjectsRequest& req);
  Result<v1::ReportDegradedWriteResponse> ReportDegradedWrite(const v1::ReportDegradedWriteRequest& req);
  // With several addresses: the leader's status.
  Result<v1::MgmtStatus> GetStatus(const v1::GetStatusRequest& req = {});

  // Calls `on_map` on a background thread with the cluster map now and after every epoch
  // change (only epochs greater than `since_epoch` and than the last one delivered),
  // reconnecting to the (new) leader whenever the stream breaks. Stop it by destroying or
  // Stop()ping the returned watch; the client must outlive it. `on_map` must not block long.
  std::unique_ptr<ClusterMapWatch> WatchClusterMap(std::function<void(v1::ClusterMap)> on_map,
                                                   uint64_t since_epoch = 0);

 private:
  friend class ClusterMapWatch;
  using StubPtr = std::shared_ptr<v1::Mgmt::Stub>;

  MgmtClient(std::string address, std::vector<std::string> addresses,
             std::chrono::milliseconds timeout, bool tls,
             std::shared_ptr<grpc::ChannelCredentials> creds);
  // A channel to `address` with this client's credentials and reconnect policy.
  std::shared_ptr<grpc::Channel> NewChannel(const std::string& address) const;
  // "mgmt at H:P is unreachable (why); <what to check>", the hint depending on whether mgmt
  // answered at all and whether this client speaks TLS.
  std::string Unreachable(const std::string& address, const std::string& why) const;
  bool ha() const { return addresses_.size() > 1; }
  // A stub for `address` (channels cached).
  StubPtr StubFor(const std::string& address);
  // The current leader's address and stub, discovering the leader first when none is known.
  // Errors: kUnavailable "no mgmt leader among ... within N ms (...)".
  Result<std::pair<std::string, StubPtr>> Leader(std::chrono::system_clock::time_point deadline);
  // Forgets `address` as the leader (after an UNAVAILABLE from it).
  void ForgetLeader(const std::string& address);
  Status FindLeader(std::chrono::system_clock::time_point deadline);
  // Calls `rpc` on the stub with this client's deadline and converts the status.
  template <typename Req, typename Resp>
  Result<Resp> Call(const char* method,
                    grpc::Status (v1::Mgmt::Stub::*rpc)(grpc::ClientContext*, const Req&, Resp*),
                    const Req& req);
  // grpc::Status -> Status, naming the mgmt address on transport errors.
  Status Convert(const grpc::Status& s, const char* method, const std::string& address) const;

  const std::string address_;
  const std::vector<std::string> addresses_;
  const std::chrono::milliseconds timeout_;
  const bool tls_;
  const std::shared_ptr<grpc::ChannelCredentials> creds_;
  std::string api_key_;  // set before use, then read-only
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_;  // guarded by mu_
  std::string leader_;                                              // guarded by mu_
  StubPtr stub_;                                                    // guarded by mu_
};

}  // namespace penstock

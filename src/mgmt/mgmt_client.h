// mgmt_client.h — the client side of the penstock.v1.Mgmt gRPC service, used by targets, the
// client library and the CLI.
//
// Every call carries a deadline (the `timeout` given to Connect) and returns penstock::Status
// codes equal to gRPC's; kUnavailable and kDeadlineExceeded name the mgmt address and are
// worth retrying (a target retries registration and heartbeats; a client retries map fetches).
// Results are the generated proto messages (penstock/mgmt.pb.h).
//
// Thread safety: all methods are thread-safe (one gRPC channel, shared).
// Ownership: the client owns its channel; destroy it after the last call returns.
// Namespace: penstock (not penstock::mgmt) — this is the component's public entry point.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "penstock/mgmt.grpc.pb.h"
#include "penstock/status.h"

namespace penstock {

class MgmtClient {
 public:
  // Connects to mgmt at `address` ("host:port") and waits up to `timeout` for the channel to
  // become ready; a refused connection fails at once rather than at the deadline (the caller
  // owns the retry policy). `timeout` is also the deadline of every later call. After Connect,
  // the channel reconnects by itself (backoff 100 ms .. 1 s) if mgmt restarts.
  // Errors: kInvalidArgument for a malformed address; kUnavailable "mgmt at H:P is unreachable
  // (...); is `penstock mgmt` running? check --mgmt".
  static Result<std::unique_ptr<MgmtClient>> Connect(
      const std::string& address,
      std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

  const std::string& address() const { return address_; }

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
  Result<v1::MgmtStatus> GetStatus(const v1::GetStatusRequest& req = {});

 private:
  MgmtClient(std::string address, std::chrono::milliseconds timeout,
             std::shared_ptr<grpc::Channel> channel);
  // Calls `rpc` on the stub with this client's deadline and converts the status.
  template <typename Req, typename Resp>
  Result<Resp> Call(const char* method,
                    grpc::Status (v1::Mgmt::Stub::*rpc)(grpc::ClientContext*, const Req&, Resp*),
                    const Req& req);
  // grpc::Status -> Status, naming the mgmt address on transport errors.
  Status Convert(const grpc::Status& s, const char* method) const;

  const std::string address_;
  const std::chrono::milliseconds timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Mgmt::Stub> stub_;
};

}  // namespace penstock

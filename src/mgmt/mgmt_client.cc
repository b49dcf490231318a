#include "mgmt/mgmt_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

namespace penstock {
namespace {

std::string Unreachable(const std::string& address, const std::string& why) {
  return "mgmt at " + address + " is unreachable (" + why +
         "); is `penstock mgmt` running? check --mgmt";
}

}  // namespace

MgmtClient::MgmtClient(std::string address, std::chrono::milliseconds timeout,
                       std::shared_ptr<grpc::Channel> channel)
    : address_(std::move(address)),
      timeout_(timeout),
      channel_(std::move(channel)),
      stub_(v1::Mgmt::NewStub(channel_)) {}

Result<std::unique_ptr<MgmtClient>> MgmtClient::Connect(const std::string& address,
                                                        std::chrono::milliseconds timeout) {
  size_t colon = address.rfind(':');
  if (address.empty() || colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return InvalidArgument("mgmt address '" + address +
                           "' is not host:port; check --mgmt (e.g. 127.0.0.1:7000)");
  }
  grpc::ChannelArguments args;
  // Retry a dead mgmt quickly instead of gRPC's default backoff of up to minutes. gRPC also
  // uses MIN_RECONNECT_BACKOFF as the time allowed for one connection attempt (TCP + HTTP/2
  // handshake); keep it at least our own deadline so a slow handshake reports a timeout.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
              static_cast<int>(std::max<int64_t>(timeout.count(), 1000)));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  // Wait for READY, but give up at the first failed connection attempt (nothing listening,
  // unknown host) instead of retrying until the deadline: the caller decides about retries.
  const auto deadline = std::chrono::system_clock::now() + timeout;
  for (;;) {
    grpc_connectivity_state st = channel->GetState(/*try_to_connect=*/true);
    if (st == GRPC_CHANNEL_READY) break;
    if (st == GRPC_CHANNEL_TRANSIENT_FAILURE || st == GRPC_CHANNEL_SHUTDOWN) {
      return Unavailable(Unreachable(address, "connection refused, host unknown or handshake failed"));
    }
    if (!channel->WaitForStateChange(st, deadline)) {
      return Unavailable(Unreachable(
          address, "no connection within " + std::to_string(timeout.count()) + " ms"));
    }
  }
  return std::unique_ptr<MgmtClient>(new MgmtClient(address, timeout, std::move(channel)));
}

Status MgmtClient::Convert(const grpc::Status& s, const char* method) const {
  if (s.ok()) return OkStatus();
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return Unavailable(Unreachable(address_, std::string(method) + ": " + s.error_message()));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return DeadlineExceeded("mgmt at " + address_ + " did not answer " + method + " within " +
                              std::to_string(timeout_.count()) +
                              " ms; is it overloaded or stopped (SIGSTOP)? retry");
    default:
      return Status(static_cast<StatusCode>(s.error_code()), s.error_message());
  }
}

template <typename Req, typename Resp>
Result<Resp> MgmtClient::Call(
    const char* method,
    grpc::Status (v1::Mgmt::Stub::*rpc)(grpc::ClientContext*, const Req&, Resp*),
    const Req& req) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
  Resp resp;
  PS_RETURN_IF_ERROR(Convert((stub_.get()->*rpc)(&ctx, req, &resp), method));
  return resp;
}

Result<v1::RegisterTargetResponse> MgmtClient::RegisterTarget(
    const v1::RegisterTargetRequest& req) {
  return Call("RegisterTarget", &v1::Mgmt::Stub::RegisterTarget, req);
}

Result<v1::HeartbeatResponse> MgmtClient::Heartbeat(const v1::HeartbeatRequest& req) {
  return Call("Heartbeat", &v1::Mgmt::Stub::Heartbeat, req);
}

Result<v1::ClusterMap> MgmtClient::GetClusterMap(const v1::GetClusterMapRequest& req) {
  return Call("GetClusterMap", &v1::Mgmt::Stub::GetClusterMap, req);
}

Result<v1::Container> MgmtClient::CreateContainer(const v1::CreateContainerRequest& req) {
  return Call("CreateContainer", &v1::Mgmt::Stub::CreateContainer, req);
}

Result<v1::Container> MgmtClient::GetContainer(const v1::GetContainerRequest& req) {
  return Call("GetContainer", &v1::Mgmt::Stub::GetContainer, req);
}

Result<v1::ListContainersResponse> MgmtClient::ListContainers(
    const v1::ListContainersRequest& req) {
  return Call("ListContainers", &v1::Mgmt::Stub::ListContainers, req);
}

Result<v1::DeleteContainerResponse> MgmtClient::DeleteContainer(
    const v1::DeleteContainerRequest& req) {
  return Call("DeleteContainer", &v1::Mgmt::Stub::DeleteContainer, req);
}

Result<v1::MgmtStatus> MgmtClient::GetStatus(const v1::GetStatusRequest& req) {
  return Call("GetStatus", &v1::Mgmt::Stub::GetStatus, req);
}

}  // namespace penstock

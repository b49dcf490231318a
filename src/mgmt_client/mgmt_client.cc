#include "mgmt_client/mgmt_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <thread>

#include "mgmt_client/cluster_map_watch.h"

namespace penstock {
namespace {

bool IsHostPort(const std::string& a) {
  size_t colon = a.rfind(':');
  return !a.empty() && colon != std::string::npos && colon != 0 && colon + 1 != a.size();
}

}  // namespace

MgmtClient::MgmtClient(std::string address, std::vector<std::string> addresses,
                       std::chrono::milliseconds timeout, bool tls,
                       std::shared_ptr<grpc::ChannelCredentials> creds)
    : address_(std::move(address)),
      addresses_(std::move(addresses)),
      timeout_(timeout),
      tls_(tls),
      creds_(std::move(creds)) {}

std::shared_ptr<grpc::Channel> MgmtClient::NewChannel(const std::string& address) const {
  grpc::ChannelArguments args;
  // Retry a dead mgmt quickly instead of gRPC's default backoff of up to minutes. gRPC also
  // uses MIN_RECONNECT_BACKOFF as the time allowed for one connection attempt (TCP + HTTP/2
  // handshake); keep it at least our own deadline so a slow handshake reports a timeout.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
              static_cast<int>(std::max<int64_t>(timeout_.count(), 1000)));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(address, creds_, args);
}

std::string MgmtClient::Unreachable(const std::string& address, const std::string& why_in) const {
  std::string why = why_in;
  const std::string noise = "failed to connect to all addresses; last error: ";
  if (why.rfind(noise, 0) == 0) why = why.substr(noise.size());
  auto has = [&why](const char* part) { return why.find(part) != std::string::npos; };
  const std::string head = "mgmt at " + address + " is unreachable (" + why + "); ";
  const std::string running = "is `penstock mgmt` running? check --mgmt";
  // Nothing listens, or the name does not resolve: TLS is not the question.
  if (has("Connection refused") || has("DNS") || has("resolv") || has("no connection within")) {
    return head + running;
  }
  if (!tls_) {
    // A TLS mgmt closes a plaintext connection at once ("Socket closed").
    return head + "if mgmt serves TLS, pass --tls-ca, --tls-cert and --tls-key (or PENSTOCK_TLS_CA, "
                  "PENSTOCK_TLS_CERT, PENSTOCK_TLS_KEY); else " + running;
  }
  if (has("Ssl handshake failed") || has("SSL_ERROR") || has("certificate")) {
    // This client refused mgmt (its certificate is not from --tls-ca or does not name the
    // address), or mgmt does not speak TLS.
    return head + "check that --tls-ca is the CA that signed mgmt's certificate, that the certificate "
                  "names this address, and that mgmt serves TLS";
  }
  // mgmt refused this client after the handshake: no certificate, or one it does not trust.
  return head + "mgmt requires a client certificate from its CA (its --tls-ca): check --tls-cert and "
                "--tls-key (or PENSTOCK_TLS_CERT, PENSTOCK_TLS_KEY); else " + running;
}

Result<std::unique_ptr<MgmtClient>> MgmtClient::Connect(const std::string& address,
                                                        std::chrono::milliseconds timeout,
                                                        const TlsOptions& tls) {
  std::vector<std::string> addresses;
  for (size_t pos = 0;;) {
    size_t comma = address.find(',', pos);
    addresses.push_back(address.substr(pos, comma == std::string::npos ? comma : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  for (const std::string& a : addresses) {
    if (!IsHostPort(a)) {
      return InvalidArgument("mgmt address '" + a +
                             "' is not host:port; check --mgmt (e.g. 127.0.0.1:7000, or "
                             "h1:7000,h2:7000,h3:7000 for several mgmt instances)");
    }
  }
  RouteGrpcLogsToSpdlog();
  PS_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds, MgmtChannelCredentials(tls));
  std::unique_ptr<MgmtClient> c(new MgmtClient(address, addresses, timeout, tls.enabled(), std::move(creds)));
  const auto deadline = std::chrono::system_clock::now() + timeout;
  if (c->ha()) {
    PS_RETURN_IF_ERROR(c->FindLeader(deadline));
    return c;
  }
  std::shared_ptr<grpc::Channel> channel = c->NewChannel(address);
  // Wait for READY, but give up at the first failed connection attempt (nothing listening,
  // unknown host) instead of retrying until the deadline: the caller decides about retries.
  for (;;) {
    grpc_connectivity_state st = channel->GetState(/*try_to_connect=*/true);
    if (st == GRPC_CHANNEL_READY) break;
    if (st == GRPC_CHANNEL_TRANSIENT_FAILURE || st == GRPC_CHANNEL_SHUTDOWN) {
      // gRPC keeps the reason of the failed attempt for the next call; one call fetches it.
      grpc::ClientContext ctx;
      ctx.set_deadline(std::min(deadline, std::chrono::system_clock::now() + std::chrono::seconds(1)));
      v1::MgmtStatus ignored;
      grpc::Status s = v1::Mgmt::NewStub(channel)->GetStatus(&ctx, v1::GetStatusRequest(), &ignored);
      return Unavailable(c->Unreachable(address, s.ok() ? "connection failed" : s.error_message()));
    }
    if (!channel->WaitForStateChange(st, deadline)) {
      return Unavailable(c->Unreachable(
          address, "no connection within " + std::to_string(timeout.count()) + " ms"));
    }
  }
  c->channels_[address] = channel;
  c->leader_ = address;
  c->stub_ = v1::Mgmt::NewStub(channel);
  return c;
}

std::string MgmtClient::current_address() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leader_;
}

MgmtClient::StubPtr MgmtClient::StubFor(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<grpc::Channel>& ch = channels_[address];
  if (!ch) ch = NewChannel(address);
  return v1::Mgmt::NewStub(ch);
}

void MgmtClient::ForgetLeader(const std::string& address) {
  if (!ha()) return;  // one address: the channel reconnects by itself
  std::lock_guard<std::mutex> lock(mu_);
  if (leader_ == address) {
    leader_.clear();
    stub_.reset();
  }
}

Result<std::pair<std::string, MgmtClient::StubPtr>> MgmtClient::Leader(
    std::chrono::system_clock::time_point deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stub_) return std::make_pair(leader_, stub_);
  }
  PS_RETURN_IF_ERROR(FindLeader(deadline));
  std::lock_guard<std::mutex> lock(mu_);
  return std::make_pair(leader_, stub_);
}

Status MgmtClient::FindLeader(std::chrono::system_clock::time_point deadline) {
  std::string why;
  for (;;) {
    std::vector<std::string> todo(addresses_.rbegin(), addresses_.rend());  // back = next
    std::vector<std::string> tried;
    while (!todo.empty() && std::chrono::system_clock::now() < deadline) {
      std::string a = todo.back();
      todo.pop_back();
      if (std::find(tried.begin(), tried.end(), a) != tried.end()) continue;
      tried.push_back(a);
      StubPtr stub = StubFor(a);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::min(deadline, std::chrono::system_clock::now() + std::chrono::seconds(1)));
      v1::MgmtStatus st;
      grpc::Status s = stub->GetStatus(&ctx, v1::GetStatusRequest(), &st);
      if (s.ok() && st.is_leader()) {
        std::lock_guard<std::mutex> lock(mu_);
        leader_ = a;
        stub_ = std::move(stub);
        return OkStatus();
      }
      if (s.ok()) {
        why = a + ": not the leader" +
              (st.leader_address().empty() ? "; none elected yet" : "; leader is " + st.leader_address());
        if (!st.leader_address().empty()) todo.push_back(st.leader_address());
      } else {
        why = a + ": " + s.error_message();
      }
    }
    if (std::chrono::system_clock::now() >= deadline) {
      return Unavailable("no mgmt leader found among " + address_ + " within " +
                         std::to_string(timeout_.count()) + " ms (last: " + why +
                         "); is `penstock mgmt` running? check --mgmt");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Status MgmtClient::Convert(const grpc::Status& s, const char* method,
                           const std::string& address) const {
  if (s.ok()) return OkStatus();
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      if (s.error_message().rfind("not the leader", 0) == 0) {
        return Unavailable("mgmt at " + address + " is " + s.error_message() +
                           "; list every mgmt instance in --mgmt (h1:p1,h2:p2,...) to follow the leader");
      }
      return Unavailable(Unreachable(address, std::string(method) + ": " + s.error_message()));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return DeadlineExceeded("mgmt at " + address + " did not answer " + method + " within " +
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
  const auto deadline = std::chrono::system_clock::now() + timeout_;
  for (;;) {
    PS_ASSIGN_OR_RETURN(auto leader, Leader(deadline));
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline);
    if (!api_key_.empty()) ctx.AddMetadata("x-penstock-api-key", api_key_);
    Resp resp;
    grpc::Status s = (leader.second.get()->*rpc)(&ctx, req, &resp);
    if (s.ok() || !ha() || s.error_code() != grpc::StatusCode::UNAVAILABLE ||
        std::chrono::system_clock::now() >= deadline) {
      PS_RETURN_IF_ERROR(Convert(s, method, leader.first));
      return resp;
    }
    ForgetLeader(leader.first);  // and find the new one on the next round
  }
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

Result<v1::CreateTenantResponse> MgmtClient::CreateTenant(const v1::CreateTenantRequest& req) {
  return Call("CreateTenant", &v1::Mgmt::Stub::CreateTenant, req);
}

Result<v1::ListTenantsResponse> MgmtClient::ListTenants(const v1::ListTenantsRequest& req) {
  return Call("ListTenants", &v1::Mgmt::Stub::ListTenants, req);
}

Result<v1::DeleteTenantResponse> MgmtClient::DeleteTenant(const v1::DeleteTenantRequest& req) {
  return Call("DeleteTenant", &v1::Mgmt::Stub::DeleteTenant, req);
}

Result<v1::Capability> MgmtClient::GetCapability(const v1::GetCapabilityRequest& req) {
  return Call("GetCapability", &v1::Mgmt::Stub::GetCapability, req);
}

Result<v1::RotateClusterKeyResponse> MgmtClient::RotateClusterKey(const v1::RotateClusterKeyRequest& req) {
  return Call("RotateClusterKey", &v1::Mgmt::Stub::RotateClusterKey, req);
}

Result<v1::MarkTargetLostResponse> MgmtClient::MarkTargetLost(const v1::MarkTargetLostRequest& req) {
  return Call("MarkTargetLost", &v1::Mgmt::Stub::MarkTargetLost, req);
}

Result<v1::LossReport> MgmtClient::AssessTargetLoss(const v1::AssessTargetLossRequest& req) {
  return Call("AssessTargetLoss", &v1::Mgmt::Stub::AssessTargetLoss, req);
}

Result<v1::ListLostObjectsResponse> MgmtClient::ListLostObjects(const v1::ListLostObjectsRequest& req) {
  return Call("ListLostObjects", &v1::Mgmt::Stub::ListLostObjects, req);
}

Result<v1::ReportDegradedWriteResponse> MgmtClient::ReportDegradedWrite(const v1::ReportDegradedWriteRequest& req) {
  return Call("ReportDegradedWrite", &v1::Mgmt::Stub::ReportDegradedWrite, req);
}

Result<v1::MgmtStatus> MgmtClient::GetStatus(const v1::GetStatusRequest& req) {
  Result<v1::MgmtStatus> r = Call("GetStatus", &v1::Mgmt::Stub::GetStatus, req);
  if (r.ok() && ha() && !r->is_leader()) {  // it stepped down since we found it
    ForgetLeader(current_address());
    r = Call("GetStatus", &v1::Mgmt::Stub::GetStatus, req);
  }
  return r;
}

std::unique_ptr<ClusterMapWatch> MgmtClient::WatchClusterMap(
    std::function<void(v1::ClusterMap)> on_map, uint64_t since_epoch) {
  return std::unique_ptr<ClusterMapWatch>(new ClusterMapWatch(this, std::move(on_map), since_epoch));
}

}  // namespace penstock

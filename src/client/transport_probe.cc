#include "client/transport_probe.h"

#include "protocol/shard_request.h"
#include "transport/rpc_client.h"

namespace penstock {

std::map<uint32_t, std::string> ProbeTransports(const v1::ClusterMap& map, const ClientOptions& options) {
  std::map<uint32_t, std::string> out;
  RpcClientOptions ro;
  ro.timeout = std::chrono::milliseconds(2000);
  ro.workers = options.data_workers;
  ro.net_devices = options.net_devices;
  auto rpc = RpcClient::Create(ro);
  const std::vector<std::byte> stat = EncodeShardRequest(
      {.op = ShardOp::kStat, .map_epoch = map.epoch(), .deadline_s = RequestDeadline(ro.timeout)});
  for (const auto& t : map.targets()) {
    out[t.id()] = "-";
    if (!rpc.ok() || t.state() != v1::TARGET_STATE_UP) continue;
    RpcReply r = (*rpc)->CallSync(t.address(), static_cast<uint16_t>(ShardOp::kStat), stat, {});
    // A cluster with API keys refuses the token-less stat: still the target's own answer.
    if (r.status.ok() || r.status.code() == StatusCode::kNotFound || r.status.code() == StatusCode::kUnauthenticated) {
      std::string name = (*rpc)->TransportName(t.address());
      out[t.id()] = name.empty() ? "?" : name;
    }
  }
  return out;
}

}  // namespace penstock

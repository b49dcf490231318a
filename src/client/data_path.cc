#include "client/data_path.h"

namespace penstock {

Status DataPath::Open(const DataPathOptions& o) {
  PS_ASSIGN_OR_RETURN(mgmt, MgmtClient::Connect(o.mgmt_address, std::chrono::milliseconds(5000), o.tls));
  mgmt->set_api_key(o.api_key);
  caps = std::make_unique<CapabilityCache>(mgmt.get(), !o.api_key.empty());
  RpcClientOptions ro;
  ro.timeout = o.timeout;
  ro.workers = o.workers;
  ro.net_devices = o.net_devices;
  ro.local_direct = o.local_direct;
  PS_ASSIGN_OR_RETURN(rpc, RpcClient::Create(ro));
  view = std::make_unique<ClusterView>(mgmt.get());
  if (o.fetch_map) PS_RETURN_IF_ERROR(view->Refresh());
  caller = std::make_unique<UcxRpcCaller>(rpc.get());
  shards = std::make_unique<ShardClient>(caller.get(), view.get(), o.timeout);
  shards->set_capabilities(caps.get());
  io = std::make_unique<StripeIo>(shards.get(), view.get(), o.straggler);
  return OkStatus();
}

}  // namespace penstock

// data_path.h — the parts every user of the data plane assembles, in dependency order: the mgmt
// connection, the UCX client, the cluster map view, the capability cache, the shard client and
// stripe I/O. Used by the Client and by mgmt's repair service.
//
// Members are destroyed in reverse order (stripe I/O first, the mgmt connection last). Not
// thread-safe to Open; the parts are thread-safe once open.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "client/capability_cache.h"
#include "client/cluster_view.h"
#include "client/rpc_caller.h"
#include "client/shard_client.h"
#include "client/stripe_io.h"
#include "mgmt_client/mgmt_client.h"
#include "mgmt_client/tls.h"
#include "transport/rpc_client.h"

namespace penstock {

struct DataPathOptions {
  std::string mgmt_address;
  std::string api_key;  // "" : none (clusters without --auth)
  TlsOptions tls;       // to mgmt
  std::chrono::milliseconds timeout{30000};    // data-plane requests, retry budget
  std::chrono::milliseconds straggler{2000};   // see StripeIo
  unsigned workers = 1;                         // data-plane workers (RpcClientOptions)
  std::vector<std::string> net_devices;
  bool local_direct = true;                  // RpcClientOptions::local_direct
  // Load the map in Open (a client needs it at once; mgmt's repair service, which may start on
  // a follower, loads it when it runs a pass).
  bool fetch_map = true;
};

struct DataPath {
  // Connects to mgmt, loads the map (see fetch_map) and creates the rest. Errors: those of
  // MgmtClient::Connect, RpcClient::Create and the first map fetch.
  Status Open(const DataPathOptions& options);

  std::unique_ptr<MgmtClient> mgmt;
  std::unique_ptr<RpcClient> rpc;
  std::unique_ptr<UcxRpcCaller> caller;
  std::unique_ptr<ClusterView> view;
  std::unique_ptr<CapabilityCache> caps;
  std::unique_ptr<ShardClient> shards;
  std::unique_ptr<StripeIo> io;
};

}  // namespace penstock

// cluster_map_watch.h — a running subscription to the cluster map (MgmtClient::WatchClusterMap).
//
// A background thread holds a WatchClusterMap stream open to the mgmt leader and calls the
// callback with every newer map it receives. When the stream breaks (leader killed, stepped
// down, mgmt restarted) it re-discovers the leader through its MgmtClient and re-subscribes
// with the last epoch it delivered, so no epoch is delivered twice and none is missed for
// long: after a failover the new leader sends its map at once if its epoch is newer.
//
// Thread safety: Stop() may be called from any thread but not from the callback; the
// destructor calls it. Ownership: the MgmtClient is borrowed and must outlive the watch.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "penstock/mgmt.pb.h"

namespace grpc {
class ClientContext;
}

namespace penstock {

class MgmtClient;

class ClusterMapWatch {
 public:
  ~ClusterMapWatch();
  ClusterMapWatch(const ClusterMapWatch&) = delete;
  ClusterMapWatch& operator=(const ClusterMapWatch&) = delete;

  // Ends the stream and joins the thread; no callback runs after it returns. Idempotent.
  void Stop();
  // The epoch of the last map delivered (the `since_epoch` given until then).
  uint64_t epoch() const;

 private:
  friend class MgmtClient;
  ClusterMapWatch(MgmtClient* client, std::function<void(v1::ClusterMap)> on_map,
                  uint64_t since_epoch);
  void Run();

  MgmtClient* const client_;
  const std::function<void(v1::ClusterMap)> on_map_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;                     // guarded by mu_
  uint64_t epoch_ = 0;                        // guarded by mu_
  std::unique_ptr<grpc::ClientContext> ctx_;  // the open stream's; guarded by mu_
  std::thread thread_;
};

}  // namespace penstock

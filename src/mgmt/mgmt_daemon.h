// mgmt_daemon.h — the whole `penstock mgmt` process as a library: the MgmtServer (cluster state,
// gRPC service, failure detector, /metrics; mgmt_server.h) and beside it the repair service
// (repair/repairer.h), wired to each other.
//
// Start() starts the server, then the Repairer. The Repairer talks to this mgmt over gRPC like
// any client (with the admin key, and mgmt's own TLS certificate: one CA signs both) and runs
// passes only while this instance leads; it reports back in-process: a clean pass clears
// recovering flags (ClusterState::MarkRecovered), a pass that found every shard on the slots of
// the newest placement settles it (ClusterState::MarkPlacementSettled), and its progress is what
// GetStatus reports (MgmtStatus.repair, `penstock status`). Repair writes its metrics into the
// server's registry, so one /metrics endpoint shows both. The daemon's main() is Start(), then
// Stop() once SIGINT/SIGTERM arrives.
//
// Ownership: the daemon owns the server (and through it the state) and the repair service.
// Thread safety: server() may be called from any thread; Stop() too, more than once, and it
// unblocks Wait(). The destructor calls Stop().
// Namespace: penstock, like MgmtServer.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>

#include "mgmt/mgmt_server.h"
#include "penstock/status.h"

namespace penstock {

class Repairer;

struct MgmtDaemonOptions {
  MgmtServerOptions server;
  // Pause between repair passes when the map does not change (passes also run on every change).
  std::chrono::milliseconds repair_interval{30000};
  // Repair write traffic limit, bytes per second; 0: unlimited.
  uint64_t repair_rate_bytes_per_s = 0;
};

class MgmtDaemon {
 public:
  // Errors: those of MgmtServer::Start; those of Repairer::Start, in the context "starting the
  // repair service" (the server is shut down again first).
  static Result<std::unique_ptr<MgmtDaemon>> Start(const MgmtDaemonOptions& options);
  ~MgmtDaemon();
  MgmtDaemon(const MgmtDaemon&) = delete;
  MgmtDaemon& operator=(const MgmtDaemon&) = delete;

  // The mgmt server (its address, state and metrics; for in-process tools and tests).
  MgmtServer* server() const { return server_.get(); }

  // Blocks until Stop() has been called and the server has stopped.
  void Wait();
  // Stops the repair service (after its current pass), then the server.
  void Stop();

 private:
  MgmtDaemon() = default;

  std::unique_ptr<MgmtServer> server_;
  std::unique_ptr<Repairer> repair_;
  std::mutex stop_mu_;  // one Stop() at a time
};

}  // namespace penstock

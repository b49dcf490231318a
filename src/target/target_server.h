// target_server.h — one `penstock target`: a storage engine over one data file or device,
// served on the UCX data plane, registered with mgmt and kept alive there by heartbeats,
// with Prometheus /metrics.
//
// Layout of the data dir: target.uuid (stable identity across restarts), data.img (the data
// file, unless --device names a block device), index/ (RocksDB).
// Start() returns once the target serves I/O and mgmt has accepted its registration.
// Shutdown() is idempotent and thread-safe; the destructor calls it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/http_server.h"
#include "common/metrics.h"
#include "engine/engine.h"
#include "mgmt_client/tls.h"
#include "penstock/status.h"

namespace penstock {

class MgmtClient;
class RpcServer;
struct RpcRail;
class ShardService;

struct TargetOptions {
  std::string data_dir;
  std::string device;           // block device or file to use instead of <data_dir>/data.img
  // "file" (the device or data file above) or "null": no media, like fio's null engine (writes
  // are accounted and dropped, reads return zeros; the index is kept), for data-plane benchmarks.
  std::string device_kind = "file";
  std::string mgmt;             // mgmt address host:port
  std::string listen_host = "127.0.0.1";  // data plane (without rails) and /metrics
  // Multi-rail data plane: "HOST[@DEVICES];..." (ParseRails, rpc_server.h), one listener per
  // network, each with its own UCX context on its devices and data_workers workers; the
  // address registered with mgmt lists them all. "": one listener on listen_host.
  std::string rails;
  uint16_t port = 0;            // data-plane (UCX) port (every rail's); 0 picks free ones
  uint16_t metrics_port = 0;    // /metrics port; 0 picks a free one
  uint64_t capacity_bytes = 1ull << 30;
  uint64_t segment_bytes = 64ull << 20;
  std::string fault_domain;     // defaults to the target's uuid (every target its own domain)
  unsigned io_threads = 4;
  unsigned data_workers = 1;    // data-plane workers (threads) serving connections (RpcServer)
  // Request payload bytes held at once (received, not yet answered); beyond it senders wait
  // (RpcServerOptions::max_incoming_bytes: the bound on the target's memory under incast).
  uint64_t max_incoming_bytes = uint64_t{256} << 20;
  // Bytes of request and reply buffers kept resident and registered with the engine's
  // io_uring rings (BufferPool::ReserveArena; 0: none): I/O from them skips the kernel's page
  // pinning. Process-wide: the first target in a process sets it.
  uint64_t registered_buffer_bytes = uint64_t{32} << 20;
  uint64_t gc_rate_bytes_per_sec = 64ull << 20;  // background GC relocation rate (0: unlimited)
  uint64_t scrub_rate_bytes_per_sec = 16ull << 20;  // background scrub rate (0: off)
  uint64_t zero_rate_bytes_per_sec = 64ull << 20;   // background zeroing rate when busy (0: off)
  int heartbeat_ms = 1000;
  int register_timeout_ms = 10000;  // how long to retry the first registration with mgmt
  TlsOptions tls;               // TLS to mgmt (mgmt/tls.h); empty: plaintext
  std::string admin_key;        // mgmt's admin API key (clusters run with --auth); "" : none
};

class TargetServer {
 public:
  // Errors name the failing thing: data dir not writable, port in use, mgmt unreachable.
  static Result<std::unique_ptr<TargetServer>> Start(const TargetOptions& options);
  ~TargetServer();

  void Shutdown();
  // Blocks until Shutdown() is called from another thread (or a signal handler's thread).
  void Wait();

  uint32_t target_id() const { return target_id_.load(); }
  const std::string& uuid() const { return uuid_; }
  std::string address() const;
  uint16_t metrics_port() const;
  // The placement epoch from mgmt that the data plane enforces (ShardService).
  uint64_t placement_epoch() const;

 private:
  // Start's steps: the engine's figures as metrics; the shard service on the data plane.
  void AddEngineGauges();
  Status ServeDataPlane(std::vector<RpcRail> rails);
  TargetServer() = default;
  Status Register();
  void HeartbeatLoop();

  TargetOptions options_;
  std::string uuid_;
  std::atomic<uint32_t> target_id_{0};
  bool lost_logged_ = false;  // the heartbeat thread's: mgmt said this target was declared lost
  MetricsRegistry metrics_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ShardService> service_;
  std::unique_ptr<RpcServer> rpc_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<MgmtClient> mgmt_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread heartbeat_;
};

// Reads <data_dir>/target.uuid, creating it with a fresh random uuid the first time.
// Errors: kPermissionDenied naming the dir when it cannot be created or written.
Result<std::string> LoadOrCreateTargetUuid(const std::string& data_dir);

}  // namespace penstock

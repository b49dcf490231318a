#include "target/target_server.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/buffer_pool.h"
#include "common/log.h"
#include "mgmt_client/mgmt_client.h"
#include "target/shard_service.h"
#include "transport/rpc_server.h"

namespace penstock {

namespace fs = std::filesystem;

Result<std::string> LoadOrCreateTargetUuid(const std::string& data_dir) {
  std::error_code ec;
  fs::create_directories(data_dir, ec);
  if (ec) {
    return PermissionDenied("data dir '" + data_dir + "' cannot be created: " + ec.message() +
                            "; choose another with --data-dir or fix its permissions");
  }
  if (::access(data_dir.c_str(), W_OK) != 0) {
    return PermissionDenied("data dir '" + data_dir +
                            "' is not writable; choose another with --data-dir or fix its "
                            "permissions");
  }
  std::string path = data_dir + "/target.uuid";
  {
    std::ifstream in(path);
    std::string uuid;
    if (in && std::getline(in, uuid) && uuid.size() == 36) return uuid;
  }
  std::random_device rd;
  std::mt19937_64 rng((static_cast<uint64_t>(rd()) << 32) ^ rd());
  uint64_t a = rng(), b = rng();
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                static_cast<unsigned>(0x8000 | ((b >> 48) & 0x3fff)),
                static_cast<unsigned long long>(b & 0xffffffffffffull));
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << buf << "\n";
    out.flush();
    if (!out) return PermissionDenied("cannot write '" + tmp + "'; check the data dir permissions");
  }
  int fd = ::open(tmp.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  fs::rename(tmp, path, ec);
  if (ec) return PermissionDenied("cannot create '" + path + "': " + ec.message());
  return std::string(buf);
}

namespace {

EngineOptions EngineOptionsFor(const TargetOptions& options) {
  EngineOptions eo;
  eo.data_path = options.device.empty() ? options.data_dir + "/data.img" : options.device;
  eo.index_dir = options.data_dir + "/index";
  eo.device_kind = options.device_kind;
  if (options.device_kind == "null") eo.data_path.clear();
  eo.capacity_bytes = options.capacity_bytes;
  eo.segment_bytes = options.segment_bytes;
  eo.gc_rate_bytes_per_sec = options.gc_rate_bytes_per_sec;
  eo.scrub_rate_bytes_per_sec = options.scrub_rate_bytes_per_sec;
  eo.zero_rate_bytes_per_sec = options.zero_rate_bytes_per_sec;
  return eo;
}

// After a kill -9 the kernel may hold the dead process's lock on the data file for a moment
// (while it tears down its io_uring): retry briefly before giving up.
Result<std::unique_ptr<Engine>> OpenEngine(const EngineOptions& eo) {
  auto open_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    auto engine = Engine::Open(eo);
    if (engine.ok()) return engine;
    if (engine.status().code() != StatusCode::kUnavailable ||
        std::chrono::steady_clock::now() >= open_deadline) {
      return engine.status();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

void TargetServer::AddEngineGauges() {
  Engine* engine = engine_.get();
  auto gauge = [this, engine](const char* name, const char* help, auto field) {
    metrics_.AddCallbackGauge(name, help, {}, [engine, field] {
      return static_cast<double>(engine->Stats().*field);
    });
  };
  gauge("penstock_target_capacity_bytes", "Device capacity.", &EngineStats::capacity_bytes);
  gauge("penstock_target_used_bytes", "Bytes in segments that are not free.", &EngineStats::used_bytes);
  gauge("penstock_target_live_bytes", "Bytes of live shard data.", &EngineStats::live_bytes);
  gauge("penstock_target_dead_bytes", "Bytes of overwritten or deleted data not yet reclaimed.",
        &EngineStats::dead_bytes);
  gauge("penstock_target_shards", "Shards stored.", &EngineStats::shards);
  gauge("penstock_engine_checksum_errors", "Blocks that failed their crc32c on read.",
        &EngineStats::checksum_errors);
  gauge("penstock_engine_registered_buffer_ios", "Device reads and writes from io_uring registered buffers.",
        &EngineStats::registered_buffer_ios);
  gauge("penstock_engine_gc_segments_cleaned", "Segments reclaimed by garbage collection.",
        &EngineStats::gc_segments_cleaned);
  gauge("penstock_engine_gc_bytes_moved", "Live bytes relocated by garbage collection.",
        &EngineStats::gc_bytes_moved);
  gauge("penstock_engine_write_amplification", "Bytes written to the device per byte written by users.",
        &EngineStats::write_amplification);
  gauge("penstock_engine_device_bytes_written", "Bytes written to the device (data and GC).",
        &EngineStats::device_bytes_written);
  gauge("penstock_engine_commit_batches", "Group commits (one device flush and index batch each).",
        &EngineStats::commit_batches);
  gauge("penstock_engine_segment_owner_entries",
        "Runs GC can find by segment, held in memory (about 56 bytes each).",
        &EngineStats::segment_owner_entries);
  gauge("penstock_engine_index_lookups", "Index record lookups (reads, stats, the committer's "
        "misses, GC).", &EngineStats::index_lookups);
  gauge("penstock_engine_index_cache_hits", "Index record lookups answered by its record cache.",
        &EngineStats::index_cache_hits);
  gauge("penstock_engine_commit_ops", "Writes and deletes made durable by group commits.",
        &EngineStats::commit_ops);
  gauge("penstock_engine_commit_overlapped", "Group commits started while an earlier one was still "
        "being written and flushed.", &EngineStats::commit_overlapped);
  gauge("penstock_engine_commit_redone", "Requests written again because a group commit before "
        "theirs failed.", &EngineStats::commit_redone);
  gauge("penstock_engine_scrub_bytes_verified", "Bytes verified by the background scrub.",
        &EngineStats::scrub_bytes_verified);
  gauge("penstock_engine_scrub_corrupt_shards", "Shards the scrub found corrupt.",
        &EngineStats::scrub_corrupt_shards);
  gauge("penstock_target_free_segments", "Free segments.", &EngineStats::free_segments);
  gauge("penstock_engine_zero_pending_segments",
        "Segments holding never-written space that background zeroing has still to write.",
        &EngineStats::zero_pending_segments);
  gauge("penstock_engine_zeroed_bytes", "Bytes written with zeros by background zeroing.",
        &EngineStats::zeroed_bytes);
}

Status TargetServer::ServeDataPlane(std::vector<RpcRail> rails) {
  service_ = std::make_unique<ShardService>(engine_.get(), &metrics_, options_.io_threads);
  RpcServerOptions ro;
  ro.max_incoming_bytes = options_.max_incoming_bytes;
  ro.host = options_.listen_host;
  ro.port = options_.port;
  ro.metrics = &metrics_;
  ro.workers = options_.data_workers;
  ro.rails = std::move(rails);
  // Reads started on a transport thread complete on it (no hand-off from the device's
  // completion thread before the reply goes out).
  ro.on_worker_start = [](const RpcServerOptions::AddSource& add_source) {
    return Engine::CompleteReadsOnThisThread(add_source);
  };
  ShardService* service = service_.get();
  PS_ASSIGN_OR_RETURN(rpc_, RpcServer::Start(ro, [service](RpcRequest req, Responder respond) {
                        service->Handle(std::move(req), std::move(respond));
                      }));
  return OkStatus();
}

Result<std::unique_ptr<TargetServer>> TargetServer::Start(const TargetOptions& options) {
  if (options.mgmt.empty()) {
    return InvalidArgument("no mgmt address; pass --mgmt HOST:PORT (or set PENSTOCK_MGMT)");
  }
  std::vector<RpcRail> rails;
  if (!options.rails.empty()) {
    PS_ASSIGN_OR_RETURN(rails, ParseRails(options.rails));
  }
  std::unique_ptr<TargetServer> t(new TargetServer());
  t->options_ = options;
  PS_ASSIGN_OR_RETURN(t->uuid_, LoadOrCreateTargetUuid(options.data_dir));
  if (t->options_.fault_domain.empty()) t->options_.fault_domain = t->uuid_;

  // The buffer arena the engine's io_uring rings register (made before the engine, whose
  // rings register it as they are made); request and reply buffers come from it first.
  if (options.registered_buffer_bytes > 0) {
    if (Status s = BufferPool::Global().ReserveArena(options.registered_buffer_bytes);
        !s.ok() && s.code() != StatusCode::kAlreadyExists) {
      PS_LOG_WARN("registered buffers off: {}", s.ToString());
    }
  }
  const EngineOptions eo = EngineOptionsFor(options);
  PS_ASSIGN_OR_RETURN(t->engine_, OpenEngine(eo));
  t->AddEngineGauges();
  PS_RETURN_IF_ERROR(t->ServeDataPlane(std::move(rails)));
  PS_ASSIGN_OR_RETURN(t->http_, HttpServer::Start(options.listen_host, options.metrics_port, &t->metrics_, "--metrics-port"));

  PS_RETURN_IF_ERROR(t->Register());
  t->heartbeat_ = std::thread([raw = t.get()] { raw->HeartbeatLoop(); });
  PS_LOG_INFO("target {} (uuid {}) serving on {} (metrics :{}), data {}", t->target_id(), t->uuid_,
              t->address(), t->metrics_port(), eo.data_path);
  return t;
}

std::string TargetServer::address() const { return rpc_->address(); }
uint16_t TargetServer::metrics_port() const { return http_->port(); }

namespace {

CapabilityKeySet FromProto(const v1::ClusterKeySet& ks) {
  CapabilityKeySet out;
  out.auth_enabled = ks.auth_enabled();
  for (const auto& k : ks.keys()) out.keys.push_back(ClusterKey{k.id(), k.secret()});
  out.revoked_tenants.assign(ks.revoked_tenants().begin(), ks.revoked_tenants().end());
  return out;
}

}  // namespace

Status TargetServer::Register() {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.register_timeout_ms);
  Status last;
  for (;;) {
    if (!mgmt_) {
      auto c = MgmtClient::Connect(options_.mgmt, std::chrono::milliseconds(5000), options_.tls);
      if (c.ok()) {
        mgmt_ = std::move(*c);
        mgmt_->set_api_key(options_.admin_key);
      } else {
        last = c.status();
        if (!last.retryable()) return last;  // e.g. a TLS file that cannot be used
      }
    }
    if (mgmt_) {
      v1::RegisterTargetRequest req;
      req.set_uuid(uuid_);
      req.set_address(rpc_->address());
      req.set_metrics_address(options_.listen_host + ":" + std::to_string(http_->port()));
      req.set_capacity_bytes(engine_->Stats().capacity_bytes);
      req.set_fault_domain(options_.fault_domain);
      auto r = mgmt_->RegisterTarget(req);
      if (r.ok()) {
        target_id_ = r->target_id();
        service_->SetPlacementEpoch(r->placement_epoch());
        service_->SetKeySet(FromProto(r->key_set()));
        return OkStatus();
      }
      last = r.status();
      if (!last.retryable()) return last.WithContext("registering with mgmt at " + options_.mgmt);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Unavailable("cannot register with mgmt at " + options_.mgmt + " (" + last.message() +
                         "); is `penstock mgmt` running there? check --mgmt");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

uint64_t TargetServer::placement_epoch() const { return service_->placement_epoch(); }

void TargetServer::HeartbeatLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(options_.heartbeat_ms));
    if (stopping_) break;
    lock.unlock();
    EngineStats st = engine_->Stats();
    v1::HeartbeatRequest req;
    req.set_target_id(target_id_);
    req.set_uuid(uuid_);
    req.set_used_bytes(st.used_bytes);
    req.set_live_bytes(st.live_bytes);
    req.set_dead_bytes(st.dead_bytes);
    req.set_capacity_bytes(st.capacity_bytes);
    req.set_shards(st.shards);
    // Corrupt shards (scrub or reads) reach mgmt with every heartbeat, for repair.
    std::vector<ShardKey> corrupt = engine_->CorruptShards();
    req.set_corrupt_shard_count(corrupt.size());
    for (size_t i = 0; i < corrupt.size() && i < 64; ++i) req.add_corrupt_shards(corrupt[i].ToString());
    auto r = mgmt_->Heartbeat(req);
    if (r.ok() && r->has_key_set()) service_->SetKeySet(FromProto(r->key_set()));
    if (r.ok()) service_->SetPlacementEpoch(r->placement_epoch());
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kNotFound) {
        PS_LOG_WARN("mgmt does not know this target any more; registering again");
        Status s = Register();
        if (!s.ok()) PS_LOG_WARN("re-registration failed: {}", s.ToString());
      } else if (r.status().code() == StatusCode::kFailedPrecondition) {
        // Declared lost: its slots went to other targets. It serves nothing from now on.
        if (!lost_logged_) PS_LOG_ERROR("{}; refusing every shard request", r.status().message());
        lost_logged_ = true;
        service_->SetLost();
      } else {
        PS_LOG_WARN("heartbeat to mgmt at {} failed: {}", options_.mgmt, r.status().ToString());
      }
    }
    lock.lock();
  }
}

void TargetServer::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
}

void TargetServer::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return stopping_; });
}

TargetServer::~TargetServer() {
  Shutdown();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (rpc_) rpc_->Stop();  // no new requests; then the service drains its queue
  service_.reset();
  if (http_) http_->Stop();
}

}  // namespace penstock

// `penstock mgmt` and `penstock target`: run a daemon in the foreground until SIGINT/SIGTERM.
// Only flags live here: the daemons assemble themselves (mgmt/mgmt_daemon.h,
// target/target_server.h).
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "common/config.h"
#include "common/log.h"

#include "mgmt/mgmt_daemon.h"
#include "protocol/object_head.h"
#include "target/target_server.h"

namespace penstock::cli {

namespace {

struct MgmtFlags {
  std::string config;
  std::string listen = "127.0.0.1:7000";
  std::string metrics_listen = "127.0.0.1:7001";
  std::string data_dir;
  std::string meta;
  int heartbeat_timeout_ms = 5000;
  int64_t lost_timeout_ms = 0;
  int repair_interval_ms = 30000;
  int64_t orphan_grace_ms = kOrphanGrace.count();
  std::string repair_rate = "0";
  std::string log_level = "info";
  bool auth = false;
  std::string admin_key;
  std::string admin_key_file;
  int64_t token_ttl_ms = 5 * 60 * 1000;
  TlsOptions tls;
};

struct TargetFlags {
  std::string config;
  std::string data_dir;
  std::string device;
  std::string device_kind = "file";
  std::string mgmt = "127.0.0.1:7000";
  std::string listen_host = "127.0.0.1";
  int port = 7010;
  int metrics_port = 7011;
  std::string capacity = "1G";
  std::string segment_size = "64M";
  std::string fault_domain;
  unsigned io_threads = 4;
  unsigned data_workers = 1;
  std::string max_incoming = "256M";
  std::string registered_buffers = "32M";
  std::string rails;
  std::string gc_rate = "64M";
  std::string scrub_rate = "16M";
  std::string zero_rate = "64M";
  int heartbeat_ms = 1000;
  std::string log_level = "info";
  TlsOptions tls;
  std::string admin_key;
  std::string admin_key_file;
};

// The admin key from --admin-key-file (its first line) when given, else `key`.
Result<std::string> AdminKey(const std::string& key, const std::string& file) {
  if (file.empty()) return key;
  std::string line;
  std::ifstream in(file);
  if (!in || !std::getline(in, line) || line.empty()) {
    return InvalidArgument("cannot read an admin key from '" + file + "'; fix --admin-key-file");
  }
  return line;
}

// The daemon these flags ask for, but for the admin key (AdminKey reads it).
MgmtDaemonOptions ToDaemonOptions(const MgmtFlags& f, uint64_t repair_rate) {
  MgmtDaemonOptions d;
  MgmtServerOptions& o = d.server;
  o.listen = f.listen;
  o.metrics_listen = f.metrics_listen;
  o.data_dir = f.data_dir;
  o.meta = f.meta;
  o.heartbeat_timeout_ms = f.heartbeat_timeout_ms;
  o.lost_timeout_ms = f.lost_timeout_ms;
  o.orphan_grace_ms = f.orphan_grace_ms;
  o.auth = f.auth;
  o.token_ttl_ms = f.token_ttl_ms;
  o.tls = f.tls;
  d.repair_interval = std::chrono::milliseconds(f.repair_interval_ms);
  d.repair_rate_bytes_per_s = repair_rate;
  return d;
}

int RunMgmt(CLI::App* app, MgmtFlags& f) {
  uint64_t repair_rate = 0;
  try {
    ApplyConfigFile(*app, f.config);
    if (f.meta.empty() || f.meta == "rocksdb") RequireSetting(*app, "data-dir");  // etcd keeps it all
    repair_rate = ParseSize(f.repair_rate, "--repair-rate");
  } catch (const CLI::ParseError& e) {
    std::cerr << "penstock mgmt: error: " << e.what() << "\n";
    return 2;
  }
  if (Status s = InitLogging("mgmt", f.log_level); !s.ok()) return ReportError(s, false);
  BlockTerminationSignals();
  MgmtDaemonOptions o = ToDaemonOptions(f, repair_rate);
  auto admin_key = AdminKey(f.admin_key, f.admin_key_file);
  if (!admin_key.ok()) return ReportError(admin_key.status(), false);
  o.server.admin_key = *admin_key;
  auto daemon = MgmtDaemon::Start(o);
  if (!daemon.ok()) return ReportError(daemon.status(), false);
  int sig = WaitForTerminationSignal();
  PS_LOG_INFO("signal {} received; shutting down", sig);
  (*daemon)->Stop();
  return 0;
}

int RunTarget(CLI::App* app, TargetFlags& f) {
  TargetOptions o;
  try {
    ApplyConfigFile(*app, f.config);
    RequireSetting(*app, "data-dir");
    o.capacity_bytes = ParseSize(f.capacity, "--capacity");
    o.segment_bytes = ParseSize(f.segment_size, "--segment-size");
    o.gc_rate_bytes_per_sec = ParseSize(f.gc_rate, "--gc-rate");
    o.scrub_rate_bytes_per_sec = ParseSize(f.scrub_rate, "--scrub-rate");
    o.zero_rate_bytes_per_sec = ParseSize(f.zero_rate, "--zero-rate");
    o.max_incoming_bytes = ParseSize(f.max_incoming, "--max-incoming");
    o.registered_buffer_bytes = ParseSize(f.registered_buffers, "--registered-buffers");
    if (o.max_incoming_bytes < (uint64_t{1} << 20)) {
      throw CLI::ValidationError("--max-incoming", "'" + f.max_incoming + "' is under 1 MiB; give at least 1M");
    }
  } catch (const CLI::ParseError& e) {
    std::cerr << "penstock target: error: " << e.what() << "\n";
    return 2;
  }
  if (Status s = InitLogging("target", f.log_level); !s.ok()) return ReportError(s, false);
  BlockTerminationSignals();
  o.data_dir = f.data_dir;
  o.device = f.device;
  o.device_kind = f.device_kind;
  if (f.device_kind == "null" && !f.device.empty()) {
    return ReportError(InvalidArgument("--device-kind null stores nothing: drop --device " + f.device), false);
  }
  o.mgmt = f.mgmt;
  o.listen_host = f.listen_host;
  o.port = static_cast<uint16_t>(f.port);
  o.metrics_port = static_cast<uint16_t>(f.metrics_port);
  o.fault_domain = f.fault_domain;
  o.io_threads = f.io_threads;
  o.data_workers = f.data_workers;
  o.rails = f.rails;
  o.heartbeat_ms = f.heartbeat_ms;
  o.tls = f.tls;
  auto admin_key = AdminKey(f.admin_key, f.admin_key_file);
  if (!admin_key.ok()) return ReportError(admin_key.status(), false);
  o.admin_key = *admin_key;
  auto server = TargetServer::Start(o);
  if (!server.ok()) return ReportError(server.status(), false);
  int sig = WaitForTerminationSignal();
  PS_LOG_INFO("signal {} received; shutting down", sig);
  server->reset();
  return 0;
}

void AddMgmtCommand(CLI::App& root, std::vector<Command>& out) {
  auto mf = std::make_shared<MgmtFlags>();
  CLI::App* m = root.add_subcommand("mgmt", "run the control-plane daemon (gRPC) in the foreground");
  EnableConfigFile(*m, &mf->config);
  AddSetting(*m, "listen", &mf->listen, "gRPC address to serve on (host:port)");
  AddSetting(*m, "metrics-listen", &mf->metrics_listen, "Prometheus /metrics address (host:port)");
  AddSetting(*m, "data-dir", &mf->data_dir, "directory for mgmt state (RocksDB); required unless --meta etcd://...");
  AddSetting(*m, "meta", &mf->meta,
             "metadata store: rocksdb (default, in --data-dir) or etcd://HOST:PORT[,HOST:PORT...] "
             "(several mgmt instances, one leader)");
  AddSetting(*m, "heartbeat-timeout-ms", &mf->heartbeat_timeout_ms,
             "mark a target down after this long without a heartbeat")
      ->check(CLI::Range(100, 3600000));
  AddSetting(*m, "lost-timeout-ms", &mf->lost_timeout_ms,
             "declare a target lost (and rebuild its shards elsewhere) after this long without a heartbeat; "
             "0: only by `penstock out`")
      ->check(CLI::Range(int64_t{0}, int64_t{30} * 86400000));
  AddSetting(*m, "repair-interval-ms", &mf->repair_interval_ms,
             "repair pass interval when the map does not change (passes also run on every map change)")
      ->check(CLI::Range(100, 86400000));
  AddSetting(*m, "orphan-grace-ms", &mf->orphan_grace_ms,
             "delete stripes no object head has named, unchanged, for this long (left by failed puts, dead "
             "clients, deletes that missed a target); puts give up after a third of it without progress")
      ->check(CLI::Range(int64_t{3000}, int64_t{30} * 86400000));
  AddSetting(*m, "repair-rate", &mf->repair_rate, "repair write traffic limit per second (e.g. 200M; 0: unlimited)");
  AddSetting(*m, "log-level", &mf->log_level, "trace|debug|info|warn|error");
  m->add_flag("--auth", mf->auth,
              "require an API key on container/tenant RPCs and a capability token on every shard request");
  AddSetting(*m, "admin-key", &mf->admin_key, "the admin API key (prefer --admin-key-file or PENSTOCK_ADMIN_KEY)");
  AddSetting(*m, "admin-key-file", &mf->admin_key_file, "file whose first line is the admin API key");
  AddSetting(*m, "token-ttl-ms", &mf->token_ttl_ms, "lifetime of capability tokens")
      ->check(CLI::Range(int64_t{1000}, int64_t{86400000}));
  AddTlsSettings(*m, &mf->tls, /*server=*/true);
  out.push_back({m, [m, mf] { return RunMgmt(m, *mf); }});
}

void AddTargetCommand(CLI::App& root, std::vector<Command>& out) {
  auto tf = std::make_shared<TargetFlags>();
  CLI::App* t = root.add_subcommand("target", "run a storage target daemon in the foreground");
  EnableConfigFile(*t, &tf->config);
  AddSetting(*t, "data-dir", &tf->data_dir, "directory for the target's data file and index; required");
  AddSetting(*t, "device", &tf->device, "block device or file to store data on (default DATA_DIR/data.img)");
  AddSetting(*t, "device-kind", &tf->device_kind,
             "file, or null: no media (writes dropped, reads return zeros) for data-plane benchmarks")
      ->check(CLI::IsMember({"file", "null"}));
  AddSetting(*t, "mgmt", &tf->mgmt, "mgmt address (host:port)");
  AddSetting(*t, "listen-host", &tf->listen_host, "address to serve the data plane on");
  AddSetting(*t, "port", &tf->port, "data-plane (UCX) port; 0 picks a free one")->check(CLI::Range(0, 65535));
  AddSetting(*t, "metrics-port", &tf->metrics_port, "Prometheus /metrics port; 0 picks a free one")
      ->check(CLI::Range(0, 65535));
  AddSetting(*t, "capacity", &tf->capacity, "size of a new data file (e.g. 1G)");
  AddSetting(*t, "segment-size", &tf->segment_size, "engine segment size (e.g. 64M)");
  AddSetting(*t, "fault-domain", &tf->fault_domain, "fault-domain label (default: the target's uuid)");
  AddSetting(*t, "io-threads", &tf->io_threads, "threads serving device I/O")->check(CLI::Range(1, 256));
  AddSetting(*t, "data-workers", &tf->data_workers, "data-plane workers (threads, one UCX worker each) serving connections")
      ->check(CLI::Range(1, 64));
  AddSetting(*t, "registered-buffers", &tf->registered_buffers,
             "request and reply buffer memory registered with io_uring (resident; 0: none), e.g. 32M");
  AddSetting(*t, "max-incoming", &tf->max_incoming,
             "request payload bytes held at once (received, not yet answered); beyond it senders wait (e.g. 256M)");
  AddSetting(*t, "rails", &tf->rails,
             "multi-rail data plane: HOST[@DEVICES];... one listener per network, each on its own "
             "UCX_NET_DEVICES (e.g. 10.0.1.2@eth1;10.0.2.2@eth2); clients' workers use them in turn "
             "(--listen-host then serves only /metrics)");
  AddSetting(*t, "gc-rate", &tf->gc_rate, "background garbage collection, bytes relocated per second (0: unlimited)");
  AddSetting(*t, "scrub-rate", &tf->scrub_rate, "background scrub, bytes verified per second (0: off)");
  AddSetting(*t, "zero-rate", &tf->zero_rate,
             "background zeroing of a new data file's never-written space, bytes per second while "
             "serving I/O (unpaced when idle; 0: off)");
  AddSetting(*t, "heartbeat-ms", &tf->heartbeat_ms, "heartbeat interval")->check(CLI::Range(50, 60000));
  AddSetting(*t, "log-level", &tf->log_level, "trace|debug|info|warn|error");
  AddSetting(*t, "admin-key", &tf->admin_key,
             "mgmt's admin API key, needed to register with a cluster run with --auth "
             "(prefer --admin-key-file or PENSTOCK_ADMIN_KEY)");
  AddSetting(*t, "admin-key-file", &tf->admin_key_file, "file whose first line is mgmt's admin API key");
  AddTlsSettings(*t, &tf->tls);
  out.push_back({t, [t, tf] { return RunTarget(t, *tf); }});
}

}  // namespace

void AddDaemonCommands(CLI::App& root, std::vector<Command>& out) {
  AddMgmtCommand(root, out);
  AddTargetCommand(root, out);
}

}  // namespace penstock::cli

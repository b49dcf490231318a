// `penstock up` and `penstock down`: start a local cluster (mgmt and N targets, background
// processes of this binary on this host) and stop it again. What `up` started is recorded in
// DATA_DIR/cluster.json (local_cluster.h), which `down` and the tests read.
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/commands.h"
#include "cli/local_cluster.h"
#include "common/config.h"
#include "mgmt/local_tls.h"
#include "mgmt/tenant_registry.h"
#include "mgmt_client/mgmt_client.h"
#include "protocol/object_head.h"

namespace penstock::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string SelfExe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "penstock";
  buf[n] = '\0';
  return buf;
}

struct UpFlags {
  int targets = 3;
  std::string data_dir;
  std::string host = "127.0.0.1";
  int base_port = 7000;
  std::string capacity = "1G";
  std::string segment_size = "64M";
  int heartbeat_timeout_ms = 5000;
  int64_t lost_timeout_ms = 0;
  int64_t orphan_grace_ms = kOrphanGrace.count();
  int repair_interval_ms = 30000;
  unsigned target_data_workers = 1;
  std::string target_device_kind = "file";
  int wait_ms = 30000;
  std::string log_level = "info";
  bool json = false;
  bool auth = false;
  bool tls = false;
};

// Ports for mgmt, mgmt metrics, then (data, metrics) per target.
Result<std::vector<uint16_t>> ChoosePorts(const UpFlags& f) {
  std::vector<uint16_t> ports;
  const size_t n = 2 + 2 * static_cast<size_t>(f.targets);
  if (f.base_port == 0) {
    while (ports.size() < n) {
      uint16_t p = PickFreePort(f.host);
      if (p == 0) return Unavailable("no free TCP port on " + f.host);
      if (std::find(ports.begin(), ports.end(), p) == ports.end()) ports.push_back(p);
    }
    return ports;
  }
  ports = {static_cast<uint16_t>(f.base_port), static_cast<uint16_t>(f.base_port + 1)};
  for (int i = 0; i < f.targets; ++i) {
    ports.push_back(static_cast<uint16_t>(f.base_port + 10 + 2 * i));
    ports.push_back(static_cast<uint16_t>(f.base_port + 11 + 2 * i));
  }
  for (uint16_t p : ports) {
    if (p == 0 || !PortIsFree(f.host, p)) {
      return Unavailable("port " + f.host + ":" + std::to_string(p) +
                         " is in use; choose other ports with --base-port (0 picks free ones)");
    }
  }
  return ports;
}

void KillAll(const ClusterRecord& r) {
  for (auto it = r.daemons.rbegin(); it != r.daemons.rend(); ++it) StopProcess(it->pid, 2000);
}

// Fails with the daemon's log tail when a process we started has exited.
Status CheckAlive(const ClusterRecord& r) {
  for (const auto& d : r.daemons) {
    if (!ProcessAlive(d.pid)) {
      return Unavailable(d.name + " (pid " + std::to_string(d.pid) + ") exited during start-up; " +
                         "its log " + d.log + " ends with:\n" + TailFile(d.log, 8));
    }
  }
  return OkStatus();
}

// `data_dir` (--data-dir), made with its logs/ directory and checked writable; as an absolute
// path.
Result<std::string> PrepareDataDir(const std::string& data_dir) {
  if (data_dir.empty()) return InvalidArgument("--data-dir is required");
  std::error_code ec;
  fs::create_directories(data_dir + "/logs", ec);
  if (ec || ::access(data_dir.c_str(), W_OK) != 0) {
    return PermissionDenied("data dir '" + data_dir + "' is not writable (" +
                            (ec ? ec.message() : std::string("permission denied")) +
                            "); choose another with --data-dir");
  }
  return fs::absolute(data_dir).lexically_normal().string();
}

// Fails when a cluster recorded in `dir` still runs (one of its daemons is a live `exe`).
Status CheckNoClusterRunning(const std::string& dir, const std::string& exe) {
  auto old = LoadClusterRecord(dir);
  if (!old.ok()) return OkStatus();
  for (const auto& d : old->daemons) {
    if (IsOurProcess(d.pid, exe)) {
      return AlreadyExists("a cluster is already running in '" + dir + "' (" + d.name + " pid " +
                           std::to_string(d.pid) + "); stop it with `penstock down --data-dir " + dir + "`");
    }
  }
  return OkStatus();
}

// --capacity and --segment-size, checked before anything starts (the targets parse them).
Status CheckSizes(const UpFlags& f) {
  try {
    ParseSize(f.capacity, "--capacity");
    ParseSize(f.segment_size, "--segment-size");
  } catch (const CLI::ValidationError& e) {
    return InvalidArgument(e.what());
  }
  return OkStatus();
}

// The admin key lives in DATA_DIR/admin.key (0600), kept across restarts of the cluster: made
// with a new key unless it holds one. Returns its path.
Result<std::string> EnsureAdminKeyFile(const std::string& dir) {
  std::string admin_key_file = dir + "/admin.key";
  std::string key;
  if (std::ifstream in(admin_key_file); in) std::getline(in, key);
  if (!key.empty()) return admin_key_file;
  key = mgmt::NewApiKey();
  int fd = ::open(admin_key_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, "cannot create '" + admin_key_file + "'");
  std::string line = key + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!ok) return ErrnoStatus(errno, "cannot write '" + admin_key_file + "'");
  return admin_key_file;
}

// What `up` starts: every daemon's record (no pids yet), mgmt first, and with --auth the file
// that holds the admin key.
struct UpPlan {
  ClusterRecord rec;
  std::string admin_key_file;
};

// mgmt's record, on ports[0] (gRPC) and ports[1] (metrics); no --auth or TLS flags yet.
DaemonRecord MgmtRecord(const UpFlags& f, const std::string& dir, const std::string& exe,
                        const std::vector<uint16_t>& ports) {
  DaemonRecord mgmt;
  mgmt.name = "mgmt";
  mgmt.address = f.host + ":" + std::to_string(ports[0]);
  mgmt.metrics = f.host + ":" + std::to_string(ports[1]);
  mgmt.log = dir + "/logs/mgmt.log";
  mgmt.argv = {exe, "mgmt", "--listen", mgmt.address, "--metrics-listen", mgmt.metrics, "--data-dir",
               dir + "/mgmt", "--heartbeat-timeout-ms", std::to_string(f.heartbeat_timeout_ms),
               "--lost-timeout-ms", std::to_string(f.lost_timeout_ms), "--repair-interval-ms",
               std::to_string(f.repair_interval_ms), "--orphan-grace-ms", std::to_string(f.orphan_grace_ms),
               "--log-level", f.log_level};
  return mgmt;
}

// Target `i`'s record (from 0), on its two ports after mgmt's; it dials the mgmt of `plan`
// with the plan's client TLS and admin key file, when there are.
DaemonRecord TargetRecord(const UpFlags& f, int i, const UpPlan& plan, const std::string& exe,
                          const std::vector<uint16_t>& ports) {
  const std::string& dir = plan.rec.data_dir;
  const TlsOptions& tls = plan.rec.client_tls;
  DaemonRecord t;
  t.name = "target-" + std::to_string(i + 1);
  uint16_t port = ports[2 + 2 * i], mport = ports[3 + 2 * i];
  t.address = f.host + ":" + std::to_string(port);
  t.metrics = f.host + ":" + std::to_string(mport);
  t.log = dir + "/logs/" + t.name + ".log";
  t.argv = {exe, "target", "--data-dir", dir + "/" + t.name, "--mgmt", plan.rec.mgmt, "--listen-host",
            f.host, "--port", std::to_string(port), "--metrics-port", std::to_string(mport),
            "--capacity", f.capacity, "--segment-size", f.segment_size, "--log-level", f.log_level,
            "--data-workers", std::to_string(f.target_data_workers), "--device-kind", f.target_device_kind};
  if (tls.enabled()) {
    t.argv.insert(t.argv.end(), {"--tls-ca", tls.ca, "--tls-cert", tls.cert, "--tls-key", tls.key});
  }
  if (!plan.admin_key_file.empty()) t.argv.insert(t.argv.end(), {"--admin-key-file", plan.admin_key_file});
  return t;
}

// The cluster to start in `dir`; with --auth the admin key file and with --tls the CA and
// certificates are made here.
Result<UpPlan> PlanCluster(const UpFlags& f, const std::string& dir, const std::string& exe,
                           const std::vector<uint16_t>& ports) {
  UpPlan plan;
  ClusterRecord& rec = plan.rec;
  rec.data_dir = dir;
  DaemonRecord mgmt = MgmtRecord(f, dir, exe, ports);
  rec.mgmt = mgmt.address;
  if (f.auth) {
    PS_ASSIGN_OR_RETURN(plan.admin_key_file, EnsureAdminKeyFile(dir));
    mgmt.argv.insert(mgmt.argv.end(), {"--auth", "--admin-key-file", plan.admin_key_file});
  }
  // Every daemon gets its TLS settings as flags (or none); PENSTOCK_TLS_* exported for client
  // commands in this shell must not turn a plaintext cluster's mgmt into a TLS server with the
  // client's certificate, so the daemons do not inherit them.
  for (const char* var : {"PENSTOCK_TLS_CA", "PENSTOCK_TLS_CERT", "PENSTOCK_TLS_KEY"}) ::unsetenv(var);
  if (f.tls) {
    // A fresh throw-away CA for every `up`, in DATA_DIR/tls (keys 0600).
    PS_ASSIGN_OR_RETURN(LocalTlsFiles files, GenerateLocalTls(dir + "/tls", {f.host}));
    const TlsOptions server = files.Server();
    mgmt.argv.insert(mgmt.argv.end(), {"--tls-cert", server.cert, "--tls-key", server.key, "--tls-ca", server.ca});
    rec.client_tls = files.Client();
  }
  for (int i = 0; i < f.targets; ++i) rec.daemons.push_back(TargetRecord(f, i, plan, exe, ports));
  rec.daemons.insert(rec.daemons.begin(), mgmt);
  return plan;
}

// Starts the daemons of `rec` in order (mgmt first; targets register with it as they start),
// recording each one's pid in `rec` and DATA_DIR/cluster.json.
Status SpawnCluster(ClusterRecord& rec) {
  for (auto& d : rec.daemons) {
    PS_ASSIGN_OR_RETURN(d.pid, SpawnDaemon(d.argv, d.log));
    PS_RETURN_IF_ERROR(SaveClusterRecord(rec));
  }
  return OkStatus();
}

// Waits until all f.targets targets are registered and UP (or one of the daemons exited, or
// f.wait_ms passed).
Status WaitForTargets(const ClusterRecord& rec, const UpFlags& f) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(f.wait_ms);
  Status last;
  for (;;) {
    PS_RETURN_IF_ERROR(CheckAlive(rec));
    auto mc = MgmtClient::Connect(rec.mgmt, std::chrono::milliseconds(1000), rec.client_tls);
    if (mc.ok()) {
      auto map = (*mc)->GetClusterMap();
      if (map.ok()) {
        int up = 0;
        for (const auto& t : map->targets()) up += t.state() == v1::TARGET_STATE_UP;
        if (up >= f.targets) return OkStatus();
        last = Unavailable(std::to_string(up) + " of " + std::to_string(f.targets) + " targets registered");
      } else {
        last = map.status();
      }
    } else {
      last = mc.status();
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return DeadlineExceeded("the cluster did not come up within " + std::to_string(f.wait_ms) + " ms (" +
                              last.message() + "); see the logs in " + rec.data_dir + "/logs");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// The cluster that came up: as JSON (the tests read it), or mgmt's address on stdout and how
// to use and stop the cluster on stderr.
void PrintUp(const UpPlan& plan, const UpFlags& f, bool json_out) {
  const ClusterRecord& rec = plan.rec;
  const std::string& dir = rec.data_dir;
  if (json_out) {
    json j = {{"mgmt", rec.mgmt}, {"data_dir", dir}, {"daemons", json::array()}};
    if (!plan.admin_key_file.empty()) j["admin_key_file"] = plan.admin_key_file;
    if (f.tls) {
      j["tls"] = {{"ca", rec.client_tls.ca}, {"cert", rec.client_tls.cert}, {"key", rec.client_tls.key}};
    }
    for (const auto& d : rec.daemons) {
      j["daemons"].push_back({{"name", d.name}, {"pid", d.pid}, {"address", d.address},
                              {"metrics", d.metrics}, {"log", d.log}});
    }
    PrintJson(j);
    return;
  }
  std::cout << rec.mgmt << std::endl;
  std::cerr << "penstock: cluster up: mgmt " << rec.mgmt << " and " << f.targets
            << " targets (data and logs in " << dir << "); stop it with `penstock down --data-dir "
            << dir << "`\n";
  if (f.tls) {
    std::cerr << "penstock: mgmt serves TLS and requires client certificates (in " << dir
              << "/tls); for client commands run:\n  export PENSTOCK_MGMT=" << rec.mgmt
              << " PENSTOCK_TLS_CA=" << rec.client_tls.ca << " PENSTOCK_TLS_CERT=" << rec.client_tls.cert
              << " PENSTOCK_TLS_KEY=" << rec.client_tls.key << "\n";
  }
}

int RunUp(const UpFlags& f, bool json_out) {
  auto dir = PrepareDataDir(f.data_dir);
  if (!dir.ok()) return ReportError(dir.status(), json_out);
  const std::string exe = SelfExe();
  if (Status s = CheckNoClusterRunning(*dir, exe); !s.ok()) return ReportError(s, json_out);
  if (Status s = CheckSizes(f); !s.ok()) return ReportError(s, json_out);
  auto ports = ChoosePorts(f);
  if (!ports.ok()) return ReportError(ports.status(), json_out);
  auto plan = PlanCluster(f, *dir, exe, *ports);
  if (!plan.ok()) return ReportError(plan.status(), json_out);
  Status s = SpawnCluster(plan->rec);
  if (s.ok()) s = WaitForTargets(plan->rec, f);
  if (!s.ok()) {
    KillAll(plan->rec);
    return ReportError(s, json_out);
  }
  PrintUp(*plan, f, json_out);
  return 0;
}

int RunDown(const std::string& data_dir, bool json_out) {
  std::string dir = data_dir.empty() ? data_dir : fs::absolute(data_dir).lexically_normal().string();
  auto rec = LoadClusterRecord(dir);
  if (!rec.ok()) return ReportError(rec.status(), json_out);
  std::string exe = SelfExe();
  int stopped = 0, killed = 0;
  // Targets first, then mgmt (recorded first).
  for (auto it = rec->daemons.rbegin(); it != rec->daemons.rend(); ++it) {
    if (!IsOurProcess(it->pid, exe)) continue;
    killed += StopProcess(it->pid, 10000);
    ++stopped;
  }
  std::remove(ClusterRecordPath(dir).c_str());
  if (json_out) {
    PrintJson(json{{"stopped", stopped}, {"killed", killed}});
  } else {
    std::cerr << "penstock: stopped " << stopped << " processes" << (killed ? " (" + std::to_string(killed) + " killed after 10 s)" : "")
              << "; data kept in " << dir << "\n";
  }
  return 0;
}

}  // namespace

void AddLocalClusterCommands(CLI::App& root, std::vector<Command>& out) {
  auto uf = std::make_shared<UpFlags>();
  CLI::App* up = root.add_subcommand("up", "start a local cluster (mgmt + N targets on files) in the background");
  AddSetting(*up, "targets", &uf->targets, "number of targets")->check(CLI::Range(1, 64));
  AddSetting(*up, "data-dir", &uf->data_dir, "directory for all data, logs and PIDs")->required();
  AddSetting(*up, "host", &uf->host, "address every daemon listens on");
  AddSetting(*up, "base-port", &uf->base_port,
             "mgmt port; metrics base+1, target i data base+10+2i, metrics base+11+2i (0 picks free ports)")
      ->check(CLI::Range(0, 65000));
  AddSetting(*up, "capacity", &uf->capacity, "size of each target's data file (e.g. 1G)");
  AddSetting(*up, "segment-size", &uf->segment_size, "engine segment size of each target");
  AddSetting(*up, "heartbeat-timeout-ms", &uf->heartbeat_timeout_ms, "mark a silent target down after this long")
      ->check(CLI::Range(100, 3600000));
  AddSetting(*up, "lost-timeout-ms", &uf->lost_timeout_ms,
             "declare a silent target lost and rebuild its shards after this long (0: only `penstock out`)")
      ->check(CLI::Range(int64_t{0}, int64_t{30} * 86400000));
  AddSetting(*up, "repair-interval-ms", &uf->repair_interval_ms, "mgmt's repair pass interval")
      ->check(CLI::Range(100, 86400000));
  AddSetting(*up, "orphan-grace-ms", &uf->orphan_grace_ms,
             "mgmt's grace period before it deletes stripes no object head names")
      ->check(CLI::Range(int64_t{3000}, int64_t{30} * 86400000));
  AddSetting(*up, "wait-ms", &uf->wait_ms, "how long to wait for every target to register")
      ->check(CLI::Range(100, 600000));
  AddSetting(*up, "log-level", &uf->log_level, "daemons' log level");
  AddSetting(*up, "target-data-workers", &uf->target_data_workers,
             "data-plane workers (threads) of each target")
      ->check(CLI::Range(1u, 64u));
  AddSetting(*up, "target-device-kind", &uf->target_device_kind,
             "file, or null: targets with no media (writes dropped, reads return zeros), for data-plane benchmarks")
      ->check(CLI::IsMember({"file", "null"}));
  up->add_flag("--json", uf->json, "print the result as JSON");
  up->add_flag("--auth", uf->auth,
               "require API keys and capability tokens; the admin key is written to DATA_DIR/admin.key");
  up->add_flag("--tls", uf->tls,
               "TLS with client certificates on the control plane; a throw-away CA and certificates go to "
               "DATA_DIR/tls");
  out.push_back({up, [uf] { return RunUp(*uf, uf->json); }});

  auto down_opts = std::make_shared<UpFlags>();
  CLI::App* down = root.add_subcommand("down", "stop the local cluster recorded in a data dir");
  AddSetting(*down, "data-dir", &down_opts->data_dir, "the data dir given to `penstock up`")->required();
  down->add_flag("--json", down_opts->json, "print the result as JSON");
  out.push_back({down, [down_opts] { return RunDown(down_opts->data_dir, down_opts->json); }});
}

}  // namespace penstock::cli

// `penstock up` and `penstock down`: start a local cluster (mgmt and N targets, background
// processes of this binary on this host) and stop it again. What `up` started is recorded in
// DATA_DIR/cluster.json (local_cluster.h), which `down` and the tests read. mgmt starts first;
// the targets are laid out against its map and named after their ids (up_targets.h).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/commands.h"
#include "cli/local_cluster.h"
#include "cli/up_targets.h"
#include "common/config.h"
#include "mgmt/local_tls.h"
#include "mgmt_client/mgmt_client.h"
#include "protocol/object_head.h"

namespace penstock::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct UpFlags {
  int targets = 3;
  std::string data_dir;
  std::string host = "127.0.0.1";
  int base_port = 7000;
  std::string capacity = "auto";
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

// What `up` starts: every daemon's record, mgmt first; with --auth the file that holds the
// admin key; the targets as laid out against mgmt's map (up_targets.h).
struct UpPlan {
  ClusterRecord rec;
  std::string admin_key_file;
  std::string capacity;  // of each new target's data file
  TargetLayout layout;
};

// mgmt's record, on ports[0] (gRPC) and ports[1] (metrics); no --auth or TLS flags yet.
DaemonRecord MgmtRecord(const UpFlags& f, const std::string& dir, const std::string& exe,
                        std::pair<uint16_t, uint16_t> ports) {
  DaemonRecord mgmt;
  mgmt.name = "mgmt";
  mgmt.address = f.host + ":" + std::to_string(ports.first);
  mgmt.metrics = f.host + ":" + std::to_string(ports.second);
  mgmt.log = dir + "/logs/mgmt.log";
  mgmt.argv = {exe, "mgmt", "--listen", mgmt.address, "--metrics-listen", mgmt.metrics, "--data-dir",
               dir + "/mgmt", "--heartbeat-timeout-ms", std::to_string(f.heartbeat_timeout_ms),
               "--lost-timeout-ms", std::to_string(f.lost_timeout_ms), "--repair-interval-ms",
               std::to_string(f.repair_interval_ms), "--orphan-grace-ms", std::to_string(f.orphan_grace_ms),
               "--log-level", f.log_level};
  return mgmt;
}

// Target `id`'s record, named, logged and kept in DATA_DIR/target-ID; it dials the mgmt of
// `plan` with the plan's client TLS and admin key file, when there are.
DaemonRecord TargetRecord(const UpFlags& f, uint32_t id, const UpPlan& plan, const std::string& exe,
                          std::pair<uint16_t, uint16_t> ports) {
  const std::string& dir = plan.rec.data_dir;
  const TlsOptions& tls = plan.rec.client_tls;
  DaemonRecord t;
  t.name = TargetName(id);
  t.address = f.host + ":" + std::to_string(ports.first);
  t.metrics = f.host + ":" + std::to_string(ports.second);
  t.log = dir + "/logs/" + t.name + ".log";
  t.argv = {exe, "target", "--data-dir", dir + "/" + t.name, "--mgmt", plan.rec.mgmt, "--listen-host",
            f.host, "--port", std::to_string(ports.first), "--metrics-port", std::to_string(ports.second),
            "--capacity", plan.capacity, "--segment-size", f.segment_size, "--log-level", f.log_level,
            "--data-workers", std::to_string(f.target_data_workers), "--device-kind", f.target_device_kind};
  if (tls.enabled()) {
    t.argv.insert(t.argv.end(), {"--tls-ca", tls.ca, "--tls-cert", tls.cert, "--tls-key", tls.key});
  }
  if (!plan.admin_key_file.empty()) t.argv.insert(t.argv.end(), {"--admin-key-file", plan.admin_key_file});
  return t;
}

// The cluster to start in `dir`, mgmt only so far; with --auth the admin key file and with
// --tls the CA and certificates are made here.
Result<UpPlan> PlanMgmt(const UpFlags& f, const std::string& dir, const std::string& exe, PortChooser& ports) {
  UpPlan plan;
  ClusterRecord& rec = plan.rec;
  rec.data_dir = dir;
  PS_ASSIGN_OR_RETURN(plan.capacity, ResolveCapacity(f.capacity, f.segment_size, f.targets, dir));
  PS_ASSIGN_OR_RETURN(auto mgmt_ports, ports.Mgmt());
  DaemonRecord mgmt = MgmtRecord(f, dir, exe, mgmt_ports);
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
  rec.daemons.push_back(mgmt);
  return plan;
}

// Starts `d`, records its pid, and adds it to `rec` and DATA_DIR/cluster.json.
Status Spawn(ClusterRecord& rec, DaemonRecord d) {
  PS_ASSIGN_OR_RETURN(d.pid, SpawnDaemon(d.argv, d.log));
  rec.daemons.push_back(std::move(d));
  return SaveClusterRecord(rec);
}

// Polls mgmt's map until `done(map)` says so (or fails), a daemon exits, or f.wait_ms pass.
// `waiting_for` names what is awaited, for the error.
Result<v1::ClusterMap> PollMap(const ClusterRecord& rec, const UpFlags& f, const std::string& waiting_for,
                               const std::function<Result<bool>(const v1::ClusterMap&)>& done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(f.wait_ms);
  Status last;
  for (;;) {
    PS_RETURN_IF_ERROR(CheckAlive(rec));
    auto mc = MgmtClient::Connect(rec.mgmt, std::chrono::milliseconds(1000), rec.client_tls);
    auto map = mc.ok() ? (*mc)->GetClusterMap() : Result<v1::ClusterMap>(mc.status());
    if (map.ok()) {
      PS_ASSIGN_OR_RETURN(bool ok, done(*map));
      if (ok) return *map;
      last = OkStatus();
    } else {
      last = map.status();
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return DeadlineExceeded("the cluster did not come up within " + std::to_string(f.wait_ms) + " ms (waiting for " +
                              waiting_for + (last.ok() ? "" : ": " + last.message()) + "); see the logs in " +
                              rec.data_dir + "/logs");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

const v1::Target* FindTarget(const v1::ClusterMap& map, uint32_t id) {
  for (const auto& t : map.targets()) {
    if (t.id() == id) return &t;
  }
  return nullptr;
}

// Starts new target `id` and waits until it registered, checking that mgmt gave it that id.
Status StartNewTarget(UpPlan& plan, const UpFlags& f, uint32_t id, DaemonRecord d) {
  const std::string target_dir = plan.rec.data_dir + "/" + d.name;
  PS_RETURN_IF_ERROR(Spawn(plan.rec, std::move(d)));
  auto registered = PollMap(plan.rec, f, TargetName(id) + " to register", [&](const v1::ClusterMap& map) -> Result<bool> {
    const std::string uuid = ReadTargetUuid(target_dir);
    for (const auto& t : map.targets()) {
      if (uuid.empty() || t.uuid() != uuid) continue;
      if (t.id() == id) return true;
      return FailedPrecondition("the target in " + target_dir + " registered as target " + std::to_string(t.id()) +
                                ", not " + std::to_string(id) + " (did another target join this mgmt meanwhile?); "
                                "stop the cluster with `penstock down --data-dir " + plan.rec.data_dir +
                                "` and start it again");
    }
    return false;
  });
  return registered.status();
}

// Starts mgmt, lays out the targets against its map, starts the known ones together and new
// ones one at a time (so each gets the id it is named after), and waits until all are up.
Status StartCluster(UpPlan& plan, const UpFlags& f, const std::string& exe, PortChooser& ports) {
  ClusterRecord& rec = plan.rec;
  DaemonRecord mgmt = rec.daemons.front();
  rec.daemons.clear();
  PS_RETURN_IF_ERROR(Spawn(rec, std::move(mgmt)));
  PS_ASSIGN_OR_RETURN(v1::ClusterMap map, PollMap(rec, f, "mgmt", [](const v1::ClusterMap&) { return true; }));
  PS_ASSIGN_OR_RETURN(plan.layout, LayOutTargets(rec.data_dir, map, f.targets));
  for (uint32_t id : plan.layout.restart) {
    PS_ASSIGN_OR_RETURN(auto p, ports.Target(id));
    PS_RETURN_IF_ERROR(Spawn(rec, TargetRecord(f, id, plan, exe, p)));
  }
  for (uint32_t id : plan.layout.fresh) {
    PS_ASSIGN_OR_RETURN(auto p, ports.Target(id));
    PS_RETURN_IF_ERROR(StartNewTarget(plan, f, id, TargetRecord(f, id, plan, exe, p)));
  }
  std::vector<uint32_t> started = plan.layout.restart;
  started.insert(started.end(), plan.layout.fresh.begin(), plan.layout.fresh.end());
  if (started.empty()) {
    return FailedPrecondition("no target of " + rec.data_dir + " can start: each was declared lost or has no data "
                              "dir; add new ones with --targets (more than " + std::to_string(map.targets_size()) + ")");
  }
  auto up = PollMap(rec, f, "every target to be up", [&](const v1::ClusterMap& m) -> Result<bool> {
    return std::all_of(started.begin(), started.end(), [&](uint32_t id) {
      const v1::Target* t = FindTarget(m, id);
      return t != nullptr && t->state() == v1::TARGET_STATE_UP;
    });
  });
  return up.status();
}

std::string IdList(const std::vector<uint32_t>& ids) {
  std::string s;
  for (uint32_t id : ids) s += (s.empty() ? "" : ", ") + std::to_string(id);
  return s;
}

// The line a shell evaluates for client commands: mgmt's address, and with --tls the client's
// certificate.
std::string ExportLine(const ClusterRecord& rec) {
  std::string line = "export PENSTOCK_MGMT=" + rec.mgmt;
  const TlsOptions& tls = rec.client_tls;
  if (tls.enabled()) line += " PENSTOCK_TLS_CA=" + tls.ca + " PENSTOCK_TLS_CERT=" + tls.cert + " PENSTOCK_TLS_KEY=" + tls.key;
  return line;
}

// The targets that stay stopped, and why.
json NotStartedJson(const TargetLayout& layout) {
  json j = json::array();
  for (uint32_t id : layout.lost) j.push_back({{"id", id}, {"name", TargetName(id)}, {"reason", "declared lost"}});
  for (uint32_t id : layout.missing) j.push_back({{"id", id}, {"name", TargetName(id)}, {"reason", "no data dir"}});
  return j;
}

void PrintUpJson(const UpPlan& plan, const UpFlags& f) {
  const ClusterRecord& rec = plan.rec;
  json j = {{"mgmt", rec.mgmt}, {"mgmt_metrics", rec.daemons.front().metrics}, {"data_dir", rec.data_dir},
            {"export", ExportLine(rec)}, {"capacity", plan.capacity}, {"daemons", json::array()},
            {"not_started", NotStartedJson(plan.layout)}};
  if (!plan.admin_key_file.empty()) j["admin_key_file"] = plan.admin_key_file;
  if (f.tls) j["tls"] = {{"ca", rec.client_tls.ca}, {"cert", rec.client_tls.cert}, {"key", rec.client_tls.key}};
  for (const auto& d : rec.daemons) {
    j["daemons"].push_back({{"name", d.name}, {"pid", d.pid}, {"address", d.address}, {"metrics", d.metrics},
                            {"log", d.log}});
  }
  PrintJson(j);
}

// The cluster that came up: as JSON (the tests read it), or mgmt's address on stdout (for
// `mgmt=$(penstock up ...)`) and on stderr what started, what did not, how to stop it, and the
// `export` line for client commands.
void PrintUp(const UpPlan& plan, const UpFlags& f, bool json_out) {
  if (json_out) return PrintUpJson(plan, f);
  const ClusterRecord& rec = plan.rec;
  const std::string& dir = rec.data_dir;
  const TargetLayout& layout = plan.layout;
  std::vector<uint32_t> ids = layout.restart;
  ids.insert(ids.end(), layout.fresh.begin(), layout.fresh.end());
  std::cout << rec.mgmt << std::endl;
  std::cerr << "penstock: cluster up: mgmt " << rec.mgmt << " (metrics " << rec.daemons.front().metrics
            << ") and target" << (ids.size() > 1 ? "s " : " ") << IdList(ids) << " (new data files of "
            << plan.capacity << "; data and logs in " << dir << "); stop it with `penstock down --data-dir " << dir
            << "`\n";
  if (!layout.lost.empty()) {
    std::cerr << "penstock: target" << (layout.lost.size() > 1 ? "s " : " ") << IdList(layout.lost)
              << " declared lost (`penstock out`): not started; " << (layout.lost.size() > 1 ? "their" : "its")
              << " data dirs in " << dir << " are kept (remove them to free the space)\n";
  }
  if (!layout.missing.empty()) {
    std::cerr << "penstock: target" << (layout.missing.size() > 1 ? "s " : " ") << IdList(layout.missing)
              << " in mgmt's map but no data dir in " << dir << " holds " << (layout.missing.size() > 1 ? "them" : "it")
              << ": not started (declare " << (layout.missing.size() > 1 ? "them" : "it") << " lost with `penstock out`)\n";
  }
  if (f.tls) std::cerr << "penstock: mgmt serves TLS and requires client certificates (in " << dir << "/tls)\n";
  std::cerr << "penstock: for client commands in this shell run:\n" << ExportLine(rec) << "\n";
}

int RunUp(const UpFlags& f, bool json_out) {
  auto dir = PrepareDataDir(f.data_dir);
  if (!dir.ok()) return ReportError(dir.status(), json_out);
  const std::string exe = SelfExe();
  if (Status s = CheckNoClusterRunning(*dir, exe); !s.ok()) return ReportError(s, json_out);
  PortChooser ports(f.host, f.base_port);
  auto plan = PlanMgmt(f, *dir, exe, ports);
  if (!plan.ok()) return ReportError(plan.status(), json_out);
  if (Status s = StartCluster(*plan, f, exe, ports); !s.ok()) {
    KillAll(plan->rec);
    return ReportError(s, json_out);
  }
  PrintUp(*plan, f, json_out);
  return 0;
}

int RunDown(const std::string& data_dir, bool json_out) {
  std::string dir = data_dir.empty() ? data_dir : fs::absolute(data_dir).lexically_normal().string();
  auto rec = LoadClusterRecord(dir);
  if (!rec.ok() && rec.status().code() != StatusCode::kNotFound) return ReportError(rec.status(), json_out);
  std::string exe = SelfExe();
  int stopped = 0, killed = 0;
  if (rec.ok()) {
    // Targets first, then mgmt (recorded first).
    for (auto it = rec->daemons.rbegin(); it != rec->daemons.rend(); ++it) {
      if (!IsOurProcess(it->pid, exe)) continue;
      killed += StopProcess(it->pid, 10000);
      ++stopped;
    }
    std::remove(ClusterRecordPath(dir).c_str());
  }
  if (json_out) {
    PrintJson(json{{"stopped", stopped}, {"killed", killed}});
  } else if (stopped == 0) {
    std::cerr << "penstock: no cluster is running in " << dir << "; nothing to stop\n";
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
  AddSetting(*up, "targets", &uf->targets,
             "number of targets (a data dir's earlier targets all start again; new ones make up the rest)")->check(CLI::Range(1, 64));
  AddSetting(*up, "data-dir", &uf->data_dir, "directory for all data, logs and PIDs")->required();
  AddSetting(*up, "host", &uf->host, "address every daemon listens on");
  AddSetting(*up, "base-port", &uf->base_port,
             "mgmt port; metrics base+1, target i data base+10+2i, metrics base+11+2i (0 picks free ports)")
      ->check(CLI::Range(0, 65000));
  AddSetting(*up, "capacity", &uf->capacity,
             "size of each new target's data file (e.g. 4G); auto: an eighth of the free disk space over the "
             "targets, 1-16 GiB each");
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

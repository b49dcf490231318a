// `penstock up`, `penstock down`, `penstock status`: a local cluster's life cycle and view.
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <map>
#include <thread>

#include "cli/commands.h"
#include "cli/local_cluster.h"
#include "client/transport_probe.h"
#include "common/config.h"
#include "mgmt/local_tls.h"
#include "mgmt_client/mgmt_client.h"
#include "mgmt/tenant_registry.h"
#include "protocol/object_head.h"
#include "protocol/shard_protocol.h"
#include "transport/rpc_client.h"

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

int RunUp(const UpFlags& f, bool json_out) {
  if (f.data_dir.empty()) return ReportError(InvalidArgument("--data-dir is required"), json_out);
  std::error_code ec;
  fs::create_directories(f.data_dir + "/logs", ec);
  if (ec || ::access(f.data_dir.c_str(), W_OK) != 0) {
    return ReportError(PermissionDenied("data dir '" + f.data_dir + "' is not writable (" +
                                        (ec ? ec.message() : std::string("permission denied")) +
                                        "); choose another with --data-dir"),
                       json_out);
  }
  std::string dir = fs::absolute(f.data_dir).lexically_normal().string();
  std::string exe = SelfExe();
  if (auto old = LoadClusterRecord(dir); old.ok()) {
    for (const auto& d : old->daemons) {
      if (IsOurProcess(d.pid, exe)) {
        return ReportError(AlreadyExists("a cluster is already running in '" + dir + "' (" + d.name +
                                         " pid " + std::to_string(d.pid) +
                                         "); stop it with `penstock down --data-dir " + dir + "`"),
                           json_out);
      }
    }
  }
  uint64_t capacity;
  try {
    capacity = ParseSize(f.capacity, "--capacity");
    ParseSize(f.segment_size, "--segment-size");
  } catch (const CLI::ValidationError& e) {
    return ReportError(InvalidArgument(e.what()), json_out);
  }
  (void)capacity;
  auto ports = ChoosePorts(f);
  if (!ports.ok()) return ReportError(ports.status(), json_out);

  ClusterRecord rec;
  rec.data_dir = dir;
  rec.mgmt = f.host + ":" + std::to_string((*ports)[0]);
  DaemonRecord mgmt;
  mgmt.name = "mgmt";
  mgmt.address = rec.mgmt;
  mgmt.metrics = f.host + ":" + std::to_string((*ports)[1]);
  mgmt.log = dir + "/logs/mgmt.log";
  mgmt.argv = {exe, "mgmt", "--listen", mgmt.address, "--metrics-listen", mgmt.metrics, "--data-dir",
               dir + "/mgmt", "--heartbeat-timeout-ms", std::to_string(f.heartbeat_timeout_ms),
               "--lost-timeout-ms", std::to_string(f.lost_timeout_ms), "--repair-interval-ms",
               std::to_string(f.repair_interval_ms), "--orphan-grace-ms", std::to_string(f.orphan_grace_ms),
               "--log-level", f.log_level};
  std::string admin_key_file;
  if (f.auth) {
    // The admin key lives in DATA_DIR/admin.key (0600), kept across restarts of the cluster.
    admin_key_file = dir + "/admin.key";
    std::string key;
    if (std::ifstream in(admin_key_file); in) std::getline(in, key);
    if (key.empty()) {
      key = mgmt::NewApiKey();
      int fd = ::open(admin_key_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0) return ReportError(ErrnoStatus(errno, "cannot create '" + admin_key_file + "'"), json_out);
      std::string line = key + "\n";
      bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
      ::close(fd);
      if (!ok) return ReportError(ErrnoStatus(errno, "cannot write '" + admin_key_file + "'"), json_out);
    }
    mgmt.argv.insert(mgmt.argv.end(), {"--auth", "--admin-key-file", admin_key_file});
  }
  // Every daemon gets its TLS settings as flags (or none); PENSTOCK_TLS_* exported for client
  // commands in this shell must not turn a plaintext cluster's mgmt into a TLS server with the
  // client's certificate, so the daemons do not inherit them.
  for (const char* var : {"PENSTOCK_TLS_CA", "PENSTOCK_TLS_CERT", "PENSTOCK_TLS_KEY"}) ::unsetenv(var);
  if (f.tls) {
    // A fresh throw-away CA for every `up`, in DATA_DIR/tls (keys 0600).
    auto files = GenerateLocalTls(dir + "/tls", {f.host});
    if (!files.ok()) return ReportError(files.status(), json_out);
    const TlsOptions server = files->Server();
    mgmt.argv.insert(mgmt.argv.end(),
                     {"--tls-cert", server.cert, "--tls-key", server.key, "--tls-ca", server.ca});
    rec.client_tls = files->Client();
  }
  for (int i = 0; i < f.targets; ++i) {
    DaemonRecord t;
    t.name = "target-" + std::to_string(i + 1);
    uint16_t port = (*ports)[2 + 2 * i], mport = (*ports)[3 + 2 * i];
    t.address = f.host + ":" + std::to_string(port);
    t.metrics = f.host + ":" + std::to_string(mport);
    t.log = dir + "/logs/" + t.name + ".log";
    t.argv = {exe, "target", "--data-dir", dir + "/" + t.name, "--mgmt", rec.mgmt, "--listen-host",
              f.host, "--port", std::to_string(port), "--metrics-port", std::to_string(mport),
              "--capacity", f.capacity, "--segment-size", f.segment_size, "--log-level", f.log_level,
              "--data-workers", std::to_string(f.target_data_workers), "--device-kind", f.target_device_kind};
    if (rec.client_tls.enabled()) {
      t.argv.insert(t.argv.end(), {"--tls-ca", rec.client_tls.ca, "--tls-cert", rec.client_tls.cert,
                                   "--tls-key", rec.client_tls.key});
    }
    if (!admin_key_file.empty()) t.argv.insert(t.argv.end(), {"--admin-key-file", admin_key_file});
    rec.daemons.push_back(t);
  }
  rec.daemons.insert(rec.daemons.begin(), mgmt);

  auto fail = [&](const Status& s) {
    KillAll(rec);
    return ReportError(s, json_out);
  };
  // mgmt first; targets register with it as they start.
  for (auto& d : rec.daemons) {
    auto pid = SpawnDaemon(d.argv, d.log);
    if (!pid.ok()) return fail(pid.status());
    d.pid = *pid;
    if (Status s = SaveClusterRecord(rec); !s.ok()) return fail(s);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(f.wait_ms);
  Status last;
  for (;;) {
    if (Status s = CheckAlive(rec); !s.ok()) return fail(s);
    auto mc = MgmtClient::Connect(rec.mgmt, std::chrono::milliseconds(1000), rec.client_tls);
    if (mc.ok()) {
      auto map = (*mc)->GetClusterMap();
      if (map.ok()) {
        int up = 0;
        for (const auto& t : map->targets()) up += t.state() == v1::TARGET_STATE_UP;
        if (up >= f.targets) break;
        last = Unavailable(std::to_string(up) + " of " + std::to_string(f.targets) + " targets registered");
      } else {
        last = map.status();
      }
    } else {
      last = mc.status();
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return fail(DeadlineExceeded("the cluster did not come up within " + std::to_string(f.wait_ms) +
                                   " ms (" + last.message() + "); see the logs in " + dir + "/logs"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (json_out) {
    json j = {{"mgmt", rec.mgmt}, {"data_dir", dir}, {"daemons", json::array()}};
    if (!admin_key_file.empty()) j["admin_key_file"] = admin_key_file;
    if (f.tls) {
      j["tls"] = {{"ca", rec.client_tls.ca}, {"cert", rec.client_tls.cert}, {"key", rec.client_tls.key}};
    }
    for (const auto& d : rec.daemons) {
      j["daemons"].push_back({{"name", d.name}, {"pid", d.pid}, {"address", d.address},
                              {"metrics", d.metrics}, {"log", d.log}});
    }
    PrintJson(j);
  } else {
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

// Space of a target as its last heartbeat reported it: dead = written but overwritten or
// deleted and not yet reclaimed by GC; free = not in any used segment.
uint64_t DeadBytes(const v1::Target& t) {
  if (t.has_dead_bytes()) return t.dead_bytes();  // the engine's own count
  return t.used_bytes() > t.live_bytes() ? t.used_bytes() - t.live_bytes() : 0;  // an older target
}
uint64_t FreeBytes(const v1::Target& t) {
  return t.capacity_bytes() > t.used_bytes() ? t.capacity_bytes() - t.used_bytes() : 0;
}

int RunStatus(const GlobalOptions& g) {
  auto mc = MgmtClient::Connect(g.mgmt, std::chrono::milliseconds(5000), g.tls);
  if (!mc.ok()) return ReportError(mc.status(), g.json);
  auto st = (*mc)->GetStatus();
  if (!st.ok()) return ReportError(st.status(), g.json);
  auto map = (*mc)->GetClusterMap();
  if (!map.ok()) return ReportError(map.status(), g.json);
  int up = 0, down = 0, lost = 0;
  for (const auto& t : map->targets()) {
    (t.state() == v1::TARGET_STATE_UP ? up : t.state() == v1::TARGET_STATE_LOST ? lost : down)++;
  }
  auto state_name = [](const v1::Target& t) {
    return t.state() == v1::TARGET_STATE_UP ? "up" : t.state() == v1::TARGET_STATE_LOST ? "lost" : "down";
  };
  auto transports = ProbeTransports(*map, ToClientOptions(g));
  // Recovering for some containers only (writes to them missed it): their ids.
  auto recovering_ids = [](const v1::Target& t) {
    std::vector<uint64_t> ids;
    for (const auto& rc : t.recovering_containers()) ids.push_back(rc.container_id());
    return ids;
  };
  const v1::RepairStatus& rs = st->repair();
  if (g.json) {
    json j = {{"mgmt", g.mgmt}, {"leader", st->leader_address()}, {"epoch", map->epoch()},
              {"placement_epoch", map->placement_epoch()},
              {"settled_placement_epoch", map->settled_placement_epoch()}, {"targets_up", up}, {"targets_down", down},
              {"targets_lost", lost}, {"containers", st->containers()}, {"targets", json::array()},
              {"repair", {{"state", rs.state()}, {"epoch", rs.epoch()}, {"stripes_checked", rs.stripes_checked()},
                          {"stripes_total", rs.stripes_total()}, {"shards_repaired", rs.shards_repaired()},
                          {"bytes_repaired", rs.bytes_repaired()}, {"stripes_unrecoverable", rs.stripes_unrecoverable()},
                          {"passes", rs.passes()}, {"last_pass_ms", rs.last_pass_ms()},
                          {"bytes_per_second", rs.bytes_per_second()},
                          {"total_shards_repaired", rs.total_shards_repaired()},
                          {"total_bytes_repaired", rs.total_bytes_repaired()},
                          {"last_active_epoch", rs.last_active_epoch()},
                          {"last_active_bytes", rs.last_active_bytes()},
                          {"last_active_bytes_per_second", rs.last_active_bytes_per_second()},
                          {"total_orphan_shards_deleted", rs.total_orphan_shards_deleted()},
                          {"total_orphans_collected", rs.total_orphans_collected()},
                          {"orphans_pending", rs.orphans_pending()},
                          {"total_deleted_container_shards", rs.total_deleted_container_shards()},
                          {"total_deleted_containers_emptied", rs.total_deleted_containers_emptied()},
                          {"deleted_containers_pending", rs.deleted_containers_pending()},
                          {"total_tombstones_collected", rs.total_tombstones_collected()},
                          {"tombstones_pending", rs.tombstones_pending()}}}};
    for (const auto& t : map->targets()) {
      j["targets"].push_back({{"id", t.id()}, {"uuid", t.uuid()},
                              {"state", state_name(t)},
                              {"recovering", t.recovering() || t.recovering_containers_size() > 0},
                              {"recovering_all", t.recovering()}, {"recovering_containers", recovering_ids(t)},
                              {"address", t.address()}, {"metrics", t.metrics_address()},
                              {"fault_domain", t.fault_domain()}, {"capacity_bytes", t.capacity_bytes()},
                              {"used_bytes", t.used_bytes()}, {"live_bytes", t.live_bytes()},
                              {"dead_bytes", DeadBytes(t)}, {"free_bytes", FreeBytes(t)},
                              {"corrupt_shard_count", t.corrupt_shard_count()},
                              {"corrupt_shards", std::vector<std::string>(t.corrupt_shards().begin(),
                                                                          t.corrupt_shards().end())},
                              {"transport", transports[t.id()]}});
    }
    PrintJson(j);
    return 0;
  }
  std::printf("mgmt %s (leader %s)  epoch %llu (placement %llu)  targets %d up, %d down%s  containers %llu\n",
              g.mgmt.c_str(), st->leader_address().empty() ? g.mgmt.c_str() : st->leader_address().c_str(),
              static_cast<unsigned long long>(map->epoch()), static_cast<unsigned long long>(map->placement_epoch()), up, down,
              lost ? (", " + std::to_string(lost) + " lost").c_str() : "",
              static_cast<unsigned long long>(st->containers()));
  bool unsettled_join = false;
  for (const auto& t : map->targets()) {
    unsettled_join |= t.state() != v1::TARGET_STATE_LOST && t.joined_epoch() > map->settled_placement_epoch();
  }
  if (unsettled_join) {
    std::printf("data moves: repair has not yet moved every shard to the placement of epoch %llu (done up to "
                "%llu): a target joined; reads also look where earlier placements put shards\n",
                static_cast<unsigned long long>(map->placement_epoch()),
                static_cast<unsigned long long>(map->settled_placement_epoch()));
  }
  if (!rs.state().empty()) {
    // The totals take in a pass when it ends well ("idle"); while one runs, or after one
    // failed, its own counts are not in them yet.
    const bool folded = rs.state() == "idle";
    const uint64_t all_shards = rs.total_shards_repaired() + (folded ? 0 : rs.shards_repaired());
    const uint64_t all_bytes = rs.total_bytes_repaired() + (folded ? 0 : rs.bytes_repaired());
    std::printf("repair %s: %llu/%llu stripes checked, %llu shards (%s) rewritten at %s/s, %llu unrecoverable; "
                "%llu passes, %llu shards (%s) rewritten in all\n",
                rs.state().c_str(), static_cast<unsigned long long>(rs.stripes_checked()),
                static_cast<unsigned long long>(rs.stripes_total()),
                static_cast<unsigned long long>(rs.shards_repaired()),
                HumanBytes(static_cast<double>(rs.bytes_repaired())).c_str(),
                HumanBytes(rs.bytes_per_second()).c_str(),
                static_cast<unsigned long long>(rs.stripes_unrecoverable()),
                static_cast<unsigned long long>(rs.passes()),
                static_cast<unsigned long long>(all_shards), HumanBytes(static_cast<double>(all_bytes)).c_str());
    if (rs.total_orphan_shards_deleted() > 0 || rs.orphans_pending() > 0) {
      std::printf("orphans (stripes no object names): %llu shard(s) of %llu object version(s) deleted, %llu waiting "
                  "out the grace period\n",
                  static_cast<unsigned long long>(rs.total_orphan_shards_deleted()),
                  static_cast<unsigned long long>(rs.total_orphans_collected()),
                  static_cast<unsigned long long>(rs.orphans_pending()));
    }
    if (rs.total_deleted_container_shards() > 0 || rs.deleted_containers_pending() > 0) {
      std::printf("deleted containers: %llu shard(s) of %llu container(s) deleted, %llu container(s) waiting out the "
                  "grace period\n",
                  static_cast<unsigned long long>(rs.total_deleted_container_shards()),
                  static_cast<unsigned long long>(rs.total_deleted_containers_emptied()),
                  static_cast<unsigned long long>(rs.deleted_containers_pending()));
    }
    if (rs.total_tombstones_collected() > 0 || rs.tombstones_pending() > 0) {
      std::printf("tombstones (deleted objects): %llu removed, %llu waiting out the grace period\n",
                  static_cast<unsigned long long>(rs.total_tombstones_collected()),
                  static_cast<unsigned long long>(rs.tombstones_pending()));
    }
  }
  std::printf("%-4s %-5s %-22s %10s %10s %10s %10s %10s  %s\n", "ID", "STATE", "ADDRESS", "CAPACITY", "USED",
              "LIVE", "DEAD", "FREE", "TRANSPORT");
  auto h = [](uint64_t b) { return HumanBytes(static_cast<double>(b)); };
  for (const auto& t : map->targets()) {
    const std::string state =
        std::string(state_name(t)) + (t.recovering() || t.recovering_containers_size() > 0 ? "*" : "");
    std::printf("%-4u %-5s %-22s %10s %10s %10s %10s %10s  %s\n", t.id(), state.c_str(), t.address().c_str(),
                h(t.capacity_bytes()).c_str(), h(t.used_bytes()).c_str(), h(t.live_bytes()).c_str(),
                h(DeadBytes(t)).c_str(), h(FreeBytes(t)).c_str(), transports[t.id()].c_str());
  }
  for (const auto& t : map->targets()) {
    if (t.recovering()) {
      std::printf("target %u*: recovering (restarted or missed writes): no protected reads from it until repair "
                  "has checked it\n",
                  t.id());
    } else if (t.recovering_containers_size() > 0) {
      std::string ids;
      for (uint64_t id : recovering_ids(t)) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
      std::printf("target %u*: missed writes to container id %s: no reads of %s from it until repair has checked "
                  "it\n",
                  t.id(), ids.c_str(), t.recovering_containers_size() > 1 ? "them" : "it");
    }
  }
  for (const auto& t : map->targets()) {
    if (t.corrupt_shard_count() == 0) continue;
    std::printf("target %u: %llu corrupt shard(s) found by scrub or reads, e.g. %s\n", t.id(),
                static_cast<unsigned long long>(t.corrupt_shard_count()),
                t.corrupt_shards().empty() ? "?" : t.corrupt_shards(0).c_str());
  }
  return 0;
}

struct OutFlags {
  GlobalOptions g;
  uint32_t id = 0;
};

int RunOut(const OutFlags& f) {
  auto mc = MgmtClient::Connect(f.g.mgmt, std::chrono::milliseconds(5000), f.g.tls);
  if (!mc.ok()) return ReportError(mc.status(), f.g.json);
  (*mc)->set_api_key(f.g.api_key);
  v1::MarkTargetLostRequest req;
  req.set_target_id(f.id);
  auto r = (*mc)->MarkTargetLost(req);
  if (!r.ok()) return ReportError(r.status(), f.g.json);
  if (f.g.json) {
    PrintJson(json{{"target", f.id}, {"state", "lost"}, {"epoch", r->epoch()}});
  } else {
    std::printf("target %u declared lost (epoch %llu); mgmt rebuilds its shards on the other targets — follow it "
                "with `penstock status`\n",
                f.id, static_cast<unsigned long long>(r->epoch()));
  }
  return 0;
}

}  // namespace

void AddClusterCommands(CLI::App& root, std::vector<Command>& out) {
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

  auto g = std::make_shared<GlobalOptions>();
  CLI::App* status = root.add_subcommand("status", "show mgmt, the cluster map and every target");
  AddSetting(*status, "mgmt", &g->mgmt, "mgmt address (host:port)");
  status->add_flag("--json", g->json, "print as JSON");
  AddTlsSettings(*status, &g->tls);
  out.push_back({status, [g] { return RunStatus(*g); }});

  auto of = std::make_shared<OutFlags>();
  CLI::App* o = root.add_subcommand("out", "declare a target lost for good: its shards are rebuilt on the others");
  o->add_option("ID", of->id, "target id (see `penstock status`)")->required();
  AddSetting(*o, "mgmt", &of->g.mgmt, "mgmt address (host:port)");
  AddSetting(*o, "api-key", &of->g.api_key, "the admin API key (clusters run with --auth)");
  AddTlsSettings(*o, &of->g.tls);
  o->add_flag("--json", of->g.json, "print the result as JSON");
  out.push_back({o, [of] { return RunOut(*of); }});
}

}  // namespace penstock::cli

// local_cluster.h — the processes of a local cluster started by `penstock up`, recorded in
// DATA_DIR/cluster.json so that `penstock down` stops exactly those (by PID) and tests can
// find each daemon's command line, log and addresses.
// Not thread-safe; used by the CLI's main thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mgmt_client/tls.h"
#include "penstock/status.h"

namespace penstock::cli {

struct DaemonRecord {
  std::string name;              // "mgmt", "target-1", ...
  pid_t pid = 0;
  std::vector<std::string> argv;
  std::string log;
  std::string address;           // gRPC (mgmt) or data-plane (target) address
  std::string metrics;           // host:port of /metrics
};

struct ClusterRecord {
  std::string data_dir;
  std::string mgmt;              // mgmt address
  TlsOptions client_tls;         // `up --tls`: what clients dial mgmt with; empty: plaintext
  std::vector<DaemonRecord> daemons;
};

std::string ClusterRecordPath(const std::string& data_dir);
Status SaveClusterRecord(const ClusterRecord& record);
// kNotFound when DATA_DIR has no cluster.json.
Result<ClusterRecord> LoadClusterRecord(const std::string& data_dir);

// True if `pid` is alive and is a penstock process (its /proc cmdline names `exe`),
// so a recycled PID is never signalled.
bool IsOurProcess(pid_t pid, const std::string& exe);

// Starts `argv` (argv[0] = executable) detached in its own session, with stdin from
// /dev/null and stdout/stderr appended to `log`. Returns its pid.
Result<pid_t> SpawnDaemon(const std::vector<std::string>& argv, const std::string& log);

// True while `pid` runs (false once it exited, even before it is reaped).
bool ProcessAlive(pid_t pid);

// Sends SIGTERM, waits up to `grace_ms`, then SIGKILL. Returns true if it had to kill.
bool StopProcess(pid_t pid, int grace_ms);

// Last `lines` lines of a file (for error reports).
std::string TailFile(const std::string& path, int lines);

// A TCP port that is free on `host` now (0 if none could be found), chosen below the kernel's
// ephemeral port range when it can be, so no process's ephemeral socket takes it meanwhile.
uint16_t PickFreePort(const std::string& host);
// True if `host:port` can be bound now by a listener (with SO_REUSEADDR, as every daemon binds:
// connections of an earlier cluster in TIME_WAIT on it do not count).
bool PortIsFree(const std::string& host, uint16_t port);

// The path of this binary (/proc/self/exe), which `up` starts the daemons from.
std::string SelfExe();

// `data_dir` (--data-dir), made with its logs/ directory and checked writable; as an absolute
// path.
Result<std::string> PrepareDataDir(const std::string& data_dir);

// Fails when a cluster recorded in `dir` still runs (one of its daemons is a live `exe`).
Status CheckNoClusterRunning(const std::string& dir, const std::string& exe);

// The admin key lives in DATA_DIR/admin.key (0600), kept across restarts of the cluster: made
// with a new key unless it holds one. Returns its path.
Result<std::string> EnsureAdminKeyFile(const std::string& dir);

// The ports of a local cluster's daemons: mgmt's two, then two per target. With a base port
// they follow it (target ID's at base+10+2(ID-1), so a target keeps its ports across restarts;
// each checked free); with 0 each is a free port not handed out before.
class PortChooser {
 public:
  PortChooser(std::string host, int base_port) : host_(std::move(host)), base_port_(base_port) {}

  // (gRPC or data plane, metrics). Errors: kUnavailable naming a port in use and --base-port.
  Result<std::pair<uint16_t, uint16_t>> Mgmt() { return Pair(base_port_); }
  Result<std::pair<uint16_t, uint16_t>> Target(uint32_t id) {
    return Pair(base_port_ + 10 + 2 * (static_cast<int>(id) - 1));
  }

 private:
  Result<std::pair<uint16_t, uint16_t>> Pair(int first);
  Result<uint16_t> One(int fixed);

  const std::string host_;
  const int base_port_;
  std::vector<uint16_t> taken_;
};

// --capacity of `up`'s new targets: "auto" is an eighth of the free space of `dir`'s file
// system shared by `targets`, between 1 and 16 GiB each (whole GiB): room for the README's
// `bench write` with rep:3 without taking a small disk. Other values (and --segment-size) are
// checked here, before anything starts (the targets parse them).
Result<std::string> ResolveCapacity(const std::string& capacity, const std::string& segment_size, int targets,
                                    const std::string& dir);

}  // namespace penstock::cli

// local_cluster.h — the processes of a local cluster started by `penstock up`, recorded in
// DATA_DIR/cluster.json so that `penstock down` stops exactly those (by PID) and tests can
// find each daemon's command line, log and addresses.
// Not thread-safe; used by the CLI's main thread.
#pragma once

#include <sys/types.h>

#include <string>
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
// True if `host:port` can be bound now.
bool PortIsFree(const std::string& host, uint16_t port);

}  // namespace penstock::cli

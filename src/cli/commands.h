// commands.h — the subcommands of the `penstock` binary. Each Add*Commands() declares its
// subcommands on the root app and returns handlers that main() runs after parsing.
// Handlers return the process exit code: 0 success, 1 runtime error (already printed),
// 2 bad usage. Only used from main's thread.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "mgmt_client/tls.h"
#include "penstock/client.h"
#include "penstock/status.h"

namespace penstock::cli {

// Prints `j` on one line of stdout (--json output). Object names may hold any bytes but NUL:
// bytes that are not UTF-8 come out as U+FFFD instead of throwing (nlohmann's default) and
// failing the command.
void PrintJson(const nlohmann::json& j);

struct Command {
  CLI::App* app;                 // the (sub)subcommand that selects this handler
  std::function<int()> run;
};

// Options every client-side command shares.
struct GlobalOptions {
  std::string mgmt = "127.0.0.1:7000";
  bool json = false;
  std::string log_level = "warn";
  std::string api_key;  // --api-key / PENSTOCK_API_KEY
  TlsOptions tls;       // --tls-ca/--tls-cert/--tls-key / PENSTOCK_TLS_*: TLS to mgmt
  unsigned data_workers = 1;  // --data-workers / PENSTOCK_DATA_WORKERS
  std::string net_devices;    // --net-devices / PENSTOCK_NET_DEVICES: "devs;devs;..." per worker
  bool local_direct = true;  // --local-direct / PENSTOCK_LOCAL_DIRECT
  uint64_t timeout_ms = 30000;  // --timeout-ms / PENSTOCK_TIMEOUT_MS: ClientOptions::timeout
};

// The ClientOptions these global options ask for.
ClientOptions ToClientOptions(const GlobalOptions& g);
// Declares the data-plane settings (--data-workers, --net-devices, --local-direct,
// --timeout-ms) on `app`.
void AddDataPlaneSettings(CLI::App& app, GlobalOptions& g);

// Declares --tls-ca, --tls-cert and --tls-key on `app`, bound to `*tls`: a client's (to
// verify mgmt and present a certificate), or with `server` mgmt's (to serve TLS and require
// client certificates).
void AddTlsSettings(CLI::App& app, TlsOptions* tls, bool server = false);

// Connects a client as the options ask (logging at --log-level); `stripes_in_flight` > 0
// overrides ClientOptions::max_inflight_stripes.
Result<std::unique_ptr<Client>> ConnectClient(const GlobalOptions& g, unsigned stripes_in_flight = 0);
// Declares the options every client command shares (--mgmt, --json, --log-level, --api-key,
// TLS, data plane) on `app`.
void AddClientFlags(CLI::App& app, GlobalOptions& g);

void AddDaemonCommands(CLI::App& root, std::vector<Command>& out);
// `up`, `down` (cmd_up.cc).
void AddLocalClusterCommands(CLI::App& root, std::vector<Command>& out);
// `status` (cmd_cluster.cc; it adds `out` too).
void AddStatusCommands(CLI::App& root, std::vector<Command>& out);
// `penstock out` (cmd_out.cc; AddStatusCommands adds it).
void AddOutCommand(CLI::App& root, std::vector<Command>& out);
void AddObjectCommands(CLI::App& root, std::vector<Command>& out);
void AddTenantCommands(CLI::App& root, std::vector<Command>& out);
void AddBenchCommand(CLI::App& root, std::vector<Command>& out);
// `mount`, `umount` (cmd_mount.cc).
void AddMountCommands(CLI::App& root, std::vector<Command>& out);
// `fs ls|mkdir|cp|rm|stat|du|format` (cmd_fs.cc).
void AddFsCommands(CLI::App& root, std::vector<Command>& out);

// Prints `s` as one line on stderr ("penstock: error: ..."), or as JSON on stdout with
// --json, and returns the exit code 1.
int ReportError(const Status& s, bool json);

// "1.5 GiB"
std::string HumanBytes(double bytes);

// Milliseconds since the epoch as local time in ISO 8601 with the UTC offset:
// "2026-11-29T14:03:07+01:00".
std::string LocalIsoTime(int64_t ms);

// Blocks SIGINT/SIGTERM in the calling thread (call before starting threads so they inherit
// the mask) and returns once one arrives. Used by daemons.
void BlockTerminationSignals();
int WaitForTerminationSignal();

}  // namespace penstock::cli

#include <nlohmann/json.hpp>

#include <algorithm>
#include <csignal>
#include <ctime>
#include <cstdio>
#include <iostream>

#include "cli/commands.h"

#include "common/config.h"

namespace penstock::cli {

void AddTlsSettings(CLI::App& app, TlsOptions* tls, bool server) {
  if (server) {
    AddSetting(app, "tls-cert", &tls->cert, "serve TLS with this certificate chain (PEM file)");
    AddSetting(app, "tls-key", &tls->key, "private key of --tls-cert (PEM file)");
    AddSetting(app, "tls-ca", &tls->ca,
               "require client certificates that chain to this CA (PEM file; needs --tls-cert)");
  } else {
    AddSetting(app, "tls-ca", &tls->ca, "CA (PEM file) that mgmt's certificate must chain to; turns on TLS to mgmt");
    AddSetting(app, "tls-cert", &tls->cert,
               "client certificate (PEM file) to present to mgmt; a mgmt run with --tls-ca requires one");
    AddSetting(app, "tls-key", &tls->key, "private key of --tls-cert (PEM file)");
  }
}

void AddDataPlaneSettings(CLI::App& app, GlobalOptions& g) {
  AddSetting(app, "timeout-ms", &g.timeout_ms,
             "data-plane request timeout, and how long an unreachable target is retried, in ms")
      ->check(CLI::Range(uint64_t{100}, uint64_t{3600000}));
  AddSetting(app, "data-workers", &g.data_workers,
             "data-plane workers (threads, one UCX worker each) the client spreads requests over")
      ->check(CLI::Range(1u, 64u));
  AddSetting(app, "net-devices", &g.net_devices,
             "network devices per data-plane worker, ';' between workers, ',' within one (UCX_NET_DEVICES "
             "syntax, e.g. 'mlx5_0:1;mlx5_1:1'); worker i uses entry i modulo their number");
  AddSetting(app, "local-direct", &g.local_direct,
             "let targets on this host copy data straight into and out of this process's memory "
             "(true/false)");
}

ClientOptions ToClientOptions(const GlobalOptions& g) {
  ClientOptions o;
  o.mgmt_address = g.mgmt;
  o.api_key = g.api_key;
  o.tls_ca = g.tls.ca;
  o.tls_cert = g.tls.cert;
  o.tls_key = g.tls.key;
  o.data_workers = g.data_workers;
  o.local_direct = g.local_direct;
  o.timeout = std::chrono::milliseconds(g.timeout_ms);
  size_t start = 0;
  while (!g.net_devices.empty() && start <= g.net_devices.size()) {
    const size_t end = std::min(g.net_devices.find(';', start), g.net_devices.size());
    o.net_devices.push_back(g.net_devices.substr(start, end - start));
    start = end + 1;
  }
  return o;
}

void PrintJson(const nlohmann::json& j) {
  std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

int ReportError(const Status& s, bool json) {
  if (json) {
    nlohmann::json j = {{"error", {{"code", std::string(StatusCodeName(s.code()))}, {"message", s.message()}}}};
    PrintJson(j);
  } else {
    std::cerr << "penstock: error: " << s.message() << "\n";
  }
  return 1;
}

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (bytes >= 1024 && u < 5) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

std::string LocalIsoTime(int64_t ms) {
  const time_t secs = static_cast<time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
  struct tm tm{};
  if (::localtime_r(&secs, &tm) == nullptr) return std::to_string(ms) + " ms";
  char buf[40];
  const size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S%z", &tm);
  std::string s(buf, n);
  if (s.size() >= 5) s.insert(s.size() - 2, ":");  // +0100 -> +01:00
  return s;
}

void BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForTerminationSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

}  // namespace penstock::cli

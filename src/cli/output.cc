#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdio>
#include <iostream>

#include "cli/commands.h"

namespace penstock::cli {

int ReportError(const Status& s, bool json) {
  if (json) {
    nlohmann::json j = {{"error", {{"code", std::string(StatusCodeName(s.code()))}, {"message", s.message()}}}};
    std::cout << j.dump() << std::endl;
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

// etcd_test_process.h — a real single-member etcd for tests: started on free loopback ports
// with its data in a temp dir, stopped (SIGKILL) by PID in the destructor. Test-only.
//
// If /usr/bin/etcd (or $PENSTOCK_ETCD) is missing, Start() fails with a message saying how to
// install it; tests ASSERT on it, they never skip. Not thread-safe.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <cstdlib>
#include <string>
#include <thread>

#include "common/temp_dir.h"
#include "mgmt/etcd_client.h"

namespace penstock::testing {

class EtcdProcess {
 public:
  EtcdProcess() : dir_("etcd") {}
  ~EtcdProcess() { Kill(); }

  // Empty on success, else why etcd could not be started. Ports are picked free just before
  // etcd binds them, so another process can take one in between (tests run in parallel): an
  // etcd that exits at once is started again on fresh ports, a few times.
  std::string Start() {
    const char* env = std::getenv("PENSTOCK_ETCD");
    const std::string bin = env ? env : "/usr/bin/etcd";
    if (::access(bin.c_str(), X_OK) != 0) {
      return bin + " is missing; install etcd (apt-get install -y etcd-server etcd-client, "
                   "see scripts/bootstrap.sh) to run the etcd tests";
    }
    std::string why;
    for (int attempt = 0; attempt < 3; ++attempt) {
      bool exited = false;
      why = StartOnce(bin, exited);
      if (why.empty() || !exited) return why;
    }
    return why;
  }

  void Kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  // "etcd://127.0.0.1:PORT"
  std::string endpoint() const { return "etcd://127.0.0.1:" + std::to_string(client_port_); }

 private:
  // One start on fresh ports; `exited`: etcd ended by itself (e.g. a port was taken meanwhile).
  std::string StartOnce(const std::string& bin, bool& exited) {
    client_port_ = FreePort();
    const int peer_port = FreePort();
    const std::string c = "http://127.0.0.1:" + std::to_string(client_port_);
    const std::string p = "http://127.0.0.1:" + std::to_string(peer_port);
    const std::string log = dir_.path() + "/etcd.log";
    std::error_code ec;
    std::filesystem::remove_all(dir_.path() + "/data", ec);  // a failed attempt's
    pid_ = ::fork();
    if (pid_ == 0) {
      FILE* f = std::freopen(log.c_str(), "w", stdout);
      if (f != nullptr) ::dup2(::fileno(stdout), 2);
      ::execl(bin.c_str(), bin.c_str(), "--data-dir", (dir_.path() + "/data").c_str(), "--name",
              "default", "--listen-client-urls", c.c_str(), "--advertise-client-urls", c.c_str(),
              "--listen-peer-urls", p.c_str(), "--initial-advertise-peer-urls", p.c_str(),
              "--initial-cluster", ("default=" + p).c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    auto client = mgmt::EtcdClient::Create(endpoint());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if ((*client)->Get("probe").ok()) return "";
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        exited = true;
        return "etcd exited at start on " + endpoint() + ": " + Tail(log);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "etcd did not answer on " + endpoint() + " within 20 s: " + Tail(log);
  }

  // The end of etcd's log (the temp dir goes with this object).
  static std::string Tail(const std::string& log) {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.size() > 1500 ? text.substr(text.size() - 1500) : text;
  }

  static int FreePort() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port = ntohs(a.sin_port);
    }
    ::close(fd);
    return port;
  }

  TempDir dir_;
  pid_t pid_ = -1;
  int client_port_ = 0;
};

}  // namespace penstock::testing

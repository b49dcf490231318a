// test_cluster.h — an in-process cluster for client tests: a real MgmtServer and real
// TargetServers on loopback (UCX over UCX_TLS; CTest sets tcp), and a Client connected to it.
// Test-only.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "common/temp_dir.h"
#include "mgmt/mgmt_server.h"
#include "penstock/client.h"
#include "target/target_server.h"

namespace penstock::testing {

class InProcessCluster {
 public:
  // Starts mgmt and `targets` targets; check ok() (failures are reported through gtest).
  explicit InProcessCluster(int targets = 2) : dir_("client") {
    MgmtServerOptions mo;
    mo.data_dir = dir_.path() + "/mgmt";
    mo.metrics_listen = "";
    auto m = MgmtServer::Start(mo);
    if (!m.ok()) {
      ADD_FAILURE() << m.status().ToString();
      return;
    }
    mgmt_ = std::move(*m);
    for (int i = 0; i < targets; ++i) {
      if (!AddTarget()) return;
    }
    ClientOptions co;
    co.mgmt_address = mgmt_->address();
    co.timeout = std::chrono::milliseconds(5000);
    auto c = Client::Connect(co);
    if (!c.ok()) {
      ADD_FAILURE() << c.status().ToString();
      return;
    }
    client_ = std::move(*c);
  }
  ~InProcessCluster() {
    client_.reset();
    targets_.clear();
    if (mgmt_) mgmt_->Shutdown();
  }

  // Starts one more target (a new member: placement changes); false after a gtest failure.
  bool AddTarget() {
    TargetOptions to;
    to.data_dir = dir_.path() + "/target" + std::to_string(targets_.size());
    to.mgmt = mgmt_->address();
    to.capacity_bytes = 129 << 20;
    to.segment_bytes = 4 << 20;
    target_options_.push_back(to);
    targets_.emplace_back();
    return StartTarget(targets_.size() - 1);
  }
  // Stops target `i` (its data stays); StartTarget starts it again on its data (a new port).
  void StopTarget(size_t i) { targets_.at(i).reset(); }
  bool StartTarget(size_t i) {
    auto t = TargetServer::Start(target_options_.at(i));
    if (!t.ok()) {
      ADD_FAILURE() << t.status().ToString();
      return false;
    }
    targets_.at(i) = std::move(*t);
    return true;
  }
  TargetServer& target(size_t i) { return *targets_.at(i); }
  size_t target_count() const { return targets_.size(); }

  bool ok() const { return client_ != nullptr; }
  std::string mgmt_address() const { return mgmt_->address(); }
  MgmtServer& mgmt() { return *mgmt_; }
  Client& client() { return *client_; }

 private:
  TempDir dir_;
  std::unique_ptr<MgmtServer> mgmt_;
  std::vector<TargetOptions> target_options_;
  std::vector<std::unique_ptr<TargetServer>> targets_;
  std::unique_ptr<Client> client_;
};

inline std::vector<std::byte> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = std::byte{static_cast<unsigned char>(rng())};
  return v;
}

}  // namespace penstock::testing

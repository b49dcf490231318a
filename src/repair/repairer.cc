#include "repair/repairer.h"

#include <thread>

#include "common/log.h"

namespace penstock {

using Clock = std::chrono::steady_clock;

Repairer::Repairer(const RepairOptions& options) : options_(options) {
  status_.set_state("idle");
}

Result<std::unique_ptr<Repairer>> Repairer::Start(const RepairOptions& options) {
  std::unique_ptr<Repairer> r(new Repairer(options));
  DataPathOptions dp;
  dp.mgmt_address = options.mgmt_address;
  dp.api_key = options.api_key;
  dp.tls = options.tls;
  dp.timeout = options.timeout;
  dp.fetch_map = false;  // a follower has none to give; each pass loads it
  PS_RETURN_IF_ERROR(r->dp_.Open(dp));
  // Repair reads recovering targets too: it knows each stripe's version from the listing and
  // RepairShards checks that the bytes it read are of that version.
  r->dp_.io->set_read_from_recovering(true);
  r->thread_ = std::thread([raw = r.get()] { raw->Loop(); });
  return r;
}

Repairer::~Repairer() { Stop(); }

void Repairer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

v1::RepairStatus Repairer::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void Repairer::Update(const std::function<void(v1::RepairStatus&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  fn(status_);
}

void Repairer::Loop() {
  uint64_t last_epoch = UINT64_MAX;
  auto last_pass = Clock::now() - options_.interval;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stop_; })) return;
    }
    if (Deposed()) {
      // What was noted as a leader is forgotten: leading again, every orphan waits a whole
      // grace period of new observation.
      std::lock_guard<std::mutex> lock(pass_mu_);
      orphans_.clear();
      tombstones_.clear();
      deleted_containers_.clear();
      continue;
    }
    auto map = dp_.mgmt->GetClusterMap();
    if (!map.ok()) continue;
    if (map->epoch() == last_epoch && Clock::now() - last_pass < options_.interval) continue;
    last_epoch = map->epoch();
    last_pass = Clock::now();
    Status s = RunPass();
    if (!s.ok()) {
      PS_LOG_WARN("repair pass failed: {}", s.ToString());
      Update([&](v1::RepairStatus& st) { st.set_state("failed: " + s.ToString()); });
    }
  }
}

bool Repairer::Deposed() const { return options_.is_leader && !options_.is_leader(); }

}  // namespace penstock

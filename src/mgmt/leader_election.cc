#include "mgmt/leader_election.h"

#include "common/log.h"

namespace penstock::mgmt {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

LeaderElection::LeaderElection(EtcdClient* etcd, LeaderElectionOptions options)
    : etcd_(etcd), options_(std::move(options)) {}

LeaderElection::~LeaderElection() { Stop(/*resign=*/true); }

void LeaderElection::Start() {
  Step();
  thread_ = std::thread([this] { Run(); });
}

void LeaderElection::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, options_.poll, [this] { return stopping_; })) {
    lock.unlock();
    Step();
    lock.lock();
  }
}

bool LeaderElection::is_leader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leader_;
}

std::string LeaderElection::leader_address() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leader_address_;
}

void LeaderElection::Lose(const std::string& why) {
  PS_LOG_WARN("mgmt {} lost the leadership: {}", options_.address, why);
  {
    std::lock_guard<std::mutex> lock(mu_);
    leader_ = false;
    leader_address_.clear();
  }
  term_ = 0;
  if (options_.on_lost) options_.on_lost();
}

void LeaderElection::Step() {
  bool leader;
  {
    std::lock_guard<std::mutex> lock(mu_);
    leader = leader_;
  }
  if (!KeepLease(leader)) return;
  ElectionRound(leader);
}

bool LeaderElection::KeepLease(bool leader) {
  const auto now = Clock::now();
  const auto ttl = std::chrono::milliseconds(options_.ttl_s * 1000);
  // 1. The lease: grant one, or keep ours alive every ttl/3.
  if (lease_ == 0) {
    Result<int64_t> l = etcd_->LeaseGrant(options_.ttl_s);
    if (!l.ok()) {
      PS_LOG_WARN("mgmt {}: cannot get an election lease: {}", options_.address, l.status().ToString());
      return false;
    }
    lease_ = *l;
    last_keepalive_ok_ = now;
    next_keepalive_ = now + ttl / 3;
  } else if (now >= next_keepalive_) {
    Result<int64_t> left = etcd_->LeaseKeepAlive(lease_);
    if (left.ok() && *left > 0) {
      last_keepalive_ok_ = now;
      next_keepalive_ = now + ttl / 3;
    } else if (left.ok() || left.status().code() == StatusCode::kNotFound) {
      lease_ = 0;
      if (leader) Lose("its etcd lease expired");
      return false;
    } else {
      next_keepalive_ = now + options_.poll;
      if (leader && now - last_keepalive_ok_ >= ttl) {
        Lose("no lease keep-alive for " + std::to_string(options_.ttl_s) + " s (" +
             left.status().message() + ")");
        return false;
      }
    }
  }
  return true;
}

void LeaderElection::ElectionRound(bool leader) {
  // 2. Campaign (follower) or check that the key still carries our term (leader).
  Result<EtcdTxnResult> r =
      leader ? etcd_->Txn(json::array(), json::array({etcd::Range(options_.key)}))
             : etcd_->Txn(json::array({etcd::CreateRevisionIs(options_.key, 0)}),
                          json::array({etcd::Put(options_.key, options_.address, lease_),
                                       etcd::Range(options_.key)}),
                          json::array({etcd::Range(options_.key)}));
  if (!r.ok()) {
    PS_LOG_DEBUG("mgmt {}: election round failed: {}", options_.address, r.status().ToString());
    return;
  }
  const EtcdKv* kv = !r->ranges.empty() && !r->ranges.back().empty() ? &r->ranges.back().front() : nullptr;
  if (leader) {
    if (kv == nullptr || kv->create_revision != term_) {
      Lose("the election key " + options_.key + " no longer carries its term");
    }
    return;
  }
  // A txn retried on another endpoint after a lost answer finds the key it created itself.
  const bool ours = kv != nullptr && kv->lease == lease_;
  if (!r->succeeded && !ours) {
    PS_LOG_DEBUG("mgmt {}: key {} held by {}", options_.address, options_.key, kv ? kv->value : "<none>");
    std::lock_guard<std::mutex> lock(mu_);
    leader_address_ = kv ? kv->value : "";
    return;
  }
  if (kv == nullptr) return;  // cannot happen: the txn created it
  term_ = kv->create_revision;
  Status s = options_.on_elected ? options_.on_elected(term_) : OkStatus();
  if (!s.ok()) {
    PS_LOG_ERROR("mgmt {} won the election but could not take over: {}; resigning",
                 options_.address, s.ToString());
    (void)etcd_->Txn(json::array({etcd::CreateRevisionIs(options_.key, term_)}),
                     json::array({etcd::DeleteKey(options_.key)}));
    term_ = 0;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    leader_ = true;
    leader_address_ = options_.address;
  }
  PS_LOG_INFO("mgmt {} is the leader (term {}, lease ttl {} s)", options_.address, term_,
              options_.ttl_s);
}

void LeaderElection::Stop(bool resign) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  bool leader;
  {
    std::lock_guard<std::mutex> lock(mu_);
    leader = leader_;
    leader_ = false;
  }
  if (leader && options_.on_lost) options_.on_lost();
  if (resign && lease_ != 0) {
    if (leader) {
      (void)etcd_->Txn(json::array({etcd::CreateRevisionIs(options_.key, term_)}),
                     json::array({etcd::DeleteKey(options_.key)}));
    }
    (void)etcd_->LeaseRevoke(lease_);
    lease_ = 0;
  }
}

}  // namespace penstock::mgmt

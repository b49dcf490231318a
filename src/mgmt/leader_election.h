// leader_election.h — one mgmt instance's side of the leader election over etcd.
//
// Each candidate holds an etcd lease of `ttl_s` seconds, refreshed every ttl/3. It becomes
// leader by a transaction that creates the election key (value: its gRPC address, attached to
// its lease) only if the key is absent (create_revision == 0). The key's create_revision
// identifies the term: it is handed to on_elected so the MetaStore can fence writes on it.
// Leadership ends when the lease expires (keep-alive answers TTL 0), when keep-alives have
// failed for a whole TTL (etcd unreachable: the lease may have expired server-side), or when
// the key no longer carries our term; on_lost is then called, and the candidate campaigns
// again. Followers re-check the key every `poll` and report the current leader's address.
//
// A leader that stops cleanly (Stop(resign=true)) deletes its key and revokes its lease so a
// follower takes over at once; Stop(resign=false) models a crash: the key stays until its
// lease expires.
//
// Threading: one background thread runs the loop and calls on_elected / on_lost (never
// concurrently with each other). leader_address() and is_leader() may be called from any
// thread. Ownership: the EtcdClient is borrowed and must outlive the election.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "mgmt/etcd_client.h"

namespace penstock::mgmt {

struct LeaderElectionOptions {
  // Full etcd key of the election, e.g. "/penstock/default/leader".
  std::string key;
  // This candidate's gRPC address, the value of the key while it leads.
  std::string address;
  int64_t ttl_s = 3;
  std::chrono::milliseconds poll{250};
  // Called on the election thread once this candidate holds the key; `term` is the key's
  // create_revision. Leadership is announced (is_leader() true) only after it returns OK; an
  // error resigns and campaigns again later.
  std::function<Status(int64_t term)> on_elected;
  // Called on the election thread when leadership is lost or given up.
  std::function<void()> on_lost;
};

class LeaderElection {
 public:
  LeaderElection(EtcdClient* etcd, LeaderElectionOptions options);
  ~LeaderElection();  // Stop(/*resign=*/true)

  // Runs one campaign round synchronously (so a lone instance leads when this returns), then
  // starts the background loop.
  void Start();
  // Stops the loop; `resign` gives the key and lease back (see above). Idempotent.
  void Stop(bool resign);

  bool is_leader() const;
  // The leader's address as last seen in etcd ("" when none).
  std::string leader_address() const;

 private:
  void Run();
  // One round: keep the lease alive, campaign or check the term. Called on the loop thread.
  void Step();
  // Step's parts: the lease (false: this round ends here), then the campaign (a follower) or
  // the check that the key still carries our term (`leader`).
  bool KeepLease(bool leader);
  void ElectionRound(bool leader);
  void Lose(const std::string& why);

  EtcdClient* const etcd_;
  const LeaderElectionOptions options_;

  // Loop-thread state.
  int64_t lease_ = 0;
  int64_t term_ = 0;
  std::chrono::steady_clock::time_point last_keepalive_ok_;
  std::chrono::steady_clock::time_point next_keepalive_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;       // guarded by mu_
  bool leader_ = false;         // guarded by mu_
  std::string leader_address_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace penstock::mgmt

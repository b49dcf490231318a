// stripe_missed_reports.cc — telling mgmt which targets a protected write went without, before
// the write is acknowledged (StripeIo::set_report_degraded), coalesced per container.
//
// A report is a blocking call to mgmt, so it never runs on the transport or timer thread that
// completed the write: it runs on the "ps-report" pool (RunBlocking). One call per container
// is in flight at a time; the misses that come meanwhile wait and go together in the next, and
// each write is answered by a call sent after its miss was queued.
#include "client/stripe_io.h"

#include <algorithm>

#include "client/stripe_io_internal.h"

namespace penstock {

void StripeIo::ReportMissedThen(const WireShardKey& key, const std::vector<uint32_t>& targets,
                                const std::vector<bool>& written, std::function<void(Status)> done) {
  if (!report_) return done(OkStatus());
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < targets.size() && i < written.size(); ++i) {
    // The slots the write went to, whatever this client's view says of them now (down,
    // recovering, moved by a new map): mgmt's may be newer, and a repair pass that listed
    // before this write must not clear the target.
    if (!written[i] && targets[i] != 0) ids.push_back(targets[i]);
  }
  if (ids.empty()) return done(OkStatus());
  const uint64_t container = key.container;
  auto answer = [this, container, ids, done = std::move(done)](const Result<uint64_t>& epoch) {
    if (!epoch.ok()) {
      return done(epoch.status().WithContext("recording with mgmt that a write missed target " +
                                             std::to_string(ids.front())));
    }
    if (*epoch > view_->epoch()) {  // until the map says so, this client knows better than its map
      std::lock_guard<std::mutex> lock(suspect_mu_);
      for (uint32_t id : ids) {
        uint64_t& at = reported_[{id, container}];
        at = std::max(at, *epoch);
      }
    }
    done(OkStatus());
  };
  bool start;
  {
    std::lock_guard<std::mutex> lock(missed_mu_);
    MissedReports& q = missed_[container];
    q.targets.insert(ids.begin(), ids.end());
    q.waiting.push_back(std::move(answer));
    start = !q.in_flight;
    q.in_flight = true;
  }
  if (start) RunBlocking([this, container] { SendMissed(container); });
}

void StripeIo::SendMissed(uint64_t container) {
  // A few rounds per task, then the container goes to the back of the pool's queue: under a
  // steady stream of degraded writes a round always finds new misses, and one task looping
  // for good would hold one of the pool's threads from every other container's reports.
  for (int round = 0;; ++round) {
    if (round > 0 && round % kMissedRoundsPerTask == 0) {
      std::lock_guard<std::mutex> lock(reports_mu_);
      if (reports_ != nullptr) return reports_->Submit([this, container] { SendMissed(container); });
    }
    std::vector<uint32_t> ids;
    std::vector<std::function<void(const Result<uint64_t>&)>> waiting;
    {
      std::lock_guard<std::mutex> lock(missed_mu_);
      auto it = missed_.find(container);
      if (it->second.waiting.empty()) {
        missed_.erase(it);
        return;
      }
      ids.assign(it->second.targets.begin(), it->second.targets.end());
      it->second.targets.clear();
      waiting.swap(it->second.waiting);
    }
    stats_.missed_reports++;
    const Result<uint64_t> epoch = report_(container, ids);  // after every miss it answers for
    for (auto& answer : waiting) answer(epoch);
  }
}

void StripeIo::RunBlocking(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(reports_mu_);
    if (reports_ != nullptr) return reports_->Submit(std::move(fn));
  }
  fn();  // no pool (none set up, or tearing down): nothing else is left to wait on
}

}  // namespace penstock

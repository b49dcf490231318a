// repairer_pass.cc — one repair pass from start to end (Repairer::RunPass), and one
// container's steps in their order: scan, orphans and tombstones, then for each object its
// head copies and its stripes. The steps live in scan.cc, repairer_orphans.cc,
// repairer_heads.cc and repairer_rebuild.cc.
#include <set>

#include "common/log.h"
#include "mgmt_client/redundancy_proto.h"
#include "protocol/object_head.h"
#include "repair/pass_state.h"
#include "repair/repair_jobs.h"
#include "repair/repairer.h"

namespace penstock {

namespace {

using Clock = std::chrono::steady_clock;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Stripes rebuilt at once (each one a read of K shards and a write of the missing ones).
constexpr unsigned kRepairWorkers = 8;

}  // namespace

Status Repairer::RunPass() {
  std::lock_guard<std::mutex> pass_lock(pass_mu_);
  const auto started = Clock::now();
  PS_ASSIGN_OR_RETURN(v1::ClusterMap map, dp_.mgmt->GetClusterMap());
  dp_.view->Apply(map);
  PassState pass(std::move(map), started, options_.orphan_grace);
  NotePlacement(pass);
  // Which containers the targets hold. Only those mgmt recorded as deleted are emptied: a
  // container mgmt does not know (other metadata: a wrong data dir, a restore from an older
  // backup) is never touched.
  const auto held_listed = Clock::now();
  const auto held = ListHeldContainers(*dp_.shards, dp_.view->targets());
  PS_ASSIGN_OR_RETURN(v1::ListContainersResponse containers, dp_.mgmt->ListContainers());
  ForgetGoneContainers(containers);
  StartPassStatus(pass.map.epoch());
  pass.metrics = GetPassMetrics();
  // Stripes are rebuilt by a few workers at once; the pass waits for them at the end.
  RepairJobs jobs(kRepairWorkers, options_.rate_bytes_per_s, started);
  for (const v1::Container& c : containers.containers()) {
    if (Deposed()) return Aborted("repair pass stopped: this mgmt no longer leads");
    RepairContainer(pass, c, jobs);
  }
  // Deleted containers last: emptying them must not hold up the repair of live ones.
  if (Deposed()) return Aborted("repair pass stopped: this mgmt no longer leads");
  CollectDeletedContainers(held,
                           std::set<uint64_t>(containers.deleted_container_ids().begin(),
                                              containers.deleted_container_ids().end()),
                           held_listed, pass.grace);
  const int64_t took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  EndPassStatus(took);
  ReportPass(pass, took);
  return OkStatus();
}

void Repairer::NotePlacement(const PassState& pass) {
  if (pass.map.placement_epoch() != placement_seen_) {
    placement_seen_ = pass.map.placement_epoch();
    placement_seen_at_ = pass.started;
  }
}

void Repairer::StartPassStatus(uint64_t epoch) {
  Update([&](v1::RepairStatus& st) {
    st.set_state("running");
    st.set_epoch(epoch);
    st.set_stripes_checked(0);
    st.set_stripes_total(0);
    st.set_shards_repaired(0);
    st.set_bytes_repaired(0);
    st.set_stripes_unrecoverable(0);
    st.set_bytes_per_second(0);
  });
}

PassMetrics Repairer::GetPassMetrics() const {
  PassMetrics m;
  if (options_.metrics) {
    m.shards = &options_.metrics->GetCounter("penstock_repair_shards_total", "shards rewritten by repair");
    m.bytes = &options_.metrics->GetCounter("penstock_repair_bytes_total", "bytes rewritten by repair");
    m.lost = &options_.metrics->GetCounter("penstock_repair_unrecoverable_stripes_total",
                                           "stripes repair found with fewer than K readable shards");
  }
  return m;
}

void Repairer::RepairContainer(PassState& pass, const v1::Container& c, RepairJobs& jobs) {
  auto red = ContainerRedundancy(c);
  if (!red.ok()) {
    pass.clean_containers.push_back(c.id());  // nothing to check
    return;
  }
  ContainerPass cp{c, *red};
  // What the live targets hold.
  cp.scan = ScanContainer(*dp_.shards, dp_.view->targets(), c.id(), pass.corrupt, pass.all_up);
  if (!cp.scan.complete) cp.clean = pass.moves_done = false;
  NoteUnnamedOffSlots(pass, cp);
  ForgetRewrittenLosses(cp);
  CollectGarbage(pass, cp);
  const uint64_t total = StripesToCheck(cp.scan.heads);
  Update([&](v1::RepairStatus& st) { st.set_stripes_total(st.stripes_total() + total); });

  for (const auto& [id, newest] : cp.scan.heads) {
    if (Deposed()) {
      cp.clean = false;
      break;
    }
    RepairHeadCopies(pass, cp, id, newest);
    if (newest.data.empty()) continue;  // deleted
    auto head = DecodeObjectHead(newest.data);
    if (!head.ok()) {
      cp.clean = false;  // its stripes are not checked
      continue;
    }
    RepairStripes(pass, cp, *head, jobs);
  }
  NoteUnwalkedOffSlots(pass, cp);
  // Jobs refer to this container's data: finish them before the next one.
  jobs.Wait();
  if (cp.clean) {
    pass.clean_containers.push_back(c.id());
  } else {
    pass.clean = false;
  }
}

bool Repairer::OffSlots(const Redundancy& red, uint32_t target, const WireShardKey& k) const {
  auto slots = dp_.io->Slots(k, red.width());
  return !slots.ok() || !OnItsSlot(*slots, red.width(), target, k.shard);
}

void Repairer::NoteStripeOffSlots(PassState& pass, const Redundancy& red, const WireShardKey& key,
                                  const StripeShards& shards) const {
  for (const auto& [i, hs] : shards) {
    for (const Holder& x : hs) {
      if (pass.moves_done && OffSlots(red, x.target, WithShard(key, i))) pass.moves_done = false;
    }
  }
}

void Repairer::NoteUnnamedOffSlots(PassState& pass, const ContainerPass& cp) const {
  // A shard off its slots that no walk below moves (data no head names yet: a put placed
  // with the old map whose head is still to come; stripes past a head's end) keeps the
  // placement unsettled until it is named or collected.
  for (const auto& [id, u] : cp.scan.unnamed) {
    for (const auto& [t, k] : u.shards) {
      if (pass.moves_done && OffSlots(cp.red, t, k)) pass.moves_done = false;
    }
  }
}

void Repairer::NoteUnwalkedOffSlots(PassState& pass, const ContainerPass& cp) const {
  // Stripes no walk above checked (past a head's end, an older version's, data no head names
  // while orphans are not looked for): one off its slots keeps the placement unsettled.
  for (auto it = cp.scan.index.begin(); pass.moves_done && it != cp.scan.index.end(); ++it) {
    const auto& [hi, lo, stripe] = it->first;
    auto w = cp.walked.find({hi, lo});
    if (w != cp.walked.end() && stripe < w->second) continue;
    NoteStripeOffSlots(pass, cp.red, WireShardKey{cp.container.id(), hi, lo, stripe, 0, 0}, it->second);
  }
}

void Repairer::EndPassStatus(int64_t took) {
  Update([&](v1::RepairStatus& st) {
    st.set_state("idle");
    st.set_orphans_pending(orphans_.size());
    st.set_tombstones_pending(tombstones_.size());
    st.set_passes(st.passes() + 1);
    st.set_last_pass_ms(NowMs());
    const double secs = static_cast<double>(took) / 1000.0;
    st.set_bytes_per_second(secs > 0 ? static_cast<double>(st.bytes_repaired()) / secs : 0);
    st.set_total_shards_repaired(st.total_shards_repaired() + st.shards_repaired());
    st.set_total_bytes_repaired(st.total_bytes_repaired() + st.bytes_repaired());
    if (st.shards_repaired() > 0) {
      st.set_last_active_epoch(st.epoch());
      st.set_last_active_bytes(st.bytes_repaired());
      st.set_last_active_bytes_per_second(st.bytes_per_second());
    }
  });
}

void Repairer::ReportPass(PassState& pass, int64_t took) {
  const v1::ClusterMap& map = pass.map;
  if (pass.all_up && pass.any_recovering && options_.on_clean_pass) {
    if (!pass.clean) pass.recovering.clear();
    options_.on_clean_pass(pass.recovering, pass.clean_containers, map.epoch(), pass.started);
  }
  if (pass.moves_done && map.placement_epoch() > map.settled_placement_epoch() &&
      pass.started - placement_seen_at_ >= options_.settle_after && !Deposed() && options_.on_placement_settled) {
    options_.on_placement_settled(map.placement_epoch());
  }
  auto st = status();
  if (st.shards_repaired() > 0 || st.stripes_unrecoverable() > 0) {
    PS_LOG_INFO("repair pass done in {} ms: {} stripes checked, {} shards ({} bytes) rewritten, {} unrecoverable",
                took, st.stripes_checked(), st.shards_repaired(), st.bytes_repaired(), st.stripes_unrecoverable());
  }
  if (options_.metrics) options_.metrics->GetCounter("penstock_repair_passes_total", "repair passes completed").Inc();
}

}  // namespace penstock

// repairer.h — mgmt's repair service: rebuild after a target is lost, repair of shards that a
// degraded write missed, and rewrite of shards that scrub or a read found corrupt.
//
// A pass walks every protected container (rep:N, ec:K+M): it lists the shards each live target
// holds (kList, no data) and the object heads, and for every stripe of every live object checks
// each slot of the current map (PlaceSlots): the slot's target must hold that shard at the
// stripe's current version (the newest one that K shards hold; replicas: the newest) and it
// must not be on the target's corrupt list. A slot that fails the check is rebuilt from the
// other shards (StripeIo::RepairShards: read, degraded where needed, encode, write with
// kWriteIfNotOlder so a concurrent write wins). Once a stripe is whole on its slots, copies
// left on targets that are no longer its slots (after a map change) are deleted; head copies
// are brought to the newest version the same way. Slots on DOWN targets wait for a later pass.
//
// Orphans: stripes whose data id no object head names (a put that failed or whose client died
// before its head landed, the old version of an object whose replacement could not delete it,
// a delete that missed a target, a repair write racing a delete). Each pass notes them (every
// container, protected or not, when every target is up and listed); a data id still unnamed and
// unchanged (same shards, same newest version) a grace period after it was first noted is
// deleted. A put never lets a third of that pass between the landings of its stripes and its
// head (PutCommitWindow, object_head.h), so no put in progress loses its stripes.
//
// Tombstones: deleting a protected object writes a tombstone over its head copies, so that a
// copy on a target that was down cannot bring the object back. Once every copy in the cluster
// (every target up and listed, none left out as corrupt) is the same tombstone, and still was
// a grace period later, the copies are deleted, each only at that version (kDeleteIfVersion: a
// new put of the name wins).
//
// Deleted containers: a container deleted while some of its shards were left on targets (a
// client that stopped part way through deleting its objects, a target down meanwhile, a write
// landing late) is emptied. Each pass asks every up target which containers it holds shards of
// (kListContainers); those mgmt recorded as deleted (ListContainersResponse.
// deleted_container_ids; ids are never reused) are emptied once passes a grace period apart
// (the orphan grace) found them still held. A container mgmt has no record of is never touched.
//
// Joins: a target that joins takes slots of some stripes (placement moves about width/N of
// them; a join can also permute a stripe's slots). Repair copies each shard a slot lacks from
// where the listing finds it at the stripe's version (unprotected stripes and heads too: they
// have no other copy), then deletes the copies left behind. Until a pass has found everything on
// the new slots, readers also ask where earlier placements put a shard they do not find
// (ClusterMap.settled_placement_epoch, on_placement_settled).
//
// Passes run on the leader only: at start, whenever the map epoch changes, and every
// `interval`; repair traffic is limited to `rate_bytes_per_s`. It talks to its own mgmt over
// gRPC (the admin key when mgmt runs --auth) and to the targets over the data plane, like any
// client. Progress is in status() (MgmtStatus.repair, `penstock status`) and /metrics.
//
// Files: repairer.cc (this class: start, stop, the loop, status), repairer_pass.cc (a pass
// from start to end, and one container's steps in order), scan.h (the listings), vote.h (the
// verdicts over them: pure functions), repairer_heads.cc (head copies), repairer_rebuild.cc
// (the stripe walk: copies, rebuilds, copies left behind), repair_jobs.h (rebuild workers, rate
// limit), repairer_orphans.cc (orphans, tombstones, deleted containers), pass_state.h (what the
// steps of a pass share), loss_assessment.cc (what declaring a target lost would lose).
//
// Thread safety: status() may be called from any thread; RunPass() from one thread at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "client/data_path.h"
#include "common/metrics.h"
#include "mgmt_client/tls.h"
#include "protocol/object_head.h"
#include "penstock/redundancy.h"
#include "penstock/mgmt.pb.h"
#include "penstock/status.h"
#include "repair/scan.h"
#include "repair/vote.h"

namespace penstock {

struct ContainerPass;
struct PassMetrics;
struct PassState;
class RepairJobs;
struct StripeRepair;

struct RepairOptions {
  std::string mgmt_address;  // this mgmt's gRPC address
  std::string api_key;       // the admin key ("" without --auth)
  // TLS to mgmt (mgmt's own certificate and CA when mgmt serves TLS; see mgmt/tls.h).
  TlsOptions tls;
  // Pause between passes when nothing changed.
  std::chrono::milliseconds interval{30000};
  // Repair write traffic limit, bytes per second; 0: unlimited.
  uint64_t rate_bytes_per_s = 0;
  // Data-plane request timeout of the repair client.
  std::chrono::milliseconds timeout{10000};
  // Whether this mgmt leads (passes run only then); empty: always.
  std::function<bool()> is_leader;
  MetricsRegistry* metrics = nullptr;  // borrowed; null: no metrics
  // Orphans (see above) are deleted once passes at least this far apart found them unchanged
  // and no head naming them: the map's ClusterMap.orphan_grace_ms (what clients go by), this
  // when the map has none.
  std::chrono::milliseconds orphan_grace = kOrphanGrace;
  // After a pass that found every target up, while some target was recovering: `ids`, the
  // targets that were recovering (for every container) when it started (at map epoch `epoch`,
  // steady-clock time `started`), when the pass left nothing unrepaired anywhere (else empty),
  // and `containers`, those it checked with nothing left unrepaired. Those hold no stale shards
  // any more (mgmt clears the flags unless a write missed them after `started`).
  std::function<void(const std::vector<uint32_t>& ids, const std::vector<uint64_t>& containers, uint64_t epoch,
                     std::chrono::steady_clock::time_point started)>
      on_clean_pass;
  // After a pass that found every target up and every stripe and head of every container on
  // the slots of the placement it started with (`placement_epoch`, ClusterMap.placement_epoch),
  // the data moves after the joins up to it are done (mgmt: ClusterState::MarkPlacementSettled).
  // Only for a pass that started `settle_after` or more after the first pass with that
  // placement: a target learns a new placement epoch with its next heartbeat, and until then it
  // may still take a write placed with the old map.
  std::function<void(uint64_t placement_epoch)> on_placement_settled;
  // The objects of a container recorded lost (mgmt's ListLostObjects), and forgetting one: a
  // pass forgets the record of a name that now has a head naming other data or a tombstone (it
  // was put again or deleted). Unset: records are left alone.
  std::function<std::vector<v1::LostObject>(uint64_t container)> lost_objects;
  std::function<void(const v1::LostObject&)> forget_lost;
  std::chrono::milliseconds settle_after{5000};
};

class Repairer {
 public:
  // Starts the background loop. Errors: those of connecting to mgmt and creating the UCX client.
  static Result<std::unique_ptr<Repairer>> Start(const RepairOptions& options);
  ~Repairer();

  // Runs one whole pass now (the loop's passes are skipped meanwhile). Errors: mgmt
  // unreachable; per-stripe failures are counted, not returned.
  Status RunPass();
  v1::RepairStatus status() const;
  void Stop();

  // What declaring target `lost` lost would lose: the containers with objects whose head or a
  // stripe would keep too few copies on the other targets (loss_assessment.cc). Runs beside
  // passes (changes nothing). Errors: kNotFound for an unknown target; kAborted when a
  // target cannot be listed (then nothing can be promised); mgmt unreachable.
  Result<v1::LossReport> AssessLoss(uint32_t lost);

 private:
  explicit Repairer(const RepairOptions& options);
  void Loop();
  void Update(const std::function<void(v1::RepairStatus&)>& fn);
  // A mgmt that stopped leading stops changing anything: the new leader's passes take over
  // (an old pass that went on could rewrite a head the new leader has since collected).
  bool Deposed() const;

  // A pass, step by step (repairer_pass.cc).
  void NotePlacement(const PassState& pass);
  void StartPassStatus(uint64_t epoch);
  PassMetrics GetPassMetrics() const;
  void RepairContainer(PassState& pass, const v1::Container& c, RepairJobs& jobs);
  // Whether shard `k` held by `target` is off its slot in the current map (or its slots are
  // unknown).
  bool OffSlots(const Redundancy& red, uint32_t target, const WireShardKey& k) const;
  // Clears pass.moves_done when a shard of the stripe `key` (shard 0) is off its slot.
  void NoteStripeOffSlots(PassState& pass, const Redundancy& red, const WireShardKey& key,
                          const StripeShards& shards) const;
  void NoteUnnamedOffSlots(PassState& pass, const ContainerPass& cp) const;
  void NoteUnwalkedOffSlots(PassState& pass, const ContainerPass& cp) const;
  void EndPassStatus(int64_t took_ms);
  void ReportPass(PassState& pass, int64_t took_ms);

  // Head copies (repairer_heads.cc): every copy slot of the head `newest` of object `id`
  // holds the newest version (tombstones included); copies elsewhere go.
  void RepairHeadCopies(PassState& pass, ContainerPass& cp, const Id128& id, const ListEntry& newest);
  void WriteHeadCopy(PassState& pass, ContainerPass& cp, const Id128& id, const ListEntry& newest, const TargetRef& t,
                     const WireShardKey& k);

  // Stripes (repairer_rebuild.cc): the walk over `head`'s stripes, each voted on (vote.h),
  // rebuilt or copied by a job where slots lack it, its copies left behind deleted.
  void RepairStripes(PassState& pass, ContainerPass& cp, const ObjectHead& head, RepairJobs& jobs);
  // Stripe `key` (shard 0) of `head`, which the listing found as `shards`.
  void RepairStripe(PassState& pass, ContainerPass& cp, const ObjectHead& head, const StripeGeometry& geo,
                    const WireShardKey& key, const StripeShards& shards, RepairJobs& jobs);
  // A stripe no version of which `need` shards hold: a read decides whether it is lost.
  void CheckUnversionedStripe(PassState& pass, ContainerPass& cp, const ObjectHead& head, const StripeGeometry& geo,
                              const WireShardKey& key, const StripeShards& shards, uint32_t need);
  // The job of one stripe: copies, then a rebuild of what could not be copied.
  void RebuildStripe(PassState& pass, ContainerPass& cp, const StripeRepair& r, RepairJobs& jobs);

  // The loss assessment (loss_assessment.cc): one container's part, whether an object's head
  // keeps a copy, whether each of its stripes keeps enough shards.
  Result<v1::ContainerLoss> AssessContainerLoss(const v1::Container& c, const Redundancy& red,
                                                const std::vector<TargetRef>& targets, const TargetRef& lost);
  // Forgets the lost-object records of `cp`'s names written again or deleted since.
  void ForgetRewrittenLosses(const ContainerPass& cp);
  bool HeadSurvives(const HeadCopies& hc, const ListEntry& newest, const Redundancy& red, uint32_t lost);
  bool ObjectDataSurvives(const ContainerScan& scan, uint64_t container, const Redundancy& red, const ObjectHead& head,
                          const TargetRef& lost);

  // Orphans, tombstones and deleted containers (repairer_orphans.cc).
  // Collects `cp`'s orphans and tombstones when its listing was complete, else forgets what
  // was noted of them; drops the heads of the tombstones collected from cp.scan.heads.
  void CollectGarbage(PassState& pass, ContainerPass& cp);
  // Drops what was noted of containers not in `containers` (deleted since).
  void ForgetGoneContainers(const v1::ListContainersResponse& containers);
  // Notes what `container`'s listing found unnamed (`found`, by data id), drops what it no
  // longer finds, deletes what waited out `grace`. `heads_listed`: when this pass began listing
  // the container's heads; `data_listed`: when it had listed its shards.
  void CollectOrphans(uint64_t container, const std::vector<TargetRef>& targets, std::map<Id128, Unnamed> found,
                      std::chrono::steady_clock::time_point heads_listed,
                      std::chrono::steady_clock::time_point data_listed, std::chrono::milliseconds grace);
  // Notes `container`'s heads whose copies are all one tombstone, drops what changed, deletes
  // those noted `grace` before `heads_listed`; returns the heads deleted (by object id).
  std::set<Id128> CollectTombstones(uint64_t container, const std::vector<TargetRef>& targets,
                                    const std::map<Id128, HeadCopies>& heads,
                                    std::chrono::steady_clock::time_point heads_listed,
                                    std::chrono::milliseconds grace);
  // Notes the containers in `held` (container id -> the targets holding shards of it) that mgmt
  // recorded as `deleted`, drops what is no longer held, and deletes the shards of those noted
  // at least `grace` before `now`.
  void CollectDeletedContainers(const std::map<uint64_t, std::vector<TargetRef>>& held,
                                const std::set<uint64_t>& deleted, std::chrono::steady_clock::time_point now,
                                std::chrono::milliseconds grace);

  const RepairOptions options_;
  DataPath dp_;

  std::mutex pass_mu_;  // one pass at a time
  // Guarded by pass_mu_: the newest placement epoch a pass started with, and when the first
  // pass with it started (see on_placement_settled).
  uint64_t placement_seen_ = 0;
  std::chrono::steady_clock::time_point placement_seen_at_{};
  // A data id no head named, as first noted: when, and its shards and newest version then.
  struct Orphan {
    std::chrono::steady_clock::time_point first_seen;
    uint64_t shards = 0;
    uint64_t newest = 0;
  };
  // Guarded by pass_mu_: (container, data hi, data lo) -> when it was first found unnamed.
  std::map<std::tuple<uint64_t, uint64_t, uint64_t>, Orphan> orphans_;
  // A tombstone as first noted: when, and its version.
  struct Tombstone {
    std::chrono::steady_clock::time_point first_seen;
    uint64_t version = 0;
  };
  // Guarded by pass_mu_: (container, object hi, object lo) -> the tombstone first noted.
  std::map<std::tuple<uint64_t, uint64_t, uint64_t>, Tombstone> tombstones_;
  // Guarded by pass_mu_: deleted container id -> when a pass first found targets holding it.
  std::map<uint64_t, std::chrono::steady_clock::time_point> deleted_containers_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;              // guarded by mu_
  v1::RepairStatus status_;        // guarded by mu_
  std::thread thread_;
};

}  // namespace penstock

// repairer_heads.cc — head copies brought to the newest version: every copy slot of an
// object's head (HeadRedundancy: as many copies as faults the data survives, plus one) holds
// the newest version listed, tombstones included; once all do, copies where readers do not
// look are deleted. The verdicts are vote.h's (CheckHeadSlots, HeadCopiesOffSlots).
#include "client/shard_client.h"
#include "client/stripe_io.h"
#include "common/await.h"
#include "common/log.h"
#include "repair/pass_state.h"
#include "repair/repairer.h"

namespace penstock {

namespace {

// Whether a copy the one just written to `written_to` was made from (a listed copy of
// `version` on another target) is still there (not deleted since listed). Kept unless every
// such copy was asked and is gone.
bool SourceHeld(ShardClient& shards, const ContainerScan& scan, const Id128& id, uint64_t version,
                uint32_t written_to) {
  auto cit = scan.copies.find(id);
  if (cit == scan.copies.end()) return true;
  const HeadCopies& hc = cit->second;
  bool asked = false;
  for (size_t n = 0; n < hc.copies.size(); ++n) {
    if (hc.copies[n].first == written_to || hc.versions[n] != version) continue;
    const TargetRef* from = FindTarget(scan.listed, hc.copies[n].first);
    if (from == nullptr) return true;  // cannot tell: kept
    auto r = Await<Result<ShardData>>(
        [&](auto done) { shards.StartStatTo(*from, hc.copies[n].second, std::move(done)); });
    if (r.ok() || r.status().code() != StatusCode::kNotFound) return true;
    asked = true;
  }
  return !asked;
}

}  // namespace

void Repairer::RepairHeadCopies(PassState& pass, ContainerPass& cp, const Id128& id, const ListEntry& newest) {
  // Head copies: every copy slot holds the newest version (tombstones included).
  const Redundancy head_red = HeadRedundancy(cp.red);
  const WireShardKey hkey = WithShard(newest.key, 0);
  auto hslots = dp_.io->Slots(hkey, head_red.width());
  if (!hslots.ok()) {
    cp.clean = pass.moves_done = false;
    return;
  }
  auto cit = cp.scan.copies.find(id);
  const HeadCopies* hc = cit == cp.scan.copies.end() ? nullptr : &cit->second;
  const SlotVerdict verdict = CheckHeadSlots(*hslots, head_red.width(), hc, newest.shard_version, pass.corrupt);
  if (verdict.unchecked) cp.clean = pass.moves_done = false;
  for (uint32_t i : verdict.fix) WriteHeadCopy(pass, cp, id, newest, (*hslots)[i], WithShard(hkey, i));
  // Copies not where readers look (on a target that is no longer a slot, or under another
  // index than its target's slot: a map change moved the head) go once every slot held
  // the newest, each only at the version listed (one written since stays).
  if (!verdict.whole || hc == nullptr) return;
  for (size_t k : HeadCopiesOffSlots(*hc, *hslots)) {
    const auto& [target, ckey] = hc->copies[k];
    if (const TargetRef* t = FindTarget(cp.scan.listed, target)) {
      dp_.shards->DeleteTo(*t, ckey, hc->versions[k]).IgnoreError();
    }
  }
}

void Repairer::WriteHeadCopy(PassState& pass, ContainerPass& cp, const Id128& id, const ListEntry& newest,
                             const TargetRef& t, const WireShardKey& k) {
  Status s = dp_.shards->WriteTo(t, k, newest.data, newest.shard_version, true);
  if (s.ok() && !cp.red.protected_() && !SourceHeld(*dp_.shards, cp.scan, id, newest.shard_version, t.id)) {
    // An unprotected head has no tombstone: a delete that removed the copies listed
    // while this one was written would have missed it. Gone with them (at its version).
    dp_.shards->DeleteTo(t, k, newest.shard_version).IgnoreError();
    return;
  }
  if (s.ok()) {
    Update([&](v1::RepairStatus& st) { st.set_shards_repaired(st.shards_repaired() + 1); });
    if (pass.metrics.shards) pass.metrics.shards->Inc();
  } else {
    PS_LOG_WARN("repair: head copy {} of an object in '{}': {}", k.shard, cp.container.name(), s.ToString());
    cp.clean = false;
    pass.moves_done = false;
  }
}

}  // namespace penstock

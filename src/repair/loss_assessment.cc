// loss_assessment.cc — what declaring a target lost would lose (Repairer::AssessLoss), asked
// by `penstock out` before mgmt declares it: every container is listed on the up targets (the
// one to be declared lost too, when it is up), and each live object is checked as if that
// target were gone: its head must keep a copy elsewhere, and each of its stripes `need` shards
// of one version (vote.h, StripeSurvives). A target down for now whose slot it is counts as
// holding its shard: it may come back. Nothing is changed. Also here: passes forget the record
// of a lost object once its name was put again or deleted (ForgetRewrittenLosses).
#include "client/object_ids.h"
#include "client/stripe_io.h"
#include "repair/pass_state.h"
#include "mgmt_client/redundancy_proto.h"
#include "protocol/object_head.h"
#include "repair/repairer.h"

namespace penstock {

namespace {

// The head copies listed, as the shards of a one-stripe "stripe" (copy index -> holders).
StripeShards HeadShards(const HeadCopies& hc) {
  StripeShards out;
  for (size_t n = 0; n < hc.copies.size(); ++n) {
    out[hc.copies[n].second.shard].push_back(Holder{hc.copies[n].first, hc.versions[n], 0});
  }
  return out;
}

std::vector<TargetRef> WithTargetDown(std::vector<TargetRef> targets, uint32_t id) {
  for (TargetRef& t : targets) {
    if (t.id == id) t.up = false;
  }
  return targets;
}

}  // namespace

Result<v1::LossReport> Repairer::AssessLoss(uint32_t lost) {
  PS_ASSIGN_OR_RETURN(v1::ClusterMap map, dp_.mgmt->GetClusterMap());
  dp_.view->Apply(map);
  std::vector<TargetRef> targets = dp_.view->targets();
  const TargetRef* t = FindTarget(targets, lost);
  if (t == nullptr) return NotFound("target " + std::to_string(lost) + " is not registered; see `penstock status`");
  v1::LossReport report;
  report.set_target_id(lost);
  if (t->lost) return report;  // declared lost already: nothing more goes
  // Up in the map but not answering (killed a moment ago): as good as down.
  if (t->up && !dp_.shards->List(*t, 0, kListContainers).ok()) {
    targets = WithTargetDown(targets, lost);
    t = FindTarget(targets, lost);
  }
  report.set_target_up(t->up);
  PS_ASSIGN_OR_RETURN(v1::ListContainersResponse containers, dp_.mgmt->ListContainers());
  for (const v1::Container& c : containers.containers()) {
    PS_ASSIGN_OR_RETURN(Redundancy red, ContainerRedundancy(c));
    PS_ASSIGN_OR_RETURN(v1::ContainerLoss cl, AssessContainerLoss(c, red, targets, *t));
    if (cl.objects() > 0 || cl.unlisted()) *report.add_containers() = std::move(cl);
  }
  return report;
}

Result<v1::ContainerLoss> Repairer::AssessContainerLoss(const v1::Container& c, const Redundancy& red,
                                                        const std::vector<TargetRef>& targets, const TargetRef& lost) {
  v1::ContainerLoss out;
  out.set_container_id(c.id());
  out.set_container(c.name());
  out.set_redundancy(red.ToString());
  // One copy of each head, and the target cannot be listed: what only it named is unknown.
  out.set_unlisted(!lost.up && !red.protected_());
  const ContainerScan scan = ScanContainer(*dp_.shards, targets, c.id(), CorruptSet{}, false);
  if (!scan.complete) {
    return Aborted("a target could not be listed (see mgmt's log), so what declaring target " +
                       std::to_string(lost.id) + " lost would lose in '" + c.name() +
                       "' is unknown; try again once every up target answers");
  }
  for (const auto& [id, newest] : scan.heads) {
    if (newest.data.empty()) continue;  // deleted
    auto head = DecodeObjectHead(newest.data);
    if (!head.ok()) continue;  // repair reports it
    auto hc = scan.copies.find(id);
    const bool head_survives = hc != scan.copies.end() && HeadSurvives(hc->second, newest, red, lost.id);
    if (head_survives && ObjectDataSurvives(scan, c.id(), red, *head, lost)) continue;
    v1::LostObject* o = out.add_lost();
    o->set_name(head->name);
    o->set_bytes(head->size);
    o->set_data_hi(head->data_hi);
    o->set_data_lo(head->data_lo);
    out.set_objects(out.objects() + 1);
    out.set_bytes(out.bytes() + head->size);
  }
  return out;
}

void Repairer::ForgetRewrittenLosses(const ContainerPass& cp) {
  if (!options_.lost_objects || !options_.forget_lost || !cp.scan.complete) return;
  for (const v1::LostObject& o : options_.lost_objects(cp.container.id())) {
    if (o.name().empty()) continue;  // a marker: nothing to check it against
    auto h = cp.scan.heads.find(HeadObjectId(cp.container.id(), o.name()));
    if (h == cp.scan.heads.end()) continue;  // still gone
    if (h->second.data.empty()) {  // a tombstone: deleted
      options_.forget_lost(o);
      continue;
    }
    auto head = DecodeObjectHead(h->second.data);
    if (head.ok() && (head->data_hi != o.data_hi() || head->data_lo != o.data_lo())) options_.forget_lost(o);
  }
}

bool Repairer::HeadSurvives(const HeadCopies& hc, const ListEntry& newest, const Redundancy& red, uint32_t lost) {
  const Redundancy head_red = HeadRedundancy(red);
  auto slots = dp_.io->Slots(WithShard(newest.key, 0), head_red.width());
  return slots.ok() && StripeSurvives(HeadShards(hc), *slots, 1, lost);
}

bool Repairer::ObjectDataSurvives(const ContainerScan& scan, uint64_t container, const Redundancy& red,
                                  const ObjectHead& head, const TargetRef& lost) {
  const uint32_t need = red.kind == Redundancy::Kind::kErasure ? red.k : 1;
  for (uint64_t s = 0; s < head.stripe_count(); ++s) {
    const WireShardKey key{container, head.data_hi, head.data_lo, s, 0, 0};
    auto it = scan.index.find({head.data_hi, head.data_lo, s});
    // Listed nowhere while the target was listed too: never written (sparse).
    if (it == scan.index.end() && lost.up) continue;
    auto slots = dp_.io->Slots(key, red.width());
    if (!slots.ok()) return false;  // cannot tell: counted lost
    if (!StripeSurvives(it == scan.index.end() ? StripeShards{} : it->second, *slots, need, lost.id)) return false;
  }
  return true;
}

}  // namespace penstock

// repairer_rebuild.cc — the walk over a live object's stripes. Each stripe is voted on
// (vote.h: its version, the slots that lack it, where each missing shard can come from); a
// job (repair_jobs.h) copies the missing shards from where the listing found them at that
// version, or rebuilds them from the other shards (StripeIo::RepairShards: read, degraded
// where needed, encode, write with kWriteIfNotOlder so a concurrent write wins); once the
// stripe is whole on its slots, copies left on other targets (after a join) are deleted.
#include "client/shard_client.h"
#include "client/stripe_io.h"
#include "common/await.h"
#include "common/log.h"
#include "repair/pass_state.h"
#include "repair/repair_jobs.h"
#include "repair/repairer.h"

namespace penstock {

// One stripe's repair as the vote planned it, run by a job.
struct StripeRepair {
  StripeGeometry geo;
  WireShardKey key;  // shard 0
  uint64_t version = 0;
  uint64_t shard_length = 0;
  std::vector<TargetRef> slots;
  FixPlan plan;
  std::string object;  // the object's name, for the log
};

namespace {

using Clock = std::chrono::steady_clock;

// A shard copied from another holder (or not).
struct ShardCopy {
  Status status;
  bool gone = false;   // its source was deleted meanwhile: so is the copy
  uint64_t bytes = 0;  // written
};

// Copies shard `i` of `r`'s stripe to its slot from the first of `from` that gives it.
ShardCopy CopyShard(ShardClient& shards, const StripeRepair& r, uint32_t i, const std::vector<TargetRef>& from,
                    const std::string& container) {
  const WireShardKey k = WithShard(r.key, i);
  ShardCopy out;
  for (const TargetRef& t : from) {  // each holder in turn; none: rebuilt
    auto got = Await<Result<ShardData>>(
        [&](auto done) { shards.StartReadTo(t, k, 0, UINT64_MAX, std::move(done)); });
    Status w = got.ok() && got->version != r.version ? Aborted("the copy changed since it was listed")
                                                     : got.status();
    if (w.ok()) w = shards.WriteTo(r.slots[i], k, got->data.span(), r.version, /*only_if_not_older=*/true);
    if (w.ok()) {
      // A delete (a truncate) that removed the source after it was read missed this
      // copy: then it goes too, at its version.
      auto src = Await<Result<ShardData>>([&](auto done) { shards.StartStatTo(t, k, std::move(done)); });
      if (!src.ok() && src.status().code() == StatusCode::kNotFound) {
        shards.DeleteTo(r.slots[i], k, r.version).IgnoreError();
        return ShardCopy{Aborted("the copy's source was deleted meanwhile"), true, 0};
      }
      return ShardCopy{w, false, got->data.size()};
    }
    PS_LOG_WARN("repair: shard {} of stripe {} of object '{}' in '{}', copied from target {}: {}", i, r.key.stripe,
                r.object, container, t.id, w.ToString());
    out.status = w;
  }
  return out;
}

// Deletes the copies of `shards` (stripe `key`) on up targets other than their slot's, each at
// the version listed.
void DeleteCopiesLeftBehind(DataPath& dp, const WireShardKey& key, const StripeShards& shards,
                            const std::vector<TargetRef>& slots) {
  for (const OffSlotCopy& x : CopiesOffSlots(shards, slots)) {
    for (const TargetRef& t : dp.view->targets()) {
      if (t.id != x.target || !t.up) continue;
      // At the listed version: a write that landed there since (a client still on the
      // old map, before its target learned the new one) stays for the next pass.
      dp.shards->DeleteTo(t, WithShard(key, x.shard), x.version).IgnoreError();
    }
  }
}

}  // namespace

void Repairer::RepairStripes(PassState& pass, ContainerPass& cp, const ObjectHead& head, RepairJobs& jobs) {
  const StripeGeometry geo = StripeGeometry::For(cp.red, head.stripe_unit);
  cp.walked[{head.data_hi, head.data_lo}] = head.stripe_count();
  for (uint64_t s = 0; s < head.stripe_count(); ++s) {
    WireShardKey key{cp.container.id(), head.data_hi, head.data_lo, s, 0, 0};
    auto it = cp.scan.index.find({head.data_hi, head.data_lo, s});
    Update([&](v1::RepairStatus& st) { st.set_stripes_checked(st.stripes_checked() + 1); });
    if (it == cp.scan.index.end()) continue;  // never written (sparse) or nothing left at all
    RepairStripe(pass, cp, head, geo, key, it->second, jobs);
  }
}

void Repairer::RepairStripe(PassState& pass, ContainerPass& cp, const ObjectHead& head, const StripeGeometry& geo,
                            const WireShardKey& key, const StripeShards& shards, RepairJobs& jobs) {
  // The stripe's version: the newest that enough shards hold.
  const uint32_t need = cp.red.kind == Redundancy::Kind::kErasure ? cp.red.k : 1;
  const uint64_t version = StripeVersion(shards, need);
  if (version == 0) {
    CheckUnversionedStripe(pass, cp, head, geo, key, shards, need);
    return;
  }
  auto slots = dp_.io->Slots(key, cp.red.width());
  if (!slots.ok()) {
    cp.clean = pass.moves_done = false;
    return;
  }
  const SlotVerdict verdict = CheckStripeSlots(*slots, cp.red.width(), shards, version);
  if (verdict.unchecked) cp.clean = pass.moves_done = false;
  if (!verdict.fix.empty()) {
    StripeRepair r{geo,
                   key,
                   version,
                   ShardLengthAt(shards, version),
                   *slots,
                   PlanFix(verdict.fix, shards, *slots, version, cp.red.protected_(), cp.scan.listed),
                   head.name};
    jobs.Submit([this, &pass, &cp, &jobs, r = std::move(r)] { RebuildStripe(pass, cp, r, jobs); });
  }
  // The stripe is whole on its slots (or will be once DOWN ones return): copies on
  // targets that are no longer slots go.
  if (verdict.whole) DeleteCopiesLeftBehind(dp_, key, shards, *slots);
}

void Repairer::CheckUnversionedStripe(PassState& pass, ContainerPass& cp, const ObjectHead& head,
                                      const StripeGeometry& geo, const WireShardKey& key, const StripeShards& shards,
                                      uint32_t need) {
  // Not moved by this walk: a shard of it off its slots keeps the placement unsettled.
  NoteStripeOffSlots(pass, cp.red, key, shards);
  // The listing may be behind a write or delete that raced with it: a read decides.
  auto r = dp_.io->ReadSync(geo, key, 0, cp.red.kind == Redundancy::Kind::kErasure ? geo.cell : UINT64_MAX);
  if (r.ok() || r.status().code() != StatusCode::kDataLoss) {
    if (!r.ok() && r.status().code() != StatusCode::kNotFound) cp.clean = pass.moves_done = false;
    return;
  }
  cp.clean = false;
  Update([&](v1::RepairStatus& st) { st.set_stripes_unrecoverable(st.stripes_unrecoverable() + 1); });
  if (pass.metrics.lost) pass.metrics.lost->Inc();
  PS_LOG_ERROR("repair: stripe {} of object '{}' in '{}' has fewer than {} shards of one version; data lost",
               key.stripe, head.name, cp.container.name(), need);
}

void Repairer::RebuildStripe(PassState& pass, ContainerPass& cp, const StripeRepair& r, RepairJobs& jobs) {
  uint64_t bytes = 0, copied = 0;
  std::vector<uint32_t> rest = r.plan.rebuild;
  for (const auto& [i, from] : r.plan.copy_from) {
    const ShardCopy c = CopyShard(*dp_.shards, r, i, from, cp.container.name());
    if (c.status.ok()) {
      ++copied;
      bytes += c.bytes;
    } else if (c.gone) {
      cp.clean = pass.moves_done = false;  // deleted meanwhile: the next pass sees what is left
    } else {
      rest.push_back(i);
    }
  }
  Result<uint64_t> written = bytes;
  if (!rest.empty()) {
    written = dp_.io->RepairShards(r.geo, r.key, r.shard_length, rest, r.version);
    if (written.ok()) *written += bytes;
  }
  if (!written.ok()) {
    PS_LOG_WARN("repair: stripe {} of object '{}' in '{}': {}", r.key.stripe, r.object, cp.container.name(),
                written.status().ToString());
    cp.clean = false;
    pass.moves_done = false;
    written = bytes;  // the copies still count
  } else {
    copied += rest.size();
  }
  Update([&](v1::RepairStatus& st) {
    st.set_shards_repaired(st.shards_repaired() + copied);
    st.set_bytes_repaired(st.bytes_repaired() + *written);
    const double secs = std::chrono::duration<double>(Clock::now() - pass.started).count();
    st.set_bytes_per_second(secs > 0 ? static_cast<double>(st.bytes_repaired()) / secs : 0);
  });
  if (pass.metrics.shards) pass.metrics.shards->Inc(copied);
  if (pass.metrics.bytes) pass.metrics.bytes->Inc(*written);
  jobs.Pace(*written);
}

}  // namespace penstock

#include "repair/vote.h"

#include <fmt/format.h>

namespace penstock {

namespace {

// The verdict over `slots` (`width` in a whole map) where `holds(i, target)` says whether the
// up target of slot i holds what it must.
template <typename Holds>
SlotVerdict CheckSlots(const std::vector<TargetRef>& slots, uint32_t width, Holds holds) {
  SlotVerdict v;
  bool all_up = true;
  for (uint32_t i = 0; i < slots.size(); ++i) {
    const TargetRef& t = slots[i];
    if (!t.up) {
      if (t.id != 0) v.unchecked = true;  // down, or suspect to this client: not checked
      all_up = false;
      continue;
    }
    if (!holds(i, t)) v.fix.push_back(i);
  }
  v.whole = all_up && v.fix.empty() && slots.size() == width;
  return v;
}

}  // namespace

std::string KeyText(const WireShardKey& k) {
  std::string stripe = k.stripe == UINT64_MAX ? std::string("head") : std::to_string(k.stripe);
  return fmt::format("c={} obj={:016x}:{:016x} stripe={} shard={}", k.container, k.object_hi, k.object_lo, stripe,
                     k.shard);
}

const TargetRef* FindTarget(const std::vector<TargetRef>& targets, uint32_t id) {
  for (const TargetRef& t : targets) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

void AddHeadCopy(HeadCopies& hc, uint32_t target, const ListEntry& e, bool corrupt) {
  if (hc.copies.empty()) hc.version = e.shard_version;
  hc.same_tombstone &= e.length == 0 && e.shard_version == hc.version && !corrupt;
  hc.copies.emplace_back(target, e.key);
  hc.versions.push_back(e.shard_version);
}

uint64_t StripeVersion(const StripeShards& shards, uint32_t need) {
  // version -> shard indexes. Stale shards (on recovering targets) hold older versions, so the
  // newest version that enough shards hold is the stripe's; with a target DOWN its copies are
  // not counted, and the pass clears no recovering flag (repairer_pass.cc).
  std::map<uint64_t, std::set<uint32_t>> holders;
  for (const auto& [i, hs] : shards) {
    for (const Holder& x : hs) holders[x.version].insert(i);
  }
  for (auto v = holders.rbegin(); v != holders.rend(); ++v) {
    if (v->second.size() >= need) return v->first;
  }
  return 0;
}

uint64_t ShardLengthAt(const StripeShards& shards, uint64_t version) {
  uint64_t shard_length = 0;
  for (const auto& [i, hs] : shards) {
    for (const Holder& x : hs) {
      if (x.version == version) shard_length = x.length;
    }
  }
  return shard_length;
}

SlotVerdict CheckStripeSlots(const std::vector<TargetRef>& slots, uint32_t width, const StripeShards& shards,
                             uint64_t version) {
  return CheckSlots(slots, width, [&](uint32_t i, const TargetRef& t) {
    bool ok = false;
    auto si = shards.find(i);
    if (si != shards.end()) {
      for (const Holder& x : si->second) ok |= x.target == t.id && x.version >= version;
    }
    return ok;
  });
}

SlotVerdict CheckHeadSlots(const std::vector<TargetRef>& slots, uint32_t width, const HeadCopies* copies,
                           uint64_t version, const CorruptSet& corrupt) {
  // Copy i on slot i's target (a copy under another index there, left by a map change that
  // permuted the slots, is not the one readers ask for).
  return CheckSlots(slots, width, [&](uint32_t i, const TargetRef& t) {
    bool ok = false;
    if (copies != nullptr) {
      const HeadCopies& hc = *copies;
      for (size_t k = 0; k < hc.copies.size(); ++k) {
        ok |= hc.copies[k].first == t.id && hc.copies[k].second.shard == i && hc.versions[k] >= version &&
              !corrupt.count({t.id, KeyText(hc.copies[k].second)});
      }
    }
    return ok;
  });
}

FixPlan PlanFix(const std::vector<uint32_t>& fix, const StripeShards& shards, const std::vector<TargetRef>& slots,
                uint64_t version, bool protected_stripe, const std::vector<TargetRef>& listed) {
  // A shard some target holds at the stripe's version, under its own index, though not
  // where its slot is now (a join permuted the slots, a target left them): copied from
  // there. Readers ask slot i for shard i only, and a decode needs K shards where the
  // slots are, which a permutation can leave too few of.
  // Only while some slot target holds a shard of the stripe at that version: copies
  // left only elsewhere (a truncate deletes on the slots) are not brought back.
  bool on_slots = false;
  for (const auto& [i, hs] : shards) {
    for (const Holder& x : hs) {
      for (const TargetRef& t : slots) on_slots |= x.version == version && x.target == t.id;
    }
  }
  FixPlan plan;
  for (uint32_t i : fix) {
    std::vector<TargetRef> from;
    // An unprotected stripe has no other copy: its one slot never holds it before.
    if (auto si = shards.find(i); (on_slots || !protected_stripe) && si != shards.end()) {
      for (const Holder& x : si->second) {
        if (x.version != version || x.target == slots[i].id) continue;
        const TargetRef* t = FindTarget(listed, x.target);
        if (t != nullptr && t->up) from.push_back(*t);
      }
    }
    if (!from.empty()) {
      plan.copy_from.emplace_back(i, std::move(from));
    } else {
      plan.rebuild.push_back(i);
    }
  }
  return plan;
}

std::vector<OffSlotCopy> CopiesOffSlots(const StripeShards& shards, const std::vector<TargetRef>& slots) {
  std::vector<OffSlotCopy> off;
  for (const auto& [i, hs] : shards) {
    if (i >= slots.size()) continue;
    for (const Holder& x : hs) {
      if (x.target != slots[i].id) off.push_back({i, x.target, x.version});
    }
  }
  return off;
}

std::vector<size_t> HeadCopiesOffSlots(const HeadCopies& hc, const std::vector<TargetRef>& slots) {
  std::vector<size_t> off;
  for (size_t k = 0; k < hc.copies.size(); ++k) {
    const auto& [target, key] = hc.copies[k];
    if (key.shard < slots.size() && slots[key.shard].id == target) continue;
    off.push_back(k);
  }
  return off;
}

bool OnItsSlot(const std::vector<TargetRef>& slots, uint32_t width, uint32_t target, uint32_t shard) {
  const uint32_t slot = width <= 1 ? 0 : shard;
  return slot < slots.size() && slots[slot].id == target;
}

bool StripeSurvives(const StripeShards& shards, const std::vector<TargetRef>& slots, uint32_t need, uint32_t lost) {
  StripeShards rest;
  for (const auto& [i, hs] : shards) {
    for (const Holder& h : hs) {
      if (h.target != lost) rest[i].push_back(h);
    }
  }
  uint32_t may_return = 0;  // slots on targets down for now, whose shards are not listed
  for (uint32_t i = 0; i < slots.size(); ++i) {
    const TargetRef& t = slots[i];
    if (t.id != lost && !t.up && !t.lost && rest.count(i) == 0) ++may_return;
  }
  if (may_return >= need) return true;
  return StripeVersion(rest, need - may_return) != 0;
}

}  // namespace penstock

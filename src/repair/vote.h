// vote.h — repair's verdicts over one pass's listings: which version of a stripe is current,
// which slots lack it (or hold it corrupt), where a missing shard can be copied from, which
// copies are left off the slots, and which head copies are where readers look.
//
// Pure functions over values (what the listings found, the slots of the current map, the
// corrupt list the targets report): no I/O, no clock, no shared state, so every function is
// thread-safe. scan.h builds the values; repairer_heads.cc and repairer_rebuild.cc act on the
// verdicts. Table tests: repair_test.cc.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "client/cluster_view.h"
#include "protocol/shard_protocol.h"

namespace penstock {

// An object id or a data id: (hi, lo).
using Id128 = std::pair<uint64_t, uint64_t>;

// A live target holding one shard of a stripe: at which version, and how long the shard is.
struct Holder {
  uint32_t target;
  uint64_t version;
  uint64_t length;
};

// One stripe's shards as the listings found them: shard index -> the targets holding it.
using StripeShards = std::map<uint32_t, std::vector<Holder>>;
// (data hi, data lo, stripe).
using StripeId = std::tuple<uint64_t, uint64_t, uint64_t>;
// Every shard of one container that the live targets hold, by (object, stripe) then shard.
using ShardIndex = std::map<StripeId, StripeShards>;

// The shards the targets report corrupt: (target, key text as KeyText writes it).
using CorruptSet = std::set<std::pair<uint32_t, std::string>>;

// The text a target reports for a corrupt shard (engine ShardKey::ToString).
std::string KeyText(const WireShardKey& k);

// Target `id` among `targets`; null when it is not there.
const TargetRef* FindTarget(const std::vector<TargetRef>& targets, uint32_t id);

// A head as this pass's listing found it: every copy's target and key, and whether all are
// the same tombstone (`version`).
struct HeadCopies {
  bool same_tombstone = true;
  uint64_t version = 0;
  std::vector<std::pair<uint32_t, WireShardKey>> copies;
  std::vector<uint64_t> versions;  // of each copy
};

// Adds head copy `e` listed on `target` (`corrupt`: the target reports it corrupt) to `hc`.
void AddHeadCopy(HeadCopies& hc, uint32_t target, const ListEntry& e, bool corrupt);

// The stripe's version: the newest that `need` shards hold (K for ec:K+M, else 1); 0 when no
// version has that many.
uint64_t StripeVersion(const StripeShards& shards, uint32_t need);

// The length of the stripe's shards at `version` (of the last one listed).
uint64_t ShardLengthAt(const StripeShards& shards, uint64_t version);

// Which of a stripe's (or a head's) slots must be written.
struct SlotVerdict {
  std::vector<uint32_t> fix;  // slots whose target is up and lacks its shard
  // Some slot's target is down, or suspect to this client: not checked (the container is not
  // clean, the placement not settled).
  bool unchecked = false;
  // Every slot of the width is up and holds its shard: copies elsewhere may go.
  bool whole = false;
};

// Slot i of `slots` (`width` of them in a whole map) must hold shard i at `version` or newer.
SlotVerdict CheckStripeSlots(const std::vector<TargetRef>& slots, uint32_t width, const StripeShards& shards,
                             uint64_t version);

// Slot i of `slots` (`width` in a whole map) must hold head copy i at `version` or newer, not
// reported corrupt. `copies`: the head's listed copies; null when none was listed.
SlotVerdict CheckHeadSlots(const std::vector<TargetRef>& slots, uint32_t width, const HeadCopies* copies,
                           uint64_t version, const CorruptSet& corrupt);

// Where the shards of `fix` come from: a copy at the stripe's version that some live target
// holds under the shard's own index, else a rebuild from the other shards.
struct FixPlan {
  std::vector<std::pair<uint32_t, std::vector<TargetRef>>> copy_from;  // (shard, holders)
  std::vector<uint32_t> rebuild;
};

// `listed`: the targets this pass listed (copy sources must be among them and up);
// `protected_stripe`: the container keeps more than one copy (Redundancy::protected_).
FixPlan PlanFix(const std::vector<uint32_t>& fix, const StripeShards& shards, const std::vector<TargetRef>& slots,
                uint64_t version, bool protected_stripe, const std::vector<TargetRef>& listed);

// A shard copy on a target that is not its slot's.
struct OffSlotCopy {
  uint32_t shard;
  uint32_t target;
  uint64_t version;  // as listed
};

// The copies of a stripe's shards (indexes below slots.size()) on targets other than their
// slot's.
std::vector<OffSlotCopy> CopiesOffSlots(const StripeShards& shards, const std::vector<TargetRef>& slots);

// Indexes into `hc.copies` of the head copies not where readers look: on a target that is no
// longer a slot, or under another index than its target's slot.
std::vector<size_t> HeadCopiesOffSlots(const HeadCopies& hc, const std::vector<TargetRef>& slots);

// Whether a stripe survives the loss of target `lost`: `need` shards (K for ec:K+M, else 1)
// of one version stay on other targets. `shards`: what the up targets hold (`lost`'s own
// shards among them when it is up: they do not count); `slots`: the stripe's slots in the
// current map. A slot on a target that is down but not lost counts as holding its shard (it may
// come back).
bool StripeSurvives(const StripeShards& shards, const std::vector<TargetRef>& slots, uint32_t need, uint32_t lost);

// Whether shard `shard` held by `target` sits on its slot: slot `shard` of `slots` (slot 0
// when the redundancy is `width` 1 or less).
bool OnItsSlot(const std::vector<TargetRef>& slots, uint32_t width, uint32_t target, uint32_t shard);

}  // namespace penstock

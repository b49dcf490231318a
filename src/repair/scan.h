// scan.h — the listings a repair pass starts from: which containers every live target holds
// shards of, and, per container, the object heads and the shards every live target holds
// (kList, no shard data but the heads').
//
// Functions over a ShardClient: they list, log what they cannot list and return values
// (ContainerScan), which the vote (vote.h) and the steps of the pass (repairer_*.cc) read.
// They keep no state; thread-safe as the ShardClient is.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "client/cluster_view.h"
#include "client/shard_client.h"
#include "protocol/shard_protocol.h"
#include "repair/vote.h"

namespace penstock {

// A data id no head names, as this pass's listing found it: its newest version and its
// shards, by target.
struct Unnamed {
  uint64_t newest = 0;
  std::vector<std::pair<uint32_t, WireShardKey>> shards;
};

// What the live targets hold of one container, as one pass listed it.
struct ContainerScan {
  ShardIndex index;                     // live objects' shards, not those reported corrupt
  std::map<Id128, ListEntry> heads;     // each object's newest head copy
  std::map<Id128, HeadCopies> copies;   // every head copy listed, by object
  std::map<Id128, Unnamed> unnamed;     // data no head names (only when find_orphans)
  std::vector<TargetRef> listed;        // the targets whose heads were listed
  // Orphans are looked for only with every target up and listed and no head copy of the
  // container left out of a listing as corrupt (it may name data no other copy names).
  bool find_orphans = false;
  // False when a listing failed: that target's shards wait for the next pass.
  bool complete = true;
  std::chrono::steady_clock::time_point heads_listed;  // when the heads' listing began
};

// Which containers the up targets among `targets` hold shards of (container id -> those
// targets; kListContainers). A target that cannot be listed is logged and left out.
std::map<uint64_t, std::vector<TargetRef>> ListHeldContainers(ShardClient& shards,
                                                              const std::vector<TargetRef>& targets);

// Lists `container` on the up targets among `targets`: the heads on every target first, then
// the data. `corrupt`: shards the targets report corrupt (as good as missing); `find_orphans`:
// whether unnamed data may be looked for (every target up), see ContainerScan::find_orphans.
ContainerScan ScanContainer(ShardClient& shards, const std::vector<TargetRef>& targets, uint64_t container,
                            const CorruptSet& corrupt, bool find_orphans);

// The stripes the walk of `heads` checks (the stripes of every live object).
uint64_t StripesToCheck(const std::map<Id128, ListEntry>& heads);

}  // namespace penstock

#include "repair/scan.h"

#include <algorithm>

#include "common/log.h"
#include "protocol/object_head.h"

namespace penstock {

namespace {

// Adds the heads `t` holds of `container` to `scan`; `named` gathers the data ids they name.
void ListHeads(ShardClient& shards, const TargetRef& t, uint64_t container, const CorruptSet& corrupt,
               ContainerScan& scan, std::set<Id128>& named) {
  uint64_t left_out = 0;
  auto hs = shards.List(t, container, kListHeadsOnly | kListWithData, &left_out);
  if (left_out > 0) scan.find_orphans = false;
  if (!hs.ok()) {
    PS_LOG_WARN("repair: cannot list target {} ({}); its shards wait for the next pass", t.id,
                hs.status().ToString());
    scan.complete = false;
    return;
  }
  scan.listed.push_back(t);
  for (ListEntry& e : *hs) {
    if (!e.data.empty()) {
      auto named_head = DecodeObjectHead(e.data);
      if (named_head.ok()) {
        named.insert({named_head->data_hi, named_head->data_lo});
      } else {
        scan.find_orphans = false;  // what it names is unknown
      }
    }
    AddHeadCopy(scan.copies[{e.key.object_hi, e.key.object_lo}], t.id, e, corrupt.count({t.id, KeyText(e.key)}) != 0);
    ListEntry& newest = scan.heads[{e.key.object_hi, e.key.object_lo}];
    if (newest.shard_version <= e.shard_version) newest = std::move(e);
  }
}

// Adds the data shards `t` holds of `container` to `scan`: unnamed ones (no head in `named`
// names them) to scan.unnamed while orphans are looked for, the others to scan.index.
void ListData(ShardClient& shards, const TargetRef& t, uint64_t container, const CorruptSet& corrupt,
              const std::set<Id128>& named, ContainerScan& scan) {
  auto all = shards.List(t, container, 0);
  if (!all.ok()) {
    PS_LOG_WARN("repair: cannot list target {} ({}); its shards wait for the next pass", t.id,
                all.status().ToString());
    scan.complete = false;
    return;
  }
  for (const ListEntry& e : *all) {
    if (e.key.stripe == UINT64_MAX) continue;
    if (scan.find_orphans && !named.count({e.key.object_hi, e.key.object_lo})) {
      Unnamed& u = scan.unnamed[{e.key.object_hi, e.key.object_lo}];
      u.newest = std::max(u.newest, e.shard_version);
      u.shards.emplace_back(t.id, e.key);
      continue;  // no live object's stripe
    }
    const bool bad = corrupt.count({t.id, KeyText(e.key)}) != 0;
    if (bad) continue;  // as good as missing
    scan.index[{e.key.object_hi, e.key.object_lo, e.key.stripe}][e.key.shard].push_back(
        {t.id, e.shard_version, e.length});
  }
}

}  // namespace

std::map<uint64_t, std::vector<TargetRef>> ListHeldContainers(ShardClient& shards,
                                                              const std::vector<TargetRef>& targets) {
  std::map<uint64_t, std::vector<TargetRef>> held;
  for (const TargetRef& t : targets) {
    if (t.lost || !t.up) continue;
    auto ids = shards.List(t, 0, kListContainers);
    if (!ids.ok()) {
      PS_LOG_WARN("repair: cannot list the containers target {} holds ({}); next pass", t.id, ids.status().ToString());
      continue;
    }
    for (const ListEntry& e : *ids) held[e.key.container].push_back(t);
  }
  return held;
}

ContainerScan ScanContainer(ShardClient& shards, const std::vector<TargetRef>& targets, uint64_t container,
                            const CorruptSet& corrupt, bool find_orphans) {
  ContainerScan scan;
  scan.find_orphans = find_orphans;
  std::set<Id128> named;                                 // data ids some head copy names
  scan.heads_listed = std::chrono::steady_clock::now();  // (from now on)
  for (const TargetRef& t : targets) {
    if (t.lost || !t.up) continue;
    // Heads on every target first, then the data: a put writes its data before its head, so
    // every object whose head is seen here has its data in the listing that follows.
    ListHeads(shards, t, container, corrupt, scan, named);
  }
  for (const TargetRef& t : scan.listed) ListData(shards, t, container, corrupt, named, scan);
  return scan;
}

uint64_t StripesToCheck(const std::map<Id128, ListEntry>& heads) {
  uint64_t total = 0;
  for (const auto& [id, newest] : heads) {
    if (newest.data.empty()) continue;
    auto head = DecodeObjectHead(newest.data);
    if (head.ok()) total += head->stripe_count();
  }
  return total;
}

}  // namespace penstock

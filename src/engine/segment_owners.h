// segment_owners.h — which shards own data in each segment: (segment, offset of a run) -> shard
// key, for every run that owns space in an indexed record.
//
// GC lists a victim segment's owners here, then reads their records from the index. In memory
// only, like the SegmentTable: rebuilt from the index at Open (Add for every record), then kept
// in step by the applier, which calls Apply with each batch once the index holds it.
//
// These entries used to live in the index beside the records: two more RocksDB entries per
// write, one of them a delete at a random key, the applier's largest cost on small random
// writes (engine randwrite4k +33% without them). The price is memory: a map node per run,
// ~96 bytes (Entries() counts them; a target's /metrics shows them). A target of 1 MiB shards
// needs ~100 MiB per TiB stored, one of 64 KiB shards ~1.5 GiB per TiB.
//
// A reader may see an entry a moment before or after the index does (GC lists owners while the
// applier goes on), so it checks each record it reads against the segment, as GC does.
//
// Thread safety: every method may be called from any thread; one mutex guards the map.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "engine/engine.h"
#include "engine/format.h"

namespace penstock::engine {

class SegmentOwners {
 public:
  explicit SegmentOwners(uint32_t segment_count) : segments_(segment_count) {}

  // `key` owns the space of each of `runs` that is not a hole (recovery).
  void Add(const ShardKey& key, const std::vector<BlockRun>& runs);
  // The index now holds `updates` (a batch, in order). For each, the entries of its old
  // record's runs starting where no new run does go, and those of its new record's runs
  // starting where no old run did come (block_map.h RunsStartingElsewhere): a range write
  // touches only the runs it changed.
  void Apply(const std::vector<IndexUpdate>& updates);
  // The keys owning runs in `segment`, each once, in the order of their first run there.
  std::vector<ShardKey> Owners(uint32_t segment) const;
  // Entries held, over all segments.
  uint64_t Entries() const;

 private:
  void Put(const ShardKey& key, const BlockRun& run);    // mu_ held
  void Erase(const ShardKey& key, const BlockRun& run);  // mu_ held

  mutable std::mutex mu_;
  std::vector<std::map<uint64_t, ShardKey>> segments_;  // guarded by mu_; offset -> owner
  uint64_t entries_ = 0;                                // guarded by mu_
};

}  // namespace penstock::engine

// segment_owners.h — which shards own data in each segment: (segment, offset of a run) -> shard
// key, for every run that owns space in an indexed record.
//
// GC lists a victim segment's owners here, then reads their records from the index. In memory
// only, like the SegmentTable: rebuilt from the index at Open (Add for every record), then kept
// in step by the applier, which calls Apply with each batch once the index holds it.
//
// These entries used to live in the index beside the records: two more RocksDB entries per
// write, one of them a delete at a random key, the applier's largest cost on small random
// writes (engine randwrite4k +33% without them). The price is memory: an entry per run,
// 56 bytes (Entries() counts them; a target's /metrics shows them). A target of 1 MiB shards
// needs ~60 MiB per TiB stored, one of 64 KiB shards ~1 GiB per TiB.
// Each segment's entries are sorted by offset, in chunks of at most 2 * kChunk (a chunk is a
// vector; the chunks follow one another in offset order). The log appends in offset order, so a
// new entry usually goes at the end of the last chunk; a run split off an older one (a random
// write into a shard written whole, the tail of the old run starting at a new offset) goes in
// the middle of its segment, where one chunk moves, not the whole segment (a single vector per
// segment had the applier moving ~half a segment's entries per such write: 4% of a target's CPU
// on random 4 KiB writes). An erased entry is marked dead where it is and the segment is
// compacted once half of it is dead (a balanced tree node per entry cost the applier an
// allocation, a free and a rebalance per write: ~6% of the engine's CPU on random writes).
//
// A reader may see an entry a moment before or after the index does (GC lists owners while the
// applier goes on), so it checks each record it reads against the segment, as GC does.
//
// Thread safety: every method may be called from any thread; one mutex guards the map.
#pragma once

#include <cstdint>
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
  static constexpr size_t kChunk = 128;  // entries a chunk is split into, or filled to at the end
  struct Entry {
    uint64_t offset = 0;
    ShardKey key;
    bool live = true;
  };
  using Chunk = std::vector<Entry>;  // sorted by offset, never empty
  struct Segment {
    std::vector<Chunk> chunks;  // in offset order; live and dead entries
    std::vector<Entry> added;   // Add's entries, in the order added, not yet merged (recovery)
    size_t size = 0;            // entries in chunks, live and dead
    size_t dead = 0;
  };
  void Put(const ShardKey& key, const BlockRun& run);    // mu_ held
  void Erase(const ShardKey& key, const BlockRun& run);  // mu_ held
  // Merges the entries Add left into the chunks; of entries at one offset the last added stays.
  void Sort(Segment& segment) const;  // mu_ held
  // The segment's live entries, in offset order, cut into chunks of kChunk (after Sort).
  static void Rechunk(Segment& segment, std::vector<Entry> live);
  // The chunk whose range holds `offset`: the last one starting at or before it (the first if none).
  static std::vector<Chunk>::iterator ChunkFor(Segment& segment, uint64_t offset);

  mutable std::mutex mu_;
  mutable std::vector<Segment> segments_;  // guarded by mu_ (Owners sorts)
  mutable uint64_t entries_ = 0;           // live entries; guarded by mu_
};

}  // namespace penstock::engine

// block_map.h — editing a shard's block map (ShardRecord::runs, format.h): which device blocks
// hold which blocks of the shard after a range write, which space a new record stops using,
// where a relocation puts the blocks.
//
// A shard written whole is one run; a range write (Engine::WriteRange) replaces the runs under
// its blocks with one new run, so a shard written in ranges is several runs, possibly in several
// segments, with holes (runs without space, reading as zeros) where it was extended past its end
// without writing. The committer composes records with these functions at decision time
// (engine_decide.cc); GC moves the blocks a shard has in its victim to one place (Relocated),
// which needs no more landing space than the victim's live bytes.
//
// Pure functions over values, no I/O; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/format.h"
#include "engine/segment_table.h"

namespace penstock::engine {

// A range write whose record would have more runs than this rewrites the shard whole instead
// (one run), so records, journal updates and reads of a shard stay bounded. 256: a shard of
// 1 MiB (the default stripe unit; 256 blocks) is never rewritten, which measured faster end to
// end than 64 (a rewrite about every 32 random writes) once every pass over a record's runs was
// linear (docs/performance.md).
inline constexpr size_t kMaxRuns = 256;

// crc32c of a 4 KiB block of zeros: the checksum of every block of a hole.
uint32_t ZeroBlockCrc();

// The record after a range write: blocks [first_block, first_block + crcs.size()) of the shard
// now lie one after another from `offset` of `segment`, with checksums `crcs`; the length
// becomes max(old length, end) and the version `version`. Blocks past the old end that the
// write does not cover become holes. `old` is the key's record (nullopt: absent). The new blocks
// must lie within the new length. Neighbouring runs that continue each other are joined.
// (`old` null: absent.)
ShardRecord ApplyRangeWrite(const ShardRecord* old, uint64_t first_block, uint32_t segment,
                            uint64_t offset, std::span<const uint32_t> crcs, uint64_t end,
                            uint64_t version);
inline ShardRecord ApplyRangeWrite(const std::optional<ShardRecord>& old, uint64_t first_block,
                                   uint32_t segment, uint64_t offset, std::span<const uint32_t> crcs,
                                   uint64_t end, uint64_t version) {
  return ApplyRangeWrite(old ? &*old : nullptr, first_block, segment, offset, crcs, end, version);
}

// The space `old` owns that `next` (nullopt: the key is deleted) does not: the pieces of old's
// runs whose blocks `next` maps elsewhere. What the applier releases when `next` replaces `old`.
// Linear in the runs of both (they are in block order).
// (`next` null: deleted.)
std::vector<Extent> ReleasedSpace(const ShardRecord& old, const ShardRecord* next);
inline std::vector<Extent> ReleasedSpace(const ShardRecord& old, const std::optional<ShardRecord>& next) {
  return ReleasedSpace(old, next ? &*next : nullptr);
}

// The runs of `runs` that own space and whose start (segment, offset) no run of `other` has:
// the segment owner entries an index update removes (runs = old, other = new) or adds (the
// reverse; segment_owners.h).
// `runs` and `other` are a key's records before and after one update, so a place both use holds
// the same block in both. Linear: records of fragmented shards have hundreds of runs.
std::vector<BlockRun> RunsStartingElsewhere(const std::vector<BlockRun>& runs,
                                            const std::vector<BlockRun>& other);

// For `next` = ApplyRangeWrite(&old, begin, ..., end - begin blocks, ...): the runs of `old`
// starting where no run of `next` does (`gone`) and the reverse (`came`), as
// RunsStartingElsewhere both ways, but looking only at the runs around blocks [begin, end),
// the only ones such a write changes (whole records otherwise: an extension, or a `next` not
// made so).
struct RunChanges {
  std::vector<BlockRun> gone;
  std::vector<BlockRun> came;
};
RunChanges RangeWriteRunChanges(const ShardRecord& old, const ShardRecord& next, uint64_t begin, uint64_t end);

// ReleasedSpace(old, &next) for `next` = ApplyRangeWrite(&old, begin, ...) of blocks [begin, end)
// written to fresh space: the places `old` had for those blocks, by binary search.
std::vector<Extent> RangeWriteReleasedSpace(const ShardRecord& old, uint64_t begin, uint64_t end);

// The run of `record` that holds block `block` (binary search), or nullptr past the end.
const BlockRun* RunHolding(const ShardRecord& record, uint64_t block);

// The space `record` owns: one extent per run that is not a hole.
std::vector<Extent> OwnedSpace(const ShardRecord& record);

// `record` with the blocks it stores in segment `from` moved, in block order, to consecutive
// places from `offset` of `segment` (GC relocation of what a shard has in its victim,
// StoredBytesIn(record, from) long); its other runs and holes stay as they are.
ShardRecord Relocated(const ShardRecord& record, uint32_t from, uint32_t segment, uint64_t offset);

// The record after a GC move committed against `current` (the key's record now): GC read
// `read`, copied its blocks in segment `from` and made `moved` (Relocated(read, from, ...)). Each
// block `current` still keeps at the place `read` had it in `from` goes to its place in `moved`;
// blocks written since stay as they are.
ShardRecord ApplyMove(const ShardRecord& current, const ShardRecord& read, const ShardRecord& moved,
                      uint32_t from);

// The pieces of `extent` that `record` does not use (of a GC copy, the blocks written since).
std::vector<Extent> UnusedSpace(const Extent& extent, const ShardRecord* record);  // null: none
inline std::vector<Extent> UnusedSpace(const Extent& extent, const std::optional<ShardRecord>& record) {
  return UnusedSpace(extent, record ? &*record : nullptr);
}

// Bytes of `record`'s blocks that lie in `segment`.
uint64_t StoredBytesIn(const ShardRecord& record, uint32_t segment);

// Joins neighbouring runs that continue each other on the device, and neighbouring holes.
void JoinRuns(std::vector<BlockRun>& runs);

// The distinct segments of the runs that hold any of blocks [begin, end) (holes own none).
std::vector<uint32_t> SegmentsOf(const ShardRecord& record, uint64_t begin = 0,
                                 uint64_t end = UINT64_MAX);

// Device-relative place of block `block` of `record`: (segment, offset in the segment), or
// nullopt for a hole or a block past the record's end.
std::optional<std::pair<uint32_t, uint64_t>> BlockPlace(const ShardRecord& record, uint64_t block);

}  // namespace penstock::engine

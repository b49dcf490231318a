// format.h — every byte layout the storage engine persists, in one place.
//
// Two places hold engine state:
//   * the data device: a 1 MiB header region (DeviceHeader in its first 4 KiB block), then
//     `segment_count` segments of `segment_bytes` each; shard data sits 4 KiB aligned inside
//     segments, zero-padded to a whole number of 4 KiB blocks (the bytes of a shard's last block
//     past its length are always zeros on the device).
//   * the RocksDB index: one record per shard (key: EncodeShardKey, value: a ShardRecordHeader
//     (version 1: the shard in one extent) or a ShardRecordHeaderV2 followed by its runs
//     (a block map, see BlockRun: version 2 as StoredRuns, version 3 packed), then one crc32c
//     per 4 KiB block; on top of it, merge operands of range writes (RangeOperandHeader, the
//     index's merge operator applies them: index.h)), plus meta
//     records (kMetaSuperblockKey holds a copy of the DeviceHeader, which pairs an index with its
//     device; kMetaJournalKey holds the JournalPosition of the last journal record the index
//     contains, written in the same batch as its updates). Earlier versions also kept a segment
//     entry per run that owns space (key: EncodeSegmentKey(segment, offset of the run), value:
//     EncodeShardKey) and kMetaSegmentIndexKey saying they were complete; Open drops both
//     (segment_owners.h keeps that map in memory now).
//   * the index journal, in the device's header region after the DeviceHeader block
//     [kJournalBegin, data_offset): one record per group-commit batch (JournalRecordHeader, then
//     per index update a JournalUpdateV2, the new record's runs and its block checksums, or
//     for a range write onto an existing record (kJournalRange, record version 3) only the
//     written blocks' run and checksums; version-1 and -2 records are still replayed), zero-padded to
//     whole 4 KiB blocks. Records follow each other from kJournalBegin; when the next one does
//     not fit the engine syncs the index and starts again at kJournalBegin (see journal.h).
// Multi-byte integers inside records are little-endian (the host order; asserted below);
// index keys are big-endian so RocksDB's bytewise order is (container, object, stripe, shard)
// order and one container's (or one object's) shards are a contiguous range.
// Every persisted struct carries a format version; readers reject versions they do not know.
//
// Pure functions over values; thread-safe.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "penstock/status.h"

namespace penstock::engine {

static_assert(std::endian::native == std::endian::little,
              "on-disk records are written in host order, which must be little-endian");

inline constexpr uint64_t kBlockSize = 4096;             // unit of alignment and checksums
inline constexpr uint64_t kDeviceHeaderBytes = 1 << 20;  // segments start here (1 MiB aligned)
inline constexpr uint64_t kDeviceMagic = 0x4B434F5453'4E4550ull;  // "PENSTOCK" little-endian
// Device format 2: the header region after the first block holds the index journal (journal.h).
// A build that knows only format 1 would ignore the journal and, after a crash, lose writes
// acknowledged since the last index sync, so it must refuse such a device: Open upgrades a
// format-1 device (and its index superblock) to 2 before writing any journal record.
// Device format 3: shard records may be block maps (ShardRecordHeaderV2) and journal records
// carry them (kJournalRecordVersion 2). A format-2 build would reject those index records and
// misread those journal records, so Open upgrades a format-1 or 2 device the same way.
// Device format 4: journal records version 3 (kJournalRange entries). A format-3 build would
// end its replay at the first such record and lose what followed, so Open upgrades older
// devices to 4 likewise.
// Device format 5: block-map records are written packed (kShardRecordVersionPacked), which a
// format-4 build cannot read, so Open upgrades older devices to 5 likewise.
// Device format 6: a range write onto an existing record may reach the index as a RocksDB
// merge operand (RangeOperandHeader) instead of the whole record; a format-5 build opens
// RocksDB without the merge operator and could not read such a key, so Open upgrades older
// devices to 6 likewise.
inline constexpr uint32_t kDeviceFormatVersion = 6;
inline constexpr uint32_t kOldestDeviceFormatVersion = 1;
inline constexpr uint16_t kShardRecordVersion = 1;     // one extent (ShardRecordHeader)
inline constexpr uint16_t kShardRecordVersionRuns = 2;  // a block map (ShardRecordHeaderV2), read only
inline constexpr uint16_t kShardRecordVersionPacked = 3;  // a block map, runs packed
inline constexpr uint32_t kNoSegment = UINT32_MAX;  // no space: a zero-length shard, or a hole

// Index key namespaces (first byte of every RocksDB key).
inline constexpr char kMetaTag = 0x00;
inline constexpr char kShardTag = 0x01;
inline constexpr char kSegmentTag = 0x02;
inline constexpr std::string_view kMetaSuperblockKey{"\x00superblock", 11};
inline constexpr std::string_view kMetaSegmentIndexKey{"\x00segment-index", 15};
inline constexpr std::string_view kMetaJournalKey{"\x00journal", 8};
inline constexpr size_t kShardKeyBytes = 1 + 8 + 8 + 8 + 8 + 4;

// First 4 KiB block of the data device (zero-padded), and the index's superblock record.
struct DeviceHeader {
  uint64_t magic = kDeviceMagic;
  uint32_t format_version = kDeviceFormatVersion;
  uint32_t header_crc = 0;  // crc32c of this struct with header_crc = 0
  uint8_t uuid[16] = {};    // random at format time; the index must hold the same uuid
  uint64_t segment_bytes = 0;
  uint64_t segment_count = 0;
  uint64_t data_offset = kDeviceHeaderBytes;  // device offset of segment 0
};
static_assert(sizeof(DeviceHeader) == 56);

// Value of a shard's index record, version 1 (a shard in one extent, or empty); followed by
// block_count little-endian uint32 crc32c values, one per 4 KiB block of the zero-padded data.
// Written for every record that is one extent, so records of shards never written in ranges
// stay as an older build wrote them.
struct ShardRecordHeader {
  uint16_t format_version = kShardRecordVersion;
  uint16_t flags = 0;             // none defined in version 1; must be 0
  uint32_t segment = kNoSegment;  // segment index, kNoSegment when length == 0
  uint64_t offset = 0;            // byte offset inside the segment, multiple of kBlockSize
  uint64_t length = 0;            // logical bytes (what Read returns)
  uint64_t version = 0;           // the caller's shard version
  uint32_t block_count = 0;       // ceil(length / kBlockSize)
  uint32_t reserved = 0;
};
static_assert(sizeof(ShardRecordHeader) == 40);

// One run of a block map as stored (index records version 2, journal updates version 2).
struct StoredRun {
  uint32_t segment = kNoSegment;  // kNoSegment: a hole (the blocks read as zeros)
  uint32_t first_block = 0;       // first block of the shard the run holds
  uint32_t block_count = 0;       // > 0
  uint32_t reserved = 0;
  uint64_t offset = 0;            // byte offset inside the segment, multiple of kBlockSize
};
static_assert(sizeof(StoredRun) == 24);

// Value of a shard's index record, version 2 (a block map): followed by run_count StoredRuns in
// block order, covering blocks [0, block_count) without gaps, then block_count crc32c values
// (a hole's blocks have the crc32c of a zero block). Version 3 (written since device format 5)
// has the same header with format_version 3 and its runs packed: per run varint(block_count),
// varint(segment + 1) (0 for a hole) and, unless a hole, varint(offset / kBlockSize), each run
// starting where the one before ends (LEB128 varints). A 4 KiB run takes ~5 bytes instead of
// 24, so a fragmented 1 MiB shard's record is ~2.3 KiB instead of ~7 KiB: that is what every
// range write copies into RocksDB's memtable and WAL (and the WAL's software crc32c reads).
struct ShardRecordHeaderV2 {
  uint16_t format_version = kShardRecordVersionRuns;
  uint16_t flags = 0;  // none defined in version 2; must be 0
  uint32_t run_count = 0;
  uint64_t length = 0;
  uint64_t version = 0;
  uint32_t block_count = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(ShardRecordHeaderV2) == 32);

// In-memory run of a block map: blocks [first_block, first_block + block_count) of the shard
// lie at `offset` of `segment`, one after another; a hole when segment == kNoSegment.
struct BlockRun {
  uint32_t segment = kNoSegment;
  uint64_t offset = 0;
  uint64_t first_block = 0;
  uint64_t block_count = 0;
  bool hole() const { return segment == kNoSegment; }
  uint64_t end_block() const { return first_block + block_count; }
  friend bool operator==(const BlockRun&, const BlockRun&) = default;
};

// In-memory form of a shard's index record: where each 4 KiB block of the shard is (`runs`,
// in block order, covering [0, block_crcs.size()) without gaps; empty when length == 0) and
// each block's checksum. A shard written whole is one run.
struct ShardRecord {
  std::vector<BlockRun> runs;
  uint64_t length = 0;
  uint64_t version = 0;
  std::vector<uint32_t> block_crcs;

  // The record of a shard stored in one extent at `offset` of `segment` (none when length 0).
  static ShardRecord Contiguous(uint32_t segment, uint64_t offset, uint64_t length,
                                uint64_t version, std::vector<uint32_t> block_crcs);
  // True when the shard is one extent (or empty): what a version-1 record can hold.
  bool contiguous() const { return runs.empty() || (runs.size() == 1 && !runs[0].hole()); }
  // Bytes the shard occupies on the device: its blocks outside holes.
  uint64_t stored_bytes() const;
  friend bool operator==(const ShardRecord&, const ShardRecord&) = default;
};

inline uint64_t BlocksFor(uint64_t length) { return (length + kBlockSize - 1) / kBlockSize; }

// A shard's record or none (deleted, absent): an optional<ShardRecord> whose copies share one
// record instead of copying its block map. A fragmented 1 MiB shard's record is ~9 KiB (256
// runs and 256 checksums); the committer keeps each record it decides in several places (the
// batch's update, the records of the batches in flight, the applier's pending overlay, its
// cache), which copied it four times per 4 KiB write (malloc, free and the copies: ~10% of a
// target's CPU on random writes). Shared records are never changed: Mutable() copies one that
// another SharedRecord also holds. Comparisons compare records, not pointers.
class SharedRecord {
 public:
  SharedRecord() = default;
  SharedRecord(std::nullopt_t) {}  // NOLINT: as optional's
  SharedRecord(ShardRecord record) : p_(std::make_shared<ShardRecord>(std::move(record))) {}  // NOLINT
  SharedRecord(const std::optional<ShardRecord>& record) {  // NOLINT
    if (record) p_ = std::make_shared<ShardRecord>(*record);
  }
  SharedRecord(std::optional<ShardRecord>&& record) {  // NOLINT
    if (record) p_ = std::make_shared<ShardRecord>(std::move(*record));
  }

  bool has_value() const { return p_ != nullptr; }
  explicit operator bool() const { return p_ != nullptr; }
  const ShardRecord& operator*() const { return *p_; }
  const ShardRecord* operator->() const { return p_.get(); }
  const ShardRecord* get() const { return p_.get(); }  // null: none
  // The record, to change; copied first when another SharedRecord holds it too.
  ShardRecord& Mutable() {
    if (p_.use_count() > 1) p_ = std::make_shared<ShardRecord>(*p_);
    return *p_;
  }
  // A new, empty record, to fill in.
  ShardRecord& emplace() {
    p_ = std::make_shared<ShardRecord>();
    return *p_;
  }
  void reset() { p_.reset(); }
  std::optional<ShardRecord> ToOptional() const {
    return p_ ? std::optional<ShardRecord>(*p_) : std::nullopt;
  }

  friend bool operator==(const SharedRecord& a, const SharedRecord& b) {
    return a.p_ == b.p_ || (a.p_ && b.p_ && *a.p_ == *b.p_);
  }
  friend bool operator==(const SharedRecord& a, const std::optional<ShardRecord>& b) {
    return a.p_ ? b && *a.p_ == *b : !b;
  }
  friend bool operator==(const SharedRecord& a, std::nullopt_t) { return !a.p_; }

 private:
  std::shared_ptr<ShardRecord> p_;
};

// One mutation of an index batch: a put of `record`, or a delete when it is none. `old` is
// the key's record before it (as the batch leaves it so far): SegmentOwners drops the entries
// of its runs (then adds those of `record`'s). Decoded from the journal it is unset (older
// records: only its runs' starts). Blocks [written_begin, written_end) of `record` are those
// whose data the batch wrote (the journal's replay checks them); the rest were durable before.
struct IndexUpdate {
  ShardKey key;
  SharedRecord record;
  SharedRecord old;
  uint64_t written_begin = 0;
  uint64_t written_end = UINT64_MAX;  // clipped to the record's blocks
  // A range write: `record` is ApplyRangeWrite(old, written_begin, the written blocks' place and
  // checksums, record->length, record->version). With `old` set, the journal carries only the
  // written blocks (kJournalRange). Decoded from such an entry, `record` is partial until the
  // journal's replay completes it: its one run and its crcs are the written blocks'.
  bool range_write = false;
};

// The written blocks of a range write onto an existing record, where they lie on the device:
// what the journal (kJournalRange) and the index (a merge operand) carry of it. nullopt when
// the update must be stored whole (not a range write onto an existing record, or its written
// blocks are not one extent).
std::optional<BlockRun> RangeEntryRun(const IndexUpdate& u);

// A merge operand of the index (RocksDB's Merge), for an update with a RangeEntryRun `run`;
// followed by block_count uint32 crc32c values (the written blocks'). Applied to the key's
// record before it, it gives ApplyRangeWrite(before, first_block, segment, offset, crcs,
// length, version): the update's record.
inline constexpr uint16_t kRangeOperandVersion = 1;
struct RangeOperandHeader {
  uint16_t format_version = kRangeOperandVersion;
  uint16_t flags = 0;  // none defined in version 1; must be 0
  uint32_t segment = kNoSegment;
  uint64_t first_block = 0;
  uint64_t block_count = 0;
  uint64_t offset = 0;   // of the first written block in the segment, multiple of kBlockSize
  uint64_t length = 0;   // the new record's
  uint64_t version = 0;  // the new record's
};
static_assert(sizeof(RangeOperandHeader) == 48);
std::string EncodeRangeOperand(const IndexUpdate& u, const BlockRun& run);
// `before` (the key's record; nullopt: absent) with the operand applied. Errors: kDataLoss
// naming `key` (malformed operand, or blocks past the new length).
Result<ShardRecord> ApplyRangeOperand(const ShardKey& key, const std::optional<ShardRecord>& before,
                                      std::string_view operand);

// Index journal. A record is durable on the device before the index batch it repeats is
// written (unsynced); Open replays the records the index does not hold.
inline constexpr uint64_t kJournalMagic = 0x4C4E524A'4B545350ull;  // "PSTKJRNL" little-endian
inline constexpr uint16_t kJournalRecordVersion = 3;     // JournalUpdateV2, range entries (written)
inline constexpr uint16_t kJournalRecordVersionTwo = 2;  // JournalUpdateV2, no range entries
inline constexpr uint16_t kJournalRecordVersionOne = 1;  // JournalUpdate (replayed only)
inline constexpr uint64_t kJournalBegin = kBlockSize;  // the DeviceHeader block comes first
inline constexpr uint64_t kMaxJournalRecordBytes = 256 << 10;  // larger batches sync the index

struct JournalRecordHeader {
  uint64_t magic = kJournalMagic;
  uint8_t uuid[16] = {};  // the device's: a reformatted device never replays old records
  uint64_t seq = 0;       // 1, 2, 3, ... one per record, never reused once in the index
  uint16_t format_version = kJournalRecordVersion;
  uint16_t flags = 0;  // none defined in versions 1 and 2; must be 0
  uint32_t update_count = 0;
  uint32_t payload_bytes = 0;  // bytes of updates after this header
  uint32_t crc = 0;            // crc32c of this header (crc = 0) and the payload
};
static_assert(sizeof(JournalRecordHeader) == 48);

// One IndexUpdate of a version-1 journal record; followed by block_count uint32 crc32c values
// (the new record's, which is one extent).
struct JournalUpdate {
  uint64_t container = 0, object_hi = 0, object_lo = 0, stripe = 0;
  uint32_t shard = 0;
  uint8_t kind = 0;  // kJournalPut or kJournalDelete
  uint8_t reserved[3] = {};
  uint32_t old_segment = kNoSegment;  // where the key's previous data was (its segment entry)
  uint32_t segment = kNoSegment;
  uint64_t old_offset = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t version = 0;
  uint32_t block_count = 0;
  uint32_t reserved2 = 0;
};
static_assert(sizeof(JournalUpdate) == 88);

// One IndexUpdate of a version-2 journal record; followed by old_run_count StoredRuns,
// run_count StoredRuns (the new record's block map, as in ShardRecordHeaderV2) and block_count
// uint32 crc32c values. The old runs were the segment entries the update removed while the
// index kept them; written as none since, read (into IndexUpdate::old) and unused.
struct JournalUpdateV2 {
  uint64_t container = 0, object_hi = 0, object_lo = 0, stripe = 0;
  uint32_t shard = 0;
  uint8_t kind = 0;  // kJournalPut, kJournalDelete or (record version 3) kJournalRange
  uint8_t reserved[3] = {};
  uint64_t length = 0;
  uint64_t version = 0;
  uint32_t block_count = 0;
  uint32_t run_count = 0;
  uint32_t old_run_count = 0;
  uint32_t reserved2 = 0;
  uint64_t written_begin = 0;  // blocks [written_begin, written_end) were written by the batch
  uint64_t written_end = 0;
};
static_assert(sizeof(JournalUpdateV2) == 88);
inline constexpr uint8_t kJournalPut = 1;
inline constexpr uint8_t kJournalDelete = 2;
// A range write onto the key's existing record: run_count 1 (the written blocks' run, first_block
// = written_begin, block_count = written_end - written_begin) and block_count crcs (those blocks'
// only); `length` and `version` are the new record's. Replay rebuilds the record from the key's
// record before it (ApplyRangeWrite), instead of the journal repeating the whole block map.
inline constexpr uint8_t kJournalRange = 3;

// Value of kMetaJournalKey: the last journal record applied to the index and where the next
// one starts.
struct JournalPosition {
  uint64_t seq = 0;
  uint64_t offset = kJournalBegin;  // device offset
  friend bool operator==(const JournalPosition&, const JournalPosition&) = default;
};
static_assert(sizeof(JournalPosition) == 16);

// The record for `updates`, zero-padded to whole 4 KiB blocks.
std::string EncodeJournalRecord(const uint8_t (&uuid)[16], uint64_t seq,
                                const std::vector<IndexUpdate>& updates);
// Bytes EncodeJournalRecord would return for `updates`.
uint64_t JournalRecordBytes(const std::vector<IndexUpdate>& updates);
// The header at the start of `block` if it is record `seq` of the device `uuid` (magic, uuid,
// seq, version, size plausible); nullopt otherwise: the journal ends there.
std::optional<JournalRecordHeader> ParseJournalHeader(std::span<const std::byte> block,
                                                      const uint8_t (&uuid)[16], uint64_t seq);
// The updates of a whole record (header and payload); nullopt when its crc or contents do not
// check out (a torn write).
std::optional<std::vector<IndexUpdate>> DecodeJournalRecord(std::span<const std::byte> record);
std::string EncodeJournalPosition(const JournalPosition& position);
std::optional<JournalPosition> DecodeJournalPosition(std::string_view bytes);

// Index keys. Prefixes select a container's or an object's contiguous range of shard keys.
std::string EncodeShardKey(const ShardKey& key);
std::optional<ShardKey> DecodeShardKey(std::string_view bytes);  // nullopt if not a shard key
std::string ContainerPrefix(uint64_t container);
std::string ObjectPrefix(uint64_t container, const ObjectId& object);
// Segment entries, as older versions kept them in the index (Index::DropSegmentEntries removes
// them): key of the shard data that starts at `offset` of `segment`.
std::string EncodeSegmentKey(uint32_t segment, uint64_t offset);

// Index values. Decode errors: kDataLoss naming `key` (corrupt record, unknown version).
std::string EncodeShardRecord(const ShardRecord& record);
Result<ShardRecord> DecodeShardRecord(const ShardKey& key, std::string_view bytes);

// Device header: Encode fills in header_crc. Decode returns nullopt when `bytes` does not start
// with a valid header (never formatted, or zeroed); kDataLoss when the magic matches but the
// crc or version does not.
std::string EncodeDeviceHeader(DeviceHeader header);
Result<std::optional<DeviceHeader>> DecodeDeviceHeader(std::span<const std::byte> bytes);

// crc32c of each kBlockSize block of `padded` (size a multiple of kBlockSize).
std::vector<uint32_t> BlockChecksums(std::span<const std::byte> padded);

}  // namespace penstock::engine

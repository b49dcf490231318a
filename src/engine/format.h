// format.h — every byte layout the storage engine persists, in one place.
//
// Two places hold engine state:
//   * the data device: a 1 MiB header region (DeviceHeader in its first 4 KiB block), then
//     `segment_count` segments of `segment_bytes` each; shard data sits 4 KiB aligned inside
//     one segment, zero-padded to a whole number of 4 KiB blocks.
//   * the RocksDB index: one record per shard (key: EncodeShardKey, value: ShardRecordHeader
//     followed by one crc32c per 4 KiB block), one segment entry per shard that owns space
//     (key: EncodeSegmentKey(segment, offset), value: EncodeShardKey — so GC finds a segment's
//     shards without reading every record), plus meta records (kMetaSuperblockKey holds a
//     copy of the DeviceHeader, which pairs an index with its device; kMetaSegmentIndexKey
//     says the segment entries are complete).
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
inline constexpr uint32_t kDeviceFormatVersion = 1;
inline constexpr uint16_t kShardRecordVersion = 1;
inline constexpr uint32_t kNoSegment = UINT32_MAX;  // a zero-length shard owns no space

// Index key namespaces (first byte of every RocksDB key).
inline constexpr char kMetaTag = 0x00;
inline constexpr char kShardTag = 0x01;
inline constexpr char kSegmentTag = 0x02;
inline constexpr std::string_view kMetaSuperblockKey{"\x00superblock", 11};
inline constexpr std::string_view kMetaSegmentIndexKey{"\x00segment-index", 15};
inline constexpr size_t kSegmentKeyBytes = 1 + 4 + 8;
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

// Value of a shard's index record; followed by block_count little-endian uint32 crc32c values,
// one per 4 KiB block of the zero-padded data.
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

// In-memory form of a shard's index record.
struct ShardRecord {
  uint32_t segment = kNoSegment;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t version = 0;
  std::vector<uint32_t> block_crcs;

  // Bytes the shard occupies in its segment (length rounded up to kBlockSize).
  uint64_t allocated_bytes() const { return (length + kBlockSize - 1) / kBlockSize * kBlockSize; }
};

inline uint64_t BlocksFor(uint64_t length) { return (length + kBlockSize - 1) / kBlockSize; }

// Index keys. Prefixes select a container's or an object's contiguous range of shard keys.
std::string EncodeShardKey(const ShardKey& key);
std::optional<ShardKey> DecodeShardKey(std::string_view bytes);  // nullopt if not a shard key
std::string ContainerPrefix(uint64_t container);
std::string ObjectPrefix(uint64_t container, const ObjectId& object);
// Segment entries: key of the shard data that starts at `offset` of `segment`; the prefix of
// one segment's entries (in offset order).
std::string EncodeSegmentKey(uint32_t segment, uint64_t offset);
std::string SegmentPrefix(uint32_t segment);

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

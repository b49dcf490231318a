#include "engine/format.h"

#include <fmt/format.h>

#include <cstring>

#include "common/crc32c.h"

namespace penstock::engine {
namespace {

void PutBigEndian64(std::string& out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

void PutBigEndian32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

uint64_t GetBigEndian(std::string_view bytes, size_t pos, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) v = (v << 8) | static_cast<uint8_t>(bytes[pos + i]);
  return v;
}

uint32_t HeaderCrc(DeviceHeader header) {
  header.header_crc = 0;
  return Crc32c(std::as_bytes(std::span(&header, 1)));
}

}  // namespace

std::string ContainerPrefix(uint64_t container) {
  std::string out;
  out.reserve(kShardKeyBytes);
  out.push_back(kShardTag);
  PutBigEndian64(out, container);
  return out;
}

std::string ObjectPrefix(uint64_t container, const ObjectId& object) {
  std::string out = ContainerPrefix(container);
  PutBigEndian64(out, object.hi);
  PutBigEndian64(out, object.lo);
  return out;
}

std::string EncodeShardKey(const ShardKey& key) {
  std::string out = ObjectPrefix(key.container, key.object);
  PutBigEndian64(out, key.stripe);
  PutBigEndian32(out, key.shard);
  return out;
}

std::string SegmentPrefix(uint32_t segment) {
  std::string out(1, kSegmentTag);
  PutBigEndian32(out, segment);
  return out;
}

std::string EncodeSegmentKey(uint32_t segment, uint64_t offset) {
  std::string out = SegmentPrefix(segment);
  PutBigEndian64(out, offset);
  return out;
}

std::optional<ShardKey> DecodeShardKey(std::string_view bytes) {
  if (bytes.size() != kShardKeyBytes || bytes[0] != kShardTag) return std::nullopt;
  ShardKey key;
  key.container = GetBigEndian(bytes, 1, 8);
  key.object.hi = GetBigEndian(bytes, 9, 8);
  key.object.lo = GetBigEndian(bytes, 17, 8);
  key.stripe = GetBigEndian(bytes, 25, 8);
  key.shard = static_cast<uint32_t>(GetBigEndian(bytes, 33, 4));
  return key;
}

std::string EncodeShardRecord(const ShardRecord& record) {
  ShardRecordHeader header;
  header.segment = record.segment;
  header.offset = record.offset;
  header.length = record.length;
  header.version = record.version;
  header.block_count = static_cast<uint32_t>(record.block_crcs.size());
  std::string out(sizeof(header) + record.block_crcs.size() * sizeof(uint32_t), '\0');
  std::memcpy(out.data(), &header, sizeof(header));
  if (!record.block_crcs.empty()) {
    std::memcpy(out.data() + sizeof(header), record.block_crcs.data(),
                record.block_crcs.size() * sizeof(uint32_t));
  }
  return out;
}

namespace {

// The shape every stored shard record must have, in the index and in journal records: one
// checksum per block of its length, space exactly when it has bytes, block-aligned.
bool RecordShapeOk(uint64_t length, uint64_t block_count, uint32_t segment, uint64_t offset) {
  return block_count == BlocksFor(length) && (length == 0) == (segment == kNoSegment) && offset % kBlockSize == 0;
}

// A ShardRecord from its fields and the `block_count` checksums stored at `crcs`.
ShardRecord RecordFrom(uint32_t segment, uint64_t offset, uint64_t length, uint64_t version, const std::byte* crcs,
                       uint32_t block_count) {
  ShardRecord record;
  record.segment = segment;
  record.offset = offset;
  record.length = length;
  record.version = version;
  record.block_crcs.resize(block_count);
  if (block_count > 0) std::memcpy(record.block_crcs.data(), crcs, block_count * sizeof(uint32_t));
  return record;
}

}  // namespace

Result<ShardRecord> DecodeShardRecord(const ShardKey& key, std::string_view bytes) {
  ShardRecordHeader header;
  if (bytes.size() < sizeof(header)) {
    return DataLoss(fmt::format("index record of shard {} is truncated ({} bytes); the index is "
                                "corrupt, rebuild this target",
                                key.ToString(), bytes.size()));
  }
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (header.format_version != kShardRecordVersion) {
    return DataLoss(fmt::format("index record of shard {} has format version {}, this build "
                                "reads version {}; run a newer penstock",
                                key.ToString(), header.format_version, kShardRecordVersion));
  }
  const bool consistent =
      header.flags == 0 && RecordShapeOk(header.length, header.block_count, header.segment, header.offset) &&
      bytes.size() == sizeof(header) + uint64_t{header.block_count} * sizeof(uint32_t);
  if (!consistent) {
    return DataLoss(fmt::format("index record of shard {} is inconsistent (length {}, {} "
                                "checksums, {} bytes); the index is corrupt, rebuild this target",
                                key.ToString(), header.length, header.block_count, bytes.size()));
  }
  return RecordFrom(header.segment, header.offset, header.length, header.version,
                    reinterpret_cast<const std::byte*>(bytes.data()) + sizeof(header), header.block_count);
}

std::string EncodeDeviceHeader(DeviceHeader header) {
  header.header_crc = HeaderCrc(header);
  std::string out(sizeof(header), '\0');
  std::memcpy(out.data(), &header, sizeof(header));
  return out;
}

Result<std::optional<DeviceHeader>> DecodeDeviceHeader(std::span<const std::byte> bytes) {
  DeviceHeader header;
  if (bytes.size() < sizeof(header)) return std::optional<DeviceHeader>();
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (header.magic != kDeviceMagic) return std::optional<DeviceHeader>();
  if (header.header_crc != HeaderCrc(header)) {
    return DataLoss("Penstock device header fails its crc32c check; the header block is corrupt");
  }
  if (header.format_version < kOldestDeviceFormatVersion || header.format_version > kDeviceFormatVersion) {
    return DataLoss(fmt::format("Penstock device format version {} is not supported by this "
                                "build (reads versions {} to {}); run a newer penstock",
                                header.format_version, kOldestDeviceFormatVersion, kDeviceFormatVersion));
  }
  return std::optional<DeviceHeader>(header);
}

namespace {

uint32_t JournalCrc(JournalRecordHeader header, std::span<const std::byte> payload) {
  header.crc = 0;
  uint32_t crc = Crc32c(std::as_bytes(std::span(&header, 1)));
  return Crc32c(payload, crc);
}

uint64_t PayloadBytes(const std::vector<IndexUpdate>& updates) {
  uint64_t bytes = 0;
  for (const IndexUpdate& u : updates) {
    bytes += sizeof(JournalUpdate) + (u.record ? u.record->block_crcs.size() * sizeof(uint32_t) : 0);
  }
  return bytes;
}

}  // namespace

uint64_t JournalRecordBytes(const std::vector<IndexUpdate>& updates) {
  uint64_t bytes = sizeof(JournalRecordHeader) + PayloadBytes(updates);
  return (bytes + kBlockSize - 1) / kBlockSize * kBlockSize;
}

std::string EncodeJournalRecord(const uint8_t (&uuid)[16], uint64_t seq,
                                const std::vector<IndexUpdate>& updates) {
  std::string out(JournalRecordBytes(updates), '\0');
  JournalRecordHeader header;
  std::memcpy(header.uuid, uuid, sizeof(header.uuid));
  header.seq = seq;
  header.update_count = static_cast<uint32_t>(updates.size());
  header.payload_bytes = static_cast<uint32_t>(PayloadBytes(updates));
  size_t pos = sizeof(header);
  for (const IndexUpdate& u : updates) {
    JournalUpdate j;
    j.container = u.key.container;
    j.object_hi = u.key.object.hi;
    j.object_lo = u.key.object.lo;
    j.stripe = u.key.stripe;
    j.shard = u.key.shard;
    j.kind = u.record ? kJournalPut : kJournalDelete;
    if (u.old) {
      j.old_segment = u.old->segment;
      j.old_offset = u.old->offset;
    }
    if (u.record) {
      j.segment = u.record->segment;
      j.offset = u.record->offset;
      j.length = u.record->length;
      j.version = u.record->version;
      j.block_count = static_cast<uint32_t>(u.record->block_crcs.size());
    }
    std::memcpy(out.data() + pos, &j, sizeof(j));
    pos += sizeof(j);
    if (j.block_count > 0) {
      std::memcpy(out.data() + pos, u.record->block_crcs.data(), j.block_count * sizeof(uint32_t));
      pos += j.block_count * sizeof(uint32_t);
    }
  }
  header.crc = JournalCrc(header, std::as_bytes(std::span(out)).subspan(sizeof(header),
                                                                         header.payload_bytes));
  std::memcpy(out.data(), &header, sizeof(header));
  return out;
}

std::optional<JournalRecordHeader> ParseJournalHeader(std::span<const std::byte> block,
                                                      const uint8_t (&uuid)[16], uint64_t seq) {
  JournalRecordHeader header;
  if (block.size() < sizeof(header)) return std::nullopt;
  std::memcpy(&header, block.data(), sizeof(header));
  if (header.magic != kJournalMagic || std::memcmp(header.uuid, uuid, sizeof(uuid)) != 0 ||
      header.seq != seq || header.format_version != kJournalRecordVersion || header.flags != 0 ||
      sizeof(header) + uint64_t{header.payload_bytes} > kMaxJournalRecordBytes) {
    return std::nullopt;
  }
  return header;
}

std::optional<std::vector<IndexUpdate>> DecodeJournalRecord(std::span<const std::byte> record) {
  JournalRecordHeader header;
  if (record.size() < sizeof(header)) return std::nullopt;
  std::memcpy(&header, record.data(), sizeof(header));
  if (record.size() - sizeof(header) < header.payload_bytes) return std::nullopt;
  std::span<const std::byte> payload = record.subspan(sizeof(header), header.payload_bytes);
  if (JournalCrc(header, payload) != header.crc) return std::nullopt;
  std::vector<IndexUpdate> updates;
  size_t pos = 0;
  for (uint32_t i = 0; i < header.update_count; ++i) {
    JournalUpdate j;
    if (payload.size() - pos < sizeof(j)) return std::nullopt;
    std::memcpy(&j, payload.data() + pos, sizeof(j));
    pos += sizeof(j);
    IndexUpdate u;
    u.key = ShardKey{j.container, ObjectId{j.object_hi, j.object_lo}, j.stripe, j.shard};
    if (j.old_segment != kNoSegment) {
      u.old.emplace();
      u.old->segment = j.old_segment;
      u.old->offset = j.old_offset;
    }
    if (j.kind == kJournalPut) {
      if (!RecordShapeOk(j.length, j.block_count, j.segment, j.offset) ||
          (payload.size() - pos) / sizeof(uint32_t) < j.block_count) {
        return std::nullopt;
      }
      u.record = RecordFrom(j.segment, j.offset, j.length, j.version, payload.data() + pos, j.block_count);
      pos += j.block_count * sizeof(uint32_t);
    } else if (j.kind != kJournalDelete || j.block_count != 0) {
      return std::nullopt;
    }
    updates.push_back(std::move(u));
  }
  if (pos != payload.size()) return std::nullopt;
  return updates;
}

std::string EncodeJournalPosition(const JournalPosition& position) {
  std::string out(sizeof(position), '\0');
  std::memcpy(out.data(), &position, sizeof(position));
  return out;
}

std::optional<JournalPosition> DecodeJournalPosition(std::string_view bytes) {
  JournalPosition position;
  if (bytes.size() != sizeof(position)) return std::nullopt;
  std::memcpy(&position, bytes.data(), sizeof(position));
  if (position.offset % kBlockSize != 0 || position.offset < kJournalBegin) return std::nullopt;
  return position;
}

std::vector<uint32_t> BlockChecksums(std::span<const std::byte> padded) {
  std::vector<uint32_t> crcs;
  crcs.reserve(padded.size() / kBlockSize);
  for (size_t pos = 0; pos + kBlockSize <= padded.size(); pos += kBlockSize) {
    crcs.push_back(Crc32c(padded.subspan(pos, kBlockSize)));
  }
  return crcs;
}

}  // namespace penstock::engine

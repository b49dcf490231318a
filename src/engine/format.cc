#include "engine/format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/crc32c.h"
#include "engine/block_map.h"

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

std::string EncodeSegmentKey(uint32_t segment, uint64_t offset) {
  std::string out(1, kSegmentTag);
  PutBigEndian32(out, segment);
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

ShardRecord ShardRecord::Contiguous(uint32_t segment, uint64_t offset, uint64_t length,
                                    uint64_t version, std::vector<uint32_t> block_crcs) {
  ShardRecord record;
  record.length = length;
  record.version = version;
  if (!block_crcs.empty()) {
    record.runs.push_back({.segment = segment, .offset = offset, .first_block = 0,
                           .block_count = block_crcs.size()});
  }
  record.block_crcs = std::move(block_crcs);
  return record;
}

uint64_t ShardRecord::stored_bytes() const {
  uint64_t blocks = 0;
  for (const BlockRun& run : runs) blocks += run.hole() ? 0 : run.block_count;
  return blocks * kBlockSize;
}

namespace {

// The shape every stored shard record must have, in the index and in journal records: one
// checksum per block of its length; runs in block order covering exactly those blocks, none
// empty, block-aligned.
bool RecordShapeOk(const ShardRecord& r) {
  if (r.block_crcs.size() != BlocksFor(r.length) || r.runs.empty() != (r.length == 0)) return false;
  uint64_t next = 0;
  for (const BlockRun& run : r.runs) {
    if (run.first_block != next || run.block_count == 0 || run.offset % kBlockSize != 0 ||
        (run.hole() && run.offset != 0)) {
      return false;
    }
    next = run.end_block();
  }
  return next == r.block_crcs.size();
}

// Reads `count` StoredRuns at `at` into `out`; false when they do not fit in [at, end).
bool ReadRuns(const std::byte* at, const std::byte* end, uint64_t count, std::vector<BlockRun>& out) {
  if (static_cast<uint64_t>(end - at) / sizeof(StoredRun) < count) return false;
  out.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    StoredRun s;
    std::memcpy(&s, at + i * sizeof(s), sizeof(s));
    out.push_back({.segment = s.segment, .offset = s.offset, .first_block = s.first_block,
                   .block_count = s.block_count});
  }
  return true;
}

// Appends `runs` as StoredRuns to `out` at `pos`; returns the position after them.
size_t WriteRuns(std::string& out, size_t pos, const std::vector<BlockRun>& runs) {
  for (const BlockRun& run : runs) {
    StoredRun s{.segment = run.segment, .first_block = static_cast<uint32_t>(run.first_block),
                .block_count = static_cast<uint32_t>(run.block_count), .offset = run.offset};
    std::memcpy(out.data() + pos, &s, sizeof(s));
    pos += sizeof(s);
  }
  return pos;
}

// Packed runs (record version 3): per run, in block order, varint(block_count), then
// varint(segment + 1) (0 for a hole), then for a run that is not a hole varint(offset / 4 KiB).
// first_block is not stored: each run starts where the one before it ends.
constexpr size_t kMaxVarintBytes = 10;
constexpr size_t kMaxPackedRunBytes = 3 * kMaxVarintBytes;

char* PutVarint(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

// False when the varint runs past `end` or is longer than 64 bits allow.
bool GetVarint(const std::byte*& p, const std::byte* end, uint64_t& v) {
  v = 0;
  for (unsigned shift = 0; shift < 64 && p < end; shift += 7) {
    const auto b = static_cast<uint8_t>(*p++);
    if (shift == 63 && b > 1) return false;
    v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// Packs `runs` into `out` at `pos` (room for kMaxPackedRunBytes each); returns the position
// after them.
size_t PackRuns(std::string& out, size_t pos, const std::vector<BlockRun>& runs) {
  char* const begin = out.data();
  char* p = begin + pos;
  for (const BlockRun& run : runs) {
    p = PutVarint(p, run.block_count);
    p = PutVarint(p, run.hole() ? 0 : uint64_t{run.segment} + 1);
    if (!run.hole()) p = PutVarint(p, run.offset / kBlockSize);
  }
  return static_cast<size_t>(p - begin);
}

// Reads `count` packed runs at `at` into `out`, advancing `at`; false when they do not fit in
// [at, end) or name impossible places (RecordShapeOk checks the rest).
bool UnpackRuns(const std::byte*& at, const std::byte* end, uint64_t count, std::vector<BlockRun>& out) {
  if (static_cast<uint64_t>(end - at) / 2 < count) return false;  // a run takes 2 bytes at least
  out.reserve(count);
  uint64_t next = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t blocks = 0, segment = 0, offset_blocks = 0;
    if (!GetVarint(at, end, blocks) || !GetVarint(at, end, segment)) return false;
    if (blocks > UINT32_MAX || segment > kNoSegment) return false;
    if (segment != 0 && (!GetVarint(at, end, offset_blocks) || offset_blocks > UINT64_MAX / kBlockSize)) {
      return false;
    }
    out.push_back({.segment = segment == 0 ? kNoSegment : static_cast<uint32_t>(segment - 1),
                   .offset = offset_blocks * kBlockSize, .first_block = next, .block_count = blocks});
    next += blocks;
  }
  return true;
}

void ReadCrcs(const std::byte* at, uint64_t count, std::vector<uint32_t>& out) {
  out.resize(count);
  if (count > 0) std::memcpy(out.data(), at, count * sizeof(uint32_t));
}

}  // namespace

std::string EncodeShardRecord(const ShardRecord& record) {
  const size_t crc_bytes = record.block_crcs.size() * sizeof(uint32_t);
  std::string out;
  size_t pos;
  if (record.contiguous()) {  // version 1: what older builds wrote and read
    ShardRecordHeader header;
    if (!record.runs.empty()) {
      header.segment = record.runs[0].segment;
      header.offset = record.runs[0].offset;
    }
    header.length = record.length;
    header.version = record.version;
    header.block_count = static_cast<uint32_t>(record.block_crcs.size());
    out.assign(sizeof(header) + crc_bytes, '\0');
    std::memcpy(out.data(), &header, sizeof(header));
    pos = sizeof(header);
  } else {  // version 3: a block map, its runs packed
    ShardRecordHeaderV2 header;
    header.format_version = kShardRecordVersionPacked;
    header.run_count = static_cast<uint32_t>(record.runs.size());
    header.length = record.length;
    header.version = record.version;
    header.block_count = static_cast<uint32_t>(record.block_crcs.size());
    out.resize(sizeof(header) + record.runs.size() * kMaxPackedRunBytes + crc_bytes);
    std::memcpy(out.data(), &header, sizeof(header));
    pos = PackRuns(out, sizeof(header), record.runs);
    out.resize(pos + crc_bytes);
  }
  if (crc_bytes > 0) std::memcpy(out.data() + pos, record.block_crcs.data(), crc_bytes);
  return out;
}

Result<ShardRecord> DecodeShardRecord(const ShardKey& key, std::string_view bytes) {
  uint16_t format_version = 0;
  if (bytes.size() < sizeof(ShardRecordHeaderV2)) {
    return DataLoss(fmt::format("index record of shard {} is truncated ({} bytes); the index is "
                                "corrupt, rebuild this target",
                                key.ToString(), bytes.size()));
  }
  std::memcpy(&format_version, bytes.data(), sizeof(format_version));
  const auto* data = reinterpret_cast<const std::byte*>(bytes.data());
  const std::byte* const end = data + bytes.size();
  ShardRecord record;
  bool consistent = false;
  uint64_t block_count = 0;
  if (format_version == kShardRecordVersion && bytes.size() >= sizeof(ShardRecordHeader)) {
    ShardRecordHeader header;
    std::memcpy(&header, data, sizeof(header));
    block_count = header.block_count;
    consistent = header.flags == 0 && (header.length == 0) == (header.segment == kNoSegment) &&
                 bytes.size() == sizeof(header) + block_count * sizeof(uint32_t);
    if (consistent) {
      std::vector<uint32_t> crcs;
      ReadCrcs(data + sizeof(header), block_count, crcs);
      record = ShardRecord::Contiguous(header.segment, header.offset, header.length,
                                       header.version, std::move(crcs));
    }
  } else if (format_version == kShardRecordVersionRuns || format_version == kShardRecordVersionPacked) {
    ShardRecordHeaderV2 header;
    std::memcpy(&header, data, sizeof(header));
    block_count = header.block_count;
    record.length = header.length;
    record.version = header.version;
    const std::byte* at = data + sizeof(header);
    if (format_version == kShardRecordVersionRuns) {
      consistent = ReadRuns(at, end, header.run_count, record.runs);
      if (consistent) at += uint64_t{header.run_count} * sizeof(StoredRun);
    } else {
      consistent = UnpackRuns(at, end, header.run_count, record.runs);
    }
    consistent = consistent && header.flags == 0 &&
                 static_cast<uint64_t>(end - at) == block_count * sizeof(uint32_t);
    if (consistent) ReadCrcs(at, block_count, record.block_crcs);
  } else {
    return DataLoss(fmt::format("index record of shard {} has format version {}, this build "
                                "reads versions {} to {}; run a newer penstock",
                                key.ToString(), format_version, kShardRecordVersion,
                                kShardRecordVersionPacked));
  }
  if (!consistent || !RecordShapeOk(record)) {
    return DataLoss(fmt::format("index record of shard {} is inconsistent (version {}, length {}, "
                                "{} checksums, {} runs, {} bytes); the index is corrupt, rebuild "
                                "this target", key.ToString(), format_version, record.length,
                                block_count, record.runs.size(), bytes.size()));
  }
  return record;
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

std::optional<BlockRun> RangeEntryRun(const IndexUpdate& u) {
  if (!u.range_write || !u.old || !u.record) return std::nullopt;
  const uint64_t blocks = u.record->block_crcs.size();
  const uint64_t begin = std::min<uint64_t>(u.written_begin, blocks);
  const uint64_t end = std::clamp<uint64_t>(u.written_end, begin, blocks);
  const BlockRun* holding = end > begin ? RunHolding(*u.record, begin) : nullptr;
  if (holding == nullptr || holding->hole() || holding->end_block() < end) return std::nullopt;  // not one extent
  return BlockRun{.segment = holding->segment,
                  .offset = holding->offset + (begin - holding->first_block) * kBlockSize,
                  .first_block = begin,
                  .block_count = end - begin};
}

std::string EncodeRangeOperand(const IndexUpdate& u, const BlockRun& run) {
  RangeOperandHeader h;
  h.segment = run.segment;
  h.first_block = run.first_block;
  h.block_count = run.block_count;
  h.offset = run.offset;
  h.length = u.record->length;
  h.version = u.record->version;
  std::string out(sizeof(h) + run.block_count * sizeof(uint32_t), '\0');
  std::memcpy(out.data(), &h, sizeof(h));
  std::memcpy(out.data() + sizeof(h), u.record->block_crcs.data() + run.first_block,
              run.block_count * sizeof(uint32_t));
  return out;
}

Result<ShardRecord> ApplyRangeOperand(const ShardKey& key, const std::optional<ShardRecord>& before,
                                      std::string_view operand) {
  RangeOperandHeader h;
  auto malformed = [&](std::string_view why) {
    return DataLoss(fmt::format("index range-write operand of {} is malformed ({}); the index is "
                                "corrupt, rebuild this target", key.ToString(), why));
  };
  if (operand.size() < sizeof(h)) return malformed("too short");
  std::memcpy(&h, operand.data(), sizeof(h));
  if (h.format_version != kRangeOperandVersion || h.flags != 0) return malformed("unknown version");
  if (h.block_count == 0 || h.segment == kNoSegment || h.offset % kBlockSize != 0 ||
      h.first_block + h.block_count < h.first_block || h.first_block + h.block_count > BlocksFor(h.length) ||
      (operand.size() - sizeof(h)) / sizeof(uint32_t) != h.block_count ||
      (operand.size() - sizeof(h)) % sizeof(uint32_t) != 0) {
    return malformed("bad run");
  }
  if (before && before->length > h.length) return malformed("shorter than the record");
  std::vector<uint32_t> crcs;
  ReadCrcs(reinterpret_cast<const std::byte*>(operand.data()) + sizeof(h), h.block_count, crcs);
  return ApplyRangeWrite(before, h.first_block, h.segment, h.offset, crcs, h.length, h.version);
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
    bytes += sizeof(JournalUpdateV2);
    if (std::optional<BlockRun> run = RangeEntryRun(u)) {
      bytes += sizeof(StoredRun) + run->block_count * sizeof(uint32_t);
    } else if (u.record) {
      bytes += u.record->runs.size() * sizeof(StoredRun) +
               u.record->block_crcs.size() * sizeof(uint32_t);
    }
  }
  return bytes;
}

// Decodes one version-1 update at `pos` of `payload`, advancing `pos`.
std::optional<IndexUpdate> DecodeUpdateV1(std::span<const std::byte> payload, size_t& pos) {
  JournalUpdate j;
  if (payload.size() - pos < sizeof(j)) return std::nullopt;
  std::memcpy(&j, payload.data() + pos, sizeof(j));
  pos += sizeof(j);
  IndexUpdate u;
  u.key = ShardKey{j.container, ObjectId{j.object_hi, j.object_lo}, j.stripe, j.shard};
  if (j.old_segment != kNoSegment) {
    u.old.emplace().runs.push_back({.segment = j.old_segment, .offset = j.old_offset});
  }
  if (j.kind == kJournalPut) {
    if ((j.length == 0) != (j.segment == kNoSegment) ||
        (payload.size() - pos) / sizeof(uint32_t) < j.block_count) {
      return std::nullopt;
    }
    std::vector<uint32_t> crcs;
    ReadCrcs(payload.data() + pos, j.block_count, crcs);
    u.record = ShardRecord::Contiguous(j.segment, j.offset, j.length, j.version, std::move(crcs));
    if (!RecordShapeOk(*u.record)) return std::nullopt;
    pos += j.block_count * sizeof(uint32_t);
  } else if (j.kind != kJournalDelete || j.block_count != 0) {
    return std::nullopt;
  }
  return u;
}

// Decodes one version-2 or -3 update at `pos` of `payload`, advancing `pos`; kJournalRange
// entries only with `ranges` (version 3).
std::optional<IndexUpdate> DecodeUpdateV2(std::span<const std::byte> payload, size_t& pos, bool ranges) {
  JournalUpdateV2 j;
  if (payload.size() - pos < sizeof(j)) return std::nullopt;
  std::memcpy(&j, payload.data() + pos, sizeof(j));
  pos += sizeof(j);
  const std::byte* const end = payload.data() + payload.size();
  IndexUpdate u;
  u.key = ShardKey{j.container, ObjectId{j.object_hi, j.object_lo}, j.stripe, j.shard};
  if (j.old_run_count > 0) {
    if (!ReadRuns(payload.data() + pos, end, j.old_run_count, u.old.emplace().runs)) return std::nullopt;
    pos += j.old_run_count * sizeof(StoredRun);
  }
  if (j.kind == kJournalPut || (j.kind == kJournalRange && ranges)) {
    ShardRecord& record = u.record.emplace();
    record.length = j.length;
    record.version = j.version;
    if (!ReadRuns(payload.data() + pos, end, j.run_count, record.runs)) return std::nullopt;
    pos += j.run_count * sizeof(StoredRun);
    if ((payload.size() - pos) / sizeof(uint32_t) < j.block_count) return std::nullopt;
    ReadCrcs(payload.data() + pos, j.block_count, record.block_crcs);
    pos += j.block_count * sizeof(uint32_t);
    if (j.written_begin > j.written_end) return std::nullopt;
    u.written_begin = j.written_begin;
    u.written_end = j.written_end;
    if (j.kind == kJournalRange) {
      // One run of the written blocks, inside the new length, and their checksums.
      const BlockRun* run = u.record->runs.size() == 1 ? &u.record->runs[0] : nullptr;
      if (run == nullptr || run->hole() || run->first_block != j.written_begin ||
          run->block_count != j.written_end - j.written_begin || run->block_count != j.block_count ||
          run->end_block() > BlocksFor(j.length)) {
        return std::nullopt;
      }
      u.range_write = true;
    } else if (!RecordShapeOk(*u.record)) {
      return std::nullopt;
    }
  } else if (j.kind != kJournalDelete || j.block_count != 0 || j.run_count != 0) {
    return std::nullopt;
  }
  return u;
}

// A record of `payload_bytes` of updates, zero-padded to whole blocks.
uint64_t RecordBytesFor(uint64_t payload_bytes) {
  return (sizeof(JournalRecordHeader) + payload_bytes + kBlockSize - 1) / kBlockSize * kBlockSize;
}

}  // namespace

uint64_t JournalRecordBytes(const std::vector<IndexUpdate>& updates) {
  return RecordBytesFor(PayloadBytes(updates));
}

std::string EncodeJournalRecord(const uint8_t (&uuid)[16], uint64_t seq,
                                const std::vector<IndexUpdate>& updates) {
  const uint64_t payload_bytes = PayloadBytes(updates);
  std::string out(RecordBytesFor(payload_bytes), '\0');
  JournalRecordHeader header;
  std::memcpy(header.uuid, uuid, sizeof(header.uuid));
  header.seq = seq;
  header.update_count = static_cast<uint32_t>(updates.size());
  header.payload_bytes = static_cast<uint32_t>(payload_bytes);
  size_t pos = sizeof(header);
  for (const IndexUpdate& u : updates) {
    JournalUpdateV2 j;  // old_run_count 0: see format.h
    j.container = u.key.container;
    j.object_hi = u.key.object.hi;
    j.object_lo = u.key.object.lo;
    j.stripe = u.key.stripe;
    j.shard = u.key.shard;
    j.kind = u.record ? kJournalPut : kJournalDelete;
    if (std::optional<BlockRun> run = RangeEntryRun(u)) {
      j.kind = kJournalRange;
      j.length = u.record->length;
      j.version = u.record->version;
      j.block_count = static_cast<uint32_t>(run->block_count);
      j.run_count = 1;
      j.written_begin = run->first_block;
      j.written_end = run->end_block();
      std::memcpy(out.data() + pos, &j, sizeof(j));
      pos = WriteRuns(out, pos + sizeof(j), {*run});
      std::memcpy(out.data() + pos, u.record->block_crcs.data() + run->first_block, j.block_count * sizeof(uint32_t));
      pos += j.block_count * sizeof(uint32_t);
      continue;
    }
    if (u.record) {
      j.length = u.record->length;
      j.version = u.record->version;
      j.block_count = static_cast<uint32_t>(u.record->block_crcs.size());
      j.run_count = static_cast<uint32_t>(u.record->runs.size());
      j.written_begin = std::min<uint64_t>(u.written_begin, j.block_count);
      j.written_end = std::clamp<uint64_t>(u.written_end, j.written_begin, j.block_count);
    }
    std::memcpy(out.data() + pos, &j, sizeof(j));
    pos += sizeof(j);
    if (u.record) {
      pos = WriteRuns(out, pos, u.record->runs);
      if (j.block_count > 0) {
        std::memcpy(out.data() + pos, u.record->block_crcs.data(), j.block_count * sizeof(uint32_t));
        pos += j.block_count * sizeof(uint32_t);
      }
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
      header.seq != seq ||
      (header.format_version != kJournalRecordVersion &&
       header.format_version != kJournalRecordVersionTwo &&
       header.format_version != kJournalRecordVersionOne) ||
      header.flags != 0 ||
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
    std::optional<IndexUpdate> u;
    if (header.format_version == kJournalRecordVersionOne) {
      u = DecodeUpdateV1(payload, pos);
    } else {
      u = DecodeUpdateV2(payload, pos, /*ranges=*/header.format_version == kJournalRecordVersion);
    }
    if (!u) return std::nullopt;
    updates.push_back(std::move(*u));
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

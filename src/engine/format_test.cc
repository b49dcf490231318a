#include "engine/format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/crc32c.h"
#include "engine/block_map.h"

namespace penstock::engine {
namespace {

TEST(FormatTest, ShardKeyRoundTripsAndSortsLikeTheKey) {
  std::vector<ShardKey> keys = {
      {1, {0, 0}, 0, 0},          {1, {0, 0}, 0, 1},
      {1, {0, 0}, 1, 0},          {1, {0, 0}, ShardKey::kHeadStripe, 0},
      {1, {0, 1}, 0, 0},          {1, {1, 0}, 0, 0},
      {2, {0, 0}, 0, 0},          {256, {0, 0}, 0, 0},
      {UINT64_MAX, {UINT64_MAX, UINT64_MAX}, UINT64_MAX, UINT32_MAX},
  };
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string enc = EncodeShardKey(keys[i]);
    ASSERT_EQ(enc.size(), kShardKeyBytes);
    EXPECT_EQ(DecodeShardKey(enc), keys[i]);
    if (i > 0) {
      EXPECT_LT(EncodeShardKey(keys[i - 1]), enc) << i;
    }
  }
  EXPECT_TRUE(EncodeShardKey(keys[0]).starts_with(ContainerPrefix(1)));
  EXPECT_TRUE(EncodeShardKey(keys[4]).starts_with(ObjectPrefix(1, {0, 1})));
  EXPECT_FALSE(EncodeShardKey(keys[5]).starts_with(ObjectPrefix(1, {0, 1})));
  EXPECT_EQ(DecodeShardKey("short"), std::nullopt);
}

TEST(FormatTest, ShardRecordRoundTrips) {
  ShardKey key{3, {1, 2}, 4, 5};
  ShardRecord r = ShardRecord::Contiguous(7, 8192, 4097, 42, {0xdeadbeef, 0x12345678});
  const std::string encoded = EncodeShardRecord(r);
  EXPECT_EQ(encoded.size(), sizeof(ShardRecordHeader) + 8);  // one extent: version 1
  auto back = DecodeShardRecord(key, encoded);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->runs.size(), 1u);
  EXPECT_EQ(back->runs[0], (BlockRun{.segment = 7, .offset = 8192, .first_block = 0, .block_count = 2}));
  EXPECT_EQ(back->length, 4097u);
  EXPECT_EQ(back->version, 42u);
  EXPECT_EQ(back->block_crcs, r.block_crcs);
  EXPECT_EQ(back->stored_bytes(), 8192u);
  EXPECT_EQ(*back, r);

  ShardRecord empty{.runs = {}, .length = 0, .version = 1, .block_crcs = {}};
  auto e = DecodeShardRecord(key, EncodeShardRecord(empty));
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->runs.empty());
  EXPECT_EQ(e->stored_bytes(), 0u);
}

// A version-1 record as an older build wrote it, byte for byte, still reads.
TEST(FormatTest, VersionOneRecordStillReads) {
  ShardKey key{3, {1, 2}, 4, 5};
  ShardRecordHeader header{.format_version = 1, .flags = 0, .segment = 2, .offset = 4096,
                           .length = 5000, .version = 9, .block_count = 2, .reserved = 0};
  std::string bytes(sizeof(header) + 8, '\0');
  std::memcpy(bytes.data(), &header, sizeof(header));
  const uint32_t crcs[2] = {11, 22};
  std::memcpy(bytes.data() + sizeof(header), crcs, sizeof(crcs));
  auto r = DecodeShardRecord(key, bytes);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, ShardRecord::Contiguous(2, 4096, 5000, 9, {11, 22}));
}

ShardRecord ThreeRuns() {
  ShardRecord r;
  r.length = 5 * kBlockSize + 10;
  r.version = 3;
  r.runs = {{.segment = 1, .offset = 8192, .first_block = 0, .block_count = 2},
            {.segment = kNoSegment, .offset = 0, .first_block = 2, .block_count = 1},
            {.segment = 4, .offset = 0, .first_block = 3, .block_count = 3}};
  r.block_crcs = {1, 2, 3, 4, 5, 6};
  return r;
}

TEST(FormatTest, BlockMapRecordRoundTripsPacked) {
  ShardKey key{3, {1, 2}, 4, 5};
  ShardRecord r = ThreeRuns();
  const std::string encoded = EncodeShardRecord(r);
  // Runs: (2 blocks, segment 1 + 1, offset 2 blocks), (1, hole), (3, segment 4 + 1, offset 0).
  EXPECT_EQ(encoded.size(), sizeof(ShardRecordHeaderV2) + 3 + 2 + 3 + 6 * 4);
  uint16_t version = 0;
  std::memcpy(&version, encoded.data(), sizeof(version));
  EXPECT_EQ(version, kShardRecordVersionPacked);
  auto back = DecodeShardRecord(key, encoded);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(back->stored_bytes(), 5 * kBlockSize);
  // Runs that leave a gap, overlap, or do not cover the blocks: corrupt.
  for (auto bad : {std::vector<BlockRun>{r.runs[0], r.runs[2]},
                   std::vector<BlockRun>{r.runs[0], r.runs[1]},
                   std::vector<BlockRun>{r.runs[0], r.runs[0], r.runs[1], r.runs[2]}}) {
    ShardRecord b = r;
    b.runs = bad;
    auto got = DecodeShardRecord(key, EncodeShardRecord(b));
    EXPECT_EQ(got.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(got.status().message().find(key.ToString()), std::string::npos);
  }
  // Every truncation, and a varint that never ends, is corrupt too.
  for (size_t n = sizeof(ShardRecordHeaderV2); n < encoded.size(); ++n) {
    EXPECT_EQ(DecodeShardRecord(key, encoded.substr(0, n)).status().code(), StatusCode::kDataLoss) << n;
  }
  std::string endless = encoded.substr(0, sizeof(ShardRecordHeaderV2)) + std::string(40, '\xff');
  EXPECT_EQ(DecodeShardRecord(key, endless).status().code(), StatusCode::kDataLoss);
}

// Large values pack and unpack exactly: the last segment, offsets past 4 GiB, 256 runs.
TEST(FormatTest, PackedRunsKeepLargeValues) {
  ShardKey key{3, {1, 2}, 4, 5};
  ShardRecord r;
  r.version = UINT64_MAX;
  for (uint64_t i = 0; i < 256; ++i) {
    const uint32_t segment = i % 3 == 0 ? kNoSegment : static_cast<uint32_t>(kNoSegment - 1 - i);
    r.runs.push_back({.segment = segment, .offset = segment == kNoSegment ? 0 : (i << 40) * kBlockSize,
                      .first_block = i * 2, .block_count = 2});
  }
  r.length = 512 * kBlockSize;
  r.block_crcs.assign(512, 0xdeadbeef);
  auto back = DecodeShardRecord(key, EncodeShardRecord(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
}

// A version-2 block map as the previous build wrote it (StoredRuns) still reads.
TEST(FormatTest, VersionTwoBlockMapStillReads) {
  ShardKey key{3, {1, 2}, 4, 5};
  ShardRecord r = ThreeRuns();
  ShardRecordHeaderV2 header{.format_version = 2, .flags = 0, .run_count = 3, .length = r.length,
                             .version = r.version, .block_count = 6, .reserved = 0};
  std::string bytes(reinterpret_cast<const char*>(&header), sizeof(header));
  for (const BlockRun& run : r.runs) {
    StoredRun s{.segment = run.segment, .first_block = static_cast<uint32_t>(run.first_block),
                .block_count = static_cast<uint32_t>(run.block_count), .reserved = 0, .offset = run.offset};
    bytes.append(reinterpret_cast<const char*>(&s), sizeof(s));
  }
  bytes.append(reinterpret_cast<const char*>(r.block_crcs.data()), 6 * sizeof(uint32_t));
  auto back = DecodeShardRecord(key, bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  bytes.pop_back();
  EXPECT_EQ(DecodeShardRecord(key, bytes).status().code(), StatusCode::kDataLoss);
}

TEST(FormatTest, CorruptShardRecordIsDataLossNamingTheKey) {
  ShardKey key{3, {1, 2}, 4, 5};
  ShardRecord r = ShardRecord::Contiguous(0, 0, 10, 1, {1});
  std::string enc = EncodeShardRecord(r);
  auto truncated = DecodeShardRecord(key, enc.substr(0, 20));
  EXPECT_EQ(truncated.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(truncated.status().message().find(key.ToString()), std::string::npos);
  std::string future = enc;
  future[0] = 9;  // format_version
  EXPECT_EQ(DecodeShardRecord(key, future).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeShardRecord(key, enc + "xxxx").status().code(), StatusCode::kDataLoss);
}

TEST(FormatTest, DeviceHeaderRoundTripsAndDetectsCorruption) {
  DeviceHeader h;
  h.segment_bytes = 1 << 20;
  h.segment_count = 12;
  h.uuid[3] = 9;
  std::string enc = EncodeDeviceHeader(h);
  auto back = DecodeDeviceHeader(std::as_bytes(std::span(enc.data(), enc.size())));
  ASSERT_TRUE(back.ok());
  ASSERT_TRUE(back->has_value());
  EXPECT_EQ((*back)->segment_count, 12u);
  EXPECT_EQ((*back)->uuid[3], 9);

  std::string zeros(4096, '\0');
  auto none = DecodeDeviceHeader(std::as_bytes(std::span(zeros.data(), zeros.size())));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  enc[30] ^= 1;
  auto bad = DecodeDeviceHeader(std::as_bytes(std::span(enc.data(), enc.size())));
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
}

TEST(FormatTest, ShardKeyToString) {
  ShardKey k{3, {0x0123456789abcdefull, 0x89ab}, 2, 0};
  EXPECT_EQ(k.ToString(), "c=3 obj=0123456789abcdef:00000000000089ab stripe=2 shard=0");
  k.stripe = ShardKey::kHeadStripe;
  EXPECT_EQ(k.ToString(), "c=3 obj=0123456789abcdef:00000000000089ab stripe=head shard=0");
}

std::span<const std::byte> Bytes(const std::string& s) { return std::as_bytes(std::span(s)); }

TEST(FormatTest, JournalRecordRoundTripsAndRejectsTornOrForeignRecords) {
  uint8_t uuid[16] = {1, 2, 3};
  ShardRecord put = ShardRecord::Contiguous(3, 8192, 5000, 7, {0xdeadbeef, 0x12345678});
  ShardRecord old = ShardRecord::Contiguous(1, 4096, 5000, 7, {0xdeadbeef, 0x12345678});
  std::vector<IndexUpdate> updates = {
      {ShardKey{1, {2, 3}, 4, 5}, put, std::nullopt},
      {ShardKey{1, {2, 3}, 4, 6}, std::nullopt, old},
      {ShardKey{9, {0, 0}, ShardKey::kHeadStripe, 0}, ShardRecord{}, old},  // empty shard
  };
  std::string record = EncodeJournalRecord(uuid, 42, updates);
  ASSERT_EQ(record.size(), JournalRecordBytes(updates));
  ASSERT_EQ(record.size() % kBlockSize, 0u);
  ASSERT_TRUE(ParseJournalHeader(Bytes(record), uuid, 42).has_value());
  auto back = DecodeJournalRecord(Bytes(record));
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->size(), 3u);
  EXPECT_EQ((*back)[0].key, updates[0].key);
  ASSERT_TRUE((*back)[0].record.has_value());
  EXPECT_EQ((*back)[0].record->block_crcs, put.block_crcs);
  EXPECT_EQ(*(*back)[0].record, put);
  EXPECT_FALSE((*back)[0].old.has_value());
  EXPECT_FALSE((*back)[1].record.has_value());
  // Old runs (the segment entries an update removed, while the index kept them) are no longer
  // written.
  EXPECT_FALSE((*back)[1].old.has_value());
  EXPECT_TRUE((*back)[2].record->runs.empty());
  EXPECT_EQ((*back)[2].key.stripe, ShardKey::kHeadStripe);

  // Another sequence number or device: not the record the journal expects there.
  EXPECT_FALSE(ParseJournalHeader(Bytes(record), uuid, 43).has_value());
  uint8_t other[16] = {1, 2, 4};
  EXPECT_FALSE(ParseJournalHeader(Bytes(record), other, 42).has_value());
  std::string zeros(kBlockSize, '\0');
  EXPECT_FALSE(ParseJournalHeader(Bytes(zeros), uuid, 1).has_value());
  // A flipped byte anywhere in header or payload: torn.
  for (size_t at : {size_t{60}, sizeof(JournalRecordHeader) + 100, size_t{40}}) {
    std::string torn = record;
    torn[at] ^= 0x10;
    EXPECT_FALSE(DecodeJournalRecord(Bytes(torn)).has_value()) << at;
  }
  // Cut short: torn.
  EXPECT_FALSE(DecodeJournalRecord(Bytes(record).first(sizeof(JournalRecordHeader) + 10)).has_value());
}

// A version-1 journal record (written by a format-2 build before the upgrade) still decodes.
TEST(FormatTest, VersionOneJournalRecordStillDecodes) {
  uint8_t uuid[16] = {5};
  JournalUpdate put;
  put.container = 1;
  put.kind = kJournalPut;
  put.old_segment = 2;
  put.old_offset = 8192;
  put.segment = 3;
  put.offset = 4096;
  put.length = 5000;
  put.version = 6;
  put.block_count = 2;
  const uint32_t crcs[2] = {10, 20};
  JournalUpdate del;
  del.container = 1;
  del.shard = 1;
  del.kind = kJournalDelete;
  del.old_segment = 4;
  std::string payload(sizeof(put) + sizeof(crcs) + sizeof(del), '\0');
  std::memcpy(payload.data(), &put, sizeof(put));
  std::memcpy(payload.data() + sizeof(put), crcs, sizeof(crcs));
  std::memcpy(payload.data() + sizeof(put) + sizeof(crcs), &del, sizeof(del));
  JournalRecordHeader header;
  std::memcpy(header.uuid, uuid, sizeof(uuid));
  header.seq = 3;
  header.format_version = kJournalRecordVersionOne;
  header.update_count = 2;
  header.payload_bytes = static_cast<uint32_t>(payload.size());
  header.crc = Crc32c(Bytes(payload), Crc32c(std::as_bytes(std::span(&header, 1))));
  std::string record(kBlockSize, '\0');
  std::memcpy(record.data(), &header, sizeof(header));
  std::memcpy(record.data() + sizeof(header), payload.data(), payload.size());
  ASSERT_TRUE(ParseJournalHeader(Bytes(record), uuid, 3).has_value());
  auto back = DecodeJournalRecord(Bytes(record));
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ(*(*back)[0].record, ShardRecord::Contiguous(3, 4096, 5000, 6, {10, 20}));
  EXPECT_EQ((*back)[0].old->runs[0].segment, 2u);
  EXPECT_EQ((*back)[0].old->runs[0].offset, 8192u);
  EXPECT_FALSE((*back)[1].record.has_value());
  EXPECT_EQ((*back)[1].old->runs[0].segment, 4u);
}

// A version-2 record carries block maps, the old record's runs and the written blocks.
// A range write onto an existing record is journaled as the written blocks only: their run and
// checksums, with the new length and version; replay (journal.cc) rebuilds the whole record.
TEST(FormatTest, RangeWritesAreJournaledAsTheirBlocksOnly) {
  uint8_t uuid[16] = {7};
  ShardRecord old = ShardRecord::Contiguous(1, 0, 256 * kBlockSize, 1, std::vector<uint32_t>(256, 5));
  // Blocks 10..12 rewritten at segment 3, offset 8 KiB; the record keeps 256 blocks.
  const std::vector<uint32_t> crcs = {21, 22, 23};
  ShardRecord next = ApplyRangeWrite(old, 10, 3, 8192, crcs, 256 * kBlockSize, 2);
  const ShardKey key{1, {2, 3}, 4, 5};
  std::vector<IndexUpdate> updates = {
      {.key = key, .record = next, .old = old, .written_begin = 10, .written_end = 13, .range_write = true}};
  std::string record = EncodeJournalRecord(uuid, 9, updates);
  EXPECT_EQ(record.size(), kBlockSize);  // the whole map would be 3 runs and 256 checksums
  EXPECT_EQ(JournalRecordBytes(updates), kBlockSize);
  auto back = DecodeJournalRecord(Bytes(record));
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->size(), 1u);
  const IndexUpdate& u = (*back)[0];
  EXPECT_TRUE(u.range_write);
  EXPECT_EQ(u.written_begin, 10u);
  EXPECT_EQ(u.written_end, 13u);
  ASSERT_TRUE(u.record.has_value());
  EXPECT_EQ(u.record->runs, (std::vector<BlockRun>{{.segment = 3, .offset = 8192, .first_block = 10, .block_count = 3}}));
  EXPECT_EQ(u.record->block_crcs, crcs);
  EXPECT_EQ(u.record->length, 256 * kBlockSize);
  EXPECT_EQ(u.record->version, 2u);
  // Rebuilt from the record before it, it is the committer's record.
  const BlockRun run = u.record->runs[0];
  EXPECT_EQ(ApplyRangeWrite(old, run.first_block, run.segment, run.offset, u.record->block_crcs,
                            u.record->length, u.record->version),
            next);
  // Without the record before it (a new shard), the whole record is journaled.
  updates[0].old.reset();
  auto whole = DecodeJournalRecord(Bytes(EncodeJournalRecord(uuid, 9, updates)));
  ASSERT_TRUE(whole.has_value());
  EXPECT_FALSE((*whole)[0].range_write);
  EXPECT_EQ(*(*whole)[0].record, next);
  // A range entry in a version-2 record is not one a version-2 writer could have made.
  JournalRecordHeader header;
  std::memcpy(&header, record.data(), sizeof(header));
  header.format_version = kJournalRecordVersionTwo;
  header.crc = 0;
  uint32_t crc = Crc32c(std::as_bytes(std::span(&header, 1)));
  header.crc = Crc32c(Bytes(record).subspan(sizeof(header), header.payload_bytes), crc);
  std::memcpy(record.data(), &header, sizeof(header));
  EXPECT_FALSE(DecodeJournalRecord(Bytes(record)).has_value());
}

TEST(FormatTest, JournalRecordCarriesBlockMaps) {
  uint8_t uuid[16] = {6};
  ShardRecord old;
  old.runs = {{.segment = 1, .offset = 0, .first_block = 0, .block_count = 2},
              {.segment = 2, .offset = 4096, .first_block = 2, .block_count = 2}};
  old.length = 4 * kBlockSize;
  old.block_crcs = {1, 2, 3, 4};
  ShardRecord next = old;
  next.runs = {{.segment = 1, .offset = 0, .first_block = 0, .block_count = 1},
               {.segment = 5, .offset = 8192, .first_block = 1, .block_count = 2},
               {.segment = 1, .offset = 3 * kBlockSize, .first_block = 3, .block_count = 1},
               {.segment = kNoSegment, .offset = 0, .first_block = 4, .block_count = 2}};
  next.length = 6 * kBlockSize - 1;
  next.block_crcs = {1, 7, 8, 4, 9, 9};
  std::vector<IndexUpdate> updates = {{ShardKey{1, {2, 3}, 4, 5}, next, old, 1, 3}};
  std::string record = EncodeJournalRecord(uuid, 8, updates);
  auto back = DecodeJournalRecord(Bytes(record));
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ(*(*back)[0].record, next);
  EXPECT_FALSE((*back)[0].old.has_value());
  EXPECT_EQ((*back)[0].written_begin, 1u);
  EXPECT_EQ((*back)[0].written_end, 3u);
  std::string torn = record;
  torn[sizeof(JournalRecordHeader) + sizeof(JournalUpdateV2) + 30] ^= 1;
  EXPECT_FALSE(DecodeJournalRecord(Bytes(torn)).has_value());
}

TEST(FormatTest, JournalPositionRoundTrips) {
  JournalPosition p{.seq = 77, .offset = 3 * kBlockSize};
  EXPECT_EQ(DecodeJournalPosition(EncodeJournalPosition(p)), p);
  EXPECT_EQ(DecodeJournalPosition("short"), std::nullopt);
  JournalPosition misaligned{.seq = 1, .offset = kBlockSize + 1};
  EXPECT_EQ(DecodeJournalPosition(EncodeJournalPosition(misaligned)), std::nullopt);
}

// A range write's merge operand carries its written blocks; applied to the record before it,
// it gives the update's record. Malformed operands are kDataLoss naming the key.
TEST(FormatTest, RangeOperandAppliesTheWrittenBlocksAndRejectsMalformedOnes) {
  const ShardKey key{3, {4, 5}, 6, 1};
  const ShardRecord before = ShardRecord::Contiguous(2, 8192, 4 * 4096, 7, {1, 2, 3, 4});
  const ShardRecord after = ApplyRangeWrite(before, 1, 9, 40960, std::vector<uint32_t>{21, 31}, 6 * 4096 - 10, 8);
  IndexUpdate u{.key = key, .record = after, .old = before, .written_begin = 1, .written_end = 3,
                .range_write = true};
  std::optional<BlockRun> run = RangeEntryRun(u);
  ASSERT_TRUE(run.has_value());
  const std::string operand = EncodeRangeOperand(u, *run);
  EXPECT_EQ(operand.size(), sizeof(RangeOperandHeader) + 2 * sizeof(uint32_t));
  auto applied = ApplyRangeOperand(key, before, operand);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_EQ(*applied, after);
  EXPECT_FALSE(RangeEntryRun({.key = key, .record = after, .old = std::nullopt, .range_write = true}).has_value())
      << "without the record before it, the update is stored whole";

  auto expect_data_loss = [&](std::string bad, const char* what) {
    auto r = ApplyRangeOperand(key, before, bad);
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << what;
    EXPECT_NE(r.status().message().find(key.ToString()), std::string::npos) << what;
  };
  expect_data_loss(operand.substr(0, 20), "too short");
  expect_data_loss(operand + "x", "crcs not whole");
  expect_data_loss(operand.substr(0, operand.size() - 4), "one crc missing");
  RangeOperandHeader h;
  std::memcpy(&h, operand.data(), sizeof(h));
  auto with = [&](RangeOperandHeader changed) {
    std::string out = operand;
    std::memcpy(out.data(), &changed, sizeof(changed));
    return out;
  };
  RangeOperandHeader v = h;
  v.format_version = 2;
  expect_data_loss(with(v), "unknown version");
  RangeOperandHeader past = h;
  past.first_block = 5;  // blocks 5 and 6 of a 6-block shard
  expect_data_loss(with(past), "past the new length");
  RangeOperandHeader shorter = h;
  shorter.length = 2 * 4096;
  expect_data_loss(with(shorter), "shorter than the record before it");
  RangeOperandHeader hole = h;
  hole.segment = kNoSegment;
  expect_data_loss(with(hole), "no place");
}


// SharedRecord: copies share one record; Mutable() copies a shared one first; comparisons look
// at the records, not at where they are.
TEST(SharedRecordTest, CopiesShareAndChangesCopyFirst) {
  SharedRecord none;
  EXPECT_FALSE(none);
  EXPECT_TRUE(none == std::nullopt);
  EXPECT_TRUE(none == std::optional<ShardRecord>());
  SharedRecord a = ShardRecord::Contiguous(1, 0, 8192, 3, {7, 8});
  SharedRecord b = a;
  EXPECT_EQ(a.get(), b.get());  // shared
  SharedRecord c = ShardRecord::Contiguous(1, 0, 8192, 3, {7, 8});
  EXPECT_NE(a.get(), c.get());
  EXPECT_TRUE(a == c);  // equal records in different places
  EXPECT_TRUE(a == std::optional<ShardRecord>(*c));
  EXPECT_FALSE(a == none);
  b.Mutable().version = 4;  // b held a's record: b gets its own
  EXPECT_NE(a.get(), b.get());
  EXPECT_EQ(a->version, 3u);
  EXPECT_EQ(b->version, 4u);
  const ShardRecord* own = c.get();
  c.Mutable().version = 5;  // c alone holds its record: changed in place
  EXPECT_EQ(c.get(), own);
  EXPECT_EQ(c.ToOptional()->version, 5u);
  EXPECT_FALSE(none.ToOptional());
  c.reset();
  EXPECT_FALSE(c);
  c.emplace().length = 9;
  EXPECT_EQ(c->length, 9u);
}

}  // namespace
}  // namespace penstock::engine

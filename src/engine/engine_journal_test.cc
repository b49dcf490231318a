// The index journal: batches acknowledged after one device flush, with the index written
// unsynced, survive a crash by replay; a torn record or data that never reached the device ends
// the replay; replay stays exact while GC frees and reuses segments.
//
// A "crash" here is CrashImage: the engine's files copied while it is idle, which is what kill -9
// would leave (RocksDB's unsynced WAL buffer is in the process, not in the files). The image is
// then opened as a fresh engine. engine_crash_test.cc does the same with real kill -9.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <vector>

#include "common/buffer.h"
#include "engine/engine.h"
#include "engine/file_device.h"
#include "engine/format.h"
#include "engine/index.h"
#include "engine/test_util.h"

namespace penstock::engine {
namespace {

using testing::CrashImage;
using testing::InImage;
using testing::Key;
using testing::MustOpen;
using testing::Pattern;
using testing::SameBytes;
using testing::ScratchDir;
using testing::SmallOptions;

// Options that leave the index unsynced for as long as the test runs (only a full journal or
// space waiting for it syncs the index).
EngineOptions LazyOptions(const ScratchDir& dir, uint64_t segments = 16,
                          uint64_t segment_bytes = 1 << 20) {
  EngineOptions o = SmallOptions(dir, segments, segment_bytes);
  o.index_sync_interval_ms = 3'600'000;
  o.gc_background = false;
  return o;
}

// Device offsets of the whole journal records, walking from kJournalBegin (the tests below
// start from a fresh device, whose first record is number 1 there).
std::vector<uint64_t> JournalRecords(const std::string& data_path) {
  std::ifstream f(data_path, std::ios::binary);
  std::string region(kDeviceHeaderBytes, '\0');
  f.read(region.data(), static_cast<std::streamsize>(region.size()));
  DeviceHeader header;
  std::memcpy(&header, region.data(), sizeof(header));
  std::vector<uint64_t> records;
  uint64_t at = kJournalBegin;
  for (uint64_t seq = 1;; ++seq) {
    auto h = ParseJournalHeader(std::as_bytes(std::span(region)).subspan(at), header.uuid, seq);
    if (!h) return records;
    records.push_back(at);
    at += (sizeof(*h) + h->payload_bytes + kBlockSize - 1) / kBlockSize * kBlockSize;
  }
}

// The offset of the last of them; 0 when there is none.
uint64_t LastJournalRecord(const std::string& data_path) {
  std::vector<uint64_t> records = JournalRecords(data_path);
  return records.empty() ? 0 : records.back();
}

void FlipByteAt(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x20));
  ASSERT_TRUE(f.good());
}

TEST(EngineJournalTest, CrashBeforeTheIndexSyncReplaysAcknowledgedBatches) {
  ScratchDir live, image;
  auto e = MustOpen(LazyOptions(live));
  std::map<ShardKey, std::pair<size_t, uint64_t>> want;  // key -> (length, seed)
  for (uint64_t i = 0; i < 60; ++i) {
    size_t len = (i * 7919) % 30000;
    ASSERT_TRUE(e->Write(Key(1, i % 25), Pattern(len, i), i).ok());
    want[Key(1, i % 25)] = {len, i};
    if (i % 9 == 4) {
      ASSERT_TRUE(e->Delete(Key(1, (i * 3) % 25)).ok() || want.count(Key(1, (i * 3) % 25)) == 0);
      want.erase(Key(1, (i * 3) % 25));
    }
  }
  EXPECT_EQ(e->Stats().index_syncs, 0u);
  CrashImage(live.path(), image.path());
  e.reset();

  auto r = MustOpen(LazyOptions(image));
  ASSERT_TRUE(r);
  EXPECT_GT(r->Stats().journal_replayed, 0u);
  EXPECT_EQ(r->Stats().shards, want.size());
  for (auto& [key, w] : want) {
    auto got = r->Read(key);
    ASSERT_TRUE(got.ok()) << key.ToString() << ": " << got.status().ToString();
    EXPECT_TRUE(SameBytes(*got, Pattern(w.first, w.second))) << key.ToString();
  }
  auto listed = r->List(1, std::nullopt, std::nullopt, 100);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), want.size());
  // A clean close syncs the index: nothing is left to replay.
  r.reset();
  r = MustOpen(LazyOptions(image));
  EXPECT_EQ(r->Stats().journal_replayed, 0u);
  EXPECT_EQ(r->Stats().shards, want.size());
}

TEST(EngineJournalTest, ReplayReadsPastASmallerJournalRegion) {
  ScratchDir live, image;
  auto e = MustOpen(LazyOptions(live));  // the whole header region
  for (uint64_t i = 0; i < 90; ++i) ASSERT_TRUE(e->Write(Key(5, i), Pattern(100, i), 1).ok());
  CrashImage(live.path(), image.path());  // 90 records of 4 KiB: past 256 KiB
  e.reset();
  EngineOptions o = LazyOptions(image);
  o.journal_bytes = 256 * 1024;
  auto r = MustOpen(o);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->Stats().journal_replayed, 90u);
  for (uint64_t i = 0; i < 90; ++i) {
    auto got = r->Read(Key(5, i));
    ASSERT_TRUE(got.ok()) << i << ": " << got.status().ToString();
    EXPECT_TRUE(SameBytes(*got, Pattern(100, i)));
  }
  ASSERT_TRUE(r->Write(Key(5, 1000), Pattern(100, 1000), 1).ok());  // wraps first
  EXPECT_TRUE(SameBytes(*r->Read(Key(5, 1000)), Pattern(100, 1000)));
}

TEST(EngineJournalTest, TornRecordAtTheTailEndsTheReplay) {
  ScratchDir live, image, image2;
  auto e = MustOpen(LazyOptions(live));
  for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(e->Write(Key(2, i), Pattern(6000, i), 1).ok());
  ASSERT_TRUE(e->Write(Key(2, 3), Pattern(9000, 100), 2).ok());  // the last record: torn below
  CrashImage(live.path(), image.path());
  e.reset();
  uint64_t last = LastJournalRecord(image.path() + "/data");
  ASSERT_GT(last, 0u);
  FlipByteAt(image.path() + "/data", last + sizeof(JournalRecordHeader) + 8);

  auto r = MustOpen(LazyOptions(image));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->Stats().journal_replayed, 10u);
  for (uint64_t i = 0; i < 10; ++i) {
    auto got = r->Read(Key(2, i));
    ASSERT_TRUE(got.ok()) << i << ": " << got.status().ToString();
    EXPECT_TRUE(SameBytes(*got, Pattern(6000, i))) << i;  // Key(2, 3) at its older version
  }
  // The journal goes on where the torn record was, numbered above it; a second crash replays
  // the new records, not the torn one.
  ASSERT_TRUE(r->Write(Key(2, 20), Pattern(100, 20), 1).ok());
  ASSERT_TRUE(r->Write(Key(2, 3), Pattern(50, 21), 3).ok());
  CrashImage(image.path(), image2.path());
  r.reset();
  auto r2 = MustOpen(LazyOptions(image2));
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->Stats().journal_replayed, 2u);
  EXPECT_TRUE(SameBytes(*r2->Read(Key(2, 20)), Pattern(100, 20)));
  EXPECT_TRUE(SameBytes(*r2->Read(Key(2, 3)), Pattern(50, 21)));
  EXPECT_EQ(r2->Stats().checksum_errors, 0u);
}

// Batches overlap, so a record can reach the device while the one before it does not (its
// writes were never acknowledged: acknowledgements follow record order). Replay stops at the
// gap, and the whole record after it must never be replayed, not even once new records have
// filled the gap with records of the same size: the journal numbers them above it.
TEST(EngineJournalTest, AWholeRecordAfterAMissingOneIsNeverReplayed) {
  ScratchDir live, image, image2;
  auto e = MustOpen(LazyOptions(live));
  for (uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE(e->Write(Key(6, i), Pattern(5000, i), 1).ok());
  CrashImage(live.path(), image.path());
  e.reset();
  std::vector<uint64_t> records = JournalRecords(image.path() + "/data");
  ASSERT_EQ(records.size(), 3u);
  ASSERT_EQ(records[2] - records[1], kBlockSize);  // one block each
  FlipByteAt(image.path() + "/data", records[1] + sizeof(JournalRecordHeader) + 8);  // record 2

  auto r = MustOpen(LazyOptions(image));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->Stats().journal_replayed, 1u);
  EXPECT_TRUE(SameBytes(*r->Read(Key(6, 1)), Pattern(5000, 1)));
  EXPECT_EQ(r->Stat(Key(6, 2)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r->Stat(Key(6, 3)).status().code(), StatusCode::kNotFound);
  // A delete: one block, like record 2, and no data that could land on Key(6, 3)'s (still
  // whole) bytes. Record 3 is next in line after it, whole, with its data intact.
  ASSERT_TRUE(r->Delete(Key(6, 1)).ok());
  CrashImage(image.path(), image2.path());
  r.reset();
  auto r2 = MustOpen(LazyOptions(image2));
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->Stats().journal_replayed, 1u);
  EXPECT_EQ(r2->Stat(Key(6, 1)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r2->Stat(Key(6, 3)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r2->Stats().shards, 0u);
}

TEST(EngineJournalTest, RecordWhoseDataDidNotReachTheDeviceEndsTheReplay) {
  ScratchDir live, image;
  auto e = MustOpen(LazyOptions(live));
  ASSERT_TRUE(e->Write(Key(3, 1), Pattern(8192, 1), 1).ok());
  ASSERT_TRUE(e->Write(Key(3, 2), Pattern(8192, 2), 1).ok());
  auto newer = Pattern(8192, 3);
  ASSERT_TRUE(e->Write(Key(3, 1), newer, 2).ok());  // its data goes missing below
  CrashImage(live.path(), image.path());
  e.reset();
  // As if the device lost the data but kept the record (both were in one flush that did not
  // complete, so this write was never acknowledged in such a crash).
  ASSERT_TRUE(testing::FlipByteOf(image.path() + "/data", newer, 100));

  auto r = MustOpen(LazyOptions(image));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->Stats().journal_replayed, 2u);
  EXPECT_TRUE(SameBytes(*r->Read(Key(3, 1)), Pattern(8192, 1)));
  EXPECT_EQ(r->Stat(Key(3, 1))->version, 1u);
  EXPECT_TRUE(SameBytes(*r->Read(Key(3, 2)), Pattern(8192, 2)));
  EXPECT_EQ(r->Stats().checksum_errors, 0u);
}

// Range writes replay from the journal (their records carry block maps), a torn last one ends
// the replay with its shard as it was before, and one whose new blocks did not reach the device
// ends it too (replay checks only the range's blocks: the rest were durable before).
TEST(EngineJournalTest, RangeWritesReplayAndATornOrDatalessOneEndsTheReplay) {
  ScratchDir live, image, image2, image3;
  auto e = MustOpen(LazyOptions(live));
  std::map<uint64_t, std::vector<std::byte>> model;
  auto range = [&](uint64_t obj, uint64_t offset, const std::vector<std::byte>& data, uint64_t v) {
    ASSERT_TRUE(e->WriteRange(Key(6, obj), offset, data, v).ok());
    auto& m = model[obj];
    if (m.size() < offset + data.size()) m.resize(offset + data.size(), std::byte{0});
    std::copy(data.begin(), data.end(), m.begin() + static_cast<std::ptrdiff_t>(offset));
  };
  for (uint64_t i = 0; i < 6; ++i) {
    model[i] = Pattern(40000, i);
    ASSERT_TRUE(e->Write(Key(6, i), model[i], 1).ok());
  }
  for (uint64_t i = 0; i < 6; ++i) {
    range(i, 4096 * i, Pattern(8192, 100 + i), 2);       // aligned
    range(i, 1000 + 3000 * i, Pattern(5000, 200 + i), 3);  // unaligned
  }
  range(7, 50000, Pattern(3000, 300), 1);  // created, a hole before
  auto before_last = model;
  auto last = Pattern(4096, 400);
  range(2, 8192, last, 4);  // the last record
  EXPECT_EQ(e->Stats().index_syncs, 0u);
  CrashImage(live.path(), image.path());
  CrashImage(live.path(), image2.path());
  CrashImage(live.path(), image3.path());
  e.reset();

  {  // Whole journal: everything.
    auto r = MustOpen(LazyOptions(image));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->Stats().journal_replayed, 6u + 12u + 2u);
    for (auto& [obj, m] : model) EXPECT_TRUE(SameBytes(*r->Read(Key(6, obj)), m)) << obj;
    EXPECT_EQ(r->Stat(Key(6, 2))->version, 4u);
    ASSERT_TRUE(r->CollectGarbage().ok());
    for (auto& [obj, m] : model) EXPECT_TRUE(SameBytes(*r->Read(Key(6, obj)), m)) << obj;
  }
  {  // The last record torn: shard 2 as before it.
    uint64_t at = LastJournalRecord(image2.path() + "/data");
    ASSERT_GT(at, 0u);
    FlipByteAt(image2.path() + "/data", at + sizeof(JournalRecordHeader) + 20);
    auto r = MustOpen(LazyOptions(image2));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->Stats().journal_replayed, 6u + 12u + 1u);
    for (auto& [obj, m] : before_last) EXPECT_TRUE(SameBytes(*r->Read(Key(6, obj)), m)) << obj;
    EXPECT_EQ(r->Stat(Key(6, 2))->version, 3u);
    EXPECT_EQ(r->Stats().checksum_errors, 0u);
  }
  // The last range's data lost (its record intact): the replay ends before it.
  ASSERT_TRUE(testing::FlipByteOf(image3.path() + "/data", last, 100));
  auto r = MustOpen(LazyOptions(image3));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->Stats().journal_replayed, 6u + 12u + 1u);
  for (auto& [obj, m] : before_last) EXPECT_TRUE(SameBytes(*r->Read(Key(6, obj)), m)) << obj;
  EXPECT_EQ(r->Stats().checksum_errors, 0u);
}

TEST(EngineJournalTest, ReplayIsExactWhileGcFreesAndReusesSegments) {
  ScratchDir live, image;
  EngineOptions o = LazyOptions(live, 8, 256 * 1024);
  o.journal_bytes = 256 * 1024;  // wraps every few dozen records
  auto e = MustOpen(o);
  std::map<uint64_t, uint64_t> version;  // object -> last version written
  auto len = [](uint64_t obj, uint64_t v) { return size_t(1 + (obj * 31 + v * 977) % 40000); };
  auto seed = [](uint64_t obj, uint64_t v) { return obj * 100000 + v; };
  // About 30 MiB of writes over a 2 MiB device: every segment is freed and reused many times.
  for (uint64_t v = 1; v <= 100; ++v) {
    for (uint64_t obj = 0; obj < 16; ++obj) {
      if ((obj + v) % 3 == 0) continue;
      Status s = e->Write(Key(4, obj), Pattern(len(obj, v), seed(obj, v)), v);
      ASSERT_TRUE(s.ok()) << obj << " v" << v << ": " << s.ToString();
      version[obj] = v;
    }
    if (v % 10 == 0) {
      ASSERT_TRUE(e->CollectGarbage().ok());
    }
  }
  EngineStats before = e->Stats();
  EXPECT_GT(before.gc_segments_cleaned, 0u);
  EXPECT_GT(before.index_syncs, 0u);  // journal wraps and space waiting for the index
  CrashImage(live.path(), image.path());
  e.reset();

  auto r = MustOpen(InImage(o, image.path()));
  ASSERT_TRUE(r);
  EXPECT_GT(r->Stats().journal_replayed, 0u);
  for (auto& [obj, v] : version) {
    auto got = r->Read(Key(4, obj));
    ASSERT_TRUE(got.ok()) << obj << ": " << got.status().ToString();
    EXPECT_TRUE(SameBytes(*got, Pattern(len(obj, v), seed(obj, v)))) << obj << " v" << v;
    EXPECT_EQ(r->Stat(Key(4, obj))->version, v);
  }
  EXPECT_EQ(r->Stats().shards, version.size());
  EXPECT_EQ(r->Stats().live_bytes, before.live_bytes);
  EXPECT_EQ(r->Stats().checksum_errors, 0u);
  // GC works on the recovered state, and its segment entries are right.
  ASSERT_TRUE(r->CollectGarbage().ok());
  for (auto& [obj, v] : version) {
    EXPECT_TRUE(SameBytes(*r->Read(Key(4, obj)), Pattern(len(obj, v), seed(obj, v)))) << obj;
  }
}

// An index that fails after the journal took a batch (its file system filled up): that batch
// was acknowledged and stays readable; writes and GC stop with the error rather than write
// copies no index will take (and that could land on space a durable record still names); a
// reopen replays every acknowledged write.
TEST(EngineJournalTest, AnIndexFailureStopsWritesAndGcUntilAReopenReplaysTheJournal) {
  ScratchDir live, image;
  EngineOptions o = LazyOptions(live, 16, 256 * 1024);
  auto e = MustOpen(o);
  std::map<uint64_t, uint64_t> version;  // object -> last version written
  auto bytes = [](uint64_t obj, uint64_t v) { return Pattern(16 * 1024, obj * 1000 + v); };
  for (uint64_t obj = 0; obj < 128; ++obj) {
    ASSERT_TRUE(e->Write(Key(4, obj), bytes(obj, 1), 1).ok());
    version[obj] = 1;
  }
  for (uint64_t obj = 0; obj < 128; obj += 2) {  // dead space in every segment
    ASSERT_TRUE(e->Write(Key(4, obj), bytes(obj, 2), 2).ok());
    version[obj] = 2;
  }
  (void)e->Stats();  // waits until every batch so far is in the index
  e->index_for_tests().FailApplies(Internal("no space left on the index's file system (test)"));
  // Journaled, so acknowledged, before the index refuses it.
  Status taken = e->Write(Key(4, 1000), bytes(1000, 1), 1);
  ASSERT_TRUE(taken.ok()) << taken.ToString();
  version[1000] = 1;
  auto gc = e->CollectGarbage();
  EXPECT_FALSE(gc.ok()) << "GC went on copying after the index failed";
  if (!gc.ok()) {
    EXPECT_NE(gc.status().message().find("no space left on the index"), std::string::npos);
  }
  Status refused = e->Write(Key(4, 1001), bytes(1001, 1), 1);
  EXPECT_FALSE(refused.ok());
  for (const auto& [obj, v] : version) {  // readers still find all of it
    auto got = e->Read(Key(4, obj));
    ASSERT_TRUE(got.ok()) << obj << ": " << got.status().ToString();
    EXPECT_TRUE(SameBytes(*got, bytes(obj, v))) << obj;
  }
  CrashImage(live.path(), image.path());
  e.reset();

  auto r = MustOpen(InImage(o, image.path()));
  ASSERT_TRUE(r);
  for (const auto& [obj, v] : version) {
    auto got = r->Read(Key(4, obj));
    ASSERT_TRUE(got.ok()) << obj << ": " << got.status().ToString();
    EXPECT_TRUE(SameBytes(*got, bytes(obj, v))) << obj;
  }
  EXPECT_EQ(r->Read(Key(4, 1001)).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(r->Write(Key(4, 1001), bytes(1001, 1), 1).ok());  // a fresh index takes writes again
  ASSERT_TRUE(r->CollectGarbage().ok());
}

}  // namespace
}  // namespace penstock::engine

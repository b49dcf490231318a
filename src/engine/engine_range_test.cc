// Engine::WriteRange: partial-shard writes checked against a byte model (aligned and unaligned
// ranges, extension with zeros, creation, overwrites across runs, the fragmentation bound),
// space accounting of block maps, restarts, concurrent writers of one key, GC of shards whose
// runs span segments, scrub of a non-first run, and WriteRangeAsync.
#include <gtest/gtest.h>
#include <poll.h>
#include <rocksdb/db.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <future>
#include <condition_variable>
#include <random>
#include <thread>

#include "engine/block_map.h"
#include "engine/engine.h"
#include "engine/format.h"
#include "engine/index.h"
#include "engine/test_util.h"

namespace penstock::engine {
namespace {

using testing::FlipByteOf;
using testing::Key;
using testing::MustOpen;
using testing::Pattern;
using testing::SameBytes;
using testing::ScratchDir;
using testing::SmallOptions;

// What WriteRange promises, on a vector of bytes.
void ModelWrite(std::vector<std::byte>& shard, uint64_t offset, const std::vector<std::byte>& data) {
  if (shard.size() < offset + data.size()) shard.resize(offset + data.size(), std::byte{0});
  std::copy(data.begin(), data.end(), shard.begin() + static_cast<std::ptrdiff_t>(offset));
}

// The key's record as the index holds it (the engine must be closed).
ShardRecord RecordOf(const EngineOptions& o, const ShardKey& key) {
  auto index = Index::Open(o.index_dir);
  EXPECT_TRUE(index.ok());
  auto got = (*index)->Get(key);
  EXPECT_TRUE(got.ok() && got->has_value());
  return got.ok() && got->has_value() ? **got : ShardRecord{};
}

TEST(EngineRangeTest, AlignedAndUnalignedRangesMatchTheModel) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir);
  o.gc_background = false;  // the device bytes each write costs are counted: no GC moves meanwhile
  auto e = MustOpen(o);
  const ShardKey k = Key(1, 1);
  std::vector<std::byte> model = Pattern(100000, 1);
  ASSERT_TRUE(e->Write(k, model, 1).ok());
  struct Case {
    uint64_t offset, size;
  } cases[] = {{8192, 4096}, {5000, 100}, {4000, 5000}, {0, 1}, {99999, 1}, {12288, 40000},
               {4095, 2}, {98304, 1696}, {1, 4095}, {65536, 8192}};
  uint64_t seed = 100;
  for (const Case& c : cases) {
    auto data = Pattern(c.size, seed++);
    const uint64_t device_before = e->Stats().device_bytes_written;
    ASSERT_TRUE(e->WriteRange(k, c.offset, data, seed).ok()) << c.offset << "+" << c.size;
    ModelWrite(model, c.offset, data);
    // Only the blocks the range touches reach the device.
    const uint64_t blocks = BlocksFor(c.offset + c.size) - c.offset / kBlockSize;
    EXPECT_EQ(e->Stats().device_bytes_written - device_before, blocks * kBlockSize);
    auto got = e->Read(k);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(SameBytes(*got, model)) << c.offset << "+" << c.size;
    EXPECT_EQ(e->Stat(k)->version, seed);
    auto range = e->ReadRange(k, c.offset > 10 ? c.offset - 10 : 0, c.size + 20);
    ASSERT_TRUE(range.ok());
    const uint64_t from = c.offset > 10 ? c.offset - 10 : 0;
    const uint64_t n = std::min<uint64_t>(c.size + 20, model.size() - from);
    EXPECT_TRUE(SameBytes(*range, std::vector<std::byte>(model.begin() + from, model.begin() + from + n)));
  }
  EngineStats s = e->Stats();
  EXPECT_EQ(s.checksum_errors, 0u);
  EXPECT_EQ(s.shards, 1u);
  uint64_t range_bytes = 0;
  for (const Case& c : cases) range_bytes += c.size;
  EXPECT_EQ(s.bytes_written, 100000 + range_bytes);
  // Too large for a segment.
  EXPECT_EQ(e->WriteRange(k, e->segment_bytes() - 10, Pattern(11, 0), 1).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(e->WriteRange(k, e->segment_bytes() + 1, {}, 1).code(), StatusCode::kInvalidArgument);
}

TEST(EngineRangeTest, ExtendPastTheEndReadsZerosAndCreatesAbsentShards) {
  ScratchDir dir;
  auto e = MustOpen(SmallOptions(dir));
  const ShardKey k = Key(1, 2);
  std::vector<std::byte> model = Pattern(5000, 2);
  ASSERT_TRUE(e->Write(k, model, 1).ok());
  auto tail = Pattern(3000, 3);
  ASSERT_TRUE(e->WriteRange(k, 20000, tail, 2).ok());
  ModelWrite(model, 20000, tail);
  EXPECT_TRUE(SameBytes(*e->Read(k), model));
  EXPECT_EQ(e->Stat(k).value(), (ShardInfo{23000, 2}));
  // Empty data: past the end extends with zeros; within it only sets the version.
  ASSERT_TRUE(e->WriteRange(k, 40000, {}, 3).ok());
  model.resize(40000, std::byte{0});
  EXPECT_EQ(e->Stat(k).value(), (ShardInfo{40000, 3}));
  ASSERT_TRUE(e->WriteRange(k, 100, {}, 4).ok());
  EXPECT_EQ(e->Stat(k).value(), (ShardInfo{40000, 4}));
  EXPECT_TRUE(SameBytes(*e->Read(k), model));
  // The holes own no space: 5000 bytes (2 blocks) + the 2 blocks of the tail.
  EXPECT_EQ(e->Stats().live_bytes, 4 * kBlockSize);

  // An absent shard is created, zeros before the range.
  const ShardKey fresh = Key(1, 3);
  auto mid = Pattern(777, 4);
  ASSERT_TRUE(e->WriteRange(fresh, 10000, mid, 9).ok());
  std::vector<std::byte> fresh_model;
  ModelWrite(fresh_model, 10000, mid);
  EXPECT_TRUE(SameBytes(*e->Read(fresh), fresh_model));
  EXPECT_EQ(e->Stat(fresh).value(), (ShardInfo{10777, 9}));
  ASSERT_TRUE(e->WriteRange(Key(1, 4), 0, {}, 5).ok());  // an empty shard
  EXPECT_EQ(e->Stat(Key(1, 4)).value(), (ShardInfo{0, 5}));
  ASSERT_TRUE(e->WriteRange(Key(1, 5), 8192, {}, 5).ok());  // all hole
  EXPECT_TRUE(SameBytes(*e->Read(Key(1, 5)), std::vector<std::byte>(8192)));
  EXPECT_EQ(e->Stats().shards, 4u);
  EXPECT_EQ(e->Stats().checksum_errors, 0u);
}

TEST(EngineRangeTest, ManySmallWritesOverlappingRunsThenRestart) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir, 32, 1 << 20);
  auto e = MustOpen(o);
  const ShardKey k = Key(2, 1);
  std::vector<std::byte> model = Pattern(1 << 20, 5);
  ASSERT_TRUE(e->Write(k, model, 1).ok());
  std::mt19937_64 rng(7);
  for (uint64_t i = 0; i < 300; ++i) {
    const bool aligned = i % 2 == 0;
    uint64_t size = aligned ? kBlockSize * (1 + rng() % 8) : 1 + rng() % 20000;
    uint64_t offset = aligned ? kBlockSize * (rng() % 256) : rng() % (1 << 20);
    if (offset + size > (1 << 20)) offset = (1 << 20) - size;
    auto data = Pattern(size, 1000 + i);
    ASSERT_TRUE(e->WriteRange(k, offset, data, i + 2).ok()) << i;
    ModelWrite(model, offset, data);
    if (i % 50 == 0) {
      ASSERT_TRUE(SameBytes(*e->Read(k), model)) << i;
    }
  }
  ASSERT_TRUE(SameBytes(*e->Read(k), model));
  // One range across many runs.
  auto wide = Pattern(300000, 77);
  ASSERT_TRUE(e->WriteRange(k, 123457, wide, 400).ok());
  ModelWrite(model, 123457, wide);
  ASSERT_TRUE(SameBytes(*e->Read(k), model));
  EXPECT_EQ(e->Stats().live_bytes, uint64_t{1} << 20);
  e.reset();
  ShardRecord r = RecordOf(o, k);
  EXPECT_LE(r.runs.size(), kMaxRuns);
  EXPECT_GT(r.runs.size(), 1u);
  e = MustOpen(o);
  EXPECT_TRUE(SameBytes(*e->Read(k), model));
  EXPECT_EQ(e->Stat(k).value(), (ShardInfo{1 << 20, 400}));
  EXPECT_EQ(e->Stats().live_bytes, uint64_t{1} << 20);
  EXPECT_EQ(e->Stats().checksum_errors, 0u);
}

// A shard with more blocks than the run bound allows runs: 4 runs' worth of blocks per bound.
constexpr uint64_t kFragmentableBytes = 4 * kMaxRuns * kBlockSize;

TEST(EngineRangeTest, TooManyRunsRewriteTheShardWhole) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir, 16, kFragmentableBytes);
  o.gc_background = false;  // the device bytes each write costs are counted: no GC moves meanwhile
  o.commit_overlap_min_requests = 1;  // every batch's data written while it is decided
  auto e = MustOpen(o);
  const ShardKey k = Key(3, 1);
  std::vector<std::byte> model = Pattern(kFragmentableBytes, 8);
  ASSERT_TRUE(e->Write(k, model, 1).ok());
  // Every other block: each write adds two runs, until the bound forces a rewrite.
  uint64_t rewrites = 0;
  for (uint64_t b = 0; b < kFragmentableBytes / kBlockSize; b += 2) {
    auto data = Pattern(kBlockSize, 50 + b);
    const uint64_t before = e->Stats().device_bytes_written;
    ASSERT_TRUE(e->WriteRange(k, b * kBlockSize, data, b + 2).ok());
    ModelWrite(model, b * kBlockSize, data);
    const uint64_t wrote = e->Stats().device_bytes_written - before;
    if (wrote > kBlockSize) {
      // The refused range write's block (written while the committer decided it), then the
      // whole shard.
      EXPECT_EQ(wrote, kBlockSize + kFragmentableBytes) << b;
      ++rewrites;
    } else {
      EXPECT_EQ(wrote, kBlockSize) << b;
    }
  }
  EXPECT_GE(rewrites, 1u);
  EXPECT_TRUE(SameBytes(*e->Read(k), model));
  e.reset();
  EXPECT_LE(RecordOf(o, k).runs.size(), kMaxRuns);
  e = MustOpen(o);
  EXPECT_TRUE(SameBytes(*e->Read(k), model));
}

// WriteRangeAsync: many whole-block writes queued at once from one thread share group commits
// and read back as the model says, in queue order for writes of one key; errors found before
// queueing come at once; a shard with too many runs answers kAborted (rewrite it whole).
TEST(EngineRangeTest, AsynchronousRangeWritesShareCommits) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir, 16, kFragmentableBytes);
  auto e = MustOpen(o);
  const int kShards = 8, kWrites = 400;
  std::vector<std::vector<std::byte>> model(kShards, Pattern(256 * 1024, 60));
  for (int i = 0; i < kShards; ++i) ASSERT_TRUE(e->Write(Key(4, i), model[i], 1).ok());
  std::vector<std::vector<std::byte>> payloads;
  std::mt19937_64 rng(61);
  struct Pending {
    std::mutex mu;
    std::condition_variable cv;
    int left = 0, failed = 0;
  } p;
  p.left = kWrites;
  const uint64_t batches = e->Stats().commit_batches;
  for (int w = 0; w < kWrites; ++w) {  // all queued before the first is answered
    const int shard = static_cast<int>(rng() % kShards);
    const uint64_t block = rng() % 64, blocks = 1 + rng() % 3;
    payloads.push_back(Pattern(blocks * kBlockSize, 1000 + w));
    ModelWrite(model[shard], block * kBlockSize, payloads.back());
  }
  rng.seed(61);
  for (int w = 0; w < kWrites; ++w) {
    const int shard = static_cast<int>(rng() % kShards);
    const uint64_t block = rng() % 64;
    rng();
    e->WriteRangeAsync(Key(4, shard), block * kBlockSize, payloads[w], 2 + w, [&p](Status s) {
      std::lock_guard<std::mutex> lock(p.mu);
      if (!s.ok()) ++p.failed;
      if (--p.left == 0) p.cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(p.mu);
    p.cv.wait(lock, [&] { return p.left == 0; });
  }
  EXPECT_EQ(p.failed, 0);
  EXPECT_LT(e->Stats().commit_batches - batches, uint64_t{kWrites} / 2);  // writes shared flushes
  for (int i = 0; i < kShards; ++i) EXPECT_TRUE(SameBytes(*e->Read(Key(4, i)), model[i])) << i;
  e.reset();
  e = MustOpen(o);
  for (int i = 0; i < kShards; ++i) EXPECT_TRUE(SameBytes(*e->Read(Key(4, i)), model[i])) << i;

  // Errors before queueing arrive at once, on this thread.
  std::vector<std::byte> block = Pattern(kBlockSize, 62);
  Status got = OkStatus();
  e->WriteRangeAsync(Key(4, 0), 100, block, 9, [&](Status s) { got = s; });
  EXPECT_EQ(got.code(), StatusCode::kInvalidArgument) << got.ToString();
  got = OkStatus();
  e->WriteRangeAsync(Key(4, 0), kFragmentableBytes, block, 9, [&](Status s) { got = s; });  // past the segment
  EXPECT_EQ(got.code(), StatusCode::kInvalidArgument) << got.ToString();

  // Every other block of a shard with more blocks than runs allowed: the run bound is reached
  // and the write comes back kAborted, changing nothing; WriteRange then rewrites it whole.
  const ShardKey k = Key(4, 100);
  std::vector<std::byte> whole = Pattern(kFragmentableBytes, 63);
  ASSERT_TRUE(e->Write(k, whole, 1).ok());
  Status aborted = OkStatus();
  for (uint64_t b = 0; b < kFragmentableBytes / kBlockSize && aborted.ok(); b += 2) {
    std::promise<Status> done;
    auto data = Pattern(kBlockSize, 70 + b);
    e->WriteRangeAsync(k, b * kBlockSize, data, b + 2, [&](Status s) { done.set_value(s); });
    Status s = done.get_future().get();
    if (s.ok()) {
      ModelWrite(whole, b * kBlockSize, data);
      continue;
    }
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
    EXPECT_TRUE(Engine::MustRewriteWhole(s)) << s.message();
    EXPECT_TRUE(SameBytes(*e->Read(k), whole));
    ASSERT_TRUE(e->WriteRange(k, b * kBlockSize, data, b + 2).ok());
    ModelWrite(whole, b * kBlockSize, data);
    aborted = s;
  }
  EXPECT_FALSE(aborted.ok()) << "the run bound was never reached";
  EXPECT_TRUE(SameBytes(*e->Read(k), whole));
}

TEST(EngineRangeTest, TryWriteRangeAsyncNeverWaitsForSpace) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir, 4, 256 * 1024);
  o.gc_background = false;  // space comes back only by an inline GC pass or an index sync
  auto e = MustOpen(o);
  const ShardKey k = Key(4, 7);
  // Overwriting one shard fills the segments with dead space, which needs an index sync (or
  // GC) before it is reused: TryWriteRangeAsync declines then, leaving `done` alone.
  std::vector<std::byte> last;
  bool declined = false;
  for (uint64_t v = 1; v < 1000 && !declined; ++v) {
    std::vector<std::byte> data = Pattern(64 * 1024, v);
    std::promise<Status> result;
    bool called = false;
    std::function<void(Status)> done = [&](Status s) {
      called = true;
      result.set_value(std::move(s));
    };
    if (!e->TryWriteRangeAsync(k, 0, data, v, done)) {
      EXPECT_FALSE(called);
      ASSERT_TRUE(done) << "a declined write must leave `done` to the caller";
      declined = true;
      // A thread that may wait: the engine makes space first and the write succeeds.
      e->WriteRangeAsync(k, 0, data, v, std::move(done));
    }
    Status s = result.get_future().get();
    ASSERT_TRUE(s.ok()) << s.ToString();
    last = std::move(data);
  }
  EXPECT_TRUE(declined) << "space never ran short";
  EXPECT_TRUE(SameBytes(*e->Read(k), last));
  // Errors found before queueing still come at once.
  Status got = OkStatus();
  std::function<void(Status)> done = [&](Status s) { got = s; };
  EXPECT_TRUE(e->TryWriteRangeAsync(k, 100, last, 5000, done));
  EXPECT_EQ(got.code(), StatusCode::kInvalidArgument) << got.ToString();
}

TEST(EngineRangeTest, AsynchronousReadsMatchReadRange) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir, 16, 1 << 20);
  auto e = MustOpen(o);
  const ShardKey whole = Key(5, 1), ranged = Key(5, 2);
  const std::vector<std::byte> data = Pattern(300000, 80);
  ASSERT_TRUE(e->Write(whole, data, 3).ok());
  ASSERT_TRUE(e->Write(ranged, data, 4).ok());
  const std::vector<std::byte> patch = Pattern(8192, 81);
  ASSERT_TRUE(e->WriteRange(ranged, 40960, patch, 5).ok());  // ranged: three runs
  // Runs `done` to completion; nullopt when declined.
  auto read = [&](const ShardKey& k, uint64_t offset, uint64_t length)
      -> std::optional<std::pair<Result<AlignedBuffer>, ShardInfo>> {
    std::promise<std::pair<Result<AlignedBuffer>, ShardInfo>> result;
    Engine::ReadDone done = [&](Result<AlignedBuffer> got, ShardInfo info) {
      result.set_value({std::move(got), info});
    };
    if (!e->TryReadRangeAsync(k, offset, length, done)) {
      EXPECT_TRUE(done) << "a declined read must leave `done` to the caller";
      return std::nullopt;
    }
    return result.get_future().get();
  };
  const uint64_t reads = e->Stats().reads;
  // Within one run: the bytes ReadRange gives, and the shard's length and version.
  for (auto [offset, length] : std::vector<std::pair<uint64_t, uint64_t>>{
           {0, 4096}, {5, 100}, {4000, 9000}, {299990, 100}, {0, UINT64_MAX}, {300000, 10}, {500000, 1}}) {
    auto got = read(whole, offset, length);
    ASSERT_TRUE(got) << offset;
    ASSERT_TRUE(got->first.ok()) << got->first.status().ToString();
    EXPECT_EQ(got->second, (ShardInfo{300000, 3}));
    auto want = e->ReadRange(whole, offset, length);
    ASSERT_TRUE(want.ok());
    EXPECT_TRUE(SameBytes(*got->first, std::vector<std::byte>(want->data(), want->data() + want->size()))) << offset;
  }
  EXPECT_EQ(e->Stats().reads - reads, 14u);  // counted like ReadRange
  // The ranged shard: a range inside one run is read; one across runs is declined.
  auto inside = read(ranged, 40960 + 100, 1000);
  ASSERT_TRUE(inside && inside->first.ok());
  EXPECT_TRUE(SameBytes(*inside->first, std::vector<std::byte>(patch.begin() + 100, patch.begin() + 1100)));
  EXPECT_EQ(inside->second, (ShardInfo{300000, 5}));
  EXPECT_FALSE(read(ranged, 40000, 4000));
  // Absent: kNotFound at once.
  auto absent = read(Key(5, 99), 0, 10);
  ASSERT_TRUE(absent);
  EXPECT_EQ(absent->first.status().code(), StatusCode::kNotFound);
  // A corrupt block: kDataLoss, and the shard is recorded corrupt.
  e.reset();
  ASSERT_TRUE(FlipByteOf(o.data_path, data, 8192 + 10));
  e = MustOpen(o);
  ASSERT_TRUE(e->Stat(whole).ok());  // the record is in the index's memory (block cache) now
  auto bad = read(whole, 8192, 100);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->first.status().code(), StatusCode::kDataLoss) << bad->first.status().ToString();
  EXPECT_EQ(e->CorruptShards(), std::vector<ShardKey>{whole});
  EXPECT_EQ(e->ReadRange(whole, 8192, 100).status().code(), StatusCode::kDataLoss);
}

// CompleteReadsOnThisThread: reads this thread starts are submitted together when its loop
// next reaps the queue, and complete on it, when it reaps the queue after the event fd fires,
// with the bytes ReadRange gives; the function it returns waits for the reads still in flight
// (submitting those only queued) and runs their callbacks, on this thread.
TEST(EngineRangeTest, ReadsCompleteOnTheThreadWithAQueue) {
  ScratchDir dir;
  auto e = MustOpen(SmallOptions(dir, 16, 1 << 20));
  constexpr int kShards = 8;
  for (int i = 0; i < kShards; ++i) ASSERT_TRUE(e->Write(Key(7, i), Pattern(65536, 100 + i), 1).ok());
  for (int i = 0; i < kShards; ++i) ASSERT_TRUE(e->Stat(Key(7, i)).ok());  // records in memory
  int fd = -1;
  std::function<bool()> reap;
  std::function<void()> stop = Engine::CompleteReadsOnThisThread([&](int f, std::function<bool()> r) {
    fd = f;
    reap = std::move(r);
  });
  ASSERT_TRUE(stop) << "no queue could be made";
  ASSERT_GE(fd, 0);
  const auto me = std::this_thread::get_id();
  int done_count = 0, wrong = 0;
  auto start_reads = [&](int round) {
    int started = 0;
    for (int i = 0; i < kShards; ++i) {
      const uint64_t offset = uint64_t(round * 4096 + i * 1000) % 60000;
      Engine::ReadDone done = [&, i, offset, me](Result<AlignedBuffer> got, ShardInfo info) {
        ++done_count;
        auto want = Pattern(65536, 100 + i);
        if (std::this_thread::get_id() != me || !got.ok() || info.length != 65536 ||
            !SameBytes(*got, std::vector<std::byte>(want.begin() + offset, want.begin() + offset + 3000))) {
          ++wrong;
        }
      };
      if (e->TryReadRangeAsync(Key(7, i), offset, 3000, done)) ++started;
    }
    return started;
  };
  // Reaped by this thread's "loop": after its round of work (which submits the reads), wait
  // for the fd, read it, reap.
  int started = start_reads(0);
  EXPECT_EQ(started, kShards);
  pollfd idle{fd, POLLIN, 0};
  EXPECT_EQ(poll(&idle, 1, 100), 0) << "queued reads ran before the loop submitted them";
  reap();
  while (done_count < started) {
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 5000), 1) << "the event fd never fired";
    uint64_t v;
    ASSERT_EQ(read(fd, &v, sizeof v), ssize_t(sizeof v));
    reap();
  }
  EXPECT_EQ(wrong, 0);
  // Reads in flight when the queue goes: their callbacks run before stop returns.
  done_count = 0;
  started = start_reads(1);
  EXPECT_EQ(started, kShards);
  stop();
  EXPECT_EQ(done_count, started);
  EXPECT_EQ(wrong, 0);
  // Without the queue, reads complete on the device's completion thread again.
  std::promise<std::thread::id> where;
  Engine::ReadDone done = [&](Result<AlignedBuffer>, ShardInfo) { where.set_value(std::this_thread::get_id()); };
  ASSERT_TRUE(e->TryReadRangeAsync(Key(7, 0), 0, 100, done));
  EXPECT_NE(where.get_future().get(), me);
}

TEST(EngineRangeTest, VersionConditionsAreDecidedInQueueOrder) {
  ScratchDir dir;
  auto e = MustOpen(SmallOptions(dir, 16, 1 << 20));
  const ShardKey k = Key(6, 1);
  std::vector<std::byte> model = Pattern(64 * 1024, 90);
  ASSERT_TRUE(e->Write(k, model, 5).ok());
  const std::vector<std::byte> block = Pattern(kBlockSize, 91);
  // Whole writes that must not be older than what is stored.
  Status older = e->Write(k, Pattern(100, 92), 4, /*not_older=*/true);
  EXPECT_EQ(older.code(), StatusCode::kAborted) << older.ToString();
  EXPECT_TRUE(SameBytes(*e->Read(k), model));
  // Range writes over an expected version, blocking and queued: a newer stored version is
  // kAborted at once (not retried), an older one or none kFailedPrecondition; nothing changes.
  Status newer = e->WriteRange(k, 0, block, 9, /*expected_version=*/4);
  EXPECT_EQ(newer.code(), StatusCode::kAborted) << newer.ToString();
  EXPECT_NE(newer.message().find("a later write won"), std::string::npos) << newer.message();
  Status behind = e->WriteRange(k, 100, block, 9, /*expected_version=*/6);  // partial blocks too
  EXPECT_EQ(behind.code(), StatusCode::kFailedPrecondition) << behind.ToString();
  EXPECT_EQ(e->WriteRange(Key(6, 2), 0, block, 9, 1).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(e->Stat(Key(6, 2)).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(SameBytes(*e->Read(k), model));
  auto queued = [&](uint64_t version, uint64_t expected) {
    std::promise<Status> done;
    e->WriteRangeAsync(k, kBlockSize, block, version, [&](Status st) { done.set_value(st); }, expected);
    return done.get_future().get();
  };
  EXPECT_EQ(queued(9, 4).code(), StatusCode::kAborted);
  EXPECT_EQ(queued(9, 6).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(SameBytes(*e->Read(k), model));
  // Over the stored version: applied.
  ASSERT_TRUE(queued(6, 5).ok());
  ModelWrite(model, kBlockSize, block);
  EXPECT_TRUE(SameBytes(*e->Read(k), model));
  EXPECT_EQ(e->Stat(k)->version, 6u);
  // Many writers patch over the same version at once: exactly one wins, the others see it.
  constexpr int kWriters = 32;
  std::mutex mu;
  std::condition_variable cv;
  int left = kWriters, won = 0, lost = 0;
  std::vector<std::vector<std::byte>> payloads;
  for (int w = 0; w < kWriters; ++w) payloads.push_back(Pattern(kBlockSize, 100 + w));
  for (int w = 0; w < kWriters; ++w) {
    e->WriteRangeAsync(k, (w % 8) * kBlockSize, payloads[w], 7, [&](Status st) {
      std::lock_guard lock(mu);
      (st.ok() ? won : lost) += st.ok() || st.code() == StatusCode::kAborted ? 1 : 1000;
      if (--left == 0) cv.notify_all();
    }, /*expected_version=*/6);
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return left == 0; });
  EXPECT_EQ(won, 1);
  EXPECT_EQ(lost, kWriters - 1);
  EXPECT_EQ(e->Stat(k)->version, 7u);
  EXPECT_TRUE(e->Write(k, Pattern(100, 93), 7, /*not_older=*/true).ok());  // equal: not older
}

TEST(EngineRangeTest, DeletingAShardInManyRunsFreesAllItsSpace) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir, 8, 256 * 1024);
  o.gc_enabled = false;  // space comes back only when a segment is wholly dead
  auto e = MustOpen(o);
  const ShardKey k = Key(4, 1);
  ASSERT_TRUE(e->Write(k, Pattern(200000, 1), 1).ok());
  // Ranges that land in later segments (other shards fill the rest).
  for (uint64_t i = 0; i < 6; ++i) {
    ASSERT_TRUE(e->Write(Key(4, 100 + i), Pattern(150000, 100 + i), 1).ok());
    ASSERT_TRUE(e->WriteRange(k, i * 30000 + 17, Pattern(20000, 10 + i), i + 2).ok());
  }
  for (uint64_t i = 0; i < 6; ++i) ASSERT_TRUE(e->Delete(Key(4, 100 + i)).ok());
  EXPECT_GT(e->Stats().live_bytes, 0u);
  ASSERT_TRUE(e->Delete(k).ok());
  EngineStats s = e->Stats();
  EXPECT_EQ(s.live_bytes, 0u);
  EXPECT_EQ(s.shards, 0u);
  EXPECT_EQ(s.free_segments, s.total_segments - 1);  // all but the open one (rewound)
  EXPECT_LT(s.dead_bytes, o.segment_bytes);  // the open segment's written part, rewound on reuse
  e.reset();
  e = MustOpen(o);
  EXPECT_EQ(e->Stats().live_bytes, 0u);
  EXPECT_EQ(e->Stats().free_segments, e->Stats().total_segments);
}

TEST(EngineRangeTest, AVersionOneRecordReadsAndTakesRanges) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir);
  const ShardKey k = Key(5, 1);
  std::vector<std::byte> model = Pattern(50000, 1);
  {
    auto e = MustOpen(o);
    ASSERT_TRUE(e->Write(k, model, 1).ok());
  }
  {  // Stored as an older build stored it: a version-1 record.
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::OpenForReadOnly(rocksdb::Options(), o.index_dir, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string value;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), EncodeShardKey(k), &value).ok());
    uint16_t version = 0;
    std::memcpy(&version, value.data(), sizeof(version));
    EXPECT_EQ(version, kShardRecordVersion);
  }
  auto e = MustOpen(o);
  EXPECT_TRUE(SameBytes(*e->Read(k), model));
  auto data = Pattern(6000, 2);
  ASSERT_TRUE(e->WriteRange(k, 10000, data, 2).ok());
  ModelWrite(model, 10000, data);
  EXPECT_TRUE(SameBytes(*e->Read(k), model));
  e.reset();
  EXPECT_EQ(RecordOf(o, k).runs.size(), 3u);
  e = MustOpen(o);
  EXPECT_TRUE(SameBytes(*e->Read(k), model));
}

// Writers of one key: whole-shard Writes of one byte value, an unaligned range and an aligned
// range, each of its own value; GC moving the shard meanwhile. Every read must show each
// region uniform (never a range half applied, nor an edge merged from a stale version).
TEST(EngineRangeTest, ConcurrentWritesOfOneKeyAreNeverTorn) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir, 16, 256 * 1024);
  o.gc_background = false;
  auto e = MustOpen(o);
  const ShardKey k = Key(6, 1);
  constexpr uint64_t kLength = 64 * 1024;
  constexpr uint64_t kRangeA = 10000, kRangeAEnd = 30001;  // unaligned edges
  constexpr uint64_t kRangeB = 32768, kRangeBEnd = 49152;  // aligned
  ASSERT_TRUE(e->Write(k, std::vector<std::byte>(kLength, std::byte{1}), 1).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::atomic<uint64_t> reads{0}, range_writes{0};
  std::vector<std::thread> threads;
  auto fill = [](size_t n, int v) { return std::vector<std::byte>(n, static_cast<std::byte>(v)); };
  threads.emplace_back([&] {  // whole writes: values 2..99
    for (int i = 0; !stop; ++i) {
      if (!e->Write(k, fill(kLength, 2 + i % 98), 1).ok()) ++failures;
    }
  });
  threads.emplace_back([&] {  // unaligned range: values 100..149
    for (int i = 0; !stop; ++i) {
      Status s = e->WriteRange(k, kRangeA, fill(kRangeAEnd - kRangeA, 100 + i % 50), 2);
      if (!s.ok()) {
        ADD_FAILURE() << s.ToString();
        ++failures;
      }
      ++range_writes;
    }
  });
  threads.emplace_back([&] {  // aligned range: values 150..199
    for (int i = 0; !stop; ++i) {
      if (!e->WriteRange(k, kRangeB, fill(kRangeBEnd - kRangeB, 150 + i % 50), 3).ok()) ++failures;
      ++range_writes;
    }
  });
  threads.emplace_back([&] {
    while (!stop) {
      if (!e->CollectGarbage().ok()) ++failures;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      while (!stop) {
        auto got = e->Read(k);
        if (!got.ok() || got->size() != kLength) {
          ++failures;
          continue;
        }
        ++reads;
        auto uniform = [&](uint64_t from, uint64_t to) {
          for (uint64_t i = from + 1; i < to; ++i) {
            if (got->data()[i] != got->data()[from]) return false;
          }
          return true;
        };
        const std::byte rest = got->data()[0];
        bool ok = uniform(0, kRangeA) && uniform(kRangeA, kRangeAEnd) &&
                  uniform(kRangeAEnd, kRangeB) && uniform(kRangeB, kRangeBEnd) &&
                  uniform(kRangeBEnd, kLength) && got->data()[kRangeAEnd] == rest &&
                  got->data()[kRangeBEnd] == rest;
        if (!ok) {
          ADD_FAILURE() << "torn read";
          ++failures;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(reads.load(), 10u);
  EXPECT_GT(range_writes.load(), 10u);
  EXPECT_EQ(e->Stats().checksum_errors, 0u);
}

// Shards whose runs lie in several segments: GC moves their runs out of its victims and they
// read back the same, also after a restart; live bytes stay what the shards store.
TEST(EngineRangeTest, GcMovesShardsWhoseRunsSpanSegments) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir, 12, 256 * 1024);
  o.gc_background = false;
  auto e = MustOpen(o);
  std::map<uint64_t, std::vector<std::byte>> model;
  for (uint64_t i = 0; i < 8; ++i) {
    model[i] = Pattern(100000, i);
    ASSERT_TRUE(e->Write(Key(7, i), model[i], 1).ok());
  }
  std::mt19937_64 rng(3);
  for (uint64_t round = 0; round < 6; ++round) {
    for (uint64_t i = 0; i < 8; ++i) {
      uint64_t offset = rng() % 90000, size = 1 + rng() % 30000;
      auto data = Pattern(size, 1000 * round + i);
      ASSERT_TRUE(e->WriteRange(Key(7, i), offset, data, round + 2).ok());
      ModelWrite(model[i], offset, data);
    }
    // Garbage in between, deleted: the segments holding the shards' runs become mostly dead.
    ASSERT_TRUE(e->Write(Key(8, round), Pattern(120000, round), 1).ok());
    ASSERT_TRUE(e->Delete(Key(8, round)).ok());
  }
  uint64_t stored = 0;
  for (auto& [i, m] : model) stored += BlocksFor(m.size()) * kBlockSize;
  EXPECT_EQ(e->Stats().live_bytes, stored);
  auto cleaned = e->CollectGarbage();
  ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
  EXPECT_GT(*cleaned, 0u);
  EXPECT_GT(e->Stats().gc_bytes_moved, 0u);
  EXPECT_EQ(e->Stats().live_bytes, stored);
  for (auto& [i, m] : model) ASSERT_TRUE(SameBytes(*e->Read(Key(7, i)), m)) << i;
  e.reset();
  e = MustOpen(o);
  EXPECT_EQ(e->Stats().live_bytes, stored);
  for (auto& [i, m] : model) ASSERT_TRUE(SameBytes(*e->Read(Key(7, i)), m)) << i;
  EXPECT_EQ(e->Stats().checksum_errors, 0u);
  ASSERT_TRUE(e->CollectGarbage().ok());
  for (auto& [i, m] : model) ASSERT_TRUE(SameBytes(*e->Read(Key(7, i)), m)) << i;
}

TEST(EngineRangeTest, ScrubFindsACorruptBlockInALaterRun) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir);
  auto e = MustOpen(o);
  const ShardKey k = Key(9, 1);
  std::vector<std::byte> model = Pattern(64 * 1024, 1);
  ASSERT_TRUE(e->Write(k, model, 1).ok());
  auto range = Pattern(8192, 99);
  ASSERT_TRUE(e->WriteRange(k, 5 * kBlockSize, range, 2).ok());
  ModelWrite(model, 5 * kBlockSize, range);
  ASSERT_TRUE(e->Scrub().ok());
  EXPECT_TRUE(e->CorruptShards().empty());
  ASSERT_TRUE(FlipByteOf(o.data_path, range, 5000));  // the second block of the range
  ASSERT_TRUE(e->Scrub().ok());
  EXPECT_EQ(e->CorruptShards(), std::vector<ShardKey>{k});
  EXPECT_EQ(e->Stats().scrub_corrupt_shards, 1u);
  auto bad = e->Read(k);
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("shard offset 24576"), std::string::npos)
      << bad.status().ToString();
  // Blocks outside it still read; a range that must merge the bad block fails, one that
  // replaces it whole succeeds but leaves the shard listed until all of it is rewritten.
  auto head = e->ReadRange(k, 0, 5 * kBlockSize);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(e->WriteRange(k, 6 * kBlockSize + 10, Pattern(10, 3), 3).code(), StatusCode::kDataLoss);
  auto fix = Pattern(kBlockSize, 4);
  ASSERT_TRUE(e->WriteRange(k, 6 * kBlockSize, fix, 4).ok());
  ModelWrite(model, 6 * kBlockSize, fix);
  EXPECT_TRUE(SameBytes(*e->Read(k), model));
  EXPECT_EQ(e->CorruptShards(), std::vector<ShardKey>{k});
  ASSERT_TRUE(e->WriteRange(k, 0, model, 5).ok());
  EXPECT_TRUE(e->CorruptShards().empty());
}

}  // namespace
}  // namespace penstock::engine

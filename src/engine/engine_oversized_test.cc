// Batches too large for the index journal (kMaxJournalRecordBytes): they are durable only once
// the applier has written them, synced, into the index. Two things must hold for them:
//  - no later batch is decided against their records before that (a journaled batch would be
//    acknowledged on a base that a crash can still take away), and
//  - GC's copies in such a batch are flushed before the index names them (a volatile device
//    cache would lose them at a power cut).
// A "crash" is CrashImage, as in engine_journal_test.cc.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "common/buffer.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "engine/file_device.h"
#include "engine/format.h"
#include "engine/test_util.h"

namespace penstock::engine {
namespace {

using testing::CrashImage;
using testing::InImage;
using testing::Key;
using testing::Pattern;
using testing::SameBytes;
using testing::ScratchDir;
using testing::SmallOptions;

// Counts callbacks and keeps the errors.
class Callbacks {
 public:
  explicit Callbacks(int n) : left_(n) {}
  std::function<void(Status)> Next() {
    return [this](Status s) {
      std::lock_guard lock(mu_);
      if (!s.ok()) errors_.push_back(s);
      if (--left_ == 0) cv_.notify_all();
    };
  }
  std::vector<Status> Wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return left_ == 0; });
    return errors_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
  std::vector<Status> errors_;
};

// Passes everything to `inner` (the devices below override what they change).
class ForwardingDevice : public Device {
 public:
  explicit ForwardingDevice(std::unique_ptr<Device> inner) : inner_(std::move(inner)) {}
  uint64_t size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }
  Status Write(uint64_t o, std::span<const std::byte> d) override { return inner_->Write(o, d); }
  Status WriteUnsynced(uint64_t o, std::span<const std::byte> d) override { return inner_->WriteUnsynced(o, d); }
  Status Read(uint64_t o, std::span<std::byte> out) override { return inner_->Read(o, out); }
  Status Sync() override { return inner_->Sync(); }

 protected:
  std::unique_ptr<Device> inner_;
};

// A file device whose group writes (the committer's batches) can be held: the first call until
// `Let(1)`, the second until `Let(2)`; `at_call(n)` runs when call n has been written.
class HeldDevice : public ForwardingDevice {
 public:
  using ForwardingDevice::ForwardingDevice;

  struct Held : PendingWrites {
    int call = 0;
  };
  std::unique_ptr<PendingWrites> StartWriteAll(std::span<DeviceWrite> writes, bool sync) override {
    auto p = std::make_unique<Held>();
    p->result = inner_->WriteAll(writes, sync);
    std::function<void()> hook;
    {
      std::lock_guard lock(mu_);
      p->call = ++calls_;
      if (auto it = hooks_.find(p->call); it != hooks_.end()) hook = it->second;
    }
    if (hook) hook();
    cv_.notify_all();
    return p;
  }
  Status FinishWriteAll(std::unique_ptr<PendingWrites> pending) override {
    auto& p = static_cast<Held&>(*pending);
    std::unique_lock lock(mu_);
    if (p.call <= 2) cv_.wait(lock, [&] { return let_ >= p.call; });
    return p.result;
  }
  void AtCall(int n, std::function<void()> fn) {
    std::lock_guard lock(mu_);
    hooks_[n] = std::move(fn);
  }
  // Waits until `n` group writes have started (true) or `ms` passed (false).
  bool WaitCalls(int n, int ms = 10000) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return calls_ >= n; });
  }
  void Let(int n) {
    {
      std::lock_guard lock(mu_);
      let_ = n;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0, let_ = 0;
  std::map<int, std::function<void()>> hooks_;
};

TEST(EngineOversizedBatchTest, NoBatchIsDecidedAgainstOneTheIndexDoesNotHoldYet) {
  ScratchDir dir, image;
  EngineOptions o = SmallOptions(dir, 32, 1 << 20);
  o.gc_enabled = false;
  o.zero_rate_bytes_per_sec = 0;
  o.commit_batches_in_flight = 2;
  o.commit_overlap_min_requests = 100;
  o.commit_gather_us = 0;
  auto file = FileDevice::Open(o.data_path, o.capacity_bytes, 8);
  ASSERT_TRUE(file.ok());
  auto held = std::make_unique<HeldDevice>(std::move(*file));
  HeldDevice* dev = held.get();
  auto opened = Engine::Open(o, std::move(held));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<Engine> e = std::move(*opened);
  const std::vector<std::byte> block = Pattern(kBlockSize, 1);
  const std::vector<std::byte> newer = Pattern(kBlockSize, 2);

  // A: one write, its group write held, so that B gathers behind it.
  Callbacks a(1);
  e->WriteRangeAsync(Key(1, 999999), 0, block, 1, a.Next());
  ASSERT_TRUE(dev->WaitCalls(1));
  // B: 2400 new shards, too many for one journal record.
  constexpr int kB = 2400, kC = 100;
  Callbacks b(kB);
  for (int i = 0; i < kB; ++i) e->WriteRangeAsync(Key(1, i), 0, block, 1, b.Next());
  dev->Let(1);
  ASSERT_TRUE(dev->WaitCalls(2));  // B's flush, held
  // C: a range write onto one of B's shards, with others. Before the fix it was decided against
  // B's record, journaled and acknowledged while B was not in the index; the image taken when
  // C's group write is done is what a crash would have left.
  dev->AtCall(3, [&] { CrashImage(dir.path(), image.path()); });
  Callbacks c(kC);
  e->WriteRangeAsync(Key(1, 0), 0, newer, 2, c.Next());
  for (int i = 1; i < kC; ++i) e->WriteRangeAsync(Key(2, i), 0, block, 1, c.Next());
  // C must not be written before B is in the index (it waits for B, which waits to be let go).
  EXPECT_FALSE(dev->WaitCalls(3, 300)) << "a batch was decided while the one too large to journal was not applied";
  dev->Let(2);
  EXPECT_TRUE(a.Wait().empty());
  EXPECT_TRUE(b.Wait().empty());
  EXPECT_TRUE(c.Wait().empty());
  ASSERT_TRUE(dev->WaitCalls(3));
  e.reset();

  auto reopened = Engine::Open(InImage(o, image.path()));
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  auto got = (*reopened)->ReadRange(Key(1, 0), 0, kBlockSize);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(SameBytes(*got, newer));
  for (int i = 1; i < kB; i += 97) {
    auto other = (*reopened)->ReadRange(Key(1, i), 0, kBlockSize);
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    EXPECT_TRUE(SameBytes(*other, block));
  }
}

// A device with a volatile write cache: unsynced writes reach the file only at a flush.
class CachedDevice : public ForwardingDevice {
 public:
  using ForwardingDevice::ForwardingDevice;
  Status WriteUnsynced(uint64_t o, std::span<const std::byte> d) override {
    std::lock_guard lock(mu_);
    cache_[o] = std::vector<std::byte>(d.begin(), d.end());
    return OkStatus();
  }
  Status Read(uint64_t o, std::span<std::byte> out) override {
    PS_RETURN_IF_ERROR(inner_->Read(o, out));
    std::lock_guard lock(mu_);
    for (const auto& [at, bytes] : cache_) {
      const uint64_t begin = std::max(at, o), end = std::min(at + bytes.size(), o + out.size());
      if (begin < end) std::memcpy(out.data() + (begin - o), bytes.data() + (begin - at), end - begin);
    }
    return OkStatus();
  }
  Status Sync() override {
    std::map<uint64_t, std::vector<std::byte>> flushing;
    {
      std::lock_guard lock(mu_);
      flushing.swap(cache_);
    }
    for (const auto& [at, bytes] : flushing) {
      AlignedBuffer b = AlignedBuffer::CopyOf(std::span<const std::byte>(bytes));
      PS_RETURN_IF_ERROR(inner_->WriteUnsynced(at, {b.data(), bytes.size()}));
    }
    return inner_->Sync();
  }
  Status WriteAll(std::span<DeviceWrite> writes, bool sync) override {
    if (sync) PS_RETURN_IF_ERROR(Sync());
    return inner_->WriteAll(writes, sync);
  }
  size_t cached() {
    std::lock_guard lock(mu_);
    size_t n = 0;
    for (const auto& [at, bytes] : cache_) n += bytes.size();
    return n;
  }

 private:
  std::mutex mu_;
  std::map<uint64_t, std::vector<std::byte>> cache_;
};

TEST(EngineOversizedBatchTest, GcCopiesAreFlushedBeforeTheIndexNamesThem) {
  ScratchDir dir, image;
  EngineOptions o = SmallOptions(dir, 48, 1 << 20);
  o.gc_background = false;
  o.zero_rate_bytes_per_sec = 0;
  auto file = FileDevice::Open(o.data_path, o.capacity_bytes, 8);
  ASSERT_TRUE(file.ok());
  auto cached = std::make_unique<CachedDevice>(std::move(*file));
  CachedDevice* dev = cached.get();
  auto opened = Engine::Open(o, std::move(cached));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<Engine> e = std::move(*opened);
  // 256 shards of 24 scattered blocks each: their block maps make GC's relocation batch too
  // large for one journal record.
  constexpr int kShards = 256, kRounds = 24;
  auto pattern = [](int shard, int round) { return Pattern(kBlockSize, static_cast<uint64_t>(shard) * 1000 + round); };
  for (int r = 0; r < kRounds; ++r) {
    Callbacks w(kShards);
    std::vector<std::vector<std::byte>> blocks;
    blocks.reserve(kShards);
    for (int s = 0; s < kShards; ++s) {
      blocks.push_back(pattern(s, r));
      e->WriteRangeAsync(Key(3, s), uint64_t(2 * r) * kBlockSize, blocks.back(), r + 1, w.Next());
    }
    auto errors = w.Wait();
    ASSERT_TRUE(errors.empty()) << errors.front().ToString();
  }
  // Dead space in the first round's segment only, then GC of one segment.
  for (int s = 0; s < 10; ++s) ASSERT_TRUE(e->WriteRange(Key(3, s), 0, pattern(s, 99), 100).ok());
  ASSERT_EQ(dev->cached(), 0u);
  auto cleaned = e->CollectGarbage(1);
  ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
  ASSERT_EQ(*cleaned, 1u);
  EXPECT_EQ(dev->cached(), 0u) << "moves committed while their copies were only in the device's cache";
  // Power cut: the file without the cache, the index as synced.
  CrashImage(dir.path(), image.path());
  e.reset();
  auto reopened = Engine::Open(InImage(o, image.path()));
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  int bad = 0;
  for (int s = 10; s < kShards; ++s) {
    auto got = (*reopened)->ReadRange(Key(3, s), 0, kBlockSize);
    if (!got.ok() || !SameBytes(*got, pattern(s, 0))) ++bad;
  }
  EXPECT_EQ(bad, 0) << "shards whose first block (moved by GC) is gone after the power cut";
}

}  // namespace
}  // namespace penstock::engine

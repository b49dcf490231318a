#include "engine/file_device.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/buffer.h"
#include "engine/test_util.h"

namespace penstock::engine {
namespace {

// `n` 4 KiB buffers, each filled with a byte of its own (mod 256).
std::vector<AlignedBuffer> FilledBlocks(size_t n) {
  std::vector<AlignedBuffer> bufs;
  for (size_t i = 0; i < n; ++i) {
    bufs.emplace_back(4096);
    std::memset(bufs.back().data(), static_cast<int>(i * 7 + 1), 4096);
  }
  return bufs;
}

using testing::ScratchDir;

TEST(FileDeviceTest, AsynchronousReadsCompleteOnceEachWithTheirBytes) {
  ScratchDir dir;
  auto dev = FileDevice::Open(dir.path() + "/dev", 8 << 20, 8);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  constexpr int kBlocks = 1024;  // more than the ring keeps in flight: some are declined
  AlignedBuffer w(kBlocks * 4096);
  for (size_t i = 0; i < w.size(); ++i) w.data()[i] = static_cast<std::byte>(i / 4096 * 7 + i % 251);
  ASSERT_TRUE((*dev)->Write(0, w.span()).ok());
  std::vector<AlignedBuffer> out;
  for (int i = 0; i < kBlocks; ++i) out.emplace_back(4096);
  std::mutex mu;
  std::condition_variable cv;
  int left = kBlocks, failed = 0, declined = 0;
  bool all_sent = false;
  const std::thread::id sender = std::this_thread::get_id();
  std::vector<int> calls(kBlocks, 0);
  for (int i = 0; i < kBlocks; ++i) {
    std::function<void(Status)> done = [&, i](Status s) {
      std::unique_lock lock(mu);
      // The first completion holds the completion thread until every read was sent, so the
      // ring fills up and declines some however fast the disk is.
      if (i == 0 && std::this_thread::get_id() != sender) cv.wait(lock, [&] { return all_sent; });
      ++calls[i];
      if (!s.ok()) ++failed;
      if (--left == 0) cv.notify_all();
    };
    if (!(*dev)->ReadAsync(uint64_t(i) * 4096, out[i].span(), done)) {
      ++declined;
      ASSERT_TRUE(done);  // still the caller's
      done((*dev)->Read(uint64_t(i) * 4096, out[i].span()));
    }
  }
  {
    std::lock_guard lock(mu);
    all_sent = true;
  }
  cv.notify_all();
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return left == 0; }));
  }
  EXPECT_EQ(failed, 0);
  EXPECT_GT(declined, 0);  // the fallback above ran
  EXPECT_LT(declined, kBlocks);
  for (int i = 0; i < kBlocks; ++i) {
    EXPECT_EQ(calls[i], 1) << i;
    EXPECT_EQ(std::memcmp(out[i].data(), w.data() + uint64_t(i) * 4096, 4096), 0) << i;
  }
  // Checked before it starts: the error comes at once, on this thread.
  Status got;
  std::function<void(Status)> done = [&](Status s) { got = s; };
  EXPECT_TRUE((*dev)->ReadAsync(100, out[0].span(), done));
  EXPECT_EQ(got.code(), StatusCode::kInvalidArgument) << got.ToString();
  // Reads still in flight when the device goes are completed first.
  std::atomic<int> late{0};
  for (int i = 0; i < 64; ++i) {
    std::function<void(Status)> count = [&](Status s) { late += s.ok() ? 1 : 1000; };
    if (!(*dev)->ReadAsync(uint64_t(i) * 4096, out[i].span(), count)) late += 1;
  }
  dev->reset();
  EXPECT_EQ(late.load(), 64);
}

// ReadAll: scattered reads of several sizes, more than one ring's worth, land where asked; a
// bad range fails the call before anything is read.
TEST(FileDeviceTest, ReadAllFillsEveryRange) {
  ScratchDir dir;
  auto dev = FileDevice::Open(dir.path() + "/dev", 8 << 20, 8);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  AlignedBuffer w(8 << 20);
  for (size_t i = 0; i < w.size(); ++i) w.data()[i] = static_cast<std::byte>(i / 4096 * 13 + i % 241);
  ASSERT_TRUE((*dev)->Write(0, w.span()).ok());
  constexpr int kReads = 100;  // > IoRing::kLaneEntries
  std::vector<AlignedBuffer> out;
  std::vector<DeviceRead> reads;
  for (int i = 0; i < kReads; ++i) {
    const size_t blocks = 1 + i % 5;
    const uint64_t offset = uint64_t(i * 37 % 2000) * 4096;
    out.emplace_back(blocks * 4096);
    reads.push_back({offset, out.back().span()});
  }
  ASSERT_TRUE((*dev)->ReadAll(reads).ok());
  for (int i = 0; i < kReads; ++i) {
    EXPECT_EQ(std::memcmp(reads[i].out.data(), w.data() + reads[i].offset, reads[i].out.size()), 0) << i;
  }
  AlignedBuffer past(4096);
  std::vector<DeviceRead> bad = {reads[0], {uint64_t{8} << 20, past.span()}};
  EXPECT_EQ((*dev)->ReadAll(bad).code(), StatusCode::kInvalidArgument);
}

TEST(FileDeviceTest, CreatesPreallocatedFileAndRoundTrips) {
  ScratchDir dir;
  std::string path = dir.path() + "/dev";
  auto dev = FileDevice::Open(path, (8 << 20) + 100, 8);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ((*dev)->size(), 8u << 20);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 8 << 20);
  EXPECT_GE(uint64_t(st.st_blocks) * 512, 8u << 20);  // preallocated, not sparse

  AlignedBuffer w(3 * 4096);
  std::memset(w.data(), 0xab, w.size());
  ASSERT_TRUE((*dev)->Write(4096, w.span()).ok());
  AlignedBuffer r(3 * 4096);
  ASSERT_TRUE((*dev)->Read(4096, r.span()).ok());
  EXPECT_EQ(std::memcmp(w.data(), r.data(), w.size()), 0);

  EXPECT_EQ((*dev)->Write(100, w.span()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*dev)->Write(8 << 20, w.span()).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*dev)->Sync().ok());
}

TEST(FileDeviceTest, UnwrittenRangesAreTheFallocatedSpaceNotYetWritten) {
  ScratchDir dir;
  auto dev = FileDevice::Open(dir.path() + "/dev", 4 << 20, 8);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  auto all = (*dev)->UnwrittenRanges(0, 4 << 20);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  if (all->empty()) GTEST_SKIP() << "this filesystem does not report unwritten extents (FIEMAP)";
  EXPECT_EQ(*all, (std::vector<DeviceRange>{{0, 4 << 20}}));

  AlignedBuffer w(2 * 4096);
  std::memset(w.data(), 0x5a, w.size());
  ASSERT_TRUE((*dev)->Write(1 << 20, w.span()).ok());
  all = (*dev)->UnwrittenRanges(0, 4 << 20);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, (std::vector<DeviceRange>{{0, 1 << 20}, {(1 << 20) + 8192, (3 << 20) - 8192}}));
  // Clipped to the query; a written range has none.
  auto part = (*dev)->UnwrittenRanges((1 << 20) - 4096, 4 * 4096);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(*part, (std::vector<DeviceRange>{{(1 << 20) - 4096, 4096}, {(1 << 20) + 8192, 4096}}));
  auto none = (*dev)->UnwrittenRanges(1 << 20, 8192);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  // Past the end of the device: nothing.
  auto beyond = (*dev)->UnwrittenRanges(4 << 20, 1 << 20);
  ASSERT_TRUE(beyond.ok());
  EXPECT_TRUE(beyond->empty());
}

TEST(FileDeviceTest, WriteAllWritesEveryRangeAndReportsEachFailure) {
  ScratchDir dir;
  auto dev = FileDevice::Open(dir.path() + "/dev", 4 << 20, 8);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  // More writes than the batch ring holds at once.
  constexpr size_t kWrites = 300;
  std::vector<AlignedBuffer> bufs;
  std::vector<DeviceWrite> writes;
  for (size_t i = 0; i < kWrites; ++i) {
    bufs.emplace_back(4096);
    std::memset(bufs.back().data(), static_cast<int>(i), 4096);
  }
  for (size_t i = 0; i < kWrites; ++i) {
    writes.push_back({.offset = i * 8192, .data = bufs[i].span(), .status = OkStatus()});
  }
  writes[7].offset = 100;  // misaligned: fails alone
  Status s = (*dev)->WriteAll(writes, /*sync=*/true);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  AlignedBuffer r(4096);
  for (size_t i = 0; i < kWrites; ++i) {
    if (i == 7) {
      EXPECT_EQ(writes[i].status.code(), StatusCode::kInvalidArgument);
      continue;
    }
    EXPECT_TRUE(writes[i].status.ok()) << i << ": " << writes[i].status.ToString();
    ASSERT_TRUE((*dev)->Read(i * 8192, r.span()).ok());
    EXPECT_EQ(std::memcmp(r.data(), bufs[i].data(), 4096), 0) << i;
  }
  writes.erase(writes.begin() + 7);
  EXPECT_TRUE((*dev)->WriteAll(writes, /*sync=*/true).ok());
  EXPECT_TRUE((*dev)->WriteAll({}, /*sync=*/true).ok());
}

TEST(FileDeviceTest, SeveralWriteAllsInFlightFinishInAnyOrder) {
  ScratchDir dir;
  auto dev = FileDevice::Open(dir.path() + "/dev", 8 << 20, 8);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  // More calls than the ring has batch rings (one more waits in StartWriteAll for a ring),
  // each with more writes than a batch ring holds at once.
  constexpr size_t kCalls = 5, kWrites = 300;
  std::vector<AlignedBuffer> bufs = FilledBlocks(kCalls * kWrites);
  std::vector<std::vector<DeviceWrite>> writes(kCalls);
  for (size_t c = 0; c < kCalls; ++c) {
    for (size_t i = 0; i < kWrites; ++i) {
      writes[c].push_back({.offset = (c * kWrites + i) * 4096, .data = bufs[c * kWrites + i].span(),
                           .status = OkStatus()});
    }
  }
  writes[2][5].offset = (8 << 20);  // past the end: fails alone, in its own call
  std::vector<std::unique_ptr<Device::PendingWrites>> pending(kCalls);
  for (size_t c = 0; c + 1 < kCalls; ++c) pending[c] = (*dev)->StartWriteAll(writes[c], /*sync=*/true);
  // The last start waits for a free ring: finish one on another thread meanwhile.
  std::thread finisher([&] { EXPECT_TRUE((*dev)->FinishWriteAll(std::move(pending[1])).ok()); });
  pending[4] = (*dev)->StartWriteAll(writes[4], /*sync=*/true);
  finisher.join();
  EXPECT_TRUE((*dev)->FinishWriteAll(std::move(pending[4])).ok());
  EXPECT_EQ((*dev)->FinishWriteAll(std::move(pending[2])).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*dev)->FinishWriteAll(std::move(pending[0])).ok());
  EXPECT_TRUE((*dev)->FinishWriteAll(std::move(pending[3])).ok());
  AlignedBuffer r(4096);
  for (size_t c = 0; c < kCalls; ++c) {
    for (size_t i = 0; i < kWrites; ++i) {
      if (c == 2 && i == 5) {
        EXPECT_EQ(writes[c][i].status.code(), StatusCode::kInvalidArgument);
        continue;
      }
      EXPECT_TRUE(writes[c][i].status.ok()) << c << "/" << i << ": " << writes[c][i].status.ToString();
      ASSERT_TRUE((*dev)->Read((c * kWrites + i) * 4096, r.span()).ok());
      EXPECT_EQ(std::memcmp(r.data(), bufs[c * kWrites + i].data(), 4096), 0) << c << "/" << i;
    }
  }
}

TEST(FileDeviceTest, EarlyWritesJoinTheCallThatContinuesThem) {
  ScratchDir dir;
  auto dev = FileDevice::Open(dir.path() + "/dev", 8 << 20, 8);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  // More early writes than a batch ring holds at once, then more, which move the array.
  constexpr size_t kEarly = 300, kLater = 200;
  std::vector<AlignedBuffer> bufs = FilledBlocks(kEarly + kLater);
  std::vector<DeviceWrite> writes;
  auto add = [&](size_t i) {
    writes.push_back({.offset = i * 4096, .data = bufs[i].span(), .status = OkStatus()});
  };
  for (size_t i = 0; i < kEarly; ++i) add(i);
  writes[7].offset = (8 << 20);  // past the end: fails alone, before anything is started
  std::unique_ptr<Device::PendingWrites> early = (*dev)->StartEarlyWrites(writes);
  ASSERT_NE(early, nullptr);
  writes.shrink_to_fit();
  for (size_t i = kEarly; i < kEarly + kLater; ++i) add(i);
  writes[kEarly + 3].offset = (8 << 20) + 4096;
  EXPECT_EQ((*dev)->FinishWriteAll((*dev)->ContinueWriteAll(std::move(early), writes, /*sync=*/true)).code(),
            StatusCode::kInvalidArgument);
  AlignedBuffer r(4096);
  for (size_t i = 0; i < kEarly + kLater; ++i) {
    if (i == 7 || i == kEarly + 3) {
      EXPECT_EQ(writes[i].status.code(), StatusCode::kInvalidArgument) << i;
      continue;
    }
    EXPECT_TRUE(writes[i].status.ok()) << i << ": " << writes[i].status.ToString();
    ASSERT_TRUE((*dev)->Read(i * 4096, r.span()).ok());
    EXPECT_EQ(std::memcmp(r.data(), bufs[i].data(), 4096), 0) << i;
  }
  // Early writes that nothing continues are still waited for.
  std::vector<DeviceWrite> lone = {{.offset = 0, .data = bufs[1].span(), .status = OkStatus()}};
  EXPECT_TRUE((*dev)->FinishWriteAll((*dev)->StartEarlyWrites(lone)).ok());
  ASSERT_TRUE((*dev)->Read(0, r.span()).ok());
  EXPECT_EQ(std::memcmp(r.data(), bufs[1].data(), 4096), 0);
}

TEST(FileDeviceTest, SecondOpenOfALockedFileIsUnavailable) {
  ScratchDir dir;
  auto a = FileDevice::Open(dir.path() + "/dev", 1 << 20, 4);
  ASSERT_TRUE(a.ok());
  auto b = FileDevice::Open(dir.path() + "/dev", 1 << 20, 4);
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  a->reset();
  EXPECT_TRUE(FileDevice::Open(dir.path() + "/dev", 1 << 20, 4).ok());
}

TEST(FileDeviceTest, UnwritableDirectoryErrorNamesThePath) {
  if (::geteuid() == 0) GTEST_SKIP() << "root may write anywhere";
  ScratchDir dir;
  std::string ro = dir.path() + "/ro";
  ASSERT_EQ(::mkdir(ro.c_str(), 0555), 0);
  auto dev = FileDevice::Open(ro + "/dev", 1 << 20, 4);
  EXPECT_EQ(dev.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(dev.status().message().find(ro), std::string::npos) << dev.status().ToString();
  EXPECT_NE(dev.status().message().find("writable"), std::string::npos);
}

TEST(FileDeviceTest, MissingDirectoryErrorNamesThePath) {
  ScratchDir dir;
  auto dev = FileDevice::Open(dir.path() + "/nope/dev", 1 << 20, 4);
  EXPECT_FALSE(dev.ok());
  EXPECT_NE(dev.status().message().find(dir.path() + "/nope"), std::string::npos);
}

TEST(FileDeviceTest, ManyThreadsInFlightAtOnce) {
  ScratchDir dir;
  auto dev = FileDevice::Open(dir.path() + "/dev", 16 << 20, 4);  // fewer slots than threads
  ASSERT_TRUE(dev.ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      AlignedBuffer w(64 * 1024), r(64 * 1024);
      for (int i = 0; i < 20; ++i) {
        std::memset(w.data(), t * 31 + i, w.size());
        uint64_t off = (uint64_t(t) * 20 + i) * w.size();
        if (!(*dev)->Write(off, w.span()).ok() || !(*dev)->Read(off, r.span()).ok() ||
            std::memcmp(w.data(), r.data(), w.size()) != 0) {
          ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace penstock::engine

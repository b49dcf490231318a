#include "engine/io_ring.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/buffer.h"
#include "common/buffer_pool.h"
#include "engine/test_util.h"

namespace penstock::engine {
namespace {

using testing::ScratchDir;

constexpr size_t kBlock = 4096;

// A file of `blocks` 4 KiB blocks, block i filled with byte i + 1, opened for reading.
class BlockFile {
 public:
  BlockFile(const ScratchDir& dir, size_t blocks) : path_(dir.path() + "/blocks") {
    int w = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    EXPECT_GE(w, 0) << std::strerror(errno);
    for (size_t i = 0; i < blocks; ++i) {
      std::vector<char> b(kBlock, static_cast<char>(i + 1));
      EXPECT_EQ(write(w, b.data(), b.size()), static_cast<ssize_t>(kBlock));
    }
    close(w);
    fd_ = open(path_.c_str(), O_RDONLY);
    EXPECT_GE(fd_, 0) << std::strerror(errno);
  }
  ~BlockFile() { close(fd_); }
  int fd() const { return fd_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// What the callbacks of a test's reads saw: result per read (INT64_MIN: not run).
struct Outcomes {
  std::vector<int64_t> result;
  explicit Outcomes(size_t n) : result(n, INT64_MIN) {}
  IoRing::ReadDone For(size_t i) {
    return [this, i](int64_t r) {
      EXPECT_EQ(result[i], INT64_MIN) << "read " << i << " completed twice";
      result[i] = r;
    };
  }
  size_t done() const {
    size_t n = 0;
    for (int64_t r : result) n += r != INT64_MIN;
    return n;
  }
};

// Reaps until `outcomes` has `n` results (waiting on the queue's event fd between rounds).
void ReapUntil(IoRing::ThreadQueue& q, const Outcomes& outcomes, size_t n) {
  for (int round = 0; round < 1000 && outcomes.done() < n; ++round) {
    q.Reap();
    if (outcomes.done() >= n) break;
    pollfd p{q.event_fd(), POLLIN, 0};
    poll(&p, 1, 10);
    uint64_t v;
    (void)!read(q.event_fd(), &v, sizeof v);
  }
  ASSERT_EQ(outcomes.done(), n);
}

TEST(IoRingThreadQueueTest, ReadsTheKernelHadNoRoomForGoWithALaterReap) {
  ScratchDir dir;
  BlockFile file(dir, 4);
  auto q = IoRing::ThreadQueue::Create(8);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  int busy = 2;  // the first two submissions: no resources now
  (*q)->SetSubmitForTest([&](io_uring* ring) { return busy-- > 0 ? -EAGAIN : io_uring_submit(ring); });
  std::vector<AlignedBuffer> bufs;
  Outcomes outcomes(3);
  for (size_t i = 0; i < 3; ++i) {
    bufs.emplace_back(kBlock);
    IoRing::ReadDone done = outcomes.For(i);
    ASSERT_TRUE((*q)->Submit(file.fd(), (i + 1) * kBlock, bufs[i].data(), kBlock, done));
  }
  EXPECT_EQ((*q)->Reap(), 0u);  // EAGAIN: kept
  EXPECT_TRUE((*q)->has_queued());
  EXPECT_EQ((*q)->Reap(), 0u);  // EAGAIN again
  EXPECT_TRUE((*q)->has_queued());
  EXPECT_EQ(outcomes.done(), 0u);
  ReapUntil(**q, outcomes, 3);
  EXPECT_FALSE((*q)->has_queued());
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(outcomes.result[i], static_cast<int64_t>(kBlock)) << "read " << i;
    EXPECT_EQ(bufs[i].data()[0], static_cast<std::byte>(i + 2));
    EXPECT_EQ(bufs[i].data()[kBlock - 1], static_cast<std::byte>(i + 2));
  }
}

TEST(IoRingThreadQueueTest, ReadsTheKernelRefusesFailWithItsErrorAndTheQueueGoesOn) {
  ScratchDir dir;
  BlockFile file(dir, 4);
  auto q = IoRing::ThreadQueue::Create(4);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  bool refuse = true;
  (*q)->SetSubmitForTest([&](io_uring* ring) { return std::exchange(refuse, false) ? -EINVAL : io_uring_submit(ring); });
  std::vector<AlignedBuffer> bufs;
  Outcomes outcomes(4);
  for (size_t i = 0; i < 2; ++i) {
    bufs.emplace_back(kBlock);
    IoRing::ReadDone done = outcomes.For(i);
    ASSERT_TRUE((*q)->Submit(file.fd(), i * kBlock, bufs[i].data(), kBlock, done));
  }
  EXPECT_EQ((*q)->Reap(), 0u);  // refused: failed, not reaped
  EXPECT_EQ(outcomes.result[0], -EINVAL);
  EXPECT_EQ(outcomes.result[1], -EINVAL);
  EXPECT_FALSE((*q)->has_queued());
  // The refused entries stay on the ring as no-ops without callbacks; the next submission
  // sends them with the new reads, whose callbacks alone run.
  for (size_t i = 2; i < 4; ++i) {
    bufs.emplace_back(kBlock);
    IoRing::ReadDone done = outcomes.For(i);
    ASSERT_TRUE((*q)->Submit(file.fd(), i * kBlock, bufs[i].data(), kBlock, done));
  }
  ReapUntil(**q, outcomes, 4);
  for (size_t i = 2; i < 4; ++i) {
    EXPECT_EQ(outcomes.result[i], static_cast<int64_t>(kBlock)) << "read " << i;
    EXPECT_EQ(bufs[i].data()[0], static_cast<std::byte>(i + 1));
  }
}

TEST(IoRingThreadQueueTest, ReadsBeyondTheByteLimitAreDeclinedUntilSomeComplete) {
  ScratchDir dir;
  BlockFile file(dir, 8);
  auto q = IoRing::ThreadQueue::Create(64, 3 * kBlock);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  AlignedBuffer buf(8 * kBlock);
  Outcomes outcomes(3);
  for (size_t i = 0; i < 3; ++i) {
    IoRing::ReadDone done = outcomes.For(i);
    ASSERT_TRUE((*q)->Submit(file.fd(), i * kBlock, buf.data() + i * kBlock, kBlock, done));
  }
  EXPECT_EQ((*q)->bytes_in_flight(), 3 * kBlock);
  bool ran = false;
  IoRing::ReadDone declined = [&](int64_t) { ran = true; };
  EXPECT_FALSE((*q)->Submit(file.fd(), 3 * kBlock, buf.data() + 3 * kBlock, kBlock, declined));
  EXPECT_TRUE(declined) << "a declined read's callback stays with the caller";
  ReapUntil(**q, outcomes, 3);
  EXPECT_EQ((*q)->bytes_in_flight(), 0u);
  // Nothing in flight: a read larger than the limit still goes, alone.
  Outcomes big(1);
  IoRing::ReadDone done = big.For(0);
  ASSERT_TRUE((*q)->Submit(file.fd(), 0, buf.data(), 5 * kBlock, done));
  IoRing::ReadDone second = [&](int64_t) { ran = true; };
  EXPECT_FALSE((*q)->Submit(file.fd(), 0, buf.data() + 5 * kBlock, kBlock, second));
  ReapUntil(**q, big, 1);
  EXPECT_EQ(big.result[0], static_cast<int64_t>(5 * kBlock));
  EXPECT_EQ(buf.data()[4 * kBlock], std::byte{5});
  EXPECT_FALSE(ran);
}

TEST(IoRingThreadQueueTest, DestroyingTheQueueRunsReadsStillWaitingForRoom) {
  ScratchDir dir;
  BlockFile file(dir, 2);
  std::vector<AlignedBuffer> bufs;
  Outcomes outcomes(2);
  {
    auto q = IoRing::ThreadQueue::Create(4);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    int busy = 3;
    (*q)->SetSubmitForTest([&](io_uring* ring) { return busy-- > 0 ? -EBUSY : io_uring_submit(ring); });
    for (size_t i = 0; i < 2; ++i) {
      bufs.emplace_back(kBlock);
      IoRing::ReadDone done = outcomes.For(i);
      ASSERT_TRUE((*q)->Submit(file.fd(), i * kBlock, bufs[i].data(), kBlock, done));
    }
    EXPECT_EQ((*q)->Reap(), 0u);
    EXPECT_TRUE((*q)->has_queued());
  }  // the destructor retries until the kernel takes them, then waits for them
  ASSERT_EQ(outcomes.done(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(outcomes.result[i], static_cast<int64_t>(kBlock));
    EXPECT_EQ(bufs[i].data()[0], static_cast<std::byte>(i + 1));
  }
}

}  // namespace
}  // namespace penstock::engine

namespace penstock::engine {
namespace {

// Buffers from the pool's arena go to the device as registered (fixed) buffers; others as
// plain reads and writes; both land the same bytes (O_DIRECT, as the engine's file device).
TEST(IoRingRegisteredBuffersTest, ArenaBuffersUseFixedIoAndOthersDoNot) {
  Status reserved = BufferPool::Global().ReserveArena(4 << 20);
  ASSERT_TRUE(reserved.ok() || reserved.code() == StatusCode::kAlreadyExists) << reserved.ToString();
  ScratchDir dir;
  const std::string path = dir.path() + "/fixed";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  auto ring = IoRing::Create(4);
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  AlignedBuffer arena_block(8 * kBlock);  // from the arena
  ASSERT_TRUE(BufferPool::Global().InArena(arena_block.data(), arena_block.size()));
  for (size_t i = 0; i < arena_block.size(); ++i) arena_block.data()[i] = std::byte(i * 7);
  AlignedBuffer outside(4 << 20);  // over kMaxArenaBlock: not from it
  ASSERT_FALSE(BufferPool::Global().InArena(outside.data(), outside.size()));
  const uint64_t before = IoRing::registered_buffer_ios();
  ASSERT_EQ((*ring)->WriteAt(fd, 0, arena_block.data(), arena_block.size(), 0),
            static_cast<int64_t>(arena_block.size()));
  EXPECT_EQ(IoRing::registered_buffer_ios(), before + 1);
  // Read back into a plain buffer (not counted) and into an arena one (counted).
  ASSERT_EQ((*ring)->ReadAt(fd, 0, outside.data(), arena_block.size()), static_cast<int64_t>(arena_block.size()));
  EXPECT_EQ(IoRing::registered_buffer_ios(), before + 1);
  EXPECT_EQ(std::memcmp(outside.data(), arena_block.data(), arena_block.size()), 0);
  AlignedBuffer again(8 * kBlock);
  ASSERT_TRUE(BufferPool::Global().InArena(again.data(), again.size()));
  IoRing::Read reads[2] = {{0, again.data(), 4 * kBlock}, {4 * kBlock, again.data() + 4 * kBlock, 4 * kBlock}};
  ASSERT_EQ((*ring)->ReadAll(fd, reads), 0);
  EXPECT_EQ(reads[0].result, static_cast<int64_t>(4 * kBlock));
  EXPECT_EQ(IoRing::registered_buffer_ios(), before + 3);
  EXPECT_EQ(std::memcmp(again.data(), arena_block.data(), arena_block.size()), 0);
  // A buffer given back to the arena is taken again from it.
  void* p = again.data();
  again = AlignedBuffer();
  AlignedBuffer reused(8 * kBlock);
  EXPECT_EQ(reused.data(), p);
  close(fd);
}

}  // namespace
}  // namespace penstock::engine

#include "protocol/shard_request.h"

#include <gtest/gtest.h>

#include <cstring>

namespace penstock {
namespace {

ShardRequest Sample(ShardOp op) {
  ShardRequest r;
  r.op = op;
  r.key = WireShardKey{11, 12, 13, 14, 2, 0};
  r.map_epoch = 21;
  r.deadline_s = 1234567;
  r.shard_version = 31;
  return r;
}

template <typename T>
T Decoded(const std::vector<std::byte>& bytes) {
  auto h = DecodeHeader<T>(bytes, "test");
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  return h.value_or(T{});
}

void ExpectBase(const ShardRequestHeader& h, uint8_t flags) {
  EXPECT_EQ(h.version, kShardProtocolVersion);
  EXPECT_EQ(h.flags, flags);
  EXPECT_EQ(h.deadline_s, 1234567u);
  EXPECT_EQ(h.map_epoch, 21u);
  EXPECT_EQ(h.shard_version, 31u);
  EXPECT_EQ(h.key.container, 11u);
  EXPECT_EQ(h.key.stripe, 14u);
  EXPECT_EQ(h.key.shard, 2u);
}

// Every opcode gets the header a target decodes for it, of the size it expects.
TEST(ShardRequestTest, EveryOpcodeGetsItsHeader) {
  for (ShardOp op : {ShardOp::kWrite, ShardOp::kRead, ShardOp::kDelete, ShardOp::kStat, ShardOp::kList,
                     ShardOp::kReadRange, ShardOp::kLockStripe, ShardOp::kUnlockStripe, ShardOp::kWriteRange,
                     ShardOp::kRewrite}) {
    auto bytes = EncodeShardRequest(Sample(op));
    EXPECT_EQ(bytes.size(), RequestHeaderSize(static_cast<uint16_t>(op))) << ShardOpName(static_cast<uint16_t>(op));
    uint64_t epoch;
    std::memcpy(&epoch, bytes.data() + kMapEpochOffset, sizeof epoch);
    EXPECT_EQ(epoch, 21u) << ShardOpName(static_cast<uint16_t>(op));
  }
}

TEST(ShardRequestTest, KindFieldsLandInTheirHeaders) {
  ShardRequest write = Sample(ShardOp::kWrite);
  write.flags = kWriteIfNotOlder;
  ExpectBase(Decoded<ShardRequestHeader>(EncodeShardRequest(write)), kWriteIfNotOlder);

  ShardRequest range = Sample(ShardOp::kReadRange);
  range.offset = 4096;
  range.length = 8192;
  auto rr = Decoded<RangeReadHeader>(EncodeShardRequest(range));
  ExpectBase(rr.base, 0);
  EXPECT_EQ(rr.offset, 4096u);
  EXPECT_EQ(rr.length, 8192u);

  ShardRequest patch = Sample(ShardOp::kWriteRange);
  patch.offset = 100;
  auto unconditional = Decoded<RangeWriteHeader>(EncodeShardRequest(patch));
  ExpectBase(unconditional.base, 0);
  EXPECT_EQ(unconditional.offset, 100u);
  patch.expected_version = 30;
  auto conditional = Decoded<RangeWriteHeader>(EncodeShardRequest(patch));
  ExpectBase(conditional.base, kWriteIfVersion);
  EXPECT_EQ(conditional.expected_version, 30u);

  ShardRequest lock = Sample(ShardOp::kLockStripe);
  lock.owner = 77;
  lock.ttl_ms = 15000;
  auto lh = Decoded<LockRequestHeader>(EncodeShardRequest(lock));
  ExpectBase(lh.base, 0);
  EXPECT_EQ(lh.owner, 77u);
  EXPECT_EQ(lh.ttl_ms, 15000u);
  lock.op = ShardOp::kUnlockStripe;
  EXPECT_EQ(Decoded<LockRequestHeader>(EncodeShardRequest(lock)).ttl_ms, 0u);

  ShardRequest list = Sample(ShardOp::kList);
  list.flags = kListHeadsOnly;
  list.limit = 1000;
  auto first = Decoded<ListRequestHeader>(EncodeShardRequest(list));
  EXPECT_EQ(first.flags, kListHeadsOnly);
  EXPECT_EQ(first.limit, 1000u);
  EXPECT_EQ(first.container, 11u);
  EXPECT_EQ(first.map_epoch, 21u);
  list.start_after = WireShardKey{11, 5, 6, 7, 0, 0};
  auto next = Decoded<ListRequestHeader>(EncodeShardRequest(list));
  EXPECT_EQ(next.flags, kListHeadsOnly | kListHasStartAfter);
  EXPECT_EQ(next.start_after.object_lo, 6u);
}

TEST(ShardRequestTest, TheCapabilityFollowsTheFixedHeader) {
  const std::vector<std::byte> token = {std::byte{1}, std::byte{2}, std::byte{3}};
  for (ShardOp op : {ShardOp::kRead, ShardOp::kList, ShardOp::kLockStripe}) {
    ShardRequest r = Sample(op);
    r.capability = token;
    auto bytes = EncodeShardRequest(r);
    const size_t fixed = RequestHeaderSize(static_cast<uint16_t>(op));
    auto got = RequestCapability(bytes, fixed);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(std::vector<std::byte>(got->begin(), got->end()), token);
  }
  auto none = RequestCapability(EncodeShardRequest(Sample(ShardOp::kRead)), sizeof(ShardRequestHeader));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace penstock

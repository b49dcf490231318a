#include "protocol/shard_protocol.h"

#include <gtest/gtest.h>

#include <random>

namespace penstock {
namespace {

TEST(ShardProtocolTest, HeaderRoundTrip) {
  ShardRequestHeader h{};
  h.version = kShardProtocolVersion;
  h.map_epoch = 7;
  h.shard_version = 9;
  h.key = WireShardKey{1, 2, 3, 4, 5, 0};
  auto bytes = EncodeHeader(h);
  ASSERT_EQ(bytes.size(), 64u);
  auto back = DecodeHeader<ShardRequestHeader>(bytes, "write");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->map_epoch, 7u);
  EXPECT_EQ(back->key.stripe, 4u);
  EXPECT_EQ(back->key.shard, 5u);
}

// A request's deadline is its client's timeout plus the clock-skew allowance from now, in
// whole seconds rounded up; it is late only after that second.
TEST(ShardProtocolTest, RequestDeadlinesAllowTheTimeoutAndTheSkew) {
  const int64_t before = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
  const uint32_t d = RequestDeadline(std::chrono::milliseconds(2500));
  const int64_t after = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_GE(int64_t{d}, before + 2 + kClockSkewAllowance.count());
  EXPECT_LE(int64_t{d}, after + 4 + kClockSkewAllowance.count());
  EXPECT_TRUE(CheckRequestDeadline(d, d).ok());
  EXPECT_TRUE(CheckRequestDeadline(d, d - 100).ok());
  Status late = CheckRequestDeadline(d, d + 7);
  EXPECT_EQ(late.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(late.message().find("arrived 7 s after its deadline"), std::string::npos) << late.message();
  EXPECT_NE(late.message().find("clock"), std::string::npos) << late.message();
  EXPECT_TRUE(CheckRequestDeadline(0, INT64_MAX).ok());  // none
  // However long the client waits, a request lives at most kMaxRequestLifetime plus the skew.
  const uint32_t capped = RequestDeadline(std::chrono::hours(1));
  EXPECT_LE(int64_t{capped}, after + 2 + std::chrono::duration_cast<std::chrono::seconds>(kMaxRequestLifetime).count() +
                                 kClockSkewAllowance.count());
}

TEST(ShardProtocolTest, RejectsTruncatedAndWrongVersion) {
  ShardRequestHeader h{};
  h.version = kShardProtocolVersion;
  auto bytes = EncodeHeader(h);
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = DecodeHeader<ShardRequestHeader>(std::span(bytes).first(n), "read");
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  bytes[0] = std::byte{99};
  auto r = DecodeHeader<ShardRequestHeader>(bytes, "read");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("version 99"), std::string::npos);
}

TEST(ShardProtocolTest, ListEntriesRoundTrip) {
  std::vector<ListEntry> in(3);
  for (int i = 0; i < 3; ++i) {
    in[i].key.stripe = static_cast<uint64_t>(i);
    in[i].shard_version = 10u + static_cast<uint64_t>(i);
    in[i].length = 5;
    in[i].data.assign(static_cast<size_t>(i), std::byte{static_cast<unsigned char>(i)});
  }
  auto bytes = EncodeListEntries(in);
  auto out = DecodeListEntries(bytes);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 3u);
  EXPECT_EQ((*out)[2].data.size(), 2u);
  EXPECT_EQ((*out)[1].shard_version, 11u);
}

TEST(ShardProtocolTest, ListDecoderSurvivesGarbage) {
  std::mt19937 rng(1);
  std::vector<ListEntry> in(2);
  in[0].data.assign(100, std::byte{1});
  auto good = EncodeListEntries(in);
  for (size_t n = 0; n < good.size(); ++n) {
    (void)DecodeListEntries(std::span(good).first(n));  // must not crash
  }
  for (int round = 0; round < 2000; ++round) {
    std::vector<std::byte> junk(rng() % 300);
    for (auto& b : junk) b = std::byte{static_cast<unsigned char>(rng())};
    (void)DecodeListEntries(junk);
  }
  std::vector<std::byte> huge_count(4, std::byte{0xff});
  EXPECT_FALSE(DecodeListEntries(huge_count).ok());
}

}  // namespace
}  // namespace penstock

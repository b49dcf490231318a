#include "protocol/object_head.h"

#include <gtest/gtest.h>

namespace penstock {
namespace {

TEST(ObjectHeadTest, RoundTrip) {
  ObjectHead h{"dir/file.bin", 3 * 1048576 + 1, 1048576, 0x1234, 0x5678, 1700000000000};
  EXPECT_EQ(h.stripe_count(), 4u);
  auto bytes = EncodeObjectHead(h);
  auto back = DecodeObjectHead(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, h);
}

TEST(ObjectHeadTest, DenseRoundTripsAndVersionOneRecordsDecodeNotDense) {
  ObjectHead h{"put.bin", 5, 4096, 1, 2, 3};
  h.dense = true;
  EXPECT_TRUE(DecodeObjectHead(EncodeObjectHead(h))->dense);
  // A version 1 record (no flags byte), as builds before version 2 wrote it.
  auto v1 = EncodeObjectHead(h);
  v1.pop_back();
  v1[4] = std::byte{1};
  v1[5] = std::byte{0};
  auto back = DecodeObjectHead(v1);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->dense);
  EXPECT_EQ(back->name, "put.bin");
}

TEST(ObjectHeadTest, EmptyObjectHasNoStripes) {
  ObjectHead h{"empty", 0, 1048576, 1, 2, 0};
  EXPECT_EQ(h.stripe_count(), 0u);
}

TEST(ObjectHeadTest, CorruptRecordsAreDataLoss) {
  ObjectHead h{"x", 10, 4096, 1, 2, 3};
  auto bytes = EncodeObjectHead(h);
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_EQ(DecodeObjectHead(std::span(bytes).first(n)).status().code(), StatusCode::kDataLoss);
  }
  bytes[0] ^= std::byte{1};
  EXPECT_EQ(DecodeObjectHead(bytes).status().code(), StatusCode::kDataLoss);
}

TEST(ObjectHeadTest, NameRules) {
  EXPECT_TRUE(ValidateObjectName("a/b.c").ok());
  EXPECT_FALSE(ValidateObjectName("").ok());
  EXPECT_FALSE(ValidateObjectName("..").ok());
  EXPECT_FALSE(ValidateObjectName(std::string(2000, 'a')).ok());
  EXPECT_FALSE(ValidateObjectName(std::string("a\0b", 3)).ok());
}

TEST(ObjectHeadTest, InlineBytesRoundTripAndMakeNoStripes) {
  ObjectHead h{"small", 5, 1048576, 1, 2, 3};
  h.inlined = true;
  h.data = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}};
  EXPECT_EQ(h.stripe_count(), 0u);
  auto bytes = EncodeObjectHead(h);
  EXPECT_EQ(bytes[4], std::byte{3});  // version 3
  auto back = DecodeObjectHead(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, h);
  // Every cut of an inline record is data loss for a read, and a prefix for a listing that
  // keeps the fixed part and the name.
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_EQ(DecodeObjectHead(std::span(bytes).first(n)).status().code(), StatusCode::kDataLoss);
  }
  auto listed = DecodeObjectHeadPrefix(std::span(bytes).first(bytes.size() - 2));
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->name, "small");
  EXPECT_EQ(listed->size, 5u);
  EXPECT_TRUE(listed->inlined);
  EXPECT_TRUE(listed->data.empty());
  EXPECT_TRUE(DecodeObjectHeadPrefix(bytes)->data == h.data);
}

TEST(ObjectHeadTest, HeadsWithoutInlineBytesStayVersionTwo) {
  ObjectHead h{"big", 5 << 20, 1048576, 1, 2, 3};
  auto bytes = EncodeObjectHead(h);
  EXPECT_EQ(bytes[4], std::byte{2});
  EXPECT_EQ(*DecodeObjectHeadPrefix(bytes), h);
}

TEST(ObjectHeadTest, InlineLengthMustMatchTheSize) {
  ObjectHead h{"small", 2, 1048576, 1, 2, 3};
  h.inlined = true;
  h.data = {std::byte{1}, std::byte{2}};
  auto bytes = EncodeObjectHead(h);
  bytes[8] = std::byte{3};  // size 3, two bytes held
  EXPECT_EQ(DecodeObjectHead(bytes).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace penstock

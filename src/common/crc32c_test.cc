#include "common/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace penstock {
namespace {

std::span<const std::byte> Bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c(Bytes("123456789")), 0xE3069283u);
  EXPECT_EQ(Crc32c(Bytes("")), 0u);
  std::vector<std::byte> zeros(32, std::byte{0});
  EXPECT_EQ(Crc32c(zeros), 0x8A9136AAu);  // RFC 3720 B.4
}

TEST(Crc32cTest, Incremental) {
  std::string s = "hello, penstock checksum";
  uint32_t whole = Crc32c(Bytes(s));
  uint32_t part = Crc32c(Bytes(s.substr(0, 7)));
  part = Crc32c(Bytes(s.substr(7)), part);
  EXPECT_EQ(whole, part);
}

TEST(Crc32cTest, DetectsFlip) {
  std::vector<std::byte> buf(4096, std::byte{0x5a});
  uint32_t a = Crc32c(buf);
  buf[1000] ^= std::byte{1};
  EXPECT_NE(a, Crc32c(buf));
}

}  // namespace
}  // namespace penstock

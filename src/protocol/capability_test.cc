#include "protocol/capability.h"

#include <gtest/gtest.h>

#include <cstring>

#include "protocol/shard_protocol.h"

namespace penstock {
namespace {

ClusterKey Key(uint32_t id, char fill) { return ClusterKey{id, std::string(kClusterKeyBytes, fill)}; }

Capability Cap(uint8_t rights = kRightRead | kRightWrite) {
  Capability c;
  c.tenant = 3;
  c.container = 42;
  c.rights = rights;
  c.expiry_ms = 10'000;
  c.map_epoch = 5;
  return c;
}

CapabilityKeySet Keys() {
  CapabilityKeySet ks;
  ks.auth_enabled = true;
  ks.keys = {Key(1, 'a'), Key(2, 'b')};
  return ks;
}

TEST(CapabilityTest, RoundTrip) {
  auto token = SignCapability(Cap(), Key(2, 'b'));
  ASSERT_EQ(token.size(), kCapabilityBytes);
  auto c = VerifyCapability(token, Keys(), 42, kRightWrite, 9'999);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tenant, 3u);
  EXPECT_EQ(c->key_id, 2u);
  EXPECT_EQ(c->map_epoch, 5u);
  auto peek = PeekCapability(token);
  ASSERT_TRUE(peek.ok());
  EXPECT_EQ(peek->expiry_ms, 10'000);
}

struct Case {
  const char* name;
  std::vector<std::byte> token;
  uint64_t container;
  uint8_t right;
  int64_t now;
  StatusCode want;
};

TEST(CapabilityTest, Table) {
  const ClusterKey k1 = Key(1, 'a');
  auto good = SignCapability(Cap(), k1);
  auto forged = good;
  forged[sizeof(CapabilityBody) + 3] ^= std::byte{1};
  auto widened = good;  // a holder flips a rights bit without the key
  widened[1] = std::byte{kRightRead | kRightWrite | kRightAdmin};
  auto truncated = std::vector<std::byte>(good.begin(), good.end() - 1);
  auto wrong_version = good;
  wrong_version[0] = std::byte{9};
  auto other_key = SignCapability(Cap(), Key(1, 'z'));  // right id, wrong secret
  auto unknown_key = SignCapability(Cap(), Key(7, 'a'));
  auto read_only = SignCapability(Cap(kRightRead), k1);
  Capability revoked = Cap();
  revoked.tenant = 66;
  auto revoked_token = SignCapability(revoked, k1);
  const std::vector<Case> cases = {
      {"good", good, 42, kRightRead, 0, StatusCode::kOk},
      {"forged mac", forged, 42, kRightRead, 0, StatusCode::kUnauthenticated},
      {"widened rights", widened, 42, kRightRead, 0, StatusCode::kUnauthenticated},
      {"truncated", truncated, 42, kRightRead, 0, StatusCode::kUnauthenticated},
      {"empty", {}, 42, kRightRead, 0, StatusCode::kUnauthenticated},
      {"wrong version", wrong_version, 42, kRightRead, 0, StatusCode::kUnauthenticated},
      {"wrong secret", other_key, 42, kRightRead, 0, StatusCode::kUnauthenticated},
      {"unknown key id", unknown_key, 42, kRightRead, 0, StatusCode::kUnauthenticated},
      {"expired", good, 42, kRightRead, 10'000, StatusCode::kPermissionDenied},
      {"wrong container", good, 43, kRightRead, 0, StatusCode::kPermissionDenied},
      {"read-only for write", read_only, 42, kRightWrite, 0, StatusCode::kPermissionDenied},
      {"read-only for read", read_only, 42, kRightRead, 0, StatusCode::kOk},
      {"admin not granted", good, 42, kRightAdmin, 0, StatusCode::kPermissionDenied},
      {"revoked tenant", revoked_token, 42, kRightRead, 0, StatusCode::kPermissionDenied},
  };
  CapabilityKeySet ks = Keys();
  ks.revoked_tenants = {66};
  for (const Case& c : cases) {
    auto r = VerifyCapability(c.token, ks, c.container, c.right, c.now);
    EXPECT_EQ(r.status().code(), c.want) << c.name << ": " << r.status().ToString();
  }
}

TEST(CapabilityTest, RotatedKeyVerifiesUntilRemoved) {
  auto old_token = SignCapability(Cap(), Key(1, 'a'));
  CapabilityKeySet ks = Keys();  // key 2 is current, key 1 still held
  EXPECT_TRUE(VerifyCapability(old_token, ks, 42, kRightRead, 0).ok());
  ks.keys.erase(ks.keys.begin());  // key 1 rotated out
  EXPECT_EQ(VerifyCapability(old_token, ks, 42, kRightRead, 0).status().code(),
            StatusCode::kUnauthenticated);
}

TEST(CapabilityTest, RequestTrailer) {
  ShardRequestHeader h{};
  h.version = kShardProtocolVersion;
  auto header = EncodeHeader(h);
  auto none = RequestCapability(header, sizeof(h));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto token = SignCapability(Cap(), Key(1, 'a'));
  AttachCapability(header, token);
  ASSERT_TRUE(DecodeHeader<ShardRequestHeader>(header, "write").ok());  // old decoders still work
  auto got = RequestCapability(header, sizeof(h));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), token.size());
  EXPECT_EQ(std::memcmp(got->data(), token.data(), token.size()), 0);
  header.pop_back();
  EXPECT_EQ(RequestCapability(header, sizeof(h)).status().code(), StatusCode::kInvalidArgument);
  header.resize(sizeof(h) + 1);
  EXPECT_EQ(RequestCapability(header, sizeof(h)).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace penstock

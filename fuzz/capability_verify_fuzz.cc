// Fuzzes the capability path of a target (src/protocol/capability.h, shard_protocol.h): the
// first input byte picks the opcode, the rest is a request header whose token trailer is
// extracted (RequestCapability) and verified (VerifyCapability) against a fixed key set. A token
// that verifies must be exactly what SignCapability makes of its fields: anything else is a
// forgery that got through.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "protocol/capability.h"
#include "protocol/shard_protocol.h"

using namespace penstock;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const CapabilityKeySet keys = [] {
    CapabilityKeySet k;
    k.auth_enabled = true;
    k.keys = {ClusterKey{1, std::string(kClusterKeyBytes, 'a')}, ClusterKey{2, std::string(kClusterKeyBytes, 'b')}};
    k.revoked_tenants = {9};
    return k;
  }();
  const uint16_t op = static_cast<uint16_t>(1 + data[0] % 9);  // every ShardOp
  std::span<const std::byte> header(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  const size_t fixed = RequestHeaderSize(op);
  if (header.size() < fixed) return 0;
  auto token = RequestCapability(header, fixed);
  if (!token.ok() || token->empty()) return 0;
  auto peek = PeekCapability(*token);
  if (!peek.ok()) return 0;
  auto c = VerifyCapability(*token, keys, peek->container, kRightRead, 0);
  if (!c.ok()) return 0;
  const ClusterKey& key = keys.keys[c->key_id == 1 ? 0 : 1];
  std::vector<std::byte> again = SignCapability(*c, key);
  if (again.size() != token->size() || std::memcmp(again.data(), token->data(), again.size()) != 0) std::abort();
  return 0;
}

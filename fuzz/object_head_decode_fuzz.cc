// Fuzzes DecodeObjectHead (src/protocol/object_head.h), the object head record decoder. An
// accepted record must survive an encode/decode round trip.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "protocol/object_head.h"

using namespace penstock;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  Result<ObjectHead> head = DecodeObjectHead(bytes);
  if (!head.ok()) return 0;
  std::vector<std::byte> again = EncodeObjectHead(*head);
  if (!DecodeObjectHead(again).ok()) std::abort();
  return 0;
}

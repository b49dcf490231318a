// Fuzzes DecodeObjectHead and DecodeObjectHeadPrefix (src/protocol/object_head.h), the object
// head record decoders. An accepted record must survive an encode/decode round trip; a record
// the full decoder accepts, the prefix decoder accepts as the same head.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "protocol/object_head.h"

using namespace penstock;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  Result<ObjectHead> listed = DecodeObjectHeadPrefix(bytes);
  Result<ObjectHead> head = DecodeObjectHead(bytes);
  if (!head.ok()) return 0;
  if (!listed.ok() || !(*listed == *head)) std::abort();
  std::vector<std::byte> again = EncodeObjectHead(*head);
  if (!DecodeObjectHead(again).ok()) std::abort();
  return 0;
}

// Fuzzes DecodeHeader<T> (src/protocol/shard_protocol.h) for every request/reply header type:
// the first input byte picks the type, the rest are the header bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "protocol/shard_protocol.h"

using namespace penstock;

namespace {

template <typename T>
void Check(std::span<const std::byte> bytes) {
  Result<T> h = DecodeHeader<T>(bytes, "fuzz");
  if (!h.ok()) return;
  if (bytes.size() < sizeof(T)) std::abort();
  std::vector<std::byte> again = EncodeHeader(*h);
  if (std::memcmp(again.data(), bytes.data(), sizeof(T)) != 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  switch (data[0] % 8) {
    case 0: Check<ShardRequestHeader>(bytes); break;
    case 1: Check<ShardReplyHeader>(bytes); break;
    case 2: Check<ListRequestHeader>(bytes); break;
    case 3: Check<RangeReadHeader>(bytes); break;
    case 4: Check<LockRequestHeader>(bytes); break;
    case 5: Check<RangeWriteHeader>(bytes); break;
    case 6: Check<ListReplyHeader>(bytes); break;
    default: Check<LockReplyHeader>(bytes); break;
  }
  return 0;
}

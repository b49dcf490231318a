// Fuzzes DecodeListEntries (src/protocol/shard_protocol.h), the list reply payload decoder. An
// accepted payload must re-encode to a prefix-equal byte string of the same entries.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "protocol/shard_protocol.h"

using namespace penstock;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  Result<std::vector<ListEntry>> entries = DecodeListEntries(bytes);
  if (!entries.ok()) return 0;
  std::vector<std::byte> again = EncodeListEntries(*entries);
  Result<std::vector<ListEntry>> twice = DecodeListEntries(again);
  if (!twice.ok() || twice->size() != entries->size()) std::abort();
  for (size_t i = 0; i < entries->size(); ++i) {
    if ((*twice)[i].data != (*entries)[i].data || (*twice)[i].length != (*entries)[i].length) {
      std::abort();
    }
  }
  return 0;
}

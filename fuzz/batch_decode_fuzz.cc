// Fuzzes wire::DecodeBatch (src/transport/wire.h): the input is a batch AM's data (a
// BatchHeader when well formed, then the entries). An accepted batch's messages must lie one
// after another inside it, each as long as its entry says, and must write back
// (WriteBatchEntry) to the same bytes; each message then goes through DecodeMessage, as a
// receiver hands it on.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "transport/wire.h"

using namespace penstock;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> batch(reinterpret_cast<const std::byte*>(data), size);
  Result<std::vector<wire::BatchItem>> items = wire::DecodeBatch(batch);
  if (!items.ok()) return 0;
  if (items->empty() || items->size() > wire::kMaxBatchCount) std::abort();
  constexpr size_t head = sizeof(wire::BatchHeader);
  std::vector<std::byte> again(size - head);
  std::byte* at = again.data();
  const std::byte* expect = batch.data() + head;
  for (const wire::BatchItem& item : *items) {
    if (item.am_header.size() < sizeof(wire::MessageHeader) || item.am_header.size() > wire::kMaxAmHeader) std::abort();
    if (item.am_header.data() != expect + sizeof(wire::BatchEntry)) std::abort();
    if (item.data.data() != item.am_header.data() + item.am_header.size()) std::abort();
    expect = item.data.data() + item.data.size();
    at = wire::WriteBatchEntry(at, item.am_header, item.data);
    (void)wire::DecodeMessage(item.am_header, item.data.size());
  }
  if (expect != batch.data() + size || at != again.data() + again.size()) std::abort();
  if (!again.empty() && std::memcmp(again.data(), batch.data() + head, again.size()) != 0) std::abort();
  return 0;
}

// Fuzzes wire::DecodeMessage and wire::PeekRequestId (src/transport/wire.h): the first 8 bytes
// of the input are the payload length UCX would report, the rest is the AM header. A decoded
// message (with its reply placement or placed flag) must re-encode to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "transport/wire.h"

using namespace penstock;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint64_t payload_len = 0;
  if (size >= 8) {
    std::memcpy(&payload_len, data, 8);
    data += 8;
    size -= 8;
  }
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  (void)wire::PeekRequestId(bytes);
  Result<wire::DecodedMessage> m = wire::DecodeMessage(bytes, payload_len);
  if (!m.ok()) return 0;
  // Invariants of an accepted message.
  if (m->op_header.size() > wire::kMaxOpHeader) std::abort();
  if (m->status_message.size() > wire::kMaxStatusMessage) std::abort();
  const bool no_data = m->placed || m->payload_source;
  if (no_data ? payload_len != 0 : m->payload_len != payload_len) std::abort();
  if (m->placement && (m->placement->iovs.empty() || m->placement->capacity() == 0)) std::abort();
  if (m->payload_source && (!m->placement || m->placement->capacity() != m->payload_len)) std::abort();
  if (m->pull_refused && m->payload_len != 0) std::abort();
  const uint32_t flags = m->placed ? wire::kPlaced
                         : m->pull_refused ? wire::kPullRefused
                         : m->payload_source ? wire::kPayloadSource : 0;
  Result<std::vector<std::byte>> again =
      m->kind == wire::MessageKind::kRequest
          ? wire::EncodeRequest(m->request_id, m->opcode, m->op_header, m->payload_len,
                                m->placement ? &*m->placement : nullptr, flags)
          : wire::EncodeReply(m->request_id, m->opcode,
                              Status(m->status_code, std::string(m->status_message)),
                              m->op_header, m->payload_len, flags);
  if (!again.ok()) std::abort();
  if (again->size() != size || std::memcmp(again->data(), data, size) != 0) std::abort();
  return 0;
}

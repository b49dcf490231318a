// wire.h — the data-plane wire format: one fixed header in front of every active message.
//
// Every request and reply is one UCX active message (AM). Its AM header is
//   MessageHeader (40 bytes) | op header (header_len bytes) | tail (message_len bytes)
// and its AM data is the bulk payload (payload_len bytes, may be 0). The op header is opaque to
// the transport. The tail of a reply is its status message; the tail of a request, when not
// empty, is a Placement: client memory the server may write the reply payload into (same host
// only, see local_direct.h), after which the reply carries the flag kPlaced and no AM data; or,
// with the flag kPayloadSource, the client memory that holds the request's payload, which the
// server then copies itself (no AM data comes). All integers are little-endian
// (the build refuses big-endian hosts). Bump kVersion on any incompatible change; a receiver
// rejects versions it does not know.
//
// Encoding and decoding are pure functions over bytes, safe from any thread. Decode never
// trusts the peer: every length is checked against the bytes actually received.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "penstock/status.h"

namespace penstock::wire {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

inline constexpr uint32_t kMagic = 0x4b545350;  // "PSTK" as bytes on the wire
// 3: batches (AmId::kBatch). A version-2 peer has no handler for them.
// 4: shard requests carry deadlines, deletes may be conditional (kDeleteIfVersion), lists
// count what they left out and may list containers: a version-3 target would ignore each of
// these and, for the conditional delete and the count, act wrongly rather than refuse.
inline constexpr uint8_t kVersion = 4;
inline constexpr size_t kMaxOpHeader = 4096;        // op-specific header bytes
inline constexpr size_t kMaxStatusMessage = 2048;   // longer messages are truncated by the sender

// UCX active-message ids: requests go to the server's handler, replies to the client's; a
// batch (below) to either, holding several requests or several replies.
enum class AmId : uint16_t { kRequest = 1, kReply = 2, kBatch = 3 };

enum class MessageKind : uint8_t { kRequest = 1, kReply = 2 };

struct [[gnu::packed]] MessageHeader {
  uint32_t magic;          // kMagic
  uint8_t version;         // kVersion
  MessageKind kind;
  uint16_t opcode;         // op chosen by the caller; echoed in the reply
  uint64_t request_id;     // chosen by the client, unique per client; echoed in the reply
  uint32_t header_len;     // op header bytes after this struct (<= kMaxOpHeader)
  uint32_t message_len;    // reply: status message bytes after the op header; request: 0
  int32_t status_code;     // reply: a StatusCode; request: 0
  uint32_t flags;          // reply: MessageFlags; request: 0
  uint64_t payload_len;    // bytes of AM data (the bulk payload); with kPlaced, bytes placed
};
static_assert(sizeof(MessageHeader) == 40);

enum MessageFlags : uint32_t {
  // Reply: the server wrote the payload (payload_len bytes) into the memory the request's
  // Placement named; no AM data follows.
  kPlaced = 1,
  // Request: the payload (payload_len bytes) is the memory the tail names, for the server to
  // copy out of the client; no AM data follows.
  kPayloadSource = 2,
  // Reply to a kPayloadSource request: the server could not copy the payload and did not run
  // the request; the client sends it again with its payload. No payload.
  kPullRefused = 4,
};

// A request's offer of client memory for its reply payload: the client process, a ticket (a
// random non-zero word the client keeps at `ticket_addr` while the memory is lent, and clears
// before it takes the memory back), and the memory, in order. Encoded as PlacementFixed then
// `iovs` as (addr, len) pairs of uint64.
inline constexpr size_t kMaxPlacementIovs = 64;
struct [[gnu::packed]] PlacementFixed {
  uint32_t pid;
  uint32_t iov_count;  // 1..kMaxPlacementIovs
  uint64_t ticket_addr;
  uint64_t ticket;     // non-zero
};
static_assert(sizeof(PlacementFixed) == 24);
struct PlacementIov {
  uint64_t addr = 0;
  uint64_t len = 0;  // > 0
};
struct Placement {
  uint32_t pid = 0;
  uint64_t ticket_addr = 0;
  uint64_t ticket = 0;
  std::vector<PlacementIov> iovs;
  uint64_t capacity() const;  // the iovs' total length
};
inline constexpr size_t kMaxPlacement = sizeof(PlacementFixed) + kMaxPlacementIovs * 16;
static_assert(kMaxPlacement <= 2048);

// Largest AM header we ever send: what a worker must support (UCX reports ~8 KiB for tcp/shm).
inline constexpr size_t kMaxAmHeader = sizeof(MessageHeader) + kMaxOpHeader + kMaxStatusMessage;

// A message as decoded; the spans point into the bytes passed to DecodeMessage.
struct DecodedMessage {
  MessageKind kind = MessageKind::kRequest;
  uint16_t opcode = 0;
  uint64_t request_id = 0;
  StatusCode status_code = StatusCode::kOk;
  std::span<const std::byte> op_header;
  std::string_view status_message;
  uint64_t payload_len = 0;    // with `placed`, the bytes the server wrote into client memory
  bool placed = false;         // reply: kPlaced (no AM data arrived)
  bool pull_refused = false;   // reply: kPullRefused
  bool payload_source = false; // request: kPayloadSource (`placement` holds the payload)
  std::optional<Placement> placement;  // request: the memory offered for the reply, or the payload
};

// AM header of a request, offering `placement` (may be null) for the reply; with `flags`
// kPayloadSource, `placement` is where the payload is instead (its capacity must equal
// `payload_len`). Errors: kInvalidArgument when `op_header` exceeds kMaxOpHeader or the
// placement is not valid (no memory or more than kMaxPlacementIovs pieces, an empty piece, a
// zero ticket, a payload source of the wrong length or missing).
Result<std::vector<std::byte>> EncodeRequest(uint64_t request_id, uint16_t opcode,
                                             std::span<const std::byte> op_header,
                                             uint64_t payload_len,
                                             const Placement* placement = nullptr,
                                             uint32_t flags = 0);

// AM header of a reply. A status message longer than kMaxStatusMessage is truncated. `flags`:
// kPlaced (payload_len is the bytes written into the request's Placement, no AM data goes) or
// kPullRefused (payload_len 0). Errors: kInvalidArgument when `op_header` exceeds
// kMaxOpHeader or the flags are not one of those.
Result<std::vector<std::byte>> EncodeReply(uint64_t request_id, uint16_t opcode,
                                           const Status& status,
                                           std::span<const std::byte> op_header,
                                           uint64_t payload_len, uint32_t flags = 0);

// Parses an AM header; `payload_len` is the AM data length UCX reported. Errors:
// kInvalidArgument naming what is wrong (short header, bad magic, unknown version or kind,
// lengths that disagree with the bytes received, an unknown status code).
Result<DecodedMessage> DecodeMessage(std::span<const std::byte> am_header, uint64_t payload_len);

// The request id of a header too broken to decode, when at least that much is readable
// (so a server can still tell the client which call was malformed); 0 otherwise.
uint64_t PeekRequestId(std::span<const std::byte> am_header);

// A batch: several small messages for one peer in one AM (AmId::kBatch), sent when a transport
// thread has more than one for that peer in one pass of its loop: one system call and one
// wake-up of the peer instead of one per message. Its AM header is empty; its AM data is a
// BatchHeader, then `count` entries, each a BatchEntry, then the message's AM header
// (header_len bytes, as above), then its AM data (data_len bytes). The receiver handles each
// message as if it had arrived alone, in order.
inline constexpr uint8_t kBatchKind = 3;  // BatchHeader::kind (MessageHeader's are 1 and 2)
inline constexpr size_t kMaxBatchCount = 256;
// A message goes into a batch only when its AM header and data together are at most this
// long, and a batch's AM data (header and entries) is at most kMaxBatchBytes: small enough for
// UCX to send it eagerly (in one 64 KiB segment over tcp).
inline constexpr size_t kMaxBatchedMessage = 16u << 10;
inline constexpr size_t kMaxBatchBytes = 60u << 10;
struct [[gnu::packed]] BatchHeader {
  uint32_t magic;    // kMagic
  uint8_t version;   // kVersion
  uint8_t kind;      // kBatchKind
  uint16_t count;    // entries, 1..kMaxBatchCount
};
static_assert(sizeof(BatchHeader) == 8);
struct [[gnu::packed]] BatchEntry {
  uint32_t header_len;  // sizeof(MessageHeader)..kMaxAmHeader
  uint32_t data_len;
};
static_assert(sizeof(BatchEntry) == 8);

// One message of a decoded batch; the spans point into the batch's AM data.
struct BatchItem {
  std::span<const std::byte> am_header;
  std::span<const std::byte> data;
};

// The header of a batch of `count` messages (the first bytes of its AM data).
BatchHeader MakeBatchHeader(uint16_t count);
// Bytes a message takes in a batch's AM data.
inline size_t BatchEntryBytes(size_t am_header_len, size_t payload_len) {
  return sizeof(BatchEntry) + am_header_len + payload_len;
}
// Writes one message's entry (BatchEntryBytes of it) at `at`; returns where the next goes.
std::byte* WriteBatchEntry(std::byte* at, std::span<const std::byte> am_header,
                           std::span<const std::byte> payload);

// Splits a batch's AM data into its messages (each still to be decoded with DecodeMessage).
// Errors: kInvalidArgument naming what is wrong (a short or foreign header, an unknown version,
// a count out of range, entries that disagree with the bytes received).
Result<std::vector<BatchItem>> DecodeBatch(std::span<const std::byte> data);

}  // namespace penstock::wire

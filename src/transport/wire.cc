#include "transport/wire.h"

#include <cstring>
#include <string>

namespace penstock::wire {
namespace {

std::vector<std::byte> Encode(MessageHeader h, std::span<const std::byte> op_header,
                              std::span<const std::byte> tail) {
  h.message_len = static_cast<uint32_t>(tail.size());
  std::vector<std::byte> out(sizeof(MessageHeader) + op_header.size() + tail.size());
  std::memcpy(out.data(), &h, sizeof h);
  if (!op_header.empty()) {
    std::memcpy(out.data() + sizeof h, op_header.data(), op_header.size());
  }
  if (!tail.empty()) {
    std::memcpy(out.data() + sizeof h + op_header.size(), tail.data(), tail.size());
  }
  return out;
}

Status BadPlacement(const std::string& what) {
  return InvalidArgument("malformed data-plane request: reply placement " + what);
}

// The pieces' total, or nothing when a piece is empty or the memory wraps around.
std::optional<uint64_t> CheckedCapacity(const std::vector<PlacementIov>& iovs) {
  uint64_t total = 0;
  for (const PlacementIov& v : iovs) {
    if (v.len == 0 || v.addr + v.len < v.addr || total + v.len < total) return std::nullopt;
    total += v.len;
  }
  return total;
}

std::vector<std::byte> EncodePlacement(const Placement& p) {
  PlacementFixed f{p.pid, static_cast<uint32_t>(p.iovs.size()), p.ticket_addr, p.ticket};
  std::vector<std::byte> out(sizeof f + p.iovs.size() * 16);
  std::memcpy(out.data(), &f, sizeof f);
  for (size_t i = 0; i < p.iovs.size(); ++i) {
    std::memcpy(out.data() + sizeof f + i * 16, &p.iovs[i].addr, 8);
    std::memcpy(out.data() + sizeof f + i * 16 + 8, &p.iovs[i].len, 8);
  }
  return out;
}

Result<Placement> DecodePlacement(std::span<const std::byte> bytes) {
  PlacementFixed f;
  if (bytes.size() < sizeof f) return BadPlacement("is shorter than its fixed part");
  std::memcpy(&f, bytes.data(), sizeof f);
  if (f.iov_count == 0 || f.iov_count > kMaxPlacementIovs) {
    return BadPlacement("has " + std::to_string(f.iov_count) + " pieces (1.." +
                        std::to_string(kMaxPlacementIovs) + ")");
  }
  if (bytes.size() != sizeof f + uint64_t{f.iov_count} * 16) {
    return BadPlacement("length disagrees with its " + std::to_string(f.iov_count) + " pieces");
  }
  if (f.ticket == 0) return BadPlacement("has no ticket");
  Placement p{f.pid, f.ticket_addr, f.ticket, std::vector<PlacementIov>(f.iov_count)};
  for (size_t i = 0; i < f.iov_count; ++i) {
    std::memcpy(&p.iovs[i].addr, bytes.data() + sizeof f + i * 16, 8);
    std::memcpy(&p.iovs[i].len, bytes.data() + sizeof f + i * 16 + 8, 8);
  }
  if (!CheckedCapacity(p.iovs)) return BadPlacement("has an empty or wrapping piece");
  return p;
}

MessageHeader Fixed(MessageKind kind, uint64_t request_id, uint16_t opcode, size_t header_len,
                    uint64_t payload_len) {
  MessageHeader h{};
  h.magic = kMagic;
  h.version = kVersion;
  h.kind = kind;
  h.opcode = opcode;
  h.request_id = request_id;
  h.header_len = static_cast<uint32_t>(header_len);
  h.payload_len = payload_len;
  return h;
}

Status HeaderTooLong(size_t n) {
  return InvalidArgument("op header of " + std::to_string(n) + " bytes exceeds the limit of " +
                         std::to_string(kMaxOpHeader) + "; move bulk data into the payload");
}

}  // namespace

uint64_t Placement::capacity() const { return CheckedCapacity(iovs).value_or(0); }

Result<std::vector<std::byte>> EncodeRequest(uint64_t request_id, uint16_t opcode,
                                             std::span<const std::byte> op_header,
                                             uint64_t payload_len, const Placement* placement,
                                             uint32_t flags) {
  if (op_header.size() > kMaxOpHeader) return HeaderTooLong(op_header.size());
  MessageHeader h = Fixed(MessageKind::kRequest, request_id, opcode, op_header.size(), payload_len);
  if ((flags & ~uint32_t{kPayloadSource}) != 0 || (flags != 0 && placement == nullptr)) {
    return InvalidArgument("request flags " + std::to_string(flags) + " are not valid");
  }
  h.flags = flags;
  if (placement == nullptr) return Encode(h, op_header, {});
  if (placement->iovs.empty() || placement->iovs.size() > kMaxPlacementIovs ||
      placement->ticket == 0 || !CheckedCapacity(placement->iovs)) {
    return InvalidArgument("reply placement needs 1.." + std::to_string(kMaxPlacementIovs) +
                           " non-empty pieces of memory and a non-zero ticket");
  }
  if (flags == kPayloadSource && placement->capacity() != payload_len) {
    return InvalidArgument("payload source of " + std::to_string(placement->capacity()) +
                           " bytes for a " + std::to_string(payload_len) + "-byte payload");
  }
  return Encode(h, op_header, EncodePlacement(*placement));
}

Result<std::vector<std::byte>> EncodeReply(uint64_t request_id, uint16_t opcode,
                                           const Status& status,
                                           std::span<const std::byte> op_header,
                                           uint64_t payload_len, uint32_t flags) {
  if (op_header.size() > kMaxOpHeader) return HeaderTooLong(op_header.size());
  if (flags != 0 && flags != kPlaced && !(flags == kPullRefused && payload_len == 0)) {
    return InvalidArgument("reply flags " + std::to_string(flags) + " are not valid");
  }
  std::string_view message = status.message();
  if (message.size() > kMaxStatusMessage) message = message.substr(0, kMaxStatusMessage);
  MessageHeader h = Fixed(MessageKind::kReply, request_id, opcode, op_header.size(), payload_len);
  h.status_code = static_cast<int32_t>(status.code());
  h.flags = flags;
  return Encode(h, op_header, std::as_bytes(std::span(message)));
}

Result<DecodedMessage> DecodeMessage(std::span<const std::byte> am_header, uint64_t payload_len) {
  if (am_header.size() < sizeof(MessageHeader)) {
    return InvalidArgument("malformed data-plane message: header of " +
                           std::to_string(am_header.size()) + " bytes is shorter than " +
                           std::to_string(sizeof(MessageHeader)));
  }
  MessageHeader h;
  std::memcpy(&h, am_header.data(), sizeof h);
  if (h.magic != kMagic) {
    return InvalidArgument("malformed data-plane message: bad magic; is the peer a Penstock daemon?");
  }
  if (h.version != kVersion) {
    return InvalidArgument("data-plane message version " + std::to_string(h.version) +
                           " is not supported (this build speaks " + std::to_string(kVersion) +
                           "); upgrade the older side");
  }
  if (h.kind != MessageKind::kRequest && h.kind != MessageKind::kReply) {
    return InvalidArgument("malformed data-plane message: unknown kind " +
                           std::to_string(static_cast<int>(h.kind)));
  }
  if (h.header_len > kMaxOpHeader || h.message_len > kMaxStatusMessage ||
      sizeof h + uint64_t{h.header_len} + h.message_len != am_header.size()) {
    return InvalidArgument("malformed data-plane message: header lengths (" +
                           std::to_string(h.header_len) + " + " + std::to_string(h.message_len) +
                           ") disagree with the " + std::to_string(am_header.size()) +
                           " bytes received");
  }
  const bool request = h.kind == MessageKind::kRequest;
  const bool valid_flags = request ? (h.flags == 0 || (h.flags == kPayloadSource && h.message_len > 0))
                                   : (h.flags == 0 || h.flags == kPlaced ||
                                      (h.flags == kPullRefused && h.payload_len == 0));
  if (!valid_flags) {
    return InvalidArgument("malformed data-plane message: flags " + std::to_string(h.flags) +
                           " are not valid for a " + (request ? "request" : "reply"));
  }
  // Placed replies and payload-source requests carry their length but no AM data.
  const bool no_data = h.flags == kPlaced || h.flags == kPayloadSource;
  if (no_data ? payload_len != 0 : h.payload_len != payload_len) {
    return InvalidArgument("malformed data-plane message: payload length " +
                           std::to_string(no_data ? 0 : h.payload_len) + " but " +
                           std::to_string(payload_len) + " bytes arrived");
  }
  if (h.kind == MessageKind::kRequest && h.status_code != 0) {
    return InvalidArgument("malformed data-plane message: a request carries a status");
  }
  if (h.status_code < 0 || h.status_code > static_cast<int32_t>(StatusCode::kUnauthenticated)) {
    return InvalidArgument("malformed data-plane message: unknown status code " +
                           std::to_string(h.status_code));
  }
  DecodedMessage m;
  m.kind = h.kind;
  m.opcode = h.opcode;
  m.request_id = h.request_id;
  m.status_code = static_cast<StatusCode>(h.status_code);
  m.op_header = am_header.subspan(sizeof h, h.header_len);
  auto tail = am_header.subspan(sizeof h + h.header_len, h.message_len);
  if (h.kind == MessageKind::kRequest) {
    if (!tail.empty()) {
      PS_ASSIGN_OR_RETURN(Placement p, DecodePlacement(tail));
      if (h.flags == kPayloadSource && p.capacity() != h.payload_len) {
        return BadPlacement("names " + std::to_string(p.capacity()) + " bytes for a " +
                            std::to_string(h.payload_len) + "-byte payload");
      }
      m.placement = std::move(p);
    }
  } else {
    m.status_message = std::string_view(reinterpret_cast<const char*>(tail.data()), tail.size());
  }
  m.payload_len = h.payload_len;
  m.placed = h.flags == kPlaced;
  m.pull_refused = h.flags == kPullRefused;
  m.payload_source = h.flags == kPayloadSource;
  return m;
}

uint64_t PeekRequestId(std::span<const std::byte> am_header) {
  if (am_header.size() < sizeof(MessageHeader)) return 0;
  MessageHeader h;
  std::memcpy(&h, am_header.data(), sizeof h);
  return h.magic == kMagic ? h.request_id : 0;
}

BatchHeader MakeBatchHeader(uint16_t count) { return BatchHeader{kMagic, kVersion, kBatchKind, count}; }

std::byte* WriteBatchEntry(std::byte* at, std::span<const std::byte> am_header,
                           std::span<const std::byte> payload) {
  const BatchEntry e{static_cast<uint32_t>(am_header.size()), static_cast<uint32_t>(payload.size())};
  std::memcpy(at, &e, sizeof e);
  at += sizeof e;
  if (!am_header.empty()) std::memcpy(at, am_header.data(), am_header.size());
  at += am_header.size();
  if (!payload.empty()) std::memcpy(at, payload.data(), payload.size());
  return at + payload.size();
}

Result<std::vector<BatchItem>> DecodeBatch(std::span<const std::byte> data) {
  BatchHeader h;
  if (data.size() < sizeof h) {
    return InvalidArgument("malformed data-plane batch: " + std::to_string(data.size()) +
                           " bytes is shorter than its header");
  }
  std::memcpy(&h, data.data(), sizeof h);
  if (h.magic != kMagic || h.kind != kBatchKind) {
    return InvalidArgument("malformed data-plane batch: bad magic or kind; is the peer a Penstock daemon?");
  }
  if (h.version != kVersion) {
    return InvalidArgument("data-plane message version " + std::to_string(h.version) +
                           " is not supported (this build speaks " + std::to_string(kVersion) +
                           "); upgrade the older side");
  }
  if (h.count == 0 || h.count > kMaxBatchCount) {
    return InvalidArgument("malformed data-plane batch: " + std::to_string(h.count) + " messages (1.." +
                           std::to_string(kMaxBatchCount) + ")");
  }
  std::vector<BatchItem> items;
  items.reserve(h.count);
  size_t at = sizeof h;
  for (uint16_t i = 0; i < h.count; ++i) {
    BatchEntry e;
    if (data.size() - at < sizeof e) {
      return InvalidArgument("malformed data-plane batch: message " + std::to_string(i) + " of " +
                             std::to_string(h.count) + " is cut off");
    }
    std::memcpy(&e, data.data() + at, sizeof e);
    at += sizeof e;
    if (e.header_len < sizeof(MessageHeader) || e.header_len > kMaxAmHeader ||
        uint64_t{e.header_len} + e.data_len > data.size() - at) {
      return InvalidArgument("malformed data-plane batch: message " + std::to_string(i) + " of " +
                             std::to_string(h.count) + " has lengths (" + std::to_string(e.header_len) +
                             " + " + std::to_string(e.data_len) + ") that disagree with the " +
                             std::to_string(data.size() - at) + " bytes left");
    }
    items.push_back({data.subspan(at, e.header_len), data.subspan(at + e.header_len, e.data_len)});
    at += uint64_t{e.header_len} + e.data_len;
  }
  if (at != data.size()) {
    return InvalidArgument("malformed data-plane batch: " + std::to_string(data.size() - at) +
                           " bytes after its last message");
  }
  return items;
}

}  // namespace penstock::wire

#include "transport/wire.h"

#include <cstring>
#include <string>

namespace penstock::wire {
namespace {

std::vector<std::byte> Encode(const MessageHeader& h, std::span<const std::byte> op_header,
                              std::string_view message) {
  std::vector<std::byte> out(sizeof(MessageHeader) + op_header.size() + message.size());
  std::memcpy(out.data(), &h, sizeof h);
  if (!op_header.empty()) {
    std::memcpy(out.data() + sizeof h, op_header.data(), op_header.size());
  }
  if (!message.empty()) {
    std::memcpy(out.data() + sizeof h + op_header.size(), message.data(), message.size());
  }
  return out;
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

Result<std::vector<std::byte>> EncodeRequest(uint64_t request_id, uint16_t opcode,
                                             std::span<const std::byte> op_header,
                                             uint64_t payload_len) {
  if (op_header.size() > kMaxOpHeader) return HeaderTooLong(op_header.size());
  MessageHeader h = Fixed(MessageKind::kRequest, request_id, opcode, op_header.size(), payload_len);
  return Encode(h, op_header, {});
}

Result<std::vector<std::byte>> EncodeReply(uint64_t request_id, uint16_t opcode,
                                           const Status& status,
                                           std::span<const std::byte> op_header,
                                           uint64_t payload_len) {
  if (op_header.size() > kMaxOpHeader) return HeaderTooLong(op_header.size());
  std::string_view message = status.message();
  if (message.size() > kMaxStatusMessage) message = message.substr(0, kMaxStatusMessage);
  MessageHeader h = Fixed(MessageKind::kReply, request_id, opcode, op_header.size(), payload_len);
  h.status_code = static_cast<int32_t>(status.code());
  h.message_len = static_cast<uint32_t>(message.size());
  return Encode(h, op_header, message);
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
  if (h.payload_len != payload_len) {
    return InvalidArgument("malformed data-plane message: payload length " +
                           std::to_string(h.payload_len) + " but " + std::to_string(payload_len) +
                           " bytes arrived");
  }
  if (h.kind == MessageKind::kRequest && (h.message_len != 0 || h.status_code != 0)) {
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
  auto msg = am_header.subspan(sizeof h + h.header_len, h.message_len);
  m.status_message = std::string_view(reinterpret_cast<const char*>(msg.data()), msg.size());
  m.payload_len = h.payload_len;
  return m;
}

uint64_t PeekRequestId(std::span<const std::byte> am_header) {
  if (am_header.size() < sizeof(MessageHeader)) return 0;
  MessageHeader h;
  std::memcpy(&h, am_header.data(), sizeof h);
  return h.magic == kMagic ? h.request_id : 0;
}

}  // namespace penstock::wire

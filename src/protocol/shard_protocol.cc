#include "protocol/shard_protocol.h"

#include <algorithm>

namespace penstock {

uint32_t RequestDeadline(std::chrono::milliseconds timeout) {
  const auto at = std::chrono::system_clock::now() +
                  std::min<std::chrono::milliseconds>(timeout, kMaxRequestLifetime) + kClockSkewAllowance;
  // Rounded up: a whole second of slack rather than a refusal a moment early.
  const auto s = std::chrono::ceil<std::chrono::seconds>(at.time_since_epoch()).count();
  return s <= 0 ? 0 : s >= int64_t{UINT32_MAX} ? UINT32_MAX : static_cast<uint32_t>(s);
}

Status CheckRequestDeadline(uint32_t deadline_s, int64_t now_s) {
  if (deadline_s == 0 || now_s <= int64_t{deadline_s}) return OkStatus();
  return DeadlineExceeded("request arrived " + std::to_string(now_s - int64_t{deadline_s}) +
                          " s after its deadline: its client had given up on it (the target was stopped or "
                          "unreachable meanwhile), or this target's clock is more than " +
                          std::to_string(kClockSkewAllowance.count()) +
                          " s ahead of the client's (sync the clocks with NTP)");
}

size_t RequestHeaderSize(uint16_t op) {
  switch (static_cast<ShardOp>(op)) {
    case ShardOp::kWrite:
    case ShardOp::kRead:
    case ShardOp::kDelete:
    case ShardOp::kStat: return sizeof(ShardRequestHeader);
    case ShardOp::kReadRange: return sizeof(RangeReadHeader);
    case ShardOp::kList: return sizeof(ListRequestHeader);
    case ShardOp::kLockStripe:
    case ShardOp::kUnlockStripe: return sizeof(LockRequestHeader);
    case ShardOp::kWriteRange:
    case ShardOp::kRewrite: return sizeof(RangeWriteHeader);
  }
  return 0;
}

void AttachCapability(std::vector<std::byte>& header, std::span<const std::byte> token) {
  if (token.empty() || header.size() < 2) return;
  header[1] = static_cast<std::byte>(static_cast<uint8_t>(header[1]) | kRequestHasCapability);
  uint16_t len = static_cast<uint16_t>(token.size());
  const size_t at = header.size();
  header.resize(at + sizeof(len) + token.size());
  std::memcpy(header.data() + at, &len, sizeof(len));
  std::memcpy(header.data() + at + sizeof(len), token.data(), token.size());
}

Result<std::span<const std::byte>> RequestCapability(std::span<const std::byte> header, size_t fixed) {
  if (header.size() < 2 || fixed < 2 || header.size() < fixed) {
    return InvalidArgument("request header truncated: " + std::to_string(header.size()) + " bytes");
  }
  if (!(static_cast<uint8_t>(header[1]) & kRequestHasCapability)) return std::span<const std::byte>();
  uint16_t len;
  if (header.size() < fixed + sizeof(len)) return InvalidArgument("capability trailer truncated");
  std::memcpy(&len, header.data() + fixed, sizeof(len));
  if (header.size() - fixed - sizeof(len) < len) {
    return InvalidArgument("capability trailer claims " + std::to_string(len) + " bytes, " +
                           std::to_string(header.size() - fixed - sizeof(len)) + " present");
  }
  return header.subspan(fixed + sizeof(len), len);
}

std::vector<std::byte> EncodeListEntries(const std::vector<ListEntry>& entries) {
  size_t total = sizeof(uint32_t);
  for (const auto& e : entries) total += sizeof(ListEntryHeader) + e.data.size();
  std::vector<std::byte> out(total);
  std::byte* p = out.data();
  uint32_t count = static_cast<uint32_t>(entries.size());
  std::memcpy(p, &count, sizeof(count));
  p += sizeof(count);
  for (const auto& e : entries) {
    ListEntryHeader h{e.key, e.shard_version, e.length, static_cast<uint32_t>(e.data.size())};
    std::memcpy(p, &h, sizeof(h));
    p += sizeof(h);
    if (!e.data.empty()) std::memcpy(p, e.data.data(), e.data.size());
    p += e.data.size();
  }
  return out;
}

Result<std::vector<ListEntry>> DecodeListEntries(std::span<const std::byte> payload) {
  if (payload.size() < sizeof(uint32_t)) return InvalidArgument("list reply truncated: no count");
  uint32_t count;
  std::memcpy(&count, payload.data(), sizeof(count));
  size_t pos = sizeof(count);
  if (count > (payload.size() - pos) / sizeof(ListEntryHeader)) {
    return InvalidArgument("list reply claims " + std::to_string(count) + " entries in " +
                           std::to_string(payload.size()) + " bytes");
  }
  std::vector<ListEntry> entries;
  entries.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    if (payload.size() - pos < sizeof(ListEntryHeader)) {
      return InvalidArgument("list reply truncated at entry " + std::to_string(i));
    }
    ListEntryHeader h;
    std::memcpy(&h, payload.data() + pos, sizeof(h));
    pos += sizeof(h);
    if (h.data_bytes > kListMaxInlineBytes || payload.size() - pos < h.data_bytes) {
      return InvalidArgument("list reply entry " + std::to_string(i) + " has a bad data length");
    }
    ListEntry e;
    e.key = h.key;
    e.shard_version = h.shard_version;
    e.length = h.length;
    e.data.assign(payload.begin() + static_cast<std::ptrdiff_t>(pos),
                  payload.begin() + static_cast<std::ptrdiff_t>(pos + h.data_bytes));
    pos += h.data_bytes;
    entries.push_back(std::move(e));
  }
  return entries;
}

std::string_view ShardOpName(uint16_t op) {
  switch (static_cast<ShardOp>(op)) {
    case ShardOp::kWrite: return "write";
    case ShardOp::kRead: return "read";
    case ShardOp::kDelete: return "delete";
    case ShardOp::kStat: return "stat";
    case ShardOp::kList: return "list";
    case ShardOp::kReadRange: return "read_range";
    case ShardOp::kLockStripe: return "lock_stripe";
    case ShardOp::kUnlockStripe: return "unlock_stripe";
    case ShardOp::kWriteRange: return "write_range";
    case ShardOp::kRewrite: return "rewrite";
  }
  return "unknown";
}

}  // namespace penstock

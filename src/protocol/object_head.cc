#include "protocol/object_head.h"

#include <cstring>

namespace penstock {

namespace {

#pragma pack(push, 1)
struct HeadFixed {
  uint32_t magic;
  uint16_t version;
  uint16_t name_len;
  uint64_t size;
  uint64_t stripe_unit;
  uint64_t data_hi;
  uint64_t data_lo;
  int64_t mtime_ms;
};
#pragma pack(pop)
static_assert(sizeof(HeadFixed) == 48);

constexpr uint8_t kHeadDense = 1;   // flags byte (version 2): ObjectHead::dense
constexpr uint8_t kHeadInline = 2;  // flags byte (version 3): ObjectHead::inlined, bytes follow

Result<ObjectHead> Decode(std::span<const std::byte> bytes, bool prefix) {
  if (bytes.size() < sizeof(HeadFixed)) {
    return DataLoss("object head record truncated (" + std::to_string(bytes.size()) + " bytes)");
  }
  HeadFixed f;
  std::memcpy(&f, bytes.data(), sizeof(f));
  if (f.magic != kObjectHeadMagic) return DataLoss("object head record has a bad magic number");
  if (f.version < 1 || f.version > kObjectHeadVersion) {
    return DataLoss("object head record version " + std::to_string(f.version) +
                    " is not supported by this build");
  }
  const size_t flags_at = sizeof(f) + f.name_len;
  const size_t flags_len = f.version >= 2 ? 1 : 0;
  if (bytes.size() < flags_at + flags_len) return DataLoss("object head record shorter than its name");
  const uint8_t flags = flags_len ? static_cast<uint8_t>(bytes[flags_at]) : 0;
  const bool inlined = f.version >= 3 && (flags & kHeadInline) != 0;
  const size_t fixed_end = flags_at + flags_len + (inlined ? 4 : 0);
  if (bytes.size() < fixed_end || (!inlined && bytes.size() != fixed_end)) {
    return DataLoss("object head record length does not match its name length");
  }
  if (f.stripe_unit == 0 && f.size != 0) return DataLoss("object head record has stripe unit 0");
  ObjectHead h;
  h.name.assign(reinterpret_cast<const char*>(bytes.data() + sizeof(f)), f.name_len);
  h.size = f.size;
  h.stripe_unit = f.stripe_unit;
  h.data_hi = f.data_hi;
  h.data_lo = f.data_lo;
  h.mtime_ms = f.mtime_ms;
  h.dense = (flags & kHeadDense) != 0;
  h.inlined = inlined;
  if (!inlined) return h;
  uint32_t len;
  std::memcpy(&len, bytes.data() + fixed_end - 4, 4);
  if (len != f.size || len > kMaxInlineBytes) return DataLoss("object head record's inline length is wrong");
  if (bytes.size() == fixed_end + len) {
    h.data.assign(bytes.begin() + static_cast<ptrdiff_t>(fixed_end), bytes.end());
  } else if (!prefix || bytes.size() > fixed_end + len) {
    return DataLoss("object head record length does not match its inline length");
  }
  return h;
}

}  // namespace

std::vector<std::byte> EncodeObjectHead(const ObjectHead& head) {
  const uint16_t version = head.inlined ? kObjectHeadVersion : 2;
  HeadFixed f{kObjectHeadMagic, version, static_cast<uint16_t>(head.name.size()),
              head.size, head.stripe_unit, head.data_hi, head.data_lo, head.mtime_ms};
  const size_t inline_len = head.inlined ? 4 + head.data.size() : 0;
  std::vector<std::byte> out(sizeof(f) + head.name.size() + 1 + inline_len);
  std::memcpy(out.data(), &f, sizeof(f));
  std::byte* p = out.data() + sizeof(f);
  std::memcpy(p, head.name.data(), head.name.size());
  p += head.name.size();
  *p++ = std::byte{static_cast<uint8_t>((head.dense ? kHeadDense : 0) | (head.inlined ? kHeadInline : 0))};
  if (head.inlined) {
    const auto len = static_cast<uint32_t>(head.data.size());
    std::memcpy(p, &len, 4);
    if (len) std::memcpy(p + 4, head.data.data(), len);
  }
  return out;
}

Result<ObjectHead> DecodeObjectHead(std::span<const std::byte> bytes) { return Decode(bytes, false); }

Result<ObjectHead> DecodeObjectHeadPrefix(std::span<const std::byte> bytes) { return Decode(bytes, true); }

Status ValidateObjectName(const std::string& name) {
  if (name.empty() || name.size() > kMaxObjectNameBytes) {
    return InvalidArgument("object name must be 1 to " + std::to_string(kMaxObjectNameBytes) +
                           " bytes long");
  }
  if (name.find('\0') != std::string::npos) return InvalidArgument("object name contains a NUL byte");
  if (name == "." || name == "..") return InvalidArgument("object name '" + name + "' is reserved");
  return OkStatus();
}

}  // namespace penstock

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

constexpr uint8_t kHeadDense = 1;  // flags byte (version 2): ObjectHead::dense

}  // namespace

std::vector<std::byte> EncodeObjectHead(const ObjectHead& head) {
  HeadFixed f{kObjectHeadMagic, kObjectHeadVersion, static_cast<uint16_t>(head.name.size()),
              head.size, head.stripe_unit, head.data_hi, head.data_lo, head.mtime_ms};
  std::vector<std::byte> out(sizeof(f) + head.name.size() + 1);
  std::memcpy(out.data(), &f, sizeof(f));
  std::memcpy(out.data() + sizeof(f), head.name.data(), head.name.size());
  out.back() = std::byte{head.dense ? kHeadDense : uint8_t{0}};
  return out;
}

Result<ObjectHead> DecodeObjectHead(std::span<const std::byte> bytes) {
  if (bytes.size() < sizeof(HeadFixed)) {
    return DataLoss("object head record truncated (" + std::to_string(bytes.size()) + " bytes)");
  }
  HeadFixed f;
  std::memcpy(&f, bytes.data(), sizeof(f));
  if (f.magic != kObjectHeadMagic) return DataLoss("object head record has a bad magic number");
  if (f.version != 1 && f.version != kObjectHeadVersion) {
    return DataLoss("object head record version " + std::to_string(f.version) +
                    " is not supported by this build");
  }
  const size_t flags_len = f.version >= 2 ? 1 : 0;
  if (bytes.size() != sizeof(f) + f.name_len + flags_len) {
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
  if (flags_len) h.dense = (static_cast<uint8_t>(bytes[sizeof(f) + f.name_len]) & kHeadDense) != 0;
  return h;
}

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

#include "mgmt/container_rules.h"

#include <cctype>


namespace penstock::mgmt {
namespace {

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

}  // namespace

Status ValidateContainerName(std::string_view name) {
  const std::string rule = "; use 1 to 128 of [A-Za-z0-9._-]";
  if (name.empty()) return InvalidArgument("container name is empty" + rule);
  if (name.size() > kMaxContainerNameLength) {
    return InvalidArgument("container name '" + std::string(name.substr(0, 32)) + "...' is " +
                           std::to_string(name.size()) + " characters long" + rule);
  }
  if (name == "." || name == "..") {
    return InvalidArgument("container name '" + std::string(name) + "' is reserved" + rule);
  }
  for (char c : name) {
    if (!IsNameChar(c)) {
      return InvalidArgument("container name '" + std::string(name) +
                             "' contains a character that is not allowed" + rule);
    }
  }
  return OkStatus();
}

Redundancy DefaultRedundancy(uint32_t usable) {
  if (usable <= 1) return Redundancy{};
  return Redundancy{Redundancy::Kind::kReplicate, 1, usable >= 3 ? 2u : 1u, 0};
}

Result<uint64_t> NormalizeStripeUnit(uint64_t stripe_unit) {
  if (stripe_unit == 0) return kDefaultStripeUnit;
  if (stripe_unit < kMinStripeUnit || stripe_unit > kMaxStripeUnit ||
      stripe_unit % kMinStripeUnit != 0) {
    return InvalidArgument("stripe unit " + std::to_string(stripe_unit) +
                           " bytes is not a multiple of 4 KiB between 4 KiB and 64 MiB; use "
                           "e.g. 1048576 (1 MiB, the default)");
  }
  return stripe_unit;
}

}  // namespace penstock::mgmt

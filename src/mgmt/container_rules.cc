#include "mgmt/container_rules.h"

#include <cctype>

namespace penstock::mgmt {
namespace {

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

bool IsDigits(std::string_view s) {
  if (s.empty() || s.size() > 3) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// rep:N or ec:K+M with small decimal numbers.
bool IsWellFormedScheme(std::string_view r) {
  if (r.starts_with("rep:")) return IsDigits(r.substr(4));
  if (r.starts_with("ec:")) {
    std::string_view km = r.substr(3);
    size_t plus = km.find('+');
    return plus != std::string_view::npos && IsDigits(km.substr(0, plus)) &&
           IsDigits(km.substr(plus + 1));
  }
  return false;
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

Result<std::string> NormalizeRedundancy(std::string_view redundancy) {
  if (redundancy.empty() || redundancy == "none") return std::string("none");
  if (IsWellFormedScheme(redundancy)) {
    return InvalidArgument("redundancy '" + std::string(redundancy) +
                           "' is not supported yet; use none");
  }
  return InvalidArgument("redundancy '" + std::string(redundancy) +
                         "' is not a redundancy scheme (none, rep:N, ec:K+M); use none");
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

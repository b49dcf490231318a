// object_head.h — the head record of a named object, stored by the client as a small shard
// (stripe = kHeadStripe) on the target that placement picks for the object's name.
//
// A put writes every data stripe under a fresh random data id first and the head last: the
// head is the commit point, so a failed put leaves no visible object, and an overwrite is
// atomic (readers see the old head or the new one). Listing a container lists heads.
// On-disk/wire format: little-endian, versioned. Pure values and functions; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "penstock/status.h"

namespace penstock {

inline constexpr uint32_t kObjectHeadMagic = 0x484f5350;  // "PSOH"
// Version 2 adds a flags byte after the name (kHeadDense); version 1 records still decode
// (not dense).
inline constexpr uint16_t kObjectHeadVersion = 2;
inline constexpr size_t kMaxObjectNameBytes = 1024;

// Stripes that no head names are orphans: mgmt's repair service deletes them once they have
// sat unnamed and unchanged for a grace period (kOrphanGrace unless mgmt's --orphan-grace-ms
// says otherwise; the cluster map carries it). So a put gives up (and reports an error) rather
// than let a third of it pass between the landing of one of its stripes and the next, or
// between its last stripe and its head (PutCommitWindow). A head write attempt that starts in
// time lands within kMaxRequestLifetime and kClockSkewAllowance (request deadlines,
// shard_protocol.h), or not at all.
inline constexpr std::chrono::milliseconds kOrphanGrace{std::chrono::minutes(15)};
inline std::chrono::milliseconds PutCommitWindow(std::chrono::milliseconds orphan_grace) {
  return (orphan_grace.count() > 0 ? orphan_grace : kOrphanGrace) / 3;
}

struct ObjectHead {
  std::string name;
  uint64_t size = 0;
  uint64_t stripe_unit = 0;
  uint64_t data_hi = 0;  // data id: the object id the data stripes are stored under
  uint64_t data_lo = 0;
  int64_t mtime_ms = 0;
  // Every stripe below `size` was written by the put that made the object (Client::Put): a
  // stripe found nowhere is lost, not a hole that reads as zeros. Objects written through the
  // Object API (Open, Write, Truncate) may be sparse and are not dense.
  bool dense = false;

  uint64_t stripe_count() const {
    return stripe_unit == 0 ? 0 : (size + stripe_unit - 1) / stripe_unit;
  }
  bool operator==(const ObjectHead&) const = default;
};

std::vector<std::byte> EncodeObjectHead(const ObjectHead& head);
// Errors: kDataLoss when the record is truncated or its magic/version is wrong.
Result<ObjectHead> DecodeObjectHead(std::span<const std::byte> bytes);

// Checks an object name: 1..1024 bytes, no NUL, not "." or "..".
Status ValidateObjectName(const std::string& name);

}  // namespace penstock

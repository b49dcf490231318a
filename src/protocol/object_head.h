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
// Version 2 adds a flags byte after the name (kHeadDense); version 3 an object's bytes after
// it when they are stored in the head (kHeadInline: u32 length, then the bytes). Versions 1 and
// 2 still decode (not dense, not inline). A head without inline bytes is still written as
// version 2, so a build that knows only versions 1 and 2 reads every object it can.
inline constexpr uint16_t kObjectHeadVersion = 3;
inline constexpr size_t kMaxObjectNameBytes = 1024;
// Objects of at most this many bytes written whole by one operation (a put, or the first write
// of an object opened with OpenOptions::replace) are stored in their head: one shard write per
// head copy, and a read of the object is a read of its head.
inline constexpr uint64_t kMaxInlineBytes = 16 * 1024;
// A head record's bytes up to and including its inline length: what a listing needs
// (kListHeadPrefix asks targets for this much of each head).
inline constexpr uint32_t kHeadPrefixBytes = 48 + kMaxObjectNameBytes + 1 + 4;

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
  // The object's bytes are `data` (size of them), stored in the head: it has no stripes.
  bool inlined = false;
  std::vector<std::byte> data{};

  uint64_t stripe_count() const {
    return inlined || stripe_unit == 0 ? 0 : (size + stripe_unit - 1) / stripe_unit;
  }
  bool operator==(const ObjectHead&) const = default;
};

std::vector<std::byte> EncodeObjectHead(const ObjectHead& head);
// Errors: kDataLoss when the record is truncated or its magic/version is wrong.
Result<ObjectHead> DecodeObjectHead(std::span<const std::byte> bytes);
// The same for the first bytes of a record (a listing's kHeadPrefixBytes): an inline head's
// bytes may be cut short, and `data` is then left empty (`inlined` and `size` are set).
Result<ObjectHead> DecodeObjectHeadPrefix(std::span<const std::byte> bytes);

// Checks an object name: 1..1024 bytes, no NUL, not "." or "..".
Status ValidateObjectName(const std::string& name);

}  // namespace penstock

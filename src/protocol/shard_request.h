// shard_request.h — the one place a shard request's header is laid out. Callers say what they
// ask (a ShardRequest: opcode, key, epoch, deadline and the fields of their kind) and
// EncodeShardRequest picks the header struct of the opcode (shard_protocol.h), fills it and
// appends the capability token. Pure values and functions; thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "protocol/shard_protocol.h"

namespace penstock {

struct ShardRequest {
  ShardOp op = ShardOp::kStat;
  WireShardKey key{};         // every kind but kList (whose container is key.container)
  uint64_t map_epoch = 0;     // the client's cluster-map epoch
  uint32_t deadline_s = 0;    // RequestDeadline(timeout); 0: none (kList has none)
  uint64_t shard_version = 0; // writes: the version stored; deletes with kDeleteIfVersion: the one expected
  uint8_t flags = 0;          // kWriteIfNotOlder, kWriteReturnReplaced, kDeleteIfVersion, ListFlags; kWriteIfVersion is set
                              // from expected_version
  uint64_t offset = 0;        // kReadRange, kWriteRange
  uint64_t length = 0;        // kReadRange
  std::optional<uint64_t> expected_version = std::nullopt;  // kWriteRange, kRewrite: only over this stored version
  uint64_t owner = 0;         // kLockStripe, kUnlockStripe
  uint32_t ttl_ms = 0;        // kLockStripe
  uint32_t limit = 0;         // kList: entries per page
  std::optional<WireShardKey> start_after = std::nullopt;  // kList: the page after this key (kListHasStartAfter)
  std::span<const std::byte> capability = {};  // the token to attach (empty: none)
};

// The header bytes of `r` (fixed part + capability trailer), as a target decodes them.
std::vector<std::byte> EncodeShardRequest(const ShardRequest& r);

}  // namespace penstock

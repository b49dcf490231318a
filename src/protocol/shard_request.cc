#include "protocol/shard_request.h"

namespace penstock {
namespace {

ShardRequestHeader Base(const ShardRequest& r) {
  ShardRequestHeader h{};
  h.version = kShardProtocolVersion;
  h.flags = r.flags;
  h.deadline_s = r.deadline_s;
  h.map_epoch = r.map_epoch;
  h.shard_version = r.shard_version;
  h.key = r.key;
  return h;
}

std::vector<std::byte> Fixed(const ShardRequest& r) {
  switch (r.op) {
    case ShardOp::kReadRange: {
      RangeReadHeader h{};
      h.base = Base(r);
      h.offset = r.offset;
      h.length = r.length;
      return EncodeHeader(h);
    }
    case ShardOp::kWriteRange:
    case ShardOp::kRewrite: {
      RangeWriteHeader h{};
      h.base = Base(r);
      if (r.expected_version) h.base.flags |= kWriteIfVersion;
      h.offset = r.offset;
      h.expected_version = r.expected_version.value_or(0);
      return EncodeHeader(h);
    }
    case ShardOp::kLockStripe:
    case ShardOp::kUnlockStripe: {
      LockRequestHeader h{};
      h.base = Base(r);
      h.owner = r.owner;
      h.ttl_ms = r.op == ShardOp::kLockStripe ? r.ttl_ms : 0;
      return EncodeHeader(h);
    }
    case ShardOp::kList: {
      ListRequestHeader h{};
      h.version = kShardProtocolVersion;
      h.flags = r.flags;
      h.limit = r.limit;
      h.map_epoch = r.map_epoch;
      h.container = r.key.container;
      if (r.start_after) {
        h.start_after = *r.start_after;
        h.flags |= kListHasStartAfter;
      }
      return EncodeHeader(h);
    }
    case ShardOp::kWrite:
    case ShardOp::kRead:
    case ShardOp::kDelete:
    case ShardOp::kStat: break;
  }
  return EncodeHeader(Base(r));
}

}  // namespace

std::vector<std::byte> EncodeShardRequest(const ShardRequest& r) {
  std::vector<std::byte> header = Fixed(r);
  AttachCapability(header, r.capability);
  return header;
}

}  // namespace penstock

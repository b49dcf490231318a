// shard_protocol.h — the data-plane messages between clients and targets: opcodes and the
// compact, versioned, little-endian binary headers carried in RpcRequest/RpcReply::header.
// (The transport frames messages; this header defines what a target understands.)
//
// Every header starts with a one-byte format version (kShardProtocolVersion). Decoders check
// sizes and versions and return kInvalidArgument on anything malformed: they never trust a peer.
// Pure values and functions; thread-safe.
#pragma once

#include <bit>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "penstock/status.h"

namespace penstock {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian and encoded by memcpy of packed structs");

inline constexpr uint8_t kShardProtocolVersion = 1;

enum class ShardOp : uint16_t {
  kWrite = 1,   // payload: shard bytes
  kRead = 2,    // reply payload: shard bytes; reply header: ShardReplyHeader
  kDelete = 3,
  kStat = 4,    // reply header: ShardReplyHeader
  kList = 5,    // header: ListRequestHeader; reply payload: encoded ListEntry array
  kReadRange = 6,  // header: RangeReadHeader; reply payload: the bytes of the range that exist
                   // (short when the shard is shorter); reply header: ShardReplyHeader
  kLockStripe = 7,    // header: LockRequestHeader; see "Stripe write leases" below
  kUnlockStripe = 8,  // header: LockRequestHeader
  kWriteRange = 9,    // header: RangeWriteHeader; payload: the bytes to write at its offset
  kRewrite = 10,      // header: RangeWriteHeader (offset 0, kWriteIfVersion set); payload: the
                      // shard's new bytes, replacing it whole (see RangeWriteHeader)
};

#pragma pack(push, 1)
struct WireShardKey {
  uint64_t container;
  uint64_t object_hi;
  uint64_t object_lo;
  uint64_t stripe;
  uint32_t shard;
  uint32_t reserved;
};
static_assert(sizeof(WireShardKey) == 40);

struct ShardRequestHeader {
  uint8_t version;
  uint8_t flags;
  uint16_t reserved0;
  uint32_t deadline_s;     // unix seconds; 0: none. See "Request deadlines" below
  uint64_t map_epoch;      // the client's cluster-map epoch (see kStaleMapRefusal)
  uint64_t shard_version;  // for writes: version stored with the shard
  WireShardKey key;
};
static_assert(sizeof(ShardRequestHeader) == 64);

struct RangeReadHeader {
  ShardRequestHeader base;
  uint64_t offset;  // within the shard
  uint64_t length;
};
static_assert(sizeof(RangeReadHeader) == 80);

// A partial-shard write: the payload replaces bytes [offset, offset + payload size) of the
// shard (created when absent; bytes between its old end and `offset` read as zeros), whose
// length becomes max(old length, end) and version base.shard_version. An empty payload sets
// only the version (and extends the length to `offset`). With kWriteIfVersion in base.flags it
// is applied only when the stored version is `expected_version` (an absent shard has version
// 0); otherwise kAborted when the stored version is newer (another write won) or
// kFailedPrecondition when it is older or the shard is missing (this copy missed a write: it
// must be repaired whole, never patched).
// kRewrite carries the same header, with offset 0 and kWriteIfVersion: the payload replaces
// the whole shard (its length becomes the payload's), only over `expected_version`, with the
// same answers. A record's conditional update is then one request (no lease, no read).
struct RangeWriteHeader {
  ShardRequestHeader base;
  uint64_t offset;
  uint64_t expected_version;
};
static_assert(sizeof(RangeWriteHeader) == 80);

// Stripe write leases. Writers of a protected (rep, ec) Object stripe first take the stripe's
// lease from the target of its first up slot, so writers in different clients take turns and
// none overwrites another's update with bytes or versions it read before it (an unprotected
// stripe is one shard, each write of it one atomic shard operation: no lease). The
// lease is per (container, object, stripe) (base.key.shard ignored), held by `owner` (a random
// token per writer) for `ttl_ms` (1..60000) or until kUnlockStripe by the same owner.
// kLockStripe answers OK (granted, or renewed for the same owner) or kAborted naming the
// stripe while another owner holds it (retry later). kUnlockStripe answers OK (also when the
// owner does not hold it). Leases live in the target's memory: a restart drops them.
// A granted kLockStripe's reply header (LockReplyHeader) says whether it was a renewal: the
// owner held the lease, unexpired, when it asked, so no other writer held it in between and
// what the owner knows of the stripe still holds. A reply without one (an older target) is
// no renewal.
struct LockRequestHeader {
  ShardRequestHeader base;
  uint64_t owner;
  uint32_t ttl_ms;
  uint32_t reserved;
};
static_assert(sizeof(LockRequestHeader) == 80);

enum LockReplyFlags : uint8_t {
  kLeaseRenewed = 1,
};

struct LockReplyHeader {
  uint8_t version;
  uint8_t flags;  // LockReplyFlags
  uint8_t reserved[6];
};
static_assert(sizeof(LockReplyHeader) == 8);

struct ShardReplyHeader {
  uint8_t version;
  uint8_t reserved0[7];
  uint64_t length;
  uint64_t shard_version;
};
static_assert(sizeof(ShardReplyHeader) == 24);

enum ListFlags : uint8_t {
  kListHeadsOnly = 1,  // only shards with stripe == kHeadStripe (object head records)
  kListWithData = 2,   // include each listed shard's bytes (for small records only)
  kListHasStartAfter = 4,
  // List the containers the target holds shards of instead of shards: one entry per container,
  // in id order, with only key.container set (start_after.container: the last one had). The
  // header's container must be 0, and so the capability token's: only the admin gets one.
  kListContainers = 8,
  // With kListWithData: of each shard only its first kHeadPrefixBytes (object_head.h), enough
  // to name an object and give its size: an object stored in its head (up to kMaxInlineBytes)
  // is not sent whole. A target from before it sends the whole shard.
  kListDataPrefix = 16,
  // With kListHasStartAfter: stop at the first shard whose object_hi differs from
  // start_after's (the records of one group, records.h). A target from before it goes on into
  // the next objects; the client drops what is past the group.
  kListSameHi = 32,
};

// Bit of a write's flags byte: write only when the shard is absent or its stored version is not
// newer than the request's shard_version; otherwise the target answers kAborted. Used by writers
// of protected stripes and by repair, so a late or repeated write never replaces newer data.
inline constexpr uint8_t kWriteIfNotOlder = 0x01;
// Bit of a range write's flags byte: see RangeWriteHeader.
inline constexpr uint8_t kWriteIfVersion = 0x02;
// Bit of a (whole-shard) write's flags byte: the reply also says what the write replaced, read
// just before it was applied: a ShardReplyHeader with the stored shard's length and version
// (both 0 when there was none) and, as payload, its first kHeadPrefixBytes (object_head.h). A
// writer of an object head learns which stripes the head it replaced named, without a read
// round trip. Not atomic with the write (another write of the key may land in between), so
// only for freeing what a replaced head named, which orphan collection would free later
// anyway. A reply without the header (a target from before it) says nothing.
inline constexpr uint8_t kWriteReturnReplaced = 0x04;
// Bit of a delete's flags byte: delete only when the stored version is the request's
// shard_version; otherwise kAborted (the shard was rewritten since). Used by repair to remove
// tombstones without racing a new put of the same name.
inline constexpr uint8_t kDeleteIfVersion = 0x02;
// Bit of a delete's flags byte: the reply also says what was deleted, as kWriteReturnReplaced's
// says what a write replaced (the shard's length, version and first kHeadPrefixBytes, read just
// before the delete). A deleter of an object head learns which stripes it named.
inline constexpr uint8_t kDeleteReturnDeleted = 0x04;

// Bit of the flags byte (offset 1 of every request header: ShardRequestHeader, RangeReadHeader,
// ListRequestHeader) saying a capability token follows the fixed header: u16 length, then the
// token bytes (protocol/capability.h). Headers without it decode as before.
inline constexpr uint8_t kRequestHasCapability = 0x80;

struct ListRequestHeader {
  uint8_t version;
  uint8_t flags;  // ListFlags
  uint16_t reserved0;
  uint32_t limit;
  uint64_t map_epoch;
  uint64_t container;
  WireShardKey start_after;
};
static_assert(sizeof(ListRequestHeader) == 64);

// Request deadlines. Every request with a ShardRequestHeader (all but kList) carries the
// wall-clock second after which its client no longer waits for it: the client's timeout plus
// kClockSkewAllowance from when it was made. A target refuses one that arrives later with
// kDeadlineExceeded, before it does anything: a request that sat in a socket while its target
// was stopped (SIGSTOP, a long pause) or on a congested path never lands after its client gave
// up on it and went on (a put that gave up before its head and whose stripes repair collects
// as orphans; a retry that another write overtook). Clocks of clients and targets must agree
// within kClockSkewAllowance: a target whose clock runs that far ahead refuses every request,
// with a message that says so.
inline constexpr std::chrono::seconds kClockSkewAllowance{30};
// A request's deadline counts at most this much of its client's timeout: however long a
// client waits, nothing lands more than this plus kClockSkewAllowance after it was sent.
inline constexpr std::chrono::minutes kMaxRequestLifetime{2};
inline constexpr size_t kDeadlineOffset = 4;
static_assert(offsetof(ShardRequestHeader, deadline_s) == kDeadlineOffset);
// The deadline of a request made now by a client whose calls time out after `timeout`
// (at most kMaxRequestLifetime of it).
uint32_t RequestDeadline(std::chrono::milliseconds timeout);
// kDeadlineExceeded when a request with `deadline_s` arriving at unix second `now_s` is late.
Status CheckRequestDeadline(uint32_t deadline_s, int64_t now_s);

// Every request header has the client's map epoch at this offset.
inline constexpr size_t kMapEpochOffset = 8;
static_assert(offsetof(ShardRequestHeader, map_epoch) == kMapEpochOffset);
static_assert(offsetof(RangeReadHeader, base) + offsetof(ShardRequestHeader, map_epoch) == kMapEpochOffset);
static_assert(offsetof(ListRequestHeader, map_epoch) == kMapEpochOffset);
static_assert(offsetof(LockRequestHeader, base) + offsetof(ShardRequestHeader, map_epoch) == kMapEpochOffset);
static_assert(offsetof(RangeWriteHeader, base) + offsetof(ShardRequestHeader, map_epoch) == kMapEpochOffset);

// Reply header of kList (absent in replies of older targets: nothing left out). `left_out`: the
// shards of this page the target left out because their bytes failed their checksums (with
// kListWithData; as if it did not hold them, see ShardService::List).
struct ListReplyHeader {
  uint8_t version;
  uint8_t reserved0[3];
  uint32_t left_out;
};
static_assert(sizeof(ListReplyHeader) == 8);

struct ListEntryHeader {
  WireShardKey key;
  uint64_t shard_version;
  uint32_t length;      // shard length
  uint32_t data_bytes;  // bytes of shard data that follow (0 without kListWithData)
};
static_assert(sizeof(ListEntryHeader) == 56);
#pragma pack(pop)

// A target refuses a request whose map_epoch is older than the cluster's placement epoch
// (ClusterMap.placement_epoch, which it learns from mgmt): the client computed placement from a
// map in which other targets hold the stripe. The refusal is kUnavailable (retryable) with a
// message that starts with kStaleMapRefusal; the client refreshes its map and tries again.
inline constexpr std::string_view kStaleMapRefusal = "stale cluster map";
inline bool IsStaleMap(const Status& s) {
  return s.code() == StatusCode::kUnavailable && s.message().find(kStaleMapRefusal) != std::string::npos;
}

// Largest shard a kListWithData reply carries inline.
inline constexpr uint32_t kListMaxInlineBytes = 64 * 1024;

struct ListEntry {
  WireShardKey key{};
  uint64_t shard_version = 0;
  uint32_t length = 0;
  std::vector<std::byte> data;
};

// `key` with shard index `shard`.
inline WireShardKey WithShard(WireShardKey key, uint32_t shard) {
  key.shard = shard;
  return key;
}

// Encodes a packed header struct as bytes.
template <typename T>
std::vector<std::byte> EncodeHeader(const T& h) {
  std::vector<std::byte> out(sizeof(T));
  std::memcpy(out.data(), &h, sizeof(T));
  return out;
}

// Decodes a packed header: kInvalidArgument when `bytes` is shorter than T or the version
// byte is not kShardProtocolVersion. Extra trailing bytes are allowed (newer minor fields).
template <typename T>
Result<T> DecodeHeader(std::span<const std::byte> bytes, const char* what) {
  if (bytes.size() < sizeof(T)) {
    return InvalidArgument(std::string(what) + " header truncated: " + std::to_string(bytes.size()) +
                           " bytes, need " + std::to_string(sizeof(T)));
  }
  T h;
  std::memcpy(&h, bytes.data(), sizeof(T));
  uint8_t version;
  std::memcpy(&version, bytes.data(), 1);
  if (version != kShardProtocolVersion) {
    return InvalidArgument(std::string(what) + " header has version " + std::to_string(version) +
                           ", this build speaks " + std::to_string(kShardProtocolVersion));
  }
  return h;
}

// Size of the fixed request header of `op` (0 for an unknown opcode).
size_t RequestHeaderSize(uint16_t op);

// Sets kRequestHasCapability in `header` (a request header of `fixed` bytes) and appends the
// token trailer. An empty token leaves the header unchanged.
void AttachCapability(std::vector<std::byte>& header, std::span<const std::byte> token);

// The token carried by a request header whose fixed part is `fixed` bytes: empty when the flag
// is not set. Errors: kInvalidArgument when the trailer is truncated.
Result<std::span<const std::byte>> RequestCapability(std::span<const std::byte> header, size_t fixed);

// List reply payload: u32 count, then per entry a ListEntryHeader and data_bytes bytes.
std::vector<std::byte> EncodeListEntries(const std::vector<ListEntry>& entries);
Result<std::vector<ListEntry>> DecodeListEntries(std::span<const std::byte> payload);

std::string_view ShardOpName(uint16_t op);

}  // namespace penstock

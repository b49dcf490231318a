#include "target/shard_service.h"

#include <gtest/gtest.h>

#include <cstring>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "common/temp_dir.h"
#include "protocol/object_head.h"
#include "engine/test_util.h"
#include "protocol/shard_protocol.h"

namespace penstock {
namespace {

class ShardServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineOptions o;
    o.data_path = dir_.path() + "/data.img";
    o.index_dir = dir_.path() + "/index";
    o.capacity_bytes = 17 << 20;
    o.segment_bytes = 4 << 20;
    auto e = Engine::Open(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(*e);
    service_ = std::make_unique<ShardService>(engine_.get(), &metrics_, 2);
    service_->SetKeySet({});  // auth disabled
  }

  static RpcRequest Request(ShardOp op, uint64_t stripe, std::string_view payload = {}) {
    ShardRequestHeader h{};
    h.version = kShardProtocolVersion;
    h.shard_version = 5;
    h.key = WireShardKey{1, 2, 3, stripe, 0, 0};
    RpcRequest r;
    r.opcode = static_cast<uint16_t>(op);
    r.header = EncodeHeader(h);
    r.payload = AlignedBuffer::CopyOf({reinterpret_cast<const std::byte*>(payload.data()), payload.size()});
    return r;
  }

  // A list of container 1 with `flags`.
  static RpcRequest ListRequest(uint8_t flags) {
    ListRequestHeader lh{};
    lh.version = kShardProtocolVersion;
    lh.flags = flags;
    lh.container = 1;
    RpcRequest req;
    req.opcode = static_cast<uint16_t>(ShardOp::kList);
    req.header = EncodeHeader(lh);
    return req;
  }

  static std::string Text(const AlignedBuffer& b) {
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }

  testing::TempDir dir_{"shard_service"};
  MetricsRegistry metrics_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ShardService> service_;
};

TEST_F(ShardServiceTest, WriteReadStatDelete) {
  ASSERT_TRUE(service_->Execute(Request(ShardOp::kWrite, 0, "hello shard")).status.ok());
  RpcReply r = service_->Execute(Request(ShardOp::kRead, 0));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Text(r.payload), "hello shard");
  auto rh = DecodeHeader<ShardReplyHeader>(r.header, "read reply");
  ASSERT_TRUE(rh.ok());
  EXPECT_EQ(rh->length, 11u);
  EXPECT_EQ(rh->shard_version, 5u);
  r = service_->Execute(Request(ShardOp::kStat, 0));
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(DecodeHeader<ShardReplyHeader>(r.header, "stat")->length, 11u);
  ASSERT_TRUE(service_->Execute(Request(ShardOp::kDelete, 0)).status.ok());
  EXPECT_EQ(service_->Execute(Request(ShardOp::kRead, 0)).status.code(), StatusCode::kNotFound);
  EXPECT_EQ(service_->Execute(Request(ShardOp::kDelete, 0)).status.code(), StatusCode::kNotFound);
}

// kWriteReturnReplaced: the write's reply says what it replaced (nothing: version 0), its
// first kHeadPrefixBytes only; a write refused says nothing of it.
TEST_F(ShardServiceTest, AWriteCanAnswerWhatItReplaced) {
  auto write = [&](std::string_view payload, uint64_t version, uint8_t flags) {
    RpcRequest r = Request(ShardOp::kWrite, UINT64_MAX, payload);
    ShardRequestHeader h = *DecodeHeader<ShardRequestHeader>(r.header, "write");
    h.shard_version = version;
    h.flags = flags;
    r.header = EncodeHeader(h);
    return service_->Execute(r);
  };
  RpcReply r = write("first", 5, kWriteReturnReplaced);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  auto rh = DecodeHeader<ShardReplyHeader>(r.header, "write reply");
  ASSERT_TRUE(rh.ok());
  EXPECT_EQ(rh->shard_version, 0u);
  EXPECT_EQ(rh->length, 0u);
  EXPECT_EQ(r.payload.size(), 0u);

  const std::string long_head(kHeadPrefixBytes + 500, 'x');
  r = write(long_head, 6, kWriteReturnReplaced);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Text(r.payload), "first");
  EXPECT_EQ(DecodeHeader<ShardReplyHeader>(r.header, "write reply")->shard_version, 5u);

  r = write("third", 7, kWriteReturnReplaced | kWriteIfNotOlder);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Text(r.payload), long_head.substr(0, kHeadPrefixBytes));  // a prefix only
  rh = DecodeHeader<ShardReplyHeader>(r.header, "write reply");
  EXPECT_EQ(rh->length, long_head.size());
  EXPECT_EQ(rh->shard_version, 6u);

  r = write("older", 3, kWriteReturnReplaced | kWriteIfNotOlder);  // refused: a newer one is stored
  EXPECT_EQ(r.status.code(), StatusCode::kAborted);
  EXPECT_TRUE(r.header.empty());
  EXPECT_TRUE(write("plain", 8, 0).header.empty());  // not asked: a plain write's reply

  // kDeleteReturnDeleted: the same for a delete; a missing shard is kNotFound as ever.
  RpcRequest del = Request(ShardOp::kDelete, UINT64_MAX);
  ShardRequestHeader dh = *DecodeHeader<ShardRequestHeader>(del.header, "delete");
  dh.flags = kDeleteReturnDeleted;
  del.header = EncodeHeader(dh);
  r = service_->Execute(del);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Text(r.payload), "plain");
  EXPECT_EQ(DecodeHeader<ShardReplyHeader>(r.header, "delete reply")->shard_version, 8u);
  EXPECT_EQ(service_->Execute(del).status.code(), StatusCode::kNotFound);
}

// kRewrite: a whole-shard write over an expected version, through Execute and Handle.
TEST_F(ShardServiceTest, RewritesReplaceAShardOverItsVersion) {
  auto rewrite = [](const std::string& bytes, uint64_t version, uint64_t expected, uint64_t offset = 0,
                    uint8_t flags = kWriteIfVersion) {
    RpcRequest r = Request(ShardOp::kRewrite, 60, bytes);
    RangeWriteHeader h{};
    std::memcpy(&h.base, r.header.data(), sizeof(h.base));
    h.base.shard_version = version;
    h.base.flags = flags;
    h.offset = offset;
    h.expected_version = expected;
    r.header = EncodeHeader(h);
    return r;
  };
  auto handle = [&](RpcRequest r) {
    std::promise<RpcReply> answer;
    service_->Handle(std::move(r), [&](RpcReply reply) { answer.set_value(std::move(reply)); });
    return answer.get_future().get();
  };
  ASSERT_TRUE(service_->Execute(rewrite(std::string(6000, 'a'), 5, 0)).status.ok());  // over none
  EXPECT_EQ(service_->Execute(rewrite("b", 6, 4)).status.code(), StatusCode::kAborted);
  EXPECT_EQ(handle(rewrite("b", 7, 6)).status.code(), StatusCode::kFailedPrecondition);
  RpcReply r = handle(rewrite("short", 7, 5));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Text(service_->Execute(Request(ShardOp::kRead, 60)).payload), "short");  // whole
  // Malformed: not at offset 0, no condition, a version that does not rise.
  EXPECT_EQ(handle(rewrite("x", 9, 7, 4096)).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(handle(rewrite("x", 9, 7, 0, 0)).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(service_->Execute(rewrite("x", 7, 7)).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Text(service_->Execute(Request(ShardOp::kRead, 60)).payload), "short");
}

TEST_F(ShardServiceTest, ListHeadsWithData) {
  ASSERT_TRUE(service_->Execute(Request(ShardOp::kWrite, 0, "data")).status.ok());
  ASSERT_TRUE(service_->Execute(Request(ShardOp::kWrite, UINT64_MAX, "head")).status.ok());
  RpcRequest req = ListRequest(kListHeadsOnly | kListWithData);
  RpcReply r = service_->Execute(req);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  auto entries = DecodeListEntries(r.payload.span());
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].key.stripe, UINT64_MAX);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*entries)[0].data.data()), 4), "head");
  auto rh = DecodeHeader<ListReplyHeader>(r.header, "list reply");
  ASSERT_TRUE(rh.ok()) << rh.status().ToString();
  EXPECT_EQ(rh->left_out, 0u);
  // Other containers see nothing.
  ListRequestHeader lh;
  std::memcpy(&lh, req.header.data(), sizeof(lh));
  lh.container = 2;
  req.header = EncodeHeader(lh);
  r = service_->Execute(req);
  EXPECT_EQ(DecodeListEntries(r.payload.span())->size(), 0u);
}

// A request that arrives after its deadline is refused before anything happens; one with no
// deadline (0) or a later one is served.
TEST_F(ShardServiceTest, RequestsPastTheirDeadlineAreRefusedUnapplied) {
  auto with_deadline = [](RpcRequest r, uint32_t deadline_s) {
    ShardRequestHeader h;
    std::memcpy(&h, r.header.data(), sizeof(h));
    h.deadline_s = deadline_s;
    r.header = EncodeHeader(h);
    return r;
  };
  const uint32_t now = static_cast<uint32_t>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  RpcReply r = service_->Execute(with_deadline(Request(ShardOp::kWrite, 0, "late"), now - 5));
  EXPECT_EQ(r.status.code(), StatusCode::kDeadlineExceeded) << r.status.ToString();
  EXPECT_EQ(service_->Execute(Request(ShardOp::kStat, 0)).status.code(), StatusCode::kNotFound);
  // Through Handle (the transport's path) too.
  std::promise<RpcReply> answered;
  service_->Handle(with_deadline(Request(ShardOp::kWrite, 0, "late"), now - 5),
                   [&](RpcReply reply) { answered.set_value(std::move(reply)); });
  EXPECT_EQ(answered.get_future().get().status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(service_->Execute(Request(ShardOp::kStat, 0)).status.code(), StatusCode::kNotFound);
  EXPECT_TRUE(service_->Execute(with_deadline(Request(ShardOp::kWrite, 0, "on time"), now + 60)).status.ok());
  EXPECT_EQ(service_->Execute(with_deadline(Request(ShardOp::kDelete, 0), now - 1)).status.code(),
            StatusCode::kDeadlineExceeded);
  r = service_->Execute(Request(ShardOp::kRead, 0));
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Text(r.payload), "on time");
}

// A head copy whose bytes fail their checksum is left out of a listing with its data, and the
// reply counts it: a reader of the listing knows a copy is missing from it.
TEST_F(ShardServiceTest, ListCountsTheCorruptHeadsItLeavesOut) {
  const std::string head(5000, 'h');
  ASSERT_TRUE(service_->Execute(Request(ShardOp::kWrite, UINT64_MAX, head)).status.ok());
  RpcRequest other = Request(ShardOp::kWrite, UINT64_MAX, "fine");
  ShardRequestHeader oh;
  std::memcpy(&oh, other.header.data(), sizeof(oh));
  oh.key.object_lo = 4;
  other.header = EncodeHeader(oh);
  ASSERT_TRUE(service_->Execute(std::move(other)).status.ok());
  const auto* p = reinterpret_cast<const std::byte*>(head.data());
  ASSERT_TRUE(engine::testing::FlipByteOf(dir_.path() + "/data.img", {p, p + 1024}, 100));
  RpcReply r = service_->Execute(ListRequest(kListHeadsOnly | kListWithData));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  auto entries = DecodeListEntries(r.payload.span());
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].key.object_lo, 4u);
  auto rh = DecodeHeader<ListReplyHeader>(r.header, "list reply");
  ASSERT_TRUE(rh.ok()) << rh.status().ToString();
  EXPECT_EQ(rh->left_out, 1u);
  // Without the data nothing is read, so nothing is left out.
  r = service_->Execute(ListRequest(kListHeadsOnly));
  EXPECT_EQ(DecodeListEntries(r.payload.span())->size(), 2u);
  EXPECT_EQ(DecodeHeader<ListReplyHeader>(r.header, "list reply")->left_out, 0u);
}

// Range writes patch a shard in place; with kWriteIfVersion only a copy holding the expected
// version is patched: a newer one answers kAborted, an older or missing one kFailedPrecondition.
TEST_F(ShardServiceTest, RangeWritesPatchOnlyTheExpectedVersion) {
  auto make = [&](uint64_t stripe, uint64_t offset, std::string_view bytes, uint64_t version,
                  std::optional<uint64_t> expected) {
    RpcRequest r = Request(ShardOp::kWriteRange, stripe, bytes);
    RangeWriteHeader h{};
    std::memcpy(&h.base, r.header.data(), sizeof(h.base));
    h.base.shard_version = version;
    h.base.flags = expected ? kWriteIfVersion : 0;
    h.offset = offset;
    h.expected_version = expected.value_or(0);
    r.header = EncodeHeader(h);
    return r;
  };
  auto range = [&](uint64_t stripe, uint64_t offset, std::string_view bytes, uint64_t version,
                   std::optional<uint64_t> expected) {
    return service_->Execute(make(stripe, offset, bytes, version, expected)).status;
  };
  // Through Handle: whole blocks go from the transport thread to the engine's committer.
  auto handled = [&](uint64_t stripe, uint64_t offset, std::string_view bytes, uint64_t version,
                     std::optional<uint64_t> expected) {
    std::promise<RpcReply> answered;
    service_->Handle(make(stripe, offset, bytes, version, expected),
                     [&](RpcReply reply) { answered.set_value(std::move(reply)); });
    return answered.get_future().get().status;
  };
  auto read = [&](uint64_t stripe) {
    RpcReply r = service_->Execute(Request(ShardOp::kRead, stripe));
    auto rh = DecodeHeader<ShardReplyHeader>(r.header, "read reply");
    return std::make_pair(Text(r.payload), rh.ok() ? rh->shard_version : 0);
  };
  ASSERT_TRUE(service_->Execute(Request(ShardOp::kWrite, 0, "hello shard")).status.ok());  // version 5
  ASSERT_TRUE(range(0, 6, "SHARD", 6, std::nullopt).ok());
  EXPECT_EQ(read(0), std::make_pair(std::string("hello SHARD"), uint64_t{6}));
  ASSERT_TRUE(range(0, 13, "!", 7, 6).ok());  // past the end: zeros in between
  EXPECT_EQ(read(0), std::make_pair(std::string("hello SHARD\0\0!", 14), uint64_t{7}));

  Status newer = range(0, 0, "x", 8, 6);
  EXPECT_EQ(newer.code(), StatusCode::kAborted) << newer.ToString();
  Status older = range(0, 0, "x", 10, 9);
  EXPECT_EQ(older.code(), StatusCode::kFailedPrecondition) << older.ToString();
  EXPECT_NE(older.message().find("repaired whole"), std::string::npos) << older.message();
  // A patch that would not raise the version is refused whatever the copy holds.
  Status lower = range(0, 0, "x", 7, 7);
  EXPECT_EQ(lower.code(), StatusCode::kInvalidArgument) << lower.ToString();
  EXPECT_EQ(handled(0, 0, std::string(4096, 'y'), 6, 7).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(read(0).second, 7u);  // none was applied
  EXPECT_EQ(range(1, 0, "x", 8, 3).code(), StatusCode::kFailedPrecondition);  // missing copy
  ASSERT_TRUE(range(1, 4, "new", 8, 0).ok());                                  // absent = version 0
  EXPECT_EQ(read(1), std::make_pair(std::string("\0\0\0\0new", 7), uint64_t{8}));

  const std::string a(4096, 'a'), b(4096, 'b');
  ASSERT_TRUE(service_->Execute(Request(ShardOp::kWrite, 3, a + a)).status.ok());  // version 5
  ASSERT_TRUE(handled(3, 4096, b, 6, 5).ok());
  Status stale = handled(3, 0, b, 7, 5);
  EXPECT_EQ(stale.code(), StatusCode::kAborted) << stale.ToString();
  Status ahead = handled(3, 0, b, 10, 9);
  EXPECT_EQ(ahead.code(), StatusCode::kFailedPrecondition) << ahead.ToString();
  EXPECT_NE(ahead.message().find("repaired whole"), std::string::npos) << ahead.message();
  EXPECT_EQ(handled(4, 0, b, 2, 1).code(), StatusCode::kFailedPrecondition);  // missing copy
  EXPECT_EQ(read(3), std::make_pair(a + b, uint64_t{6}));
  EXPECT_EQ(service_->Execute(Request(ShardOp::kStat, 4)).status.code(), StatusCode::kNotFound);

  Status too_far = range(2, 4u << 20, "x", 1, std::nullopt);  // segments are 4 MiB here
  EXPECT_EQ(too_far.code(), StatusCode::kInvalidArgument) << too_far.ToString();
  RpcRequest truncated = Request(ShardOp::kWriteRange, 0, "x");  // a plain header is too short
  EXPECT_EQ(service_->Execute(truncated).status.code(), StatusCode::kInvalidArgument);
}

TEST_F(ShardServiceTest, MalformedRequestsAreRejected) {
  RpcRequest r = Request(ShardOp::kWrite, 0, "x");
  r.header.resize(10);
  EXPECT_EQ(service_->Execute(r).status.code(), StatusCode::kInvalidArgument);
  r = Request(ShardOp::kRead, 0);
  r.header[0] = std::byte{42};
  EXPECT_EQ(service_->Execute(r).status.code(), StatusCode::kInvalidArgument);
  r = Request(ShardOp::kRead, 0);
  r.opcode = 999;
  RpcReply reply = service_->Execute(r);
  EXPECT_EQ(reply.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(reply.status.message().find("999"), std::string::npos);
  EXPECT_NE(metrics_.RenderText().find("penstock_target_op_errors_total"), std::string::npos);
}

// A request placed with a map older than the placement epoch is refused before the engine is
// touched; one at or past it runs.
TEST_F(ShardServiceTest, StaleMapEpochIsRefused) {
  ASSERT_TRUE(service_->Execute(Request(ShardOp::kWrite, 0, "old")).status.ok());
  service_->SetPlacementEpoch(7);
  auto at = [](RpcRequest r, uint64_t epoch) {
    std::memcpy(r.header.data() + kMapEpochOffset, &epoch, sizeof(epoch));
    return r;
  };
  for (ShardOp op : {ShardOp::kWrite, ShardOp::kRead, ShardOp::kStat, ShardOp::kDelete}) {
    RpcReply r = service_->Execute(at(Request(op, 0, "new"), 6));
    EXPECT_TRUE(IsStaleMap(r.status)) << r.status.ToString();
    EXPECT_TRUE(r.status.retryable());
    EXPECT_EQ(r.payload.size(), 0u);
  }
  ListRequestHeader lh{};
  lh.version = kShardProtocolVersion;
  lh.map_epoch = 0;
  lh.container = 1;
  RpcRequest list;
  list.opcode = static_cast<uint16_t>(ShardOp::kList);
  list.header = EncodeHeader(lh);
  EXPECT_TRUE(IsStaleMap(service_->Execute(list).status));
  // Nothing changed; a current map reads the old bytes, a newer one writes.
  RpcReply r = service_->Execute(at(Request(ShardOp::kRead, 0), 7));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Text(r.payload), "old");
  EXPECT_TRUE(service_->Execute(at(Request(ShardOp::kWrite, 0, "new"), 9)).status.ok());
  EXPECT_NE(metrics_.RenderText().find("penstock_target_stale_map_refusals_total 5"), std::string::npos);
  // Requests the transport thread starts on the engine itself (a read, a whole-block range
  // write) are refused the same way, before the engine is touched.
  RpcRequest range_write = Request(ShardOp::kWriteRange, 0, std::string(4096, 'x'));
  RangeWriteHeader wh{};
  std::memcpy(&wh.base, range_write.header.data(), sizeof(wh.base));
  range_write.header = EncodeHeader(wh);
  std::vector<RpcRequest> stale;
  stale.push_back(at(Request(ShardOp::kRead, 0), 6));
  stale.push_back(at(std::move(range_write), 6));
  for (RpcRequest& req : stale) {
    std::promise<RpcReply> answered;
    service_->Handle(std::move(req), [&](RpcReply reply) { answered.set_value(std::move(reply)); });
    RpcReply reply = answered.get_future().get();
    EXPECT_TRUE(IsStaleMap(reply.status)) << reply.status.ToString();
    EXPECT_EQ(reply.payload.size(), 0u);
  }
  EXPECT_EQ(Text(service_->Execute(at(Request(ShardOp::kRead, 0), 9)).payload), "new");
}

// A target mgmt declared lost refuses every shard request as placed with a stale map, whatever
// the request's epoch: a client that still places data there refreshes and goes elsewhere.
TEST_F(ShardServiceTest, ALostTargetRefusesEverythingAsAStaleMap) {
  ASSERT_TRUE(service_->Execute(Request(ShardOp::kWrite, 0, "old")).status.ok());
  service_->SetLost();
  for (ShardOp op : {ShardOp::kWrite, ShardOp::kRead, ShardOp::kStat, ShardOp::kDelete}) {
    RpcRequest req = Request(op, 0, "new");
    const uint64_t newest = UINT64_MAX;
    std::memcpy(req.header.data() + kMapEpochOffset, &newest, sizeof newest);
    RpcReply r = service_->Execute(req);
    EXPECT_TRUE(IsStaleMap(r.status)) << r.status.ToString();
    EXPECT_NE(r.status.message().find("declared lost"), std::string::npos) << r.status.ToString();
  }
  std::promise<RpcReply> answered;
  service_->Handle(Request(ShardOp::kRead, 0), [&](RpcReply reply) { answered.set_value(std::move(reply)); });
  EXPECT_TRUE(IsStaleMap(answered.get_future().get().status));
}

// Stripe write leases: one owner at a time per stripe (any shard index), renewable by the
// holder, released by it alone, expiring after their TTL; bad TTLs are refused. A grant says
// whether it renewed the owner's unexpired lease.
TEST_F(ShardServiceTest, StripeLeasesGrantOneOwnerAtATime) {
  auto lease = [&](ShardOp op, uint64_t stripe, uint32_t shard, uint64_t owner, uint32_t ttl_ms) {
    LockRequestHeader h{};
    h.base.version = kShardProtocolVersion;
    h.base.key = WireShardKey{1, 2, 3, stripe, shard, 0};
    h.owner = owner;
    h.ttl_ms = ttl_ms;
    RpcRequest r;
    r.opcode = static_cast<uint16_t>(op);
    r.header = EncodeHeader(h);
    return service_->Execute(r);
  };
  // Whether a granted lock was a renewal (LockReplyHeader).
  auto renewed = [](const RpcReply& reply) {
    auto h = DecodeHeader<LockReplyHeader>(reply.header, "lock reply");
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() && (h->flags & kLeaseRenewed) != 0;
  };
  RpcReply first = lease(ShardOp::kLockStripe, 7, 0, 100, 10000);
  ASSERT_TRUE(first.status.ok()) << first.status.ToString();
  EXPECT_FALSE(renewed(first));
  RpcReply again = lease(ShardOp::kLockStripe, 7, 0, 100, 10000);  // the holder renews
  ASSERT_TRUE(again.status.ok()) << again.status.ToString();
  EXPECT_TRUE(renewed(again));
  Status other = lease(ShardOp::kLockStripe, 7, 2, 200, 10000).status;  // another shard index: same stripe
  EXPECT_EQ(other.code(), StatusCode::kAborted) << other.ToString();
  EXPECT_NE(other.message().find("another client"), std::string::npos);
  EXPECT_TRUE(lease(ShardOp::kLockStripe, 8, 0, 200, 10000).status.ok());  // another stripe is free
  EXPECT_TRUE(lease(ShardOp::kUnlockStripe, 7, 0, 200, 0).status.ok());    // not the holder: no effect
  EXPECT_EQ(lease(ShardOp::kLockStripe, 7, 0, 200, 10000).status.code(), StatusCode::kAborted);
  EXPECT_TRUE(lease(ShardOp::kUnlockStripe, 7, 0, 100, 0).status.ok());
  EXPECT_TRUE(lease(ShardOp::kLockStripe, 7, 0, 200, 30).status.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(60));  // expired
  EXPECT_TRUE(lease(ShardOp::kLockStripe, 7, 0, 100, 30).status.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  RpcReply lapsed = lease(ShardOp::kLockStripe, 7, 0, 100, 10000);  // its own lease had expired: no renewal
  ASSERT_TRUE(lapsed.status.ok()) << lapsed.status.ToString();
  EXPECT_FALSE(renewed(lapsed));
  EXPECT_EQ(lease(ShardOp::kLockStripe, 9, 0, 100, 0).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(lease(ShardOp::kLockStripe, 9, 0, 100, 60001).status.code(), StatusCode::kInvalidArgument);
}

// Range writes of whole 4 KiB blocks are answered from the engine's completion (no I/O thread
// waits for them): many at once all succeed and read back; the service's destructor waits for
// those still in flight, so every one is answered.
TEST_F(ShardServiceTest, ReadsHandledAsynchronouslyAnswerAsExecuteDoes) {
  const std::string big(100000, 'q');
  ASSERT_TRUE(service_->Execute(Request(ShardOp::kWrite, 1, big)).status.ok());
  ASSERT_TRUE(service_->Execute(Request(ShardOp::kWrite, 2, "small shard")).status.ok());
  auto range = [](uint64_t stripe, uint64_t offset, uint64_t length) {
    RpcRequest r = Request(ShardOp::kReadRange, stripe);
    RangeReadHeader h{};
    std::memcpy(&h.base, r.header.data(), sizeof(h.base));
    h.offset = offset;
    h.length = length;
    r.header = EncodeHeader(h);
    return r;
  };
  auto copy = [](const RpcRequest& r) {
    RpcRequest c;
    c.opcode = r.opcode;
    c.header = r.header;
    c.payload = AlignedBuffer::CopyOf(r.payload.span());
    return c;
  };
  std::vector<RpcRequest> requests;
  for (int i = 0; i < 40; ++i) requests.push_back(range(1, i * 2500, 3000));
  requests.push_back(Request(ShardOp::kRead, 1));
  requests.push_back(Request(ShardOp::kRead, 2));
  requests.push_back(range(2, 5, 100));
  requests.push_back(range(3, 0, 10));  // absent
  RpcRequest truncated = Request(ShardOp::kReadRange, 1);  // a read_range header cut short
  requests.push_back(copy(truncated));
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::optional<RpcReply>> replies(requests.size());
  size_t answered = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    service_->Handle(copy(requests[i]), [&, i](RpcReply r) {
      std::lock_guard<std::mutex> lock(mu);
      replies[i] = std::move(r);
      ++answered;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return answered == requests.size(); }));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    RpcReply want = service_->Execute(requests[i]);
    const RpcReply& got = *replies[i];
    EXPECT_EQ(got.status.code(), want.status.code()) << i << ": " << got.status.ToString();
    EXPECT_EQ(Text(got.payload), Text(want.payload)) << i;
    EXPECT_EQ(got.header, want.header) << i;
  }
  EXPECT_EQ(replies[43]->status.code(), StatusCode::kNotFound);
  EXPECT_EQ(replies[44]->status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Text(replies[40]->payload), big);
}

TEST_F(ShardServiceTest, WholeBlockRangeWritesAreAnsweredFromTheEngine) {
  auto range = [](uint64_t stripe, uint64_t offset, const std::string& bytes) {
    RpcRequest r = Request(ShardOp::kWriteRange, stripe, bytes);
    RangeWriteHeader h{};
    std::memcpy(&h.base, r.header.data(), sizeof(h.base));
    h.offset = offset;
    r.header = EncodeHeader(h);
    return r;
  };
  constexpr int kWrites = 64;
  std::mutex mu;
  std::condition_variable cv;
  int answered = 0, failed = 0;
  auto count = [&](RpcReply r) {
    std::lock_guard<std::mutex> lock(mu);
    if (!r.status.ok()) ++failed;
    ++answered;
    cv.notify_all();
  };
  for (int i = 0; i < kWrites; ++i) {
    service_->Handle(range(10 + i % 4, (i / 4) * 4096, std::string(4096, static_cast<char>('a' + i % 26))), count);
  }
  service_->Handle(range(20, 100, "not whole blocks"), count);  // answered by an I/O thread
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return answered == kWrites + 1; }));
  }
  EXPECT_EQ(failed, 0);
  for (int i = 0; i < kWrites; ++i) {
    RpcReply r = service_->Execute(Request(ShardOp::kRead, 10 + i % 4));
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    ASSERT_EQ(r.payload.size(), 16u * 4096);
    EXPECT_EQ(Text(r.payload).substr((i / 4) * 4096, 4096), std::string(4096, static_cast<char>('a' + i % 26)));
  }
  EXPECT_EQ(Text(service_->Execute(Request(ShardOp::kRead, 20)).payload).substr(100), "not whole blocks");
  // Writes still in flight when the service goes are answered before its destructor returns.
  answered = 0;
  for (int i = 0; i < kWrites; ++i) service_->Handle(range(30, i * 4096, std::string(4096, 'z')), count);
  service_.reset();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(answered, kWrites);
  EXPECT_EQ(failed, 0);
}

// kWrite through Handle: queued with the engine from the transport's thread (no I/O thread),
// also when it asks what it replaced; answered as Execute answers.
TEST_F(ShardServiceTest, WholeShardWritesAreAnsweredFromTheEngine) {
  auto handle = [&](RpcRequest r) {
    std::promise<RpcReply> answer;
    service_->Handle(std::move(r), [&](RpcReply reply) { answer.set_value(std::move(reply)); });
    return answer.get_future().get();
  };
  auto write = [](uint64_t stripe, const std::string& bytes, uint64_t version, uint8_t flags) {
    RpcRequest r = Request(ShardOp::kWrite, stripe, bytes);
    ShardRequestHeader h = *DecodeHeader<ShardRequestHeader>(r.header, "write");
    h.shard_version = version;
    h.flags = flags;
    r.header = EncodeHeader(h);
    return r;
  };
  RpcReply r = handle(write(40, "first head", 5, kWriteReturnReplaced | kWriteIfNotOlder));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(DecodeHeader<ShardReplyHeader>(r.header, "write reply")->shard_version, 0u);
  r = handle(write(40, std::string(5000, 'h'), 6, kWriteReturnReplaced | kWriteIfNotOlder));
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Text(r.payload), "first head");
  EXPECT_EQ(DecodeHeader<ShardReplyHeader>(r.header, "write reply")->shard_version, 5u);
  EXPECT_EQ(handle(write(40, "stale", 4, kWriteIfNotOlder)).status.code(), StatusCode::kAborted);
  EXPECT_EQ(Text(service_->Execute(Request(ShardOp::kRead, 40)).payload), std::string(5000, 'h'));

  constexpr int kWrites = 64;
  std::mutex mu;
  int answered = 0, failed = 0;
  auto count = [&](RpcReply reply) {
    std::lock_guard<std::mutex> lock(mu);
    failed += !reply.status.ok();
    ++answered;
  };
  for (int i = 0; i < kWrites; ++i) service_->Handle(write(50 + i, std::string(3000 + i, 'w'), 1, 0), count);
  service_.reset();  // writes still in flight are answered before the destructor returns
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(answered, kWrites);
  EXPECT_EQ(failed, 0);
  for (int i = 0; i < kWrites; ++i) {
    auto got = engine_->Read(ShardKey{1, ObjectId{2, 3}, static_cast<uint64_t>(50 + i), 0});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->size(), 3000u + i);
  }
}

TEST_F(ShardServiceTest, HandleRespondsFromThePool) {
  std::promise<RpcReply> done;
  service_->Handle(Request(ShardOp::kWrite, 7, "async"), [&](RpcReply r) { done.set_value(std::move(r)); });
  EXPECT_TRUE(done.get_future().get().status.ok());
  EXPECT_EQ(Text(service_->Execute(Request(ShardOp::kRead, 7)).payload), "async");
}

}  // namespace
}  // namespace penstock

#include "client/shard_client.h"

#include <thread>

#include "common/await.h"

namespace penstock {

Result<TargetRef> ShardClient::Locate(const WireShardKey& key) const {
  return view_->Locate(PlacementKey{key.container, key.object_hi, key.object_lo, key.stripe});
}

std::string ShardClient::Describe(const WireShardKey& key) const {
  auto t = Locate(key);
  if (!t.ok()) return "no target";
  return "target " + std::to_string(t->id) + " (" + t->address + (t->up ? ")" : ", down)");
}

std::vector<std::byte> ShardClient::Header(ShardRequest r) const {
  r.map_epoch = view_->epoch();
  if (r.op != ShardOp::kList) r.deadline_s = RequestDeadline(retry_budget_);
  return EncodeShardRequest(r);
}

std::vector<std::byte> ShardClient::RequestHeader(ShardOp op, const WireShardKey& key, uint64_t version,
                                                 uint8_t flags) const {
  return Header({.op = op, .key = key, .shard_version = version, .flags = flags});
}

std::vector<std::byte> ShardClient::RangeHeader(const WireShardKey& key, uint64_t offset, uint64_t length) const {
  return Header({.op = ShardOp::kReadRange, .key = key, .offset = offset, .length = length});
}

Status ShardClient::AttachToken(std::vector<std::byte>& header, uint64_t container) {
  if (caps_ == nullptr || !caps_->enabled()) return OkStatus();
  PS_ASSIGN_OR_RETURN(std::vector<std::byte> token, caps_->Get(container));
  AttachCapability(header, token);
  return OkStatus();
}

bool ShardClient::TokenRefused(const Status& s, uint64_t container) {
  if (caps_ == nullptr || !caps_->enabled()) return false;
  if (s.code() != StatusCode::kPermissionDenied && s.code() != StatusCode::kUnauthenticated) return false;
  caps_->Invalidate(container);
  return true;
}

bool ShardClient::BackoffAndRefresh(const Status& s, std::chrono::steady_clock::time_point first_try,
                                    int attempt) {
  if (!s.retryable() || s.code() == StatusCode::kResourceExhausted) return false;
  if (std::chrono::steady_clock::now() - first_try >= retry_budget_) return false;
  // Backoff 50 ms, 100 ms, ... capped at 1 s; the map may show a restarted target's new address.
  int ms = std::min(1000, 50 << std::min(attempt, 5));
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  view_->Refresh().IgnoreError();
  return true;
}

bool ShardClient::ShouldRetry(const Status& s, const WireShardKey& key,
                              std::chrono::steady_clock::time_point first_try, int attempt) {
  if (!BackoffAndRefresh(s, first_try, attempt)) return false;
  auto target = Locate(key);
  return target.ok() && target->up;
}

RpcReply ShardClient::CallWithRetry(const WireShardKey& key, ShardOp op,
                                    std::span<const std::byte> payload, uint64_t version, uint8_t flags) {
  auto first = std::chrono::steady_clock::now();
  bool refetched = false;
  for (int attempt = 0;; ++attempt) {
    RpcReply reply;
    auto target = Locate(key);
    std::vector<std::byte> header = RequestHeader(op, key, version, flags);
    if (!target.ok()) {
      reply.status = target.status();
    } else if (Status t = AttachToken(header, key.container); !t.ok()) {
      reply.status = t;
    } else {
      reply = rpc_->CallSync(target->address, static_cast<uint16_t>(op), header, payload);
      if (!reply.status.ok() && reply.status.retryable()) {
        reply.status = reply.status.WithContext(Describe(key));
      }
      if (!refetched && TokenRefused(reply.status, key.container)) {
        refetched = true;
        continue;
      }
    }
    if (reply.status.ok() || !ShouldRetry(reply.status, key, first, attempt)) return reply;
  }
}

Status ShardClient::Write(const WireShardKey& key, std::span<const std::byte> data, uint64_t version) {
  return CallWithRetry(key, ShardOp::kWrite, data, version).status;
}

Result<AlignedBuffer> ShardClient::Read(const WireShardKey& key, uint64_t* version) {
  RpcReply r = CallWithRetry(key, ShardOp::kRead, {}, 0);
  if (!r.status.ok()) return r.status;
  if (version != nullptr) {
    *version = 0;
    if (!r.header.empty()) {
      PS_ASSIGN_OR_RETURN(ShardReplyHeader rh, DecodeHeader<ShardReplyHeader>(r.header, "read reply"));
      *version = rh.shard_version;
    }
  }
  return std::move(r.payload);
}

Status ShardClient::Delete(const WireShardKey& key, ReplacedFn deleted) {
  RpcReply r = CallWithRetry(key, ShardOp::kDelete, {}, 0, deleted ? kDeleteReturnDeleted : 0);
  if (r.status.ok()) TellReplaced(deleted, r);
  return r.status;
}

Result<std::vector<ListEntry>> ShardClient::List(const TargetRef& target, uint64_t container,
                                                 uint8_t flags, uint64_t* left_out) {
  std::vector<ListEntry> all;
  if (left_out) *left_out = 0;
  std::optional<WireShardKey> after;
  for (;;) {
    constexpr uint32_t kPage = 1000;
    PS_ASSIGN_OR_RETURN(ListPage page, List(target, container, flags, after, kPage));
    if (left_out) *left_out += page.left_out;
    const bool more = page.entries.size() == kPage;
    if (!page.entries.empty()) after = page.entries.back().key;
    for (auto& e : page.entries) all.push_back(std::move(e));
    if (!more) return all;
  }
}

Result<ShardClient::ListPage> ShardClient::List(const TargetRef& target, uint64_t container, uint8_t flags,
                                                std::optional<WireShardKey> start_after, uint32_t limit) {
  ShardRequest req{.op = ShardOp::kList, .key = WireShardKey{container, 0, 0, 0, 0, 0}, .flags = flags,
                   .limit = limit, .start_after = start_after};
  auto first = std::chrono::steady_clock::now();
  bool refetched = false;
  for (int attempt = 0;;) {
    std::vector<std::byte> header = Header(req);
    PS_RETURN_IF_ERROR(AttachToken(header, container));
    RpcReply r = rpc_->CallSync(target.address, static_cast<uint16_t>(ShardOp::kList), header, {});
    if (!r.status.ok()) {
      if (!refetched && TokenRefused(r.status, container)) {
        refetched = true;
        continue;
      }
      if (BackoffAndRefresh(r.status, first, attempt++) && view_->IsUp(target.id)) continue;
      return r.status.WithContext("listing target " + std::to_string(target.id) + " (" +
                                  target.address + ")");
    }
    ListPage page;
    PS_ASSIGN_OR_RETURN(page.entries, DecodeListEntries(r.payload.span()));
    if (!r.header.empty()) {
      PS_ASSIGN_OR_RETURN(ListReplyHeader rh, DecodeHeader<ListReplyHeader>(r.header, "list reply"));
      page.left_out = rh.left_out;
    }
    return page;
  }
}

void ShardClient::StartWrite(const WireShardKey& key, std::span<const std::byte> data,
                             uint64_t version, std::function<void(Status)> done, ReplacedFn replaced) {
  auto target = Locate(key);
  if (!target.ok()) return done(target.status());
  std::vector<std::byte> header = RequestHeader(ShardOp::kWrite, key, version, replaced ? kWriteReturnReplaced : 0);
  if (Status t = AttachToken(header, key.container); !t.ok()) return done(t);
  rpc_->Call(target->address, static_cast<uint16_t>(ShardOp::kWrite), header, data,
             WriteReplied(key.container, "", std::move(done), std::move(replaced)));
}

std::function<void(RpcReply)> ShardClient::WriteReplied(uint64_t container, std::string name,
                                                        std::function<void(Status)> done, ReplacedFn replaced) {
  return [this, container, name = std::move(name), done = std::move(done), replaced = std::move(replaced)](RpcReply r) {
    TokenRefused(r.status, container);
    if (!r.status.ok()) return done(name.empty() ? std::move(r.status) : r.status.WithContext(name));
    TellReplaced(replaced, r);
    done(OkStatus());
  };
}

void ShardClient::TellReplaced(const ReplacedFn& replaced, RpcReply& r) {
  if (!replaced || r.header.empty()) return;  // not asked, or a target from before the flags
  // A malformed answer says nothing of what was replaced; the write or delete itself succeeded.
  if (auto rh = DecodeHeader<ShardReplyHeader>(r.header, "write or delete reply"); rh.ok()) {
    replaced(ShardData{std::move(r.payload), rh->shard_version, rh->length, 0});
  }
}

void ShardClient::StartWriteRange(const WireShardKey& key, uint64_t offset, std::span<const std::byte> data,
                                  uint64_t version, std::function<void(Status)> done,
                                  std::optional<uint64_t> expected) {
  auto target = Locate(key);
  if (!target.ok()) return done(target.status());
  std::vector<std::byte> header = Header(
      {.op = ShardOp::kWriteRange, .key = key, .shard_version = version, .offset = offset, .expected_version = expected});
  if (Status t = AttachToken(header, key.container); !t.ok()) return done(t);
  rpc_->Call(target->address, static_cast<uint16_t>(ShardOp::kWriteRange), header, data,
             [this, c = key.container, done = std::move(done)](RpcReply r) {
               TokenRefused(r.status, c);
               done(std::move(r.status));
             });
}

void ShardClient::StartRewrite(const WireShardKey& key, std::span<const std::byte> data, uint64_t version,
                               uint64_t expected, std::function<void(Status)> done) {
  auto target = Locate(key);
  if (!target.ok()) return done(target.status());
  std::vector<std::byte> header =
      Header({.op = ShardOp::kRewrite, .key = key, .shard_version = version, .expected_version = expected});
  if (Status t = AttachToken(header, key.container); !t.ok()) return done(t);
  rpc_->Call(target->address, static_cast<uint16_t>(ShardOp::kRewrite), header, data,
             WriteReplied(key.container, "", std::move(done), nullptr));
}

void ShardClient::StartRead(const WireShardKey& key,
                            std::function<void(Result<AlignedBuffer>)> done) {
  auto target = Locate(key);
  if (!target.ok()) return done(target.status());
  std::vector<std::byte> header = RequestHeader(ShardOp::kRead, key, 0);
  if (Status t = AttachToken(header, key.container); !t.ok()) return done(t);
  rpc_->Call(target->address, static_cast<uint16_t>(ShardOp::kRead), header, {},
             [this, c = key.container, done = std::move(done)](RpcReply r) {
               TokenRefused(r.status, c);
               if (!r.status.ok()) return done(std::move(r.status));
               done(std::move(r.payload));
             });
}

namespace {

// The transport's view of bytes [at, ...) of a StripeDestination.
class PlacedReply : public ReplyDestination {
 public:
  PlacedReply(std::shared_ptr<StripeDestination> dest, uint64_t at, uint64_t max)
      : dest_(std::move(dest)), at_(at), max_(max) {}
  std::vector<std::span<std::byte>> Borrow(uint64_t length) override {
    if (length > max_) return {};
    auto spans = dest_->Borrow(at_, length);
    if (!spans.empty()) lent_ = length;
    return spans;
  }
  void Return(bool) override { dest_->Return(at_, lent_); }
  uint64_t UpFrontLength() const override { return max_ == UINT64_MAX ? 0 : max_; }

 private:
  std::shared_ptr<StripeDestination> dest_;
  const uint64_t at_, max_;
  uint64_t lent_ = 0;
};

std::shared_ptr<ReplyDestination> Placed(std::shared_ptr<StripeDestination> into, uint64_t at, uint64_t max) {
  if (into == nullptr) return nullptr;
  return std::make_shared<PlacedReply>(std::move(into), at, max);
}

}  // namespace

void ShardClient::StartReadRange(const WireShardKey& key, uint64_t offset, uint64_t length,
                                 std::function<void(Result<ShardData>)> done,
                                 std::shared_ptr<StripeDestination> into) {
  auto target = Locate(key);
  if (!target.ok()) return done(target.status());
  std::vector<std::byte> header = RangeHeader(key, offset, length);
  if (Status t = AttachToken(header, key.container); !t.ok()) return done(t);
  rpc_->Call(target->address, static_cast<uint16_t>(ShardOp::kReadRange), header, {},
             [this, c = key.container, done = std::move(done)](RpcReply r) {
               TokenRefused(r.status, c);
               if (!r.status.ok()) return done(std::move(r.status));
               ShardData d;
               d.placed = r.placed;
               d.length = r.placed + r.payload.size();
               d.data = std::move(r.payload);
               done(std::move(d));
             },
             Placed(std::move(into), 0, length));
}

std::string ShardClient::Name(const TargetRef& t) {
  return "target " + std::to_string(t.id) + " (" + t.address + ")";
}

void ShardClient::StartWriteTo(const TargetRef& target, const WireShardKey& key,
                               std::span<const std::byte> data, uint64_t version, bool only_if_not_older,
                               std::function<void(Status)> done, std::shared_ptr<CallAbandon> abandon,
                               ReplacedFn replaced) {
  const uint8_t flags = (only_if_not_older ? kWriteIfNotOlder : 0) | (replaced ? kWriteReturnReplaced : 0);
  std::vector<std::byte> header = RequestHeader(ShardOp::kWrite, key, version, flags);
  if (Status t = AttachToken(header, key.container); !t.ok()) return done(t);
  rpc_->Call(target.address, static_cast<uint16_t>(ShardOp::kWrite), header, data,
             WriteReplied(key.container, Name(target), std::move(done), std::move(replaced)), nullptr,
             std::move(abandon));
}

void ShardClient::StartWriteRangeTo(const TargetRef& target, const WireShardKey& key, uint64_t offset,
                                    std::span<const std::byte> data, uint64_t version,
                                    std::optional<uint64_t> expected, std::function<void(Status)> done) {
  std::vector<std::byte> header = Header({.op = ShardOp::kWriteRange, .key = key, .shard_version = version, .offset = offset, .expected_version = expected});
  if (Status t = AttachToken(header, key.container); !t.ok()) return done(t);
  rpc_->Call(target.address, static_cast<uint16_t>(ShardOp::kWriteRange), header, data,
             [this, c = key.container, name = Name(target), done = std::move(done)](RpcReply r) {
               TokenRefused(r.status, c);
               done(r.status.ok() ? OkStatus() : r.status.WithContext(name));
             });
}

void ShardClient::StartReadTo(const TargetRef& target, const WireShardKey& key, uint64_t offset,
                              uint64_t length, std::function<void(Result<ShardData>)> done,
                              std::shared_ptr<StripeDestination> into, uint64_t into_at) {
  std::vector<std::byte> header = RangeHeader(key, offset, length);
  if (Status t = AttachToken(header, key.container); !t.ok()) return done(t);
  rpc_->Call(target.address, static_cast<uint16_t>(ShardOp::kReadRange), header, {},
             [this, c = key.container, name = Name(target), done = std::move(done)](RpcReply r) {
               TokenRefused(r.status, c);
               if (!r.status.ok()) return done(r.status.WithContext(name));
               auto rh = DecodeHeader<ShardReplyHeader>(r.header, "read reply");
               if (!rh.ok()) return done(rh.status().WithContext(name));
               done(ShardData{std::move(r.payload), rh->shard_version, rh->length, r.placed});
             },
             Placed(std::move(into), into_at, length));
}

void ShardClient::StartDeleteTo(const TargetRef& target, const WireShardKey& key,
                                std::function<void(Status)> done, std::optional<uint64_t> if_version) {
  std::vector<std::byte> header = RequestHeader(ShardOp::kDelete, key, if_version.value_or(0), if_version ? kDeleteIfVersion : 0);
  if (Status t = AttachToken(header, key.container); !t.ok()) return done(t);
  rpc_->Call(target.address, static_cast<uint16_t>(ShardOp::kDelete), header, {},
             [this, c = key.container, name = Name(target), done = std::move(done)](RpcReply r) {
               TokenRefused(r.status, c);
               done(r.status.ok() ? OkStatus() : r.status.WithContext(name));
             });
}

Status ShardClient::WriteTo(const TargetRef& target, const WireShardKey& key, std::span<const std::byte> data,
                            uint64_t version, bool only_if_not_older) {
  return Await<Status>([&](auto done) { StartWriteTo(target, key, data, version, only_if_not_older, std::move(done)); });
}

Status ShardClient::DeleteTo(const TargetRef& target, const WireShardKey& key, std::optional<uint64_t> if_version) {
  return Await<Status>([&](auto done) { StartDeleteTo(target, key, std::move(done), if_version); });
}

void ShardClient::StartLockTo(const TargetRef& target, const WireShardKey& key, uint64_t owner,
                              std::chrono::milliseconds ttl, std::function<void(Result<bool>)> done) {
  std::vector<std::byte> header = Header({.op = ShardOp::kLockStripe, .key = key, .owner = owner, .ttl_ms = static_cast<uint32_t>(ttl.count())});
  if (Status t = AttachToken(header, key.container); !t.ok()) return done(t);
  rpc_->Call(target.address, static_cast<uint16_t>(ShardOp::kLockStripe), header, {},
             [this, c = key.container, name = Name(target), done = std::move(done)](RpcReply r) {
               TokenRefused(r.status, c);
               if (!r.status.ok()) return done(r.status.WithContext(name));
               if (r.header.empty()) return done(false);  // a target from before LockReplyHeader
               auto rh = DecodeHeader<LockReplyHeader>(r.header, "lock reply");
               if (!rh.ok()) return done(rh.status().WithContext(name));
               done((rh->flags & kLeaseRenewed) != 0);
             });
}

void ShardClient::StartUnlockTo(const TargetRef& target, const WireShardKey& key, uint64_t owner,
                                std::function<void(Status)> done) {
  std::vector<std::byte> header = Header({.op = ShardOp::kUnlockStripe, .key = key, .owner = owner});
  if (Status t = AttachToken(header, key.container); !t.ok()) return done(t);
  rpc_->Call(target.address, static_cast<uint16_t>(ShardOp::kUnlockStripe), header, {},
             [this, c = key.container, done = std::move(done)](RpcReply r) {
               TokenRefused(r.status, c);
               done(std::move(r.status));
             });
}

void ShardClient::StartStatTo(const TargetRef& target, const WireShardKey& key,
                              std::function<void(Result<ShardData>)> done) {
  std::vector<std::byte> header = RequestHeader(ShardOp::kStat, key, 0);
  if (Status t = AttachToken(header, key.container); !t.ok()) return done(t);
  rpc_->Call(target.address, static_cast<uint16_t>(ShardOp::kStat), header, {},
             [this, c = key.container, name = Name(target), done = std::move(done)](RpcReply r) {
               TokenRefused(r.status, c);
               if (!r.status.ok()) return done(r.status.WithContext(name));
               auto rh = DecodeHeader<ShardReplyHeader>(r.header, "stat reply");
               if (!rh.ok()) return done(rh.status().WithContext(name));
               ShardData d;
               d.version = rh->shard_version;
               d.length = rh->length;
               done(std::move(d));
             });
}

}  // namespace penstock

#include "client/shard_client.h"

#include <cstring>
#include <thread>

namespace penstock {

Result<TargetRef> ShardClient::Locate(const WireShardKey& key) const {
  return view_->Locate(PlacementKey{key.container, key.object_hi, key.object_lo, key.stripe});
}

std::string ShardClient::Describe(const WireShardKey& key) const {
  auto t = Locate(key);
  if (!t.ok()) return "no target";
  return "target " + std::to_string(t->id) + " (" + t->address + (t->up ? ")" : ", down)");
}

std::vector<std::byte> ShardClient::RequestHeader(const WireShardKey& key, uint64_t version) const {
  ShardRequestHeader h{};
  h.version = kShardProtocolVersion;
  h.map_epoch = view_->epoch();
  h.shard_version = version;
  h.key = key;
  return EncodeHeader(h);
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
                                    std::span<const std::byte> payload, uint64_t version) {
  auto first = std::chrono::steady_clock::now();
  for (int attempt = 0;; ++attempt) {
    RpcReply reply;
    auto target = Locate(key);
    if (!target.ok()) {
      reply.status = target.status();
    } else {
      reply = rpc_->CallSync(target->address, static_cast<uint16_t>(op), RequestHeader(key, version),
                             payload);
      if (!reply.status.ok() && reply.status.retryable()) {
        reply.status = reply.status.WithContext(Describe(key));
      }
    }
    if (reply.status.ok() || !ShouldRetry(reply.status, key, first, attempt)) return reply;
  }
}

Status ShardClient::Write(const WireShardKey& key, std::span<const std::byte> data, uint64_t version) {
  return CallWithRetry(key, ShardOp::kWrite, data, version).status;
}

Result<AlignedBuffer> ShardClient::Read(const WireShardKey& key) {
  RpcReply r = CallWithRetry(key, ShardOp::kRead, {}, 0);
  if (!r.status.ok()) return r.status;
  return std::move(r.payload);
}

Status ShardClient::Delete(const WireShardKey& key) {
  return CallWithRetry(key, ShardOp::kDelete, {}, 0).status;
}

Result<std::vector<ListEntry>> ShardClient::List(const TargetRef& target, uint64_t container,
                                                 uint8_t flags) {
  std::vector<ListEntry> all;
  ListRequestHeader h{};
  h.version = kShardProtocolVersion;
  h.flags = flags;
  h.limit = 1000;
  h.container = container;
  auto first = std::chrono::steady_clock::now();
  for (int attempt = 0;;) {
    h.map_epoch = view_->epoch();
    RpcReply r = rpc_->CallSync(target.address, static_cast<uint16_t>(ShardOp::kList),
                                EncodeHeader(h), {});
    if (!r.status.ok()) {
      if (BackoffAndRefresh(r.status, first, attempt++) && view_->IsUp(target.id)) continue;
      return r.status.WithContext("listing target " + std::to_string(target.id) + " (" +
                                  target.address + ")");
    }
    PS_ASSIGN_OR_RETURN(auto page, DecodeListEntries(r.payload.span()));
    bool more = page.size() == h.limit;
    if (!page.empty()) {
      h.start_after = page.back().key;
      h.flags |= kListHasStartAfter;
    }
    for (auto& e : page) all.push_back(std::move(e));
    if (!more) return all;
  }
}

void ShardClient::StartWrite(const WireShardKey& key, std::span<const std::byte> data,
                             uint64_t version, std::function<void(Status)> done) {
  auto target = Locate(key);
  if (!target.ok()) return done(target.status());
  rpc_->Call(target->address, static_cast<uint16_t>(ShardOp::kWrite), RequestHeader(key, version),
             data, [done = std::move(done)](RpcReply r) { done(std::move(r.status)); });
}

void ShardClient::StartRead(const WireShardKey& key,
                            std::function<void(Result<AlignedBuffer>)> done) {
  auto target = Locate(key);
  if (!target.ok()) return done(target.status());
  rpc_->Call(target->address, static_cast<uint16_t>(ShardOp::kRead), RequestHeader(key, 0), {},
             [done = std::move(done)](RpcReply r) {
               if (!r.status.ok()) return done(std::move(r.status));
               done(std::move(r.payload));
             });
}

void ShardClient::StartReadRange(const WireShardKey& key, uint64_t offset, uint64_t length,
                                 std::function<void(Result<AlignedBuffer>)> done) {
  auto target = Locate(key);
  if (!target.ok()) return done(target.status());
  RangeReadHeader h{};
  std::vector<std::byte> base = RequestHeader(key, 0);
  std::memcpy(&h.base, base.data(), sizeof(h.base));
  h.offset = offset;
  h.length = length;
  rpc_->Call(target->address, static_cast<uint16_t>(ShardOp::kReadRange), EncodeHeader(h), {},
             [done = std::move(done)](RpcReply r) {
               if (!r.status.ok()) return done(std::move(r.status));
               done(std::move(r.payload));
             });
}

}  // namespace penstock

// fake_shard_transport.h — an in-memory stand-in for targets, for client unit tests.
//
// Implements RpcCaller by serving the shard protocol (write, read, read_range, delete, stat)
// from a map, with replies delivered on its own thread like a real transport. Tests can hold
// replies (to cancel or expire operations while requests are in flight), make the next calls
// of an opcode fail, and count calls. Thread-safe. Test-only.
#pragma once

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "client/rpc_caller.h"
#include "protocol/shard_protocol.h"

namespace penstock::testing {

class FakeShardTransport : public RpcCaller {
 public:
  FakeShardTransport() : thread_([this] { Run(); }) {}
  ~FakeShardTransport() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      held_ = false;
    }
    cv_.notify_all();
    thread_.join();
  }

  void Call(const std::string& address, uint16_t opcode, std::span<const std::byte> header,
            std::span<const std::byte> payload, std::function<void(RpcReply)> done) override {
    RpcReply reply;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto dead = dead_.find(address);
      if (dead != dead_.end()) reply.status = dead->second;
    }
    if (reply.status.ok()) reply = Serve(opcode, header, payload);  // applied at once, in order
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++calls_[opcode];
      queue_.emplace_back(std::move(reply), std::move(done));
    }
    cv_.notify_all();
  }

  // While held, replies queue up undelivered.
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = true;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_ = false;
    }
    cv_.notify_all();
  }
  // Waits until every queued reply has been delivered.
  void Drain() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return queue_.empty() && !delivering_; });
  }
  // The next `n` calls of `op` fail with `s` (nothing is applied).
  void FailNext(ShardOp op, Status s, int n = 1) {
    std::lock_guard<std::mutex> lock(mu_);
    failures_[static_cast<uint16_t>(op)] = {std::move(s), n};
  }
  // Every call to `address` fails with `s` (a dead target) until Revive(address).
  void Kill(const std::string& address, Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    dead_[address] = std::move(s);
  }
  void Revive(const std::string& address) {
    std::lock_guard<std::mutex> lock(mu_);
    dead_.erase(address);
  }
  // Reads of the shard (container, object, stripe, shard) fail their checksum until rewritten.
  void Corrupt(uint64_t container, uint64_t hi, uint64_t lo, uint64_t stripe, uint32_t shard) {
    std::lock_guard<std::mutex> lock(data_mu_);
    shards_[{container, hi, lo, stripe, shard}].corrupt = true;
  }
  // Version stored with a shard (0 when absent).
  uint64_t Version(uint64_t container, uint64_t hi, uint64_t lo, uint64_t stripe, uint32_t shard) {
    std::lock_guard<std::mutex> lock(data_mu_);
    auto it = shards_.find({container, hi, lo, stripe, shard});
    return it == shards_.end() ? 0 : it->second.version;
  }
  bool Has(uint64_t container, uint64_t hi, uint64_t lo, uint64_t stripe, uint32_t shard) {
    std::lock_guard<std::mutex> lock(data_mu_);
    return shards_.count({container, hi, lo, stripe, shard}) != 0;
  }
  int calls(ShardOp op) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[static_cast<uint16_t>(op)];
  }

 private:
  using Key = std::tuple<uint64_t, uint64_t, uint64_t, uint64_t, uint32_t>;

  struct Shard;
  static std::vector<std::byte> ReplyHeader(const Shard& shard) {
    ShardReplyHeader rh{};
    rh.version = kShardProtocolVersion;
    rh.length = shard.bytes.size();
    rh.shard_version = shard.version;
    return EncodeHeader(rh);
  }

  RpcReply Serve(uint16_t opcode, std::span<const std::byte> header, std::span<const std::byte> payload) {
    RpcReply r;
    std::lock_guard<std::mutex> lock(data_mu_);
    {
      std::lock_guard<std::mutex> l2(mu_);
      auto f = failures_.find(opcode);
      if (f != failures_.end() && f->second.second > 0) {
        --f->second.second;
        r.status = f->second.first;
        return r;
      }
    }
    auto h = DecodeHeader<ShardRequestHeader>(header, "fake");
    if (!h.ok()) {
      r.status = h.status();
      return r;
    }
    Key key{h->key.container, h->key.object_hi, h->key.object_lo, h->key.stripe, h->key.shard};
    switch (static_cast<ShardOp>(opcode)) {
      case ShardOp::kWrite: {
        auto it = shards_.find(key);
        if ((h->flags & kWriteIfNotOlder) && it != shards_.end() && it->second.version > h->shard_version) {
          r.status = Aborted("fake: newer version stored");
          break;
        }
        auto& s = shards_[key];
        s.bytes.assign(payload.begin(), payload.end());
        s.version = h->shard_version;
        s.corrupt = false;
        break;
      }
      case ShardOp::kRead:
      case ShardOp::kReadRange: {
        auto it = shards_.find(key);
        if (it == shards_.end()) {
          r.status = NotFound("fake: no such shard");
          break;
        }
        if (it->second.corrupt) {
          r.status = DataLoss("fake: checksum mismatch");
          break;
        }
        r.header = ReplyHeader(it->second);
        uint64_t begin = 0, end = it->second.bytes.size();
        if (static_cast<ShardOp>(opcode) == ShardOp::kReadRange) {
          auto rh = DecodeHeader<RangeReadHeader>(header, "fake range");
          begin = std::min<uint64_t>(rh->offset, end);
          end = std::min<uint64_t>(end, begin + rh->length);
        }
        r.payload = AlignedBuffer::CopyOf(std::span(it->second.bytes).subspan(begin, end - begin));
        break;
      }
      case ShardOp::kStat: {
        auto it = shards_.find(key);
        if (it == shards_.end()) {
          r.status = NotFound("fake: no such shard");
          break;
        }
        r.header = ReplyHeader(it->second);
        break;
      }
      case ShardOp::kDelete:
        if (shards_.erase(key) == 0) r.status = NotFound("fake: no such shard");
        break;
      default:
        r.status = Unimplemented("fake: opcode " + std::to_string(opcode));
    }
    return r;
  }

  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stopping_ || (!held_ && !queue_.empty()); });
      if (queue_.empty() && stopping_) return;
      auto [reply, done] = std::move(queue_.front());
      queue_.pop_front();
      delivering_ = true;
      lock.unlock();
      done(std::move(reply));
      lock.lock();
      delivering_ = false;
      cv_.notify_all();
    }
  }

  struct Shard {
    std::vector<std::byte> bytes;
    uint64_t version = 0;
    bool corrupt = false;
  };
  std::mutex data_mu_;
  std::map<Key, Shard> shards_;  // guarded by data_mu_

  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  bool stopping_ = false;
  bool delivering_ = false;
  std::deque<std::pair<RpcReply, std::function<void(RpcReply)>>> queue_;
  std::map<uint16_t, std::pair<Status, int>> failures_;
  std::map<std::string, Status> dead_;
  std::map<uint16_t, int> calls_;
  std::thread thread_;
};

}  // namespace penstock::testing

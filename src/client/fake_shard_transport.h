// fake_shard_transport.h — an in-memory stand-in for targets, for client unit tests.
//
// Implements RpcCaller by serving the shard protocol (write, write_range, read, read_range,
// delete, stat, stripe leases) from a map, with replies delivered on its own thread like a real
// transport. A reply payload goes into the call's ReplyDestination when it lends memory (as the
// UCX client does). Tests can hold replies (to cancel or expire operations while requests are
// in flight), hold placements (the bytes are placed but the memory is not returned yet: a
// transfer in flight), make the next calls of an opcode fail, and count calls. A call given up
// (CallAbandon) whose reply a Stall holds is answered at once with the reason. Thread-safe.
// Test-only.
#pragma once

#include <algorithm>
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
            std::span<const std::byte> payload, std::function<void(RpcReply)> done,
            std::shared_ptr<ReplyDestination> into = nullptr,
            std::shared_ptr<CallAbandon> abandon = nullptr) override {
    RpcReply reply;
    std::function<void()> before;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto dead = dead_.find(address);
      if (dead != dead_.end()) reply.status = dead->second;
      auto b = before_.find(opcode);
      if (b != before_.end() && --b->second.first == 0) {
        before = std::move(b->second.second);
        before_.erase(b);
      }
    }
    if (before) before();
    if (reply.status.ok()) reply = Serve(opcode, header, payload);  // applied at once, in order
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++calls_[opcode];
      auto& to = stalled_.count(address) ? stalled_[address] : queue_;
      to.push_back({std::move(reply), std::move(done), std::move(into), {}, abandon});
    }
    cv_.notify_all();
    if (abandon) {
      abandon->Bind([this, call = abandon.get()](const Status& why) { GiveUp(call, why); });
    }
  }

  // Calls to `address` are served but their replies wait (a stopped target: a gray failure)
  // until Unstall(address) delivers them.
  void Stall(const std::string& address) {
    std::lock_guard<std::mutex> lock(mu_);
    stalled_[address];
  }
  // Calls to `address` whose replies a Stall holds now.
  size_t stalled_calls(const std::string& address) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = stalled_.find(address);
    return it == stalled_.end() ? 0 : it->second.size();
  }
  void Unstall(const std::string& address) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = stalled_.find(address);
      if (it == stalled_.end()) return;
      for (auto& p : it->second) queue_.push_back(std::move(p));
      stalled_.erase(it);
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
  // While placements are held, a reply placed into a destination keeps its memory (no Return,
  // no delivery) until ReleasePlacements().
  void HoldPlacements() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_placements_ = true;
  }
  void ReleasePlacements() {
    std::vector<Pending> lent;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hold_placements_ = false;
      lent.swap(lent_);
    }
    for (auto& p : lent) Place(p);
  }
  // Transfers into destinations not yet ended (held placements).
  size_t placements_held() {
    std::lock_guard<std::mutex> lock(mu_);
    return lent_.size();
  }
  // Reply payload bytes placed into destinations so far.
  uint64_t placed_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return placed_bytes_;
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
  // Runs `fn` once, on the calling thread with no lock held, before the `nth` next call of `op`
  // is served (to change the store between two steps of an operation).
  void BeforeCall(ShardOp op, int nth, std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    before_[static_cast<uint16_t>(op)] = {nth, std::move(fn)};
  }
  // Forgets every stripe lease, as a target restart does.
  void DropLeases() {
    std::lock_guard<std::mutex> lock(data_mu_);
    leases_.clear();
  }
  // Stores a shard as another client's write would.
  void Put(uint64_t container, uint64_t hi, uint64_t lo, uint64_t stripe, uint32_t shard, std::vector<std::byte> bytes,
           uint64_t version) {
    std::lock_guard<std::mutex> lock(data_mu_);
    shards_[{container, hi, lo, stripe, shard}] = {std::move(bytes), version, false};
  }
  // Removes a shard, as another client's delete (a truncate) would.
  void Erase(uint64_t container, uint64_t hi, uint64_t lo, uint64_t stripe, uint32_t shard) {
    std::lock_guard<std::mutex> lock(data_mu_);
    shards_.erase({container, hi, lo, stripe, shard});
  }
  // The stripe's write lease held by `owner` (another client), or released (owner 0).
  void LeaseAs(uint64_t container, uint64_t hi, uint64_t lo, uint64_t stripe, uint64_t owner) {
    std::lock_guard<std::mutex> lock(data_mu_);
    if (owner == 0) {
      leases_.erase({container, hi, lo, stripe, 0});
    } else {
      leases_[{container, hi, lo, stripe, 0}] = owner;
    }
  }
  // Grants answer as targets from before LockReplyHeader do: no reply header, never "renewed".
  void set_legacy_leases(bool legacy) {
    std::lock_guard<std::mutex> lock(data_mu_);
    legacy_leases_ = legacy;
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
  // Bytes stored for a shard (empty when absent).
  std::vector<std::byte> Stored(uint64_t container, uint64_t hi, uint64_t lo, uint64_t stripe, uint32_t shard) {
    std::lock_guard<std::mutex> lock(data_mu_);
    auto it = shards_.find({container, hi, lo, stripe, shard});
    return it == shards_.end() ? std::vector<std::byte>{} : it->second.bytes;
  }
  bool Has(uint64_t container, uint64_t hi, uint64_t lo, uint64_t stripe, uint32_t shard) {
    std::lock_guard<std::mutex> lock(data_mu_);
    return shards_.count({container, hi, lo, stripe, shard}) != 0;
  }
  // Reads of data shards (not heads) served so far.
  int data_reads() {
    std::lock_guard<std::mutex> lock(data_mu_);
    return data_reads_;
  }
  int lease_conflicts() {
    std::lock_guard<std::mutex> lock(data_mu_);
    return lease_conflicts_;
  }
  int calls(ShardOp op) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[static_cast<uint16_t>(op)];
  }

 private:
  struct Pending {
    RpcReply reply;
    std::function<void(RpcReply)> done;
    std::shared_ptr<ReplyDestination> into;
    std::vector<std::span<std::byte>> spans;  // lent by `into`
    std::shared_ptr<CallAbandon> abandon;
  };

  // A stalled reply of the call `call` gives up goes now, with `why`.
  void GiveUp(const CallAbandon* call, const Status& why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [address, pending] : stalled_) {
        auto it = std::find_if(pending.begin(), pending.end(), [&](const Pending& p) { return p.abandon.get() == call; });
        if (it == pending.end()) continue;
        it->reply = RpcReply{};
        it->reply.status = why;
        queue_.push_back(std::move(*it));
        pending.erase(it);
        break;
      }
    }
    cv_.notify_all();
  }
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
      case ShardOp::kWriteRange: {
        auto wh = DecodeHeader<RangeWriteHeader>(header, "fake range write");
        if (!wh.ok()) {
          r.status = wh.status();
          break;
        }
        auto it = shards_.find(key);
        const uint64_t stored = it == shards_.end() ? 0 : it->second.version;
        if ((h->flags & kWriteIfVersion) && stored > wh->expected_version) {
          r.status = Aborted("fake: newer version stored");
          break;
        }
        if ((h->flags & kWriteIfVersion) && stored < wh->expected_version) {
          r.status = FailedPrecondition("fake: older version stored");
          break;
        }
        auto& s = shards_[key];
        if (s.bytes.size() < wh->offset + payload.size()) s.bytes.resize(wh->offset + payload.size());
        std::copy(payload.begin(), payload.end(), s.bytes.begin() + static_cast<ptrdiff_t>(wh->offset));
        s.version = h->shard_version;
        break;
      }
      case ShardOp::kRead:
      case ShardOp::kReadRange: {
        if (h->key.stripe != UINT64_MAX) ++data_reads_;
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
      case ShardOp::kDelete: {
        auto it = shards_.find(key);
        if (it == shards_.end()) {
          r.status = NotFound("fake: no such shard");
        } else if ((h->flags & kDeleteIfVersion) && it->second.version != h->shard_version) {
          r.status = Aborted("fake: the shard was rewritten");
        } else {
          shards_.erase(it);
        }
        break;
      }
      case ShardOp::kLockStripe:
      case ShardOp::kUnlockStripe: {  // leases without expiry: tests release them
        auto lh = DecodeHeader<LockRequestHeader>(header, "fake lock");
        if (!lh.ok()) {
          r.status = lh.status();
          break;
        }
        const Key stripe{h->key.container, h->key.object_hi, h->key.object_lo, h->key.stripe, 0};
        auto it = leases_.find(stripe);
        if (static_cast<ShardOp>(opcode) == ShardOp::kUnlockStripe) {
          if (it != leases_.end() && it->second == lh->owner) leases_.erase(it);
        } else if (it != leases_.end() && it->second != lh->owner) {
          r.status = Aborted("fake: stripe leased by another writer");
          ++lease_conflicts_;
        } else {
          LockReplyHeader rh{};
          rh.version = kShardProtocolVersion;
          rh.flags = it != leases_.end() ? kLeaseRenewed : 0;
          if (!legacy_leases_) r.header = EncodeHeader(rh);
          leases_[stripe] = lh->owner;
        }
        break;
      }
      default:
        r.status = Unimplemented("fake: opcode " + std::to_string(opcode));
    }
    return r;
  }

  // Writes a reply's payload into the memory its destination lent (a held one only now, as a
  // late transfer would), returns the memory and delivers the reply.
  static void Place(Pending& p) {
    size_t at = 0;
    for (auto piece : p.spans) {
      std::memcpy(piece.data(), p.reply.payload.data() + at, piece.size());
      at += piece.size();
    }
    p.reply.placed = p.reply.payload.size();
    p.reply.payload = AlignedBuffer();
    p.into->Return(true);
    p.done(std::move(p.reply));
  }

  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stopping_ || (!held_ && !queue_.empty()); });
      if (queue_.empty() && stopping_) return;
      Pending p = std::move(queue_.front());
      queue_.pop_front();
      delivering_ = true;
      lock.unlock();
      if (p.abandon) p.abandon->Unbind();  // ending: a GiveUp from now on does nothing
      std::vector<std::span<std::byte>> spans;
      const size_t n = p.reply.payload.size();
      if (p.into != nullptr && n > 0) spans = p.into->Borrow(n);
      if (!spans.empty()) {
        p.spans = std::move(spans);
        lock.lock();
        placed_bytes_ += n;
        const bool hold = hold_placements_;
        if (hold) lent_.push_back(std::move(p));
        lock.unlock();
        if (!hold) Place(p);
      } else {
        p.done(std::move(p.reply));
      }
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
  std::map<Key, uint64_t> leases_;  // stripe -> owner, guarded by data_mu_
  int lease_conflicts_ = 0;         // guarded by data_mu_
  bool legacy_leases_ = false;      // guarded by data_mu_
  int data_reads_ = 0;              // guarded by data_mu_

  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  bool stopping_ = false;
  bool delivering_ = false;
  std::deque<Pending> queue_;
  std::map<std::string, std::deque<Pending>> stalled_;  // guarded by mu_: replies of stalled targets
  bool hold_placements_ = false;
  std::vector<Pending> lent_;
  uint64_t placed_bytes_ = 0;
  std::map<uint16_t, std::pair<Status, int>> failures_;
  std::map<std::string, Status> dead_;
  std::map<uint16_t, int> calls_;
  std::map<uint16_t, std::pair<int, std::function<void()>>> before_;  // see BeforeCall
  std::thread thread_;
};

}  // namespace penstock::testing

#include "target/shard_service.h"

#include <chrono>
#include <cstring>

#include "common/log.h"
#include "protocol/object_head.h"
#include "protocol/shard_protocol.h"

namespace penstock {

namespace {

ShardKey FromWire(const WireShardKey& k) {
  ShardKey key;
  key.container = k.container;
  key.object = ObjectId{k.object_hi, k.object_lo};
  key.stripe = k.stripe;
  key.shard = k.shard;
  return key;
}

WireShardKey ToWire(const ShardKey& k) {
  return WireShardKey{k.container, k.object.hi, k.object.lo, k.stripe, k.shard, 0};
}

RpcReply ErrorReply(Status s) {
  RpcReply r;
  r.status = std::move(s);
  return r;
}

// A range write's version condition: the stored version it patches, when kWriteIfVersion.
std::optional<uint64_t> ExpectedVersion(const RangeWriteHeader& h) {
  if (h.base.flags & kWriteIfVersion) return h.expected_version;
  return std::nullopt;
}

// A conditional patch must raise the version: at the same or a lower one, the copies it
// misses would look as new as the patched ones (and a reader or repair could take them).
Status PatchRaisesVersion(const RangeWriteHeader& h) {
  std::optional<uint64_t> expected = ExpectedVersion(h);
  if (!expected || h.base.shard_version > *expected) return OkStatus();
  return InvalidArgument("range write with version " + std::to_string(h.base.shard_version) + " over version " +
                         std::to_string(*expected) + ": a patch must raise the version");
}

}  // namespace

ShardService::ShardService(Engine* engine, MetricsRegistry* metrics, unsigned io_threads)
    : engine_(engine), metrics_(metrics), pool_(io_threads, "ps-io") {
  // Every series exists from the start, so a scrape before the first request sees zeros.
  for (ShardOp op : {ShardOp::kWrite, ShardOp::kRead, ShardOp::kDelete, ShardOp::kStat, ShardOp::kList,
                     ShardOp::kReadRange, ShardOp::kLockStripe, ShardOp::kUnlockStripe, ShardOp::kWriteRange,
                     ShardOp::kRewrite}) {
    const auto code = static_cast<uint16_t>(op);
    std::string name(ShardOpName(code));
    op_metrics_[code].ops = &metrics_->GetCounter("penstock_target_ops_total", "Shard operations served.", {{"op", name}});
    op_metrics_[code].seconds =
        &metrics_->GetHistogram("penstock_target_op_seconds", "Shard operation latency.", {{"op", name}});
  }
  bytes_written_ = &metrics_->GetCounter("penstock_target_bytes_written_total", "Shard bytes written.");
  bytes_read_ = &metrics_->GetCounter("penstock_target_bytes_read_total", "Shard bytes read.");
}

void ShardService::Handle(RpcRequest request, Responder respond) {
  // Leases touch only memory: answered at once, without the hop to an I/O thread.
  if (request.opcode == static_cast<uint16_t>(ShardOp::kLockStripe) ||
      request.opcode == static_cast<uint16_t>(ShardOp::kUnlockStripe)) {
    return respond(Execute(request));
  }
  auto shared = std::make_shared<RpcRequest>(std::move(request));
  // Range writes of whole blocks are queued with the engine's group commit from this thread
  // and answered from its completion: no I/O thread takes part, so as many as arrive can share
  // a flush, and each costs no hand-off to the pool.
  if (shared->opcode == static_cast<uint16_t>(ShardOp::kWriteRange) && StartWriteRange(shared, respond)) return;
  if ((shared->opcode == static_cast<uint16_t>(ShardOp::kWrite) ||
       shared->opcode == static_cast<uint16_t>(ShardOp::kRewrite)) &&
      StartWrite(shared, respond)) {
    return;
  }
  // So are reads whose shard record is in memory and whose bytes are one device read: the
  // reply is sent from the device's completion.
  if ((shared->opcode == static_cast<uint16_t>(ShardOp::kRead) ||
       shared->opcode == static_cast<uint16_t>(ShardOp::kReadRange)) &&
      StartRead(shared, respond)) {
    return;
  }
  Submit([this, shared, respond = std::move(respond)]() mutable { respond(Execute(*shared)); });
}

void ShardService::Submit(std::function<void()> task) {
  Hold();
  pool_.Submit([this, task = std::move(task)] {
    task();
    Unhold();
  });
}

void ShardService::Hold() {
  std::lock_guard<std::mutex> lock(work_mu_);
  ++outstanding_;
}

void ShardService::Unhold() {
  std::lock_guard<std::mutex> lock(work_mu_);
  if (--outstanding_ == 0) work_cv_.notify_all();
}

ShardService::~ShardService() {
  // Queued requests and the engine's completions of asynchronous writes call into this service
  // (and a completion may queue a request again): wait until none is left. The engine
  // outlives the service.
  std::unique_lock<std::mutex> lock(work_mu_);
  work_cv_.wait(lock, [this] { return outstanding_ == 0; });
}

void ShardService::SetKeySet(CapabilityKeySet keys) {
  auto p = std::make_shared<const CapabilityKeySet>(std::move(keys));
  std::lock_guard<std::mutex> lock(keys_mu_);
  keys_ = std::move(p);
}

void ShardService::SetPlacementEpoch(uint64_t epoch) { placement_epoch_.store(epoch, std::memory_order_relaxed); }

void ShardService::SetLost() { lost_.store(true); }

Status ShardService::CheckEpoch(const RpcRequest& request) const {
  const size_t fixed = RequestHeaderSize(request.opcode);
  if (fixed == 0 || request.header.size() < fixed) return OkStatus();  // answered by Execute
  if (lost_.load()) {
    return Unavailable(std::string(kStaleMapRefusal) + ": this target was declared lost and its shards are "
                       "rebuilt elsewhere; refresh the cluster map from mgmt and retry");
  }
  uint64_t map_epoch;
  std::memcpy(&map_epoch, request.header.data() + kMapEpochOffset, sizeof(map_epoch));
  const uint64_t placement = placement_epoch();
  if (map_epoch >= placement) return OkStatus();
  return Unavailable(std::string(kStaleMapRefusal) + ": the request was placed with map epoch " +
                     std::to_string(map_epoch) + ", but placement changed at epoch " + std::to_string(placement) +
                     "; refresh the cluster map from mgmt and retry");
}

Status ShardService::Authorize(const RpcRequest& request) const {
  const size_t fixed = RequestHeaderSize(request.opcode);
  if (fixed == 0) return OkStatus();  // unknown opcode: answered by Execute
  std::shared_ptr<const CapabilityKeySet> keys;
  {
    std::lock_guard<std::mutex> lock(keys_mu_);
    keys = keys_;
  }
  if (!keys) return Unavailable("target has not received the cluster keys from mgmt yet; retry");
  if (request.header.size() < fixed) {
    return InvalidArgument(std::string(ShardOpName(request.opcode)) + " header truncated: " +
                           std::to_string(request.header.size()) + " bytes, need " + std::to_string(fixed));
  }
  auto token = RequestCapability(request.header, fixed);
  if (!token.ok()) return token.status();
  if (token->empty()) {
    if (!keys->auth_enabled) return OkStatus();
    return Unauthenticated("this cluster requires a capability token on every shard request; "
                           "pass an API key (--api-key / PENSTOCK_API_KEY)");
  }
  uint64_t container = 0;
  uint8_t right = kRightRead;
  switch (static_cast<ShardOp>(request.opcode)) {
    case ShardOp::kList: {
      ListRequestHeader h;
      std::memcpy(&h, request.header.data(), sizeof(h));
      container = h.container;
      break;
    }
    case ShardOp::kWrite:
    case ShardOp::kWriteRange:
    case ShardOp::kRewrite:
    case ShardOp::kDelete:
    case ShardOp::kLockStripe:
    case ShardOp::kUnlockStripe: right = kRightWrite; [[fallthrough]];
    default: {
      ShardRequestHeader h;
      std::memcpy(&h, request.header.data(), sizeof(h));
      container = h.key.container;
    }
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  return VerifyCapability(*token, *keys, container, right, now).status();
}

Status ShardService::CheckDeadline(const RpcRequest& request) const {
  const size_t fixed = RequestHeaderSize(request.opcode);
  if (fixed == 0 || request.header.size() < fixed || request.opcode == static_cast<uint16_t>(ShardOp::kList)) {
    return OkStatus();  // answered by Execute; a list has no deadline
  }
  uint32_t deadline_s;
  std::memcpy(&deadline_s, request.header.data() + kDeadlineOffset, sizeof(deadline_s));
  if (deadline_s == 0) return OkStatus();
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return CheckRequestDeadline(deadline_s, now_s);
}

Status ShardService::Admit(const RpcRequest& request) {
  if (Status late = CheckDeadline(request); !late.ok()) {
    metrics_
        ->GetCounter("penstock_target_late_requests_total",
                     "Shard requests refused because they arrived after their client's deadline.")
        .Inc();
    // Logged at most every 10 s: with skewed clocks every request is refused.
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::steady_clock::now().time_since_epoch()).count();
    int64_t last = last_late_log_s_.load(std::memory_order_relaxed);
    if (now - last >= 10 && last_late_log_s_.compare_exchange_strong(last, now)) {
      PS_LOG_WARN("refused a {} request: {}", ShardOpName(request.opcode), late.message());
    }
    return late;
  }
  if (Status auth = Authorize(request); !auth.ok()) {
    metrics_
        ->GetCounter("penstock_target_auth_refusals_total", "Shard requests refused by the capability check.",
                     {{"code", std::string(StatusCodeName(auth.code()))}})
        .Inc();
    return auth;
  }
  if (Status fresh = CheckEpoch(request); !fresh.ok()) {
    metrics_
        ->GetCounter("penstock_target_stale_map_refusals_total",
                     "Shard requests refused because the client's cluster map predates a placement change.")
        .Inc();
    return fresh;
  }
  return OkStatus();
}

void ShardService::Account(uint16_t opcode, std::chrono::steady_clock::time_point start, const Status& status) {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (opcode < op_metrics_.size() && op_metrics_[opcode].ops) {  // looked up once, at construction
    op_metrics_[opcode].ops->Inc();
    op_metrics_[opcode].seconds->Observe(secs);
  } else {
    const std::string op(ShardOpName(opcode));
    metrics_->GetCounter("penstock_target_ops_total", "Shard operations served.", {{"op", op}}).Inc();
    metrics_->GetHistogram("penstock_target_op_seconds", "Shard operation latency.", {{"op", op}}).Observe(secs);
  }
  if (!status.ok()) {
    metrics_
        ->GetCounter("penstock_target_op_errors_total", "Shard operations that failed.",
                     {{"op", std::string(ShardOpName(opcode))}, {"code", std::string(StatusCodeName(status.code()))}})
        .Inc();
  }
}

RpcReply ShardService::Execute(const RpcRequest& request) {
  auto start = std::chrono::steady_clock::now();
  RpcReply reply;
  if (Status admitted = Admit(request); !admitted.ok()) {
    reply = ErrorReply(std::move(admitted));
  } else switch (static_cast<ShardOp>(request.opcode)) {
    case ShardOp::kWrite: reply = Write(request); break;
    case ShardOp::kRead: reply = Read(request); break;
    case ShardOp::kDelete: reply = Delete(request); break;
    case ShardOp::kStat: reply = Stat(request); break;
    case ShardOp::kList: reply = List(request); break;
    case ShardOp::kReadRange: reply = ReadRange(request); break;
    case ShardOp::kLockStripe: reply = Lease(request, true); break;
    case ShardOp::kUnlockStripe: reply = Lease(request, false); break;
    case ShardOp::kWriteRange: reply = WriteRange(request); break;
    case ShardOp::kRewrite: reply = Write(request); break;
    default:
      reply = ErrorReply(InvalidArgument("unknown shard opcode " + std::to_string(request.opcode) +
                                         "; client and target versions differ?"));
  }
  Account(request.opcode, start, reply.status);
  return reply;
}

bool ShardService::Refused(const RpcRequest& request, const Responder& respond,
                           std::chrono::steady_clock::time_point start) {
  Status admitted = Admit(request);
  if (admitted.ok()) return false;
  Account(request.opcode, start, admitted);
  respond(ErrorReply(std::move(admitted)));
  return true;
}

bool ShardService::StartWriteRange(const std::shared_ptr<RpcRequest>& request, const Responder& respond) {
  auto h = DecodeHeader<RangeWriteHeader>(request->header, "write_range");
  const uint64_t size = request->payload.size();
  if (!h.ok() || !Engine::WholeBlocks(h->offset, size) || !PatchRaisesVersion(*h).ok()) {
    return false;  // partial blocks, malformed or refused: Execute, blocking (it answers)
  }
  const auto start = std::chrono::steady_clock::now();
  if (Refused(*request, respond, start)) return true;
  Hold();
  std::function<void(Status)> done = [this, request, respond, start, size](Status s) {
    if (Engine::MustRewriteWhole(s)) {
      // Too many runs: the shard must be rewritten whole, blocking (the condition is checked
      // again there).
      Submit([this, request, respond] { respond(Execute(*request)); });
    } else {
      if (s.ok()) CountWritten(size);
      Account(request->opcode, start, s);
      respond(ErrorReply(std::move(s)));
    }
    Unhold();
  };
  if (engine_->TryWriteRangeAsync(FromWire(h->base.key), h->offset, request->payload.span(), h->base.shard_version,
                                  done, ExpectedVersion(*h))) {
    return true;
  }
  Unhold();  // space must be made first (GC, an index sync): Execute, blocking, on an I/O thread
  return false;
}

Result<ShardService::WholeWrite> ShardService::WholeWriteOf(const RpcRequest& request) {
  WholeWrite w;
  if (request.opcode == static_cast<uint16_t>(ShardOp::kRewrite)) {
    PS_ASSIGN_OR_RETURN(RangeWriteHeader h, RewriteHeader(request));
    w.key = FromWire(h.base.key);
    w.version = h.base.shard_version;
    w.expected = h.expected_version;
    return w;
  }
  PS_ASSIGN_OR_RETURN(ShardRequestHeader h, DecodeHeader<ShardRequestHeader>(request.header, "write"));
  w.key = FromWire(h.key);
  w.version = h.shard_version;
  w.not_older = (h.flags & kWriteIfNotOlder) != 0;
  w.return_replaced = (h.flags & kWriteReturnReplaced) != 0;
  return w;
}

bool ShardService::StartWrite(const std::shared_ptr<RpcRequest>& request, const Responder& respond) {
  auto w = WholeWriteOf(*request);
  if (!w.ok()) return false;  // malformed: Execute answers
  const auto start = std::chrono::steady_clock::now();
  if (Refused(*request, respond, start)) return true;
  if (!w->return_replaced) return QueueWrite(request, *w, respond, start, RpcReply{});
  // What it replaces first: from the record in memory and one device read (else Execute
  // reads and writes, blocking), then the write from the read's completion.
  Hold();
  Engine::ReadDone read = [this, request, w = *w, respond, start](Result<AlignedBuffer> prefix, ShardInfo info) {
    if (!QueueWrite(request, w, respond, start, ReplacedReply(std::move(prefix), info))) {
      Submit([this, request, respond] { respond(Execute(*request)); });
    }
    Unhold();
  };
  if (engine_->TryReadRangeAsync(w->key, 0, kHeadPrefixBytes, read)) return true;
  Unhold();
  return false;
}

bool ShardService::QueueWrite(const std::shared_ptr<RpcRequest>& request, const WholeWrite& w,
                              const Responder& respond, std::chrono::steady_clock::time_point start, RpcReply reply) {
  Hold();
  auto answer = std::make_shared<RpcReply>(std::move(reply));
  std::function<void(Status)> done = [this, request, respond, start, answer](Status s) {
    if (s.ok()) CountWritten(request->payload.size());
    Account(request->opcode, start, s);
    respond(s.ok() ? std::move(*answer) : ErrorReply(std::move(s)));
    Unhold();
  };
  if (engine_->TryWriteAsync(w.key, request->payload.span(), w.version, w.not_older, done, w.expected)) {
    return true;
  }
  Unhold();  // space must be made first: Execute, blocking, on an I/O thread
  return false;
}

bool ShardService::StartRead(const std::shared_ptr<RpcRequest>& request, const Responder& respond) {
  ShardKey key;
  uint64_t offset = 0, length = UINT64_MAX;
  if (request->opcode == static_cast<uint16_t>(ShardOp::kRead)) {
    auto h = DecodeHeader<ShardRequestHeader>(request->header, "read");
    if (!h.ok()) return false;  // malformed: Execute answers
    key = FromWire(h->key);
  } else {
    auto h = DecodeHeader<RangeReadHeader>(request->header, "read_range");
    if (!h.ok()) return false;
    key = FromWire(h->base.key);
    offset = h->offset;
    length = h->length;
  }
  const auto start = std::chrono::steady_clock::now();
  if (Refused(*request, respond, start)) return true;
  Hold();
  Engine::ReadDone done = [this, opcode = request->opcode, respond, start](Result<AlignedBuffer> data,
                                                                           ShardInfo info) {
    RpcReply reply = ReadReply(std::move(data), info);
    Account(opcode, start, reply.status);
    respond(std::move(reply));
    Unhold();
  };
  if (engine_->TryReadRangeAsync(key, offset, length, done)) return true;
  Unhold();  // it would wait: Execute, on an I/O thread
  return false;
}

RpcReply ShardService::Write(const RpcRequest& request) {
  auto w = WholeWriteOf(request);
  if (!w.ok()) return ErrorReply(w.status());
  RpcReply reply;
  if (w->return_replaced) reply = ReplacedReply(w->key);
  // kWriteIfNotOlder and kRewrite's expected version: the engine's committer decides them in
  // order with every other write of the key (newer stored: kAborted).
  Status s = engine_->Write(w->key, request.payload.span(), w->version, w->not_older, w->expected);
  if (!s.ok()) return ErrorReply(std::move(s));
  CountWritten(request.payload.size());
  return reply;
}

RpcReply ShardService::ReplacedReply(const ShardKey& key) {
  ShardInfo info;
  auto prefix = engine_->ReadRange(key, 0, kHeadPrefixBytes, &info);
  return ReplacedReply(std::move(prefix), info);
}

RpcReply ShardService::ReplacedReply(Result<AlignedBuffer> prefix, const ShardInfo& info) {
  RpcReply reply;
  // Unreadable (a checksum failure): the write still replaces it, and the reply says nothing
  // of it (no header), as an older target's would.
  if (!prefix.ok() && prefix.status().code() != StatusCode::kNotFound) return reply;
  ShardReplyHeader rh{};
  rh.version = kShardProtocolVersion;
  if (prefix.ok()) {
    rh.length = info.length;
    rh.shard_version = info.version;
    reply.payload = std::move(*prefix);
  }
  reply.header = EncodeHeader(rh);
  return reply;
}

RpcReply ShardService::WriteRange(const RpcRequest& request) {
  auto h = DecodeHeader<RangeWriteHeader>(request.header, "write_range");
  if (!h.ok()) return ErrorReply(h.status());
  if (Status raises = PatchRaisesVersion(*h); !raises.ok()) return ErrorReply(std::move(raises));
  // kWriteIfVersion: the engine's committer applies it only over expected_version (newer:
  // kAborted; older or missing: kFailedPrecondition, the copy must be repaired whole). The
  // engine refuses a range past the largest shard (kInvalidArgument, naming it).
  Status s = engine_->WriteRange(FromWire(h->base.key), h->offset, request.payload.span(), h->base.shard_version,
                                 ExpectedVersion(*h));
  if (s.ok()) CountWritten(request.payload.size());
  return ErrorReply(std::move(s));
}

Result<RangeWriteHeader> ShardService::RewriteHeader(const RpcRequest& request) {
  PS_ASSIGN_OR_RETURN(RangeWriteHeader h, DecodeHeader<RangeWriteHeader>(request.header, "rewrite"));
  if (h.offset != 0 || !(h.base.flags & kWriteIfVersion)) {
    return InvalidArgument("a rewrite replaces a shard whole over an expected version: offset 0 and "
                           "kWriteIfVersion, please (got offset " + std::to_string(h.offset) + ")");
  }
  PS_RETURN_IF_ERROR(PatchRaisesVersion(h));
  return h;
}

void ShardService::CountWritten(uint64_t bytes) { bytes_written_->Inc(bytes); }

RpcReply ShardService::Lease(const RpcRequest& request, bool lock) {
  auto h = DecodeHeader<LockRequestHeader>(request.header, lock ? "lock_stripe" : "unlock_stripe");
  if (!h.ok()) return ErrorReply(h.status());
  if (lock && (h->ttl_ms == 0 || h->ttl_ms > 60000)) {
    return ErrorReply(InvalidArgument("stripe lease of " + std::to_string(h->ttl_ms) + " ms; must be 1..60000"));
  }
  const StripeId id{h->base.key.container, h->base.key.object_hi, h->base.key.object_lo, h->base.key.stripe};
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock_guard(leases_mu_);
  if (leases_.size() > 4096) std::erase_if(leases_, [&](const auto& kv) { return kv.second.expiry <= now; });
  auto it = leases_.find(id);
  if (!lock) {
    if (it != leases_.end() && it->second.owner == h->owner) leases_.erase(it);
    return ErrorReply(OkStatus());
  }
  if (it != leases_.end() && it->second.owner != h->owner && it->second.expiry > now) {
    metrics_->GetCounter("penstock_target_lease_conflicts_total",
                         "Stripe write leases refused because another writer held them.")
        .Inc();
    ShardKey key = FromWire(h->base.key);
    key.shard = 0;
    return ErrorReply(Aborted("stripe " + key.ToString() + " is being written by another client; retry"));
  }
  const bool renewed = it != leases_.end() && it->second.owner == h->owner && it->second.expiry > now;
  leases_[id] = {h->owner, now + std::chrono::milliseconds(h->ttl_ms)};
  LockReplyHeader rh{};
  rh.version = kShardProtocolVersion;
  rh.flags = renewed ? kLeaseRenewed : 0;
  RpcReply reply;
  reply.header = EncodeHeader(rh);
  return reply;
}

RpcReply ShardService::Read(const RpcRequest& request) {
  auto h = DecodeHeader<ShardRequestHeader>(request.header, "read");
  if (!h.ok()) return ErrorReply(h.status());
  return ServeRead(FromWire(h->key), 0, UINT64_MAX);
}

RpcReply ShardService::ReadRange(const RpcRequest& request) {
  auto h = DecodeHeader<RangeReadHeader>(request.header, "read_range");
  if (!h.ok()) return ErrorReply(h.status());
  return ServeRead(FromWire(h->base.key), h->offset, h->length);
}

RpcReply ShardService::ServeRead(const ShardKey& key, uint64_t offset, uint64_t length) {
  ShardInfo info;
  auto data = engine_->ReadRange(key, offset, length, &info);
  return ReadReply(std::move(data), info);
}

RpcReply ShardService::ReadReply(Result<AlignedBuffer> data, const ShardInfo& info) {
  if (!data.ok()) {
    if (data.status().code() == StatusCode::kDataLoss) {
      PS_LOG_ERROR("checksum failure serving read: {}", data.status().message());
    }
    return ErrorReply(data.status());
  }
  RpcReply reply;
  ShardReplyHeader rh{};
  rh.version = kShardProtocolVersion;
  rh.length = info.length;
  rh.shard_version = info.version;
  reply.header = EncodeHeader(rh);
  bytes_read_->Inc(data->size());
  reply.payload = std::move(*data);
  return reply;
}

RpcReply ShardService::Delete(const RpcRequest& request) {
  auto h = DecodeHeader<ShardRequestHeader>(request.header, "delete");
  if (!h.ok()) return ErrorReply(h.status());
  std::optional<uint64_t> expected;
  if (h->flags & kDeleteIfVersion) expected = h->shard_version;
  RpcReply reply;
  if (h->flags & kDeleteReturnDeleted) reply = ReplacedReply(FromWire(h->key));
  Status s = engine_->Delete(FromWire(h->key), expected);
  return s.ok() ? std::move(reply) : ErrorReply(std::move(s));
}

RpcReply ShardService::Stat(const RpcRequest& request) {
  auto h = DecodeHeader<ShardRequestHeader>(request.header, "stat");
  if (!h.ok()) return ErrorReply(h.status());
  auto info = engine_->Stat(FromWire(h->key));
  if (!info.ok()) return ErrorReply(info.status());
  RpcReply reply;
  ShardReplyHeader rh{};
  rh.version = kShardProtocolVersion;
  rh.length = info->length;
  rh.shard_version = info->version;
  reply.header = EncodeHeader(rh);
  return reply;
}

RpcReply ShardService::ListContainers(const ListRequestHeader& h, uint32_t limit) {
  if (h.container != 0) {
    return ErrorReply(InvalidArgument("a list of containers names container 0 (every container), not " +
                                      std::to_string(h.container)));
  }
  std::optional<uint64_t> from;
  if (h.flags & kListHasStartAfter) from = h.start_after.container;
  auto ids = engine_->Containers(from, limit);
  if (!ids.ok()) return ErrorReply(ids.status());
  std::vector<ListEntry> out;
  for (uint64_t id : *ids) {
    ListEntry e;
    e.key.container = id;
    out.push_back(std::move(e));
  }
  RpcReply reply;
  reply.payload = AlignedBuffer::CopyOf(EncodeListEntries(out));
  return reply;
}

RpcReply ShardService::List(const RpcRequest& request) {
  auto h = DecodeHeader<ListRequestHeader>(request.header, "list");
  if (!h.ok()) return ErrorReply(h.status());
  const uint32_t limit = h->limit == 0 || h->limit > 10000 ? 10000 : h->limit;
  std::optional<ShardKey> after;
  if (h->flags & kListHasStartAfter) after = FromWire(h->start_after);
  if (h->flags & kListContainers) return ListContainers(*h, limit);
  std::vector<ListEntry> out;
  uint32_t left_out = 0;
  // Page through the engine's index until `limit` matching entries are found.
  while (out.size() < limit) {
    auto page = engine_->List(h->container, std::nullopt, after, 1024);
    if (!page.ok()) return ErrorReply(page.status());
    if (page->empty()) break;
    bool past_group = false;
    for (const auto& [key, info] : *page) {
      if ((h->flags & kListSameHi) && (h->flags & kListHasStartAfter) && key.object.hi != h->start_after.object_hi) {
        past_group = true;
        break;
      }
      after = key;
      if ((h->flags & kListHeadsOnly) && key.stripe != ShardKey::kHeadStripe) continue;
      ListEntry e;
      e.key = ToWire(key);
      e.shard_version = info.version;
      e.length = static_cast<uint32_t>(info.length);
      if ((h->flags & kListWithData) && info.length <= kListMaxInlineBytes) {
        auto data = engine_->Read(key);
        if (data.ok()) {
          size_t n = data->size();
          if (h->flags & kListDataPrefix) n = std::min<size_t>(n, kHeadPrefixBytes);
          e.data.assign(data->data(), data->data() + n);
        } else if (data.status().code() == StatusCode::kNotFound) {
          continue;  // deleted between list and read
        } else if (data.status().code() == StatusCode::kDataLoss) {
          // A corrupt copy is left out (as if this target did not hold it), not the whole
          // listing failed: repair then rewrites it from a good copy, and `ls` lists the rest.
          // Sent with no bytes it would read as a delete.
          PS_LOG_WARN("list of container {}: left out {}: {}", h->container, key.ToString(),
                      data.status().message());
          ++left_out;
          continue;
        } else {
          return ErrorReply(data.status());
        }
      }
      out.push_back(std::move(e));
      if (out.size() >= limit) break;
    }
    if (past_group || page->size() < 1024) break;
  }
  RpcReply reply;
  ListReplyHeader rh{};
  rh.version = kShardProtocolVersion;
  rh.left_out = left_out;
  reply.header = EncodeHeader(rh);
  auto bytes = EncodeListEntries(out);
  reply.payload = AlignedBuffer::CopyOf(bytes);
  return reply;
}

}  // namespace penstock

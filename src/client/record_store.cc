// record_store.cc — see record_store.h.
#include "client/record_store.h"

#include <algorithm>
#include <charconv>
#include <future>
#include <map>
#include <set>

#include "client/object_ids.h"
#include "common/await.h"
#include "protocol/object_head.h"

namespace penstock {

namespace {

constexpr size_t kMaxGroupAndKey = 1000;

Status Validate(const std::string& group, const std::string& key) {
  if (group.empty() || key.empty()) return InvalidArgument("a record needs a group and a key, both non-empty");
  if (group.size() + key.size() > kMaxGroupAndKey) {
    return InvalidArgument("record group and key together are " + std::to_string(group.size() + key.size()) +
                           " bytes; at most " + std::to_string(kMaxGroupAndKey) + " are allowed");
  }
  if (group.find('\0') != std::string::npos || key.find('\0') != std::string::npos) {
    return InvalidArgument("record group and key must not contain NUL bytes");
  }
  return OkStatus();
}

std::string What(const ContainerInfo& c, const std::string& group, const std::string& key) {
  return "record '" + key + "' of group '" + group + "' in container '" + c.name + "'";
}

// A listing cursor (a page's `next`: the last key's low 64 bits in hex); 0 for "".
Result<uint64_t> ParseCursor(const std::string& cursor) {
  uint64_t after = 0;
  if (cursor.empty()) return after;
  auto [p, ec] = std::from_chars(cursor.data(), cursor.data() + cursor.size(), after, 16);
  if (ec != std::errc() || p != cursor.data() + cursor.size()) {
    return InvalidArgument("'" + cursor + "' is not a record listing cursor (a page's `next`)");
  }
  return after;
}

class HeldLeases : public RecordLeases {
 public:
  struct Held {
    TargetRef holder;
    WireShardKey key;
  };
  HeldLeases(StripeIo* io, uint64_t owner) : io_(io), owner_(owner) {}
  ~HeldLeases() override {
    for (const Held& h : held_) io_->UnlockStripe(h.holder, h.key, owner_);
  }
  void Add(Held h) { held_.push_back(std::move(h)); }
  bool Covers(const WireShardKey& k) const {
    return std::any_of(held_.begin(), held_.end(), [&](const Held& h) {
      return h.key.container == k.container && h.key.object_hi == k.object_hi && h.key.object_lo == k.object_lo;
    });
  }
  uint64_t owner() const { return owner_; }

 private:
  StripeIo* io_;
  uint64_t owner_;
  std::vector<Held> held_;
};

Result<StripeLease> TakeLease(StripeIo* io, const ContainerInfo& c, const WireShardKey& key, uint64_t owner) {
  const RetryPolicy retry{std::chrono::steady_clock::now() + io->shards().retry_budget(), {}};
  const StripeGeometry g{HeadRedundancy(c.redundancy), 1, 1};
  return Await<Result<StripeLease>>([&](auto done) { io->LockStripe(g, key, owner, retry, std::move(done)); });
}

}  // namespace

struct RecordStore::Stored {
  std::vector<std::byte> value;
  uint64_t version = 0;
};

WireShardKey RecordStore::Key(const ContainerInfo& c, const std::string& group, const std::string& key) {
  auto [hi, lo] = RecordObjectId(c.id, group, key);
  return {c.id, hi, lo, UINT64_MAX, 0, 0};
}

Result<std::optional<RecordStore::Stored>> RecordStore::ReadStored(const ContainerInfo& c, const std::string& group,
                                                                   const std::string& key) {
  auto data = io_->ReadHead(c.redundancy, Key(c, group, key));
  if (!data.ok()) {
    if (data.status().code() == StatusCode::kNotFound) return std::optional<Stored>();
    return data.status().WithContext("reading " + What(c, group, key));
  }
  PS_ASSIGN_OR_RETURN(ObjectHead h, DecodeObjectHead(data->data.span()));
  if (h.name != group + "/" + key) {
    return AlreadyExists(What(c, group, key) + " hashes to the id of '" + h.name +
                         "', which is stored; use another key");
  }
  return std::optional<Stored>(Stored{std::move(h.data), data->version});
}

Status RecordStore::WithLease(const ContainerInfo& c, const WireShardKey& key, const RecordLeases* held,
                              const std::function<Status()>& fn) {
  if (held != nullptr) {
    auto* h = dynamic_cast<const HeldLeases*>(held);
    if (h == nullptr || !h->Covers(key)) return InvalidArgument("the leases given do not cover this record");
    return fn();
  }
  const uint64_t owner = NewDataId().first | 1;
  PS_ASSIGN_OR_RETURN(StripeLease lease, TakeLease(io_, c, key, owner));
  Status s = fn();
  io_->UnlockStripe(lease.holder, key, owner);
  return s;
}

Result<Record> RecordStore::Get(const ContainerInfo& c, const std::string& group, const std::string& key) {
  PS_RETURN_IF_ERROR(Validate(group, key));
  auto stored = ReadStored(c, group, key);
  if (!stored.ok() && stored.status().code() != StatusCode::kAlreadyExists) return stored.status();
  if (!stored.ok() || !stored->has_value()) return NotFound(What(c, group, key) + " does not exist");
  return Record{key, std::move((*stored)->value), (*stored)->version};
}

Result<uint64_t> RecordStore::Put(const ContainerInfo& c, const std::string& group, const std::string& key,
                                  std::span<const std::byte> value, RecordCondition cond, const RecordLeases* held) {
  PS_RETURN_IF_ERROR(Validate(group, key));
  if (value.size() > kMaxRecordBytes) {
    return InvalidArgument(What(c, group, key) + ": a value of " + std::to_string(value.size()) +
                           " bytes is over the " + std::to_string(kMaxRecordBytes) + " a record holds");
  }
  const WireShardKey k = Key(c, group, key);
  ObjectHead h;
  h.name = group + "/" + key;
  h.size = value.size();
  h.stripe_unit = c.stripe_unit;  // none (inline), but decoders want one
  h.data_hi = k.object_hi;
  h.data_lo = k.object_lo;
  h.mtime_ms = WallClockMs();
  h.inlined = true;
  h.data.assign(value.begin(), value.end());
  const std::vector<std::byte> bytes = EncodeObjectHead(h);
  if (cond.kind == RecordCondition::Kind::kBlind) {
    auto* h = dynamic_cast<const HeldLeases*>(held);
    if (held != nullptr && (h == nullptr || !h->Covers(k))) {
      return InvalidArgument("the leases given do not cover this record");
    }
    if (cond.version != 0 && OneRequest(c)) return RewriteUnprotected(c, k, bytes, cond.version, What(c, group, key));
    const uint64_t version = NewerThan(NewVersion(), cond.version);
    PS_RETURN_IF_ERROR(io_->WriteHead(c.redundancy, k, bytes, version).WithContext("writing " + What(c, group, key)));
    return version;
  }
  if (cond.kind == RecordCondition::Kind::kCreate && held == nullptr && OneRequest(c)) {
    return CreateUnprotected(c, k, bytes, What(c, group, key));
  }
  if (cond.kind == RecordCondition::Kind::kVersion && held == nullptr && OneRequest(c)) {
    return RewriteUnprotected(c, k, bytes, cond.version, What(c, group, key));
  }
  uint64_t written = 0;
  PS_RETURN_IF_ERROR(WithLease(c, k, held, [&]() -> Status {
    PS_ASSIGN_OR_RETURN(std::optional<Stored> stored, ReadStored(c, group, key));
    if (cond.kind == RecordCondition::Kind::kCreate && stored) return AlreadyExists(What(c, group, key) + " exists");
    if (cond.kind == RecordCondition::Kind::kVersion) {
      if (!stored) return NotFound(What(c, group, key) + " does not exist (any more)");
      if (stored->version != cond.version) return Aborted(What(c, group, key) + " was changed by another writer");
    }
    written = stored ? NewerThan(NewVersion(), stored->version) : NewVersion();
    return io_->WriteHead(c.redundancy, k, bytes, written).WithContext("writing " + What(c, group, key));
  }));
  return written;
}

Result<uint64_t> RecordStore::CreateUnprotected(const ContainerInfo& c, const WireShardKey& k,
                                                std::span<const std::byte> bytes, const std::string& what) {
  const uint64_t version = NewVersion();
  const auto first = std::chrono::steady_clock::now();
  for (int attempt = 0;; ++attempt) {
    Status s = Await<Status>([&](auto done) { io_->shards().StartWriteRange(k, 0, bytes, version, std::move(done), 0); });
    if (s.ok()) return version;
    if (s.code() == StatusCode::kAborted) {
      if (attempt > 0) {  // an earlier attempt may have landed: then the stored record is ours
        auto stored = io_->ReadHead(c.redundancy, k);
        if (stored.ok() && stored->version == version) return version;
      }
      return AlreadyExists(what + " exists");
    }
    if (!io_->shards().Backoff(s, first, attempt)) return s.WithContext("creating " + what);
  }
}

Result<uint64_t> RecordStore::RewriteUnprotected(const ContainerInfo& c, const WireShardKey& k,
                                                 std::span<const std::byte> bytes, uint64_t expected,
                                                 const std::string& what) {
  const uint64_t version = NewerThan(NewVersion(), expected);
  const auto first = std::chrono::steady_clock::now();
  for (int attempt = 0;; ++attempt) {
    Status s = Await<Status>([&](auto done) { io_->shards().StartRewrite(k, bytes, version, expected, std::move(done)); });
    if (s.ok()) return version;
    if (s.code() == StatusCode::kAborted || s.code() == StatusCode::kFailedPrecondition) {
      auto stored = io_->ReadHead(c.redundancy, k);
      // An earlier attempt may have landed: then the stored record is ours.
      if (attempt > 0 && stored.ok() && stored->version == version) return version;
      if (stored.status().code() == StatusCode::kNotFound) return NotFound(what + " does not exist (any more)");
      return Aborted(what + " was changed by another writer");
    }
    if (!io_->shards().Backoff(s, first, attempt)) return s.WithContext("writing " + what);
  }
}

Status RecordStore::Delete(const ContainerInfo& c, const std::string& group, const std::string& key,
                           std::optional<uint64_t> version, const RecordLeases* held) {
  PS_RETURN_IF_ERROR(Validate(group, key));
  const WireShardKey k = Key(c, group, key);
  if (version && held == nullptr && OneRequest(c)) {
    // One copy and no tombstone: the target deletes it only at that version (kDeleteIfVersion).
    PS_ASSIGN_OR_RETURN(std::vector<TargetRef> slots, io_->Slots(k, 1));
    Status s = io_->shards().DeleteTo(slots.at(0), k, *version);
    if (s.code() == StatusCode::kAborted) return Aborted(What(c, group, key) + " was changed by another writer");
    if (s.code() == StatusCode::kNotFound) return NotFound(What(c, group, key) + " does not exist");
    return s.WithContext("deleting " + What(c, group, key));
  }
  return WithLease(c, k, held, [&]() -> Status {
    auto stored = ReadStored(c, group, key);
    if (!stored.ok() && stored.status().code() != StatusCode::kAlreadyExists) return stored.status();
    if (!stored.ok() || !stored->has_value()) return NotFound(What(c, group, key) + " does not exist");
    if (version && (*stored)->version != *version) return Aborted(What(c, group, key) + " was changed by another writer");
    return io_->DeleteHead(c.redundancy, k, NewerThan(NewVersion(), (*stored)->version))
        .WithContext("deleting " + What(c, group, key));
  });
}

Result<std::vector<ListEntry>> RecordStore::ListTarget(const ContainerInfo& c, const TargetRef& t, uint64_t hi,
                                                       uint64_t after_lo, uint32_t limit) {
  const WireShardKey after{c.id, hi, after_lo, UINT64_MAX, UINT32_MAX, 0};
  PS_ASSIGN_OR_RETURN(ShardClient::ListPage page,
                      io_->shards().List(t, c.id, kListHeadsOnly | kListWithData | kListSameHi, after, limit));
  return std::move(page.entries);
}

Result<RecordPage> RecordStore::List(const ContainerInfo& c, const std::string& group, const std::string& cursor,
                                     uint32_t limit) {
  PS_RETURN_IF_ERROR(Validate(group, "-"));
  if (limit == 0 || limit > 10000) return InvalidArgument("a record page holds 1..10000 records, not " + std::to_string(limit));
  PS_ASSIGN_OR_RETURN(const uint64_t after_lo, ParseCursor(cursor));
  const uint64_t hi = RecordGroupHi(c.id, group);
  std::vector<TargetRef> targets;
  for (const TargetRef& t : view_->targets()) {
    if (!t.lost) targets.push_back(t);
  }
  std::vector<std::future<Result<std::vector<ListEntry>>>> pages;
  for (const TargetRef& t : targets) {
    pages.push_back(std::async(std::launch::async, [&, t] { return ListTarget(c, t, hi, after_lo, limit); }));
  }
  std::map<uint64_t, ListEntry> newest;
  uint64_t bound = UINT64_MAX;  // every record at or below it is complete in `newest`
  bool more = false;
  uint32_t unreachable = 0;
  Status first_error;
  for (auto& f : pages) {
    auto page = f.get();
    if (!page.ok()) {
      if (first_error.ok()) first_error = page.status();
      ++unreachable;
      continue;
    }
    const size_t raw = page->size();
    std::erase_if(*page, [hi](const ListEntry& e) { return e.key.object_hi != hi; });  // an older target's
    if (raw == limit && page->size() == raw) {
      more = true;
      bound = std::min(bound, page->back().key.object_lo);
    }
    for (auto& e : *page) {
      auto& slot = newest[e.key.object_lo];
      if (slot.shard_version <= e.shard_version) slot = std::move(e);
    }
  }
  if (unreachable > (c.redundancy.protected_() ? c.redundancy.m : 0)) {
    return first_error.WithContext("listing group '" + group + "' of container '" + c.name + "'");
  }
  return PageOf(group, newest, more ? std::optional<uint64_t>(bound) : std::nullopt, limit);
}

RecordPage RecordStore::PageOf(const std::string& group, std::map<uint64_t, ListEntry>& newest,
                               std::optional<uint64_t> bound, uint32_t limit) {
  RecordPage out;
  const std::string prefix = group + "/";
  uint64_t last = 0;  // the last key looked at
  for (auto& [lo, e] : newest) {
    if (bound && lo > *bound) break;
    if (out.records.size() == limit) {  // the targets' pages together hold more than a page
      bound = last;
      break;
    }
    last = lo;
    if (e.data.empty()) continue;  // tombstone
    auto h = DecodeObjectHead(e.data);
    if (!h.ok() || !h->name.starts_with(prefix)) continue;  // unreadable, or another group's hash
    out.records.push_back(Record{h->name.substr(prefix.size()), std::move(h->data), e.shard_version});
  }
  if (bound) {
    char buf[17];
    auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), *bound, 16);
    out.next.assign(buf, p);
  }
  return out;
}

Result<std::unique_ptr<RecordLeases>> RecordStore::Lock(const ContainerInfo& c, std::vector<RecordRef> records) {
  std::vector<WireShardKey> keys;
  for (const RecordRef& r : records) {
    PS_RETURN_IF_ERROR(Validate(r.group, r.key));
    keys.push_back(Key(c, r.group, r.key));
  }
  auto order = [](const WireShardKey& a, const WireShardKey& b) {
    return std::tie(a.object_hi, a.object_lo) < std::tie(b.object_hi, b.object_lo);
  };
  std::sort(keys.begin(), keys.end(), order);
  keys.erase(std::unique(keys.begin(), keys.end(),
                         [](const WireShardKey& a, const WireShardKey& b) {
                           return a.object_hi == b.object_hi && a.object_lo == b.object_lo;
                         }),
             keys.end());
  auto held = std::make_unique<HeldLeases>(io_, NewDataId().first | 1);
  for (const WireShardKey& k : keys) {
    PS_ASSIGN_OR_RETURN(StripeLease lease, TakeLease(io_, c, k, held->owner()));
    held->Add({lease.holder, k});
  }
  return std::unique_ptr<RecordLeases>(std::move(held));
}

}  // namespace penstock

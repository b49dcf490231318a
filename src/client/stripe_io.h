// stripe_io.h — one stripe's I/O under the container's redundancy: the layer between the
// object code (stripe_pipeline, ObjectImpl) and single-shard requests (ShardClient).
//
// none:   a stripe is one shard (shard 0) on the target placement picks; requests go through
//         ShardClient's located calls and the callers retry them.
// rep:N:  N copies, shard i on slot i (PlaceSlots: distinct targets and fault domains).
// ec:K+M: K data cells and M parity cells (ISA-L Reed-Solomon, common/erasure.h), cell i on
//         slot i. Every cell of a stripe has the same length, min(cell size, stripe length):
//         the data is zero-padded, which reads back as zeros, the same as a sparse range.
//
// Writes (protected) go to every slot at once and are acknowledged when each shard on a
// reachable target is durable and at least K are (rep: one). A shard whose target is down, or
// that fails, or has not answered `straggler` after the K-th success, is a fault the stripe
// absorbs: the write is acknowledged degraded and mgmt's repair service rewrites the shard
// later. Writes carry kWriteIfNotOlder, so a delayed or repeated write never replaces newer data.
// Range writes (none, rep) patch part of each shard; rep's carry kWriteIfVersion, so only a
// copy holding the newest version is patched. The stripe's bytes are held (shared) until every
// shard request has ended, even after the acknowledgement.
//
// Reads (protected) read the touched data cells (rep: one replica, the first up slot) and ask
// every other up slot for its shard's version (kStat, no data), so a shard that missed a
// degraded write never answers alone. A cell that is missing, fails its checksum, comes from
// another version than the newest, or is late by `straggler` turns the read degraded: the same range is read from every slot and the missing cells are
// decoded from any K of one version (the newest with K). A shard that failed its checksum and
// was read whole is written back at once (read repair). kNotFound only when no slot has the
// stripe, or none is readable and more than M slots hold none (sparse, a target down);
// kDataLoss when fewer than K shards of one version remain. An ec read of all K data cells
// with M < K asks no other slot: an acknowledged write reached at least one of them, so cells
// that agree are the newest version (stripe_read_ec.cc, DataCellsSettleTheVersion).
//
// Heads (object records) are replicated on head_copies() slots; reads return the newest copy
// (highest version), deletes of protected heads write an empty tombstone with a newer version
// so that a copy on a target that was down cannot bring the object back.
//
// Stale maps: a target refuses a request placed with a map older than the cluster's placement
// epoch (shard_protocol.h, IsStaleMap). Write, Read and Delete then refresh the map from mgmt
// and run the whole stripe operation again on the new slots (up to kStaleMapRetries times); a
// protected write never counts such a refusal as a missed shard.
//
// Thread-safe. Completions run on transport threads (or the timer thread).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "client/shard_client.h"
#include "client/stripe_geometry.h"
#include "client/timer.h"
#include "client/write_version.h"
#include "codec/erasure.h"
#include "protocol/object_head.h"
#include "common/thread_pool.h"
#include "penstock/redundancy.h"

namespace penstock {

struct StripeIoStats {
  std::atomic<uint64_t> degraded_writes{0};   // stripes acknowledged with shards missing
  std::atomic<uint64_t> degraded_reads{0};    // reads that needed other cells than the data
  std::atomic<uint64_t> read_repairs{0};      // corrupt shards rewritten by a read
  std::atomic<uint64_t> stale_map_retries{0}; // operations run again after a stale-map refusal
  std::atomic<uint64_t> transient_retries{0}; // ... after a transient failure (RetryPolicy)
  std::atomic<uint64_t> map_confirmations{0}; // map fetches to confirm a read not every copy checked
  std::atomic<uint64_t> known_version_patches{0}; // rep range writes that skipped kStat (StripeKnowledge)
  std::atomic<uint64_t> ec_reads_without_stat{0}; // ec reads of all K data cells (M < K): no kStat
  std::atomic<uint64_t> missed_reports{0};  // calls to mgmt reporting targets writes missed
  std::atomic<uint64_t> merged_writes{0};  // object writes of a stripe that joined the one queued before
                                           // them (ObjectImpl::QueuedWrite)
  // Object reads (ObjectImpl), see ReadPathStats:
  std::atomic<uint64_t> read_bytes{0};   // delivered into caller buffers
  std::atomic<uint64_t> read_placed{0};  // ... by the transport, straight
  std::atomic<uint64_t> read_copied{0};  // ... copied by the client from a reply buffer
};

// What the holder of a protected stripe's write lease knows of the stripe between its writes
// (ObjectImpl hands a held lease on to the next queued write of the stripe). Write and
// WriteRange given one record in it the version every slot's shard holds after a write that
// reached each slot (0 after any other outcome), and the map epoch the write was placed with.
// A rep WriteRange given one that knows a version at the current epoch patches over it without
// asking each copy for its version first: under one continuous lease no other writer changed
// the stripe. One write at a time uses one (the lease's holder's).
struct StripeKnowledge {
  uint64_t uniform_version = 0;  // 0: unknown
  uint64_t epoch = 0;
};

// What a head write replaced, as its copies' targets answered (kWriteReturnReplaced): the
// newest stored head older than the write. A copy holding the write's own bytes (from an
// earlier attempt) or a newer head is not one; targets that did not answer, or that predate
// the flag, add nothing. Filled on transport threads; read once the write is done.
// Thread-safe.
class ReplacedHead {
 public:
  explicit ReplacedHead(uint64_t write_version) : write_version_(write_version) {}
  void Saw(ShardData d);
  // The newest older head a copy held (none: no copy held one, or none said).
  std::optional<ShardData> Newest() const;
  // That head decoded, when it named data other than `data_hi`/`data_lo` stored in stripes:
  // the stripes a replace may free (none otherwise, or when it does not decode).
  std::optional<ObjectHead> OtherObject(uint64_t data_hi, uint64_t data_lo) const;
  // Whether any copy's target said (false: none answered, or all predate the flag).
  bool answered() const;

 private:
  const uint64_t write_version_;
  mutable std::mutex mu_;
  std::optional<ShardData> newest_;
  bool answered_ = false;
};

// A granted stripe write lease (StripeIo::LockStripe): the target holding it, and whether the
// grant renewed the asking owner's unexpired lease there (no other writer held it between).
struct StripeLease {
  TargetRef holder;
  bool renewed = false;
};

// StripeIo::WriteRange of an ec stripe refuses ranges it cannot patch with this message.
inline constexpr std::string_view kWholeUnitNeeded = "whole-unit write needed";
inline bool NeedsWholeUnit(const Status& s) {
  return s.code() == StatusCode::kFailedPrecondition && s.message().find(kWholeUnitNeeded) != std::string::npos;
}

// How long an asynchronous Read or Write keeps retrying transient failures (kUnavailable,
// kDeadlineExceeded; never kAborted or kResourceExhausted): while an attempt could start before
// `until` and `wanted()` holds (an operation that was cancelled or expired stops). The backoff
// (20 ms doubling to 500 ms) runs on the StripeIo's timer thread; the map is not fetched for it
// (the Client's map watch keeps the view current). An unprotected stripe whose target mgmt
// marks down fails at once.
struct RetryPolicy {
  std::chrono::steady_clock::time_point until;
  std::function<bool()> wanted;  // empty: always
};

class StripeIo {
 public:
  // `shards` and `view` are borrowed. `straggler`: how long a protected operation waits for
  // the last shards once it could complete without them.
  StripeIo(ShardClient* shards, ClusterView* view, std::chrono::milliseconds straggler);
  // Waits (up to 10 s) for read repairs still in flight.
  ~StripeIo();

  ShardClient& shards() { return *shards_; }
  const StripeIoStats& stats() const { return stats_; }
  StripeIoStats& stats() { return stats_; }

  // Writes a whole stripe: `data` holds its logical bytes (at most the stripe unit). With
  // `retry`, transient failures are retried (see RetryPolicy); without, the caller retries.
  // `known`: see StripeKnowledge.
  // With `replaced`, each shard's write asks its target what it replaced (ReplacedHead).
  void Write(const StripeGeometry& g, const WireShardKey& key, std::shared_ptr<const AlignedBuffer> data,
             uint64_t version, std::function<void(Status)> done, std::optional<RetryPolicy> retry = std::nullopt,
             std::shared_ptr<StripeKnowledge> known = nullptr, std::shared_ptr<ReplacedHead> replaced = nullptr);
  // Writes `data` at byte `begin` of the stripe, leaving its other bytes as they are (shard
  // range writes, kWriteRange). The caller holds the stripe's write lease. `retry` as for Write.
  // rep patches each copy only over the newest version the readable copies hold (asked first
  // with kStat); a copy that missed a write refuses and counts as a missed shard, as a failed
  // one does for Write. ec patches a range inside one data cell of a full unit whose targets
  // are all up: it reads the old bytes of the range from that cell and the parity cells (and
  // the other cells' versions), updates parity by the delta (ErasureCoder::Update) and writes
  // the range of those cells, every other cell getting only the new version, each over the
  // version all had. Otherwise (several cells, a short or missing cell, versions differ, a
  // target not up) it fails kFailedPrecondition with kWholeUnitNeeded (NeedsWholeUnit): the
  // caller reads and rewrites the unit instead. A copy or cell that does not answer the first
  // step within `straggler` is suspected: rep fails the attempt retryably (the next one goes
  // on without it), ec answers kWholeUnitNeeded. With `known` (StripeKnowledge) telling the
  // version every copy holds, rep skips the kStat step.
  void WriteRange(const StripeGeometry& g, const WireShardKey& key, uint64_t begin,
                  std::shared_ptr<const AlignedBuffer> data, uint64_t version, std::function<void(Status)> done,
                  std::optional<RetryPolicy> retry = std::nullopt, std::shared_ptr<StripeKnowledge> known = nullptr);
  // Stripe bytes [begin, begin + length): none/rep return fewer when the stripe is shorter, ec
  // returns `length` bytes (zeros past the stripe's data). `retry` as for Write.
  // With `into` (memory for the `length` bytes), the data may arrive placed there
  // (ShardData::placed bytes, `data` empty): none and the first replica of rep are received
  // straight into it, ec's data cells each into their part when the fast path succeeds.
  // Reads of other replicas, degraded reads and repairs come back in `data`.
  void Read(const StripeGeometry& g, const WireShardKey& key, uint64_t begin, uint64_t length,
            std::function<void(Result<ShardData>)> done, std::optional<RetryPolicy> retry = std::nullopt,
            std::shared_ptr<StripeDestination> into = nullptr);
  // Stripe write leases (shard_protocol.h): takes the lease of `key`'s stripe for `owner` from
  // the target of its first up slot, retrying while another owner holds it (5 ms doubling to
  // 100 ms), after a stale map, and after transient failures, while `retry` allows; `done` gets
  // the target that granted it. An unprotected stripe whose target is down fails at once; a
  // protected stripe's lease target that fails, or does not answer within `straggler`, is
  // suspected, so the next up slot grants it (writers that disagree about which target is up
  // may then hold leases on different ones: a window as long as failure detection). Asked
  // again with the token of a lease still held, it renews it (StripeLease::renewed) where that
  // target is still the first up slot.
  void LockStripe(const StripeGeometry& g, const WireShardKey& key, uint64_t owner, RetryPolicy retry,
                  std::function<void(Result<StripeLease>)> done, int attempt = 0);
  // Releases the lease (in the background; it also expires after kStripeLeaseTtl).
  void UnlockStripe(const TargetRef& holder, const WireShardKey& key, uint64_t owner);
  static constexpr std::chrono::milliseconds kStripeLeaseTtl{15000};

  // Removes every shard of the stripe (OK when none existed); best effort on slots that are
  // down (their shards stay, as garbage no head names) unless `everywhere`: then a slot down
  // or suspected fails it (kUnavailable), for stripes a head still names (truncate), and so
  // does one that has not confirmed within `straggler` (named in the error, and suspected).
  // An unprotected stripe's transient failures are retried within the client's retry budget.
  // Never blocks.
  void Delete(const StripeGeometry& g, const WireShardKey& key, std::function<void(Status)> done,
              bool everywhere = false);

  // Object heads (blocking, with the client's retry policy). Reads return the newest copy;
  // kNotFound when there is none or the newest is a tombstone. WriteHead starts no attempt
  // after `give_up_at` (kDeadlineExceeded).
  // With `replaced`, learns what head the write replaced (ReplacedHead) in the same requests.
  Status WriteHead(const Redundancy& red, const WireShardKey& key, std::span<const std::byte> bytes,
                   uint64_t version,
                   std::chrono::steady_clock::time_point give_up_at = std::chrono::steady_clock::time_point::max(),
                   std::shared_ptr<ReplacedHead> replaced = nullptr);
  Result<ShardData> ReadHead(const Redundancy& red, const WireShardKey& key);
  // With `deleted`, learns what head it deleted (a ReplacedHead of `version`) in the same
  // requests: a protected head's tombstone write asks what it replaced, an unprotected
  // head's delete what it deleted.
  Status DeleteHead(const Redundancy& red, const WireShardKey& key, uint64_t version,
                    std::shared_ptr<ReplacedHead> deleted = nullptr);
  // Asynchronous head write (replicated like WriteHead); `retry` as for Write (without: one
  // attempt).
  void StartWriteHead(const Redundancy& red, const WireShardKey& key, std::shared_ptr<const AlignedBuffer> bytes,
                      uint64_t version, std::function<void(Status)> done,
                      std::optional<RetryPolicy> retry = std::nullopt,
                      std::shared_ptr<ReplacedHead> replaced = nullptr);

  // Blocking forms of Write/Read/Delete (one attempt; not from a transport thread).
  Status WriteSync(const StripeGeometry& g, const WireShardKey& key, std::shared_ptr<const AlignedBuffer> data,
                   uint64_t version);
  Result<ShardData> ReadSync(const StripeGeometry& g, const WireShardKey& key, uint64_t begin, uint64_t length);
  Status DeleteSync(const StripeGeometry& g, const WireShardKey& key, bool everywhere = false);

  // Repair: rebuilds shards `shards` of a stripe whose stored version is `version` from the
  // others (a read, degraded where needed, then encode) and writes them to their slots.
  // `shard_length` is the length the stripe's shards have (ec) or 0 (rep). Returns the bytes
  // written. kAborted when the stripe changed meanwhile (a newer version was read).
  Result<uint64_t> RepairShards(const StripeGeometry& g, const WireShardKey& key, uint64_t shard_length,
                                const std::vector<uint32_t>& shards, uint64_t version);

  // Slots of `key`'s stripe for `width` shards (exposed for repair and tests); a target this
  // client suspects (late answers) shows as not up. ReadSlots also shows targets recovering
  // (for every container or for `key`'s) as not up: protected data is read from a target that
  // may hold stale shards only as a replica's last resort, and never from one that a write to
  // the container is known to have missed (TargetRef::MissedWritesIn).
  Result<std::vector<TargetRef>> Slots(const WireShardKey& key, size_t width) const;
  Result<std::vector<TargetRef>> ReadSlots(const WireShardKey& key, size_t width) const;

  // Called with the container and the targets a protected write went without (whatever the
  // map says of them, lost ones excepted), before the write is acknowledged (the Client reports
  // them to mgmt, which marks them recovering); it returns the map epoch that records them, and
  // until this client's map reaches that epoch its reads of the container leave those targets
  // alone; an error fails the write. Set before the first write. It may block: it runs on
  // threads of its own ("ps-report").
  void set_report_degraded(std::function<Result<uint64_t>(uint64_t container, const std::vector<uint32_t>&)> fn) {
    report_ = std::move(fn);
    std::lock_guard<std::mutex> lock(reports_mu_);
    if (reports_ == nullptr) reports_ = std::make_unique<ThreadPool>(4, "ps-report");
  }
  // The longest a put may let pass between the landing of its stripes, and before its head
  // (PutCommitWindow of the map's orphan grace, object_head.h).
  std::chrono::milliseconds commit_window() const;
  // Read from recovering targets too (repair, which checks versions itself). Set before use.
  void set_read_from_recovering(bool on) { read_recovering_ = on; }
  ErasureCoder& Coder(const Redundancy& red);

 private:
  // The operations live in files by concern; the declarations below are grouped the same way.

  // Retries of whole stripe operations (stripe_retry.cc).
  static constexpr int kStaleMapRetries = 3;
  struct Retries {
    int stale_left = 0;                 // stale-map refusals still retried at once
    int attempt = 0;                    // transient retries so far (the backoff step)
    std::optional<RetryPolicy> policy;  // none: transient failures are the caller's
    std::function<bool()> hopeless;     // true: a transient failure is not worth waiting out
  };
  Retries RetriesFor(const StripeGeometry& g, const WireShardKey& key, std::optional<RetryPolicy> policy) const;
  // Runs `attempt`; after a stale-map refusal (or, under a policy, a transient failure) it
  // refreshes the map on the timer thread and runs it again, as `st` allows; then `done`.
  // Instantiated for Status and Result<ShardData>.
  template <typename R>
  void WithRetries(std::shared_ptr<std::function<void(std::function<void(R)>)>> attempt,
                   std::function<void(R)> done, Retries st);

  // Whole-stripe writes (stripe_write.cc).
  struct WriteState;  // stripe_io_internal.h
  // One attempt of Write.
  void WriteOnce(const StripeGeometry& g, const WireShardKey& key, std::shared_ptr<const AlignedBuffer> data,
                 uint64_t version, std::function<void(Status)> done, std::shared_ptr<StripeKnowledge> known,
                 std::shared_ptr<ReplacedHead> replaced);
  using ShardSender = std::function<void(uint32_t shard, const TargetRef& t, std::function<void(Status)> done)>;
  // Sends shard i of a protected stripe to slot i with `send` for every up slot, and decides
  // the write as the class comment says (st: data, owned and done set; version and known
  // when the write keeps a StripeKnowledge).
  void WriteSlots(const StripeGeometry& g, const WireShardKey& key, std::shared_ptr<WriteState> st,
                  const ShardSender& send);
  // After each shard's answer (under st->mu, which it may release): finishes the write once
  // it is decided, or arms the straggler timer once K shards are written.
  void DecideWrite(const WireShardKey& key, const std::shared_ptr<WriteState>& st, std::unique_lock<std::mutex>& lock);
  // Gives up the requests of a decided write still waiting for an answer (st.give_up; under
  // st.mu): the write went on without them (`when`: "within the straggler delay").
  void GiveUpWaiting(WriteState& st, const WireShardKey& key, const std::string& when);
  // The bytes of every shard of a stripe holding `data` (ec: data cells, then parity): slices
  // of `data` where a shard is one, buffers appended to `owned` otherwise (parity, zero-padded
  // cells). Both must outlive the shard requests. Used by Write and RepairShards.
  std::vector<std::span<const std::byte>> EncodeShards(const StripeGeometry& g, std::span<const std::byte> data,
                                                       std::vector<std::shared_ptr<AlignedBuffer>>& owned);

  // Range writes of unprotected and replicated stripes (stripe_write_range.cc).
  // One attempt of WriteRange.
  void WriteRangeOnce(const StripeGeometry& g, const WireShardKey& key, uint64_t begin,
                      std::shared_ptr<const AlignedBuffer> data, uint64_t version, std::function<void(Status)> done,
                      std::shared_ptr<StripeKnowledge> known);
  // WriteRangeOnce of an unprotected stripe.
  void PatchUnprotected(const WireShardKey& key, uint64_t begin, std::shared_ptr<const AlignedBuffer> data,
                        uint64_t version, std::function<void(Status)> done);
  // While a join is not settled: unless `at` (the stripe's target) holds shard `key`, copies
  // it there from where an earlier placement put it (CopyFromEarlier). OK: `at` may be
  // patched now (it holds the shard, or none exists).
  void MoveFromEarlier(const TargetRef& at, const WireShardKey& key, std::function<void(Status)> done);
  // Writes `held` (read from `source`) to `at` at its version, unless `at` holds a newer one;
  // deletes it there again when `source` no longer holds it (a delete came between).
  void CopyFromEarlier(const TargetRef& at, const WireShardKey& key, std::shared_ptr<TargetRef> source,
                       std::shared_ptr<ShardData> held, std::function<void(Status)> done);
  // WriteRangeOnce of a replicated stripe: over the version `known` tells, or the newest the
  // copies tell (AskCopyVersions).
  void PatchReplicas(const StripeGeometry& g, const WireShardKey& key, uint64_t begin,
                     std::shared_ptr<const AlignedBuffer> data, uint64_t version, std::function<void(Status)> done,
                     std::shared_ptr<StripeKnowledge> known);
  // Asks each of `asks` (shard, target) for its version (kStat); `decided` gets the newest,
  // whether a copy holds none, and the error of one whose version is unknown (failed, or late
  // by `straggler`: suspected).
  using CopyVersions = std::function<void(const Status& error, uint64_t newest, bool some_missing)>;
  void AskCopyVersions(const WireShardKey& key, const std::vector<std::pair<uint32_t, TargetRef>>& asks,
                       CopyVersions decided);
  // Patches every copy with `data` at `begin` over version `expected` (kWriteIfVersion), with a
  // version above it (NewerThan `requested_version`), and decides as WriteSlots does.
  void PatchCopies(const StripeGeometry& g, const WireShardKey& key, uint64_t begin,
                   std::shared_ptr<const AlignedBuffer> data, uint64_t requested_version, uint64_t expected,
                   std::shared_ptr<StripeKnowledge> known, std::function<void(Status)> done);

  // Range writes of ec stripes: read-modify-write with a parity delta (stripe_write_ec_range.cc).
  struct EcRangeWrite;
  // WriteRange of an ec stripe (see WriteRange).
  void WriteEcRange(const StripeGeometry& g, const WireShardKey& key, uint64_t begin,
                    std::shared_ptr<const AlignedBuffer> data, uint64_t version, std::function<void(Status)> done,
                    std::shared_ptr<StripeKnowledge> known);
  // Once the old cells are in (or the straggler timer fired): updates parity and writes.
  void PatchEcCells(const std::shared_ptr<EcRangeWrite>& w);

  // Reads: unprotected and replicated stripes (stripe_read.cc).
  struct ReplicaRead;
  struct ReplicaChain;
  // One attempt of Read.
  void ReadOnce(const StripeGeometry& g, const WireShardKey& key, uint64_t begin, uint64_t length,
                std::function<void(Result<ShardData>)> done, std::shared_ptr<StripeDestination> into);
  void ReadReplica(const StripeGeometry& g, const WireShardKey& key, uint64_t begin, uint64_t length,
                   std::function<void(Result<ShardData>)> done, std::shared_ptr<StripeDestination> into);
  // Once the first replica and the others' versions are in, or the straggler timer fired
  // (`data_late`: the first replica had not answered): the answer, or ReadReplicaChain.
  // Under st->mu, which it releases when it decides.
  void DecideReplicaRead(const std::shared_ptr<ReplicaRead>& st, std::unique_lock<std::mutex>& lock, bool data_late);
  // Replicas in `order` one after the other (a late one starts the next), first success at
  // `min_version` or newer wins (an older one missed a write a replica told of);
  // `corrupt` replicas get the good bytes back.
  void ReadReplicaChain(size_t width, const WireShardKey& key, uint64_t begin, uint64_t length,
                        std::vector<std::pair<uint32_t, TargetRef>> order,
                        std::vector<std::pair<uint32_t, TargetRef>> corrupt, uint64_t min_version,
                        std::function<void(Result<ShardData>)> done);
  // Reads the next replica of the chain, if any is left.
  void TryNextReplica(const std::shared_ptr<ReplicaChain>& st);
  // A replica of the chain answered (under st->mu, which it releases).
  void OnReplicaReply(const std::shared_ptr<ReplicaChain>& st, uint32_t shard, const TargetRef& target,
                      Result<ShardData> r, std::unique_lock<std::mutex>& l);

  // Reads of ec stripes, fast and degraded (stripe_read_ec.cc).
  struct EcRead;
  void ReadEc(const StripeGeometry& g, const WireShardKey& key, uint64_t begin, uint64_t length,
              std::function<void(Result<ShardData>)> done, std::shared_ptr<StripeDestination> into);
  // With every reply of the fast path in (or the straggler timer fired with the data cells
  // in): the answer, or GiveUpEcRead. Under st->mu, which it releases.
  void DecideEcRead(const std::shared_ptr<EcRead>& st, std::unique_lock<std::mutex>& lock);
  // The fast path cannot answer: ReadEcDegraded instead (releases st->mu).
  void GiveUpEcRead(const std::shared_ptr<EcRead>& st, std::unique_lock<std::mutex>& lock);
  // Degraded ec read of cell range [lo, hi) from every slot.
  void ReadEcDegraded(const StripeGeometry& g, const WireShardKey& key, uint64_t begin, uint64_t length,
                      std::function<void(Result<ShardData>)> done);
  // Decides with the replies at hand (under st->mu, which it releases when it decides);
  // `final` when no more will come, `late` when the straggler timer ran out.
  void DecideEcDegraded(const std::shared_ptr<EcRead>& st, std::unique_lock<std::mutex>& lock, bool final, bool late);
  // Decodes the range from the cells of `version`, writes back corrupt shards read whole, and
  // answers (releases st->mu).
  void DecodeEcDegraded(const std::shared_ptr<EcRead>& st, uint64_t version, bool all_checked,
                        std::unique_lock<std::mutex>& lock);

  // The earlier-placement fallback (stripe_earlier.cc).
  // Shard reads of protected stripes and heads, and of unprotected ones (`width` 1): from `t`,
  // the target of slot key.shard; when it holds nothing (kNotFound) and a join is not settled
  // yet, from slot key.shard of each earlier placement in turn (ClusterView::EarlierSlots): the
  // shard may not have been moved yet. Its versions are compared as any other copy's are.
  void ReadShardTo(size_t width, const TargetRef& t, const WireShardKey& key, uint64_t begin, uint64_t length,
                   std::function<void(Result<ShardData>)> done, std::shared_ptr<StripeDestination> into = nullptr,
                   uint64_t into_at = 0);
  void StatShardTo(size_t width, const TargetRef& t, const WireShardKey& key,
                   std::function<void(Result<ShardData>)> done);
  // Sends one shard request (read or stat) to a target.
  using ShardAsk = std::function<void(const TargetRef&, std::function<void(Result<ShardData>)>)>;
  // `ask` of `t`, the target of slot key.shard; when it holds nothing (kNotFound) and a join is
  // not settled, AskEarlierHolders.
  void AskWithFallback(size_t width, const TargetRef& t, const WireShardKey& key, ShardAsk ask,
                       std::function<void(Result<ShardData>)> done);
  // Asks (`ask`) where each earlier placement put shard key.shard (EarlierCopies), newest first,
  // until one answers other than kNotFound; `not_found` when none does, or kUnavailable when
  // one of them is down (the shard may be there) or late (half the straggler delay; suspected).
  void AskEarlierHolders(size_t width, const WireShardKey& key, Status not_found, ShardAsk ask,
                         std::function<void(Result<ShardData>)> done);
  // Where earlier placements put the shards of `key` (`width` 1: shard key.shard; else every
  // index), as (shard index, target), leaving out each slot's current target (down ones included).
  std::vector<std::pair<uint32_t, TargetRef>> EarlierCopies(size_t width, const WireShardKey& key) const;

  // Deletes (stripe_delete.cc).
  // One attempt of Delete.
  void DeleteOnce(const StripeGeometry& g, const WireShardKey& key, bool everywhere, std::function<void(Status)> done);
  // The (shard, target) pairs DeleteOnce of a protected stripe sends to: the up slots (the first
  // `slot_requests`), then earlier placements' copies when `everywhere` (otherwise their deletes
  // start here, best effort). An error when a copy that must go is down.
  Result<std::vector<std::pair<uint32_t, TargetRef>>> DeleteTargets(const StripeGeometry& g, const WireShardKey& key,
                                                                    bool everywhere, size_t& slot_requests);
  // DeleteOnce of an unprotected stripe: earlier placements' copies, then the slot's (as
  // DeleteFrom). Never blocks (retries run it on the timer thread).
  void DeleteUnprotected(const WireShardKey& key, bool everywhere, std::function<void(Status)> done);
  // Deletes `key` on `t`, fetching a refused capability token again once; kNotFound is OK.
  void DeleteFrom(const TargetRef& t, const WireShardKey& key, bool refetched, std::function<void(Status)> done);
  // Deletes the copies EarlierCopies names, so that a read falling back there cannot find what
  // was deleted; blocking. Whether one was there. Best effort, unless `everywhere`: then a down
  // target or a failed delete is kUnavailable (retry).
  Result<bool> DeleteEarlier(size_t width, const WireShardKey& key, bool everywhere);

  // Heads (stripe_heads.cc).
  // Replicated whole-record operations for heads: one attempt on every copy.
  Result<ShardData> ReadHeadOnce(const Redundancy& red, const WireShardKey& key);

  // Suspicion of late targets, and read repair (stripe_io.cc).
  // A target that let a request wait past `straggler` (stopped, overloaded: a gray failure) is
  // treated as down by this client for kSuspectFor, so later stripes do not wait for it too.
  static constexpr std::chrono::seconds kSuspectFor{10};
  void Suspect(const TargetRef& t);
  bool Suspected(uint32_t id) const;  // within kSuspectFor of a Suspect
  // Read repair: writes `bytes` back to shard `key` on `t` in the background.
  void WriteBack(const TargetRef& t, const WireShardKey& key, std::shared_ptr<AlignedBuffer> bytes, uint64_t version);

  // Answers of reads that do not know every copy's version (stripe_map_confirm.cc).
  // Whether a read knows the version of the copy on slot target `t` (it answered, or has none;
  // a target the map shows down or recovering is not asked, unless this client only suspects it).
  bool Checked(const TargetRef& t, const std::optional<Result<ShardData>>& reply) const;
  // done(r); when `confirm` (not every copy's version known) and r is ok, only once ConfirmMap
  // says the map is still at `placed_at` (otherwise a stale-map refusal, MapMovedDuringRead).
  void Answer(uint64_t placed_at, const WireShardKey& key, bool confirm, std::function<void(Result<ShardData>)> done,
              Result<ShardData> r);
  // Calls `done(true)` once a map fetched from mgmt after this call still has epoch `epoch`
  // (false: the map changed, or mgmt could not be asked). For a read answered without the
  // version of every copy it asked (a replica late or failing): a copy that missed a write is
  // marked in mgmt's map before the write is acknowledged, so a map unchanged since the read
  // was placed means it read no copy an acknowledged write missed. One fetch at a time, on a
  // thread of its own (started with the first call), serving every caller that came before it
  // began.
  void ConfirmMap(uint64_t epoch, std::function<void(bool)> done);
  void ConfirmLoop();

  // Reports of the targets writes missed (stripe_missed_reports.cc).
  // Runs report_ for the shards of `key` that `written` says were not written, naming the
  // targets the write went to (`targets`, by shard; see above), then `done` with its result.
  // report_ blocks (a call to mgmt), so it runs on reports_, never on the transport or timer
  // thread that completed the write; `done` runs there too (or at once, when nothing is to be
  // reported).
  // Reports are coalesced per container: one call to mgmt in flight, and the misses that come
  // meanwhile go together in the next (each is answered by a call sent after it), so a stream
  // of degraded writes costs mgmt one call per round trip, not one per write.
  void ReportMissedThen(const WireShardKey& key, const std::vector<uint32_t>& targets,
                        const std::vector<bool>& written, std::function<void(Status)> done);
  // Sends the container's queued reports until none is left (on reports_), at most
  // kMissedRoundsPerTask calls before it queues itself again behind the others.
  void SendMissed(uint64_t container);
  static constexpr int kMissedRoundsPerTask = 4;
  // Runs `fn`, which may block (a call to mgmt), on reports_ (inline when there is none).
  void RunBlocking(std::function<void()> fn);

  ShardClient* shards_;
  ClusterView* view_;
  std::function<Result<uint64_t>(uint64_t container, const std::vector<uint32_t>&)> report_;
  bool read_recovering_ = false;
  const std::chrono::milliseconds straggler_;
  std::mutex repairs_mu_;
  std::condition_variable repairs_cv_;
  int repairs_in_flight_ = 0;  // guarded by repairs_mu_
  mutable std::mutex suspect_mu_;
  std::map<uint32_t, std::chrono::steady_clock::time_point> suspect_;  // guarded by suspect_mu_
  // Targets this client reported missing a write, by (target, container): the map epoch that
  // records it (see set_report_degraded). Guarded by suspect_mu_.
  mutable std::map<std::pair<uint32_t, uint64_t>, uint64_t> reported_;
  StripeIoStats stats_;
  std::mutex coders_mu_;
  std::map<std::pair<uint32_t, uint32_t>, std::unique_ptr<ErasureCoder>> coders_;
  std::mutex reports_mu_;
  std::unique_ptr<ThreadPool> reports_;  // guarded by reports_mu_; null once tearing down
  struct MissedReports {  // of one container, see ReportMissedThen
    bool in_flight = false;
    std::set<uint32_t> targets;
    std::vector<std::function<void(const Result<uint64_t>&)>> waiting;
  };
  std::mutex missed_mu_;
  std::map<uint64_t, MissedReports> missed_;  // guarded by missed_mu_
  struct Confirmation {
    uint64_t epoch;
    std::function<void(bool)> done;
  };
  std::mutex confirm_mu_;
  std::condition_variable confirm_cv_;
  std::vector<Confirmation> confirms_;  // guarded by confirm_mu_: waiting for the next fetch
  bool confirm_stop_ = false;           // guarded by confirm_mu_
  std::thread confirm_thread_;          // started by the first ConfirmMap (under confirm_mu_)
  Timer timer_;
};

// How heads of a container with `red` are kept: none stays none; a protected container's
// heads are replicated on m + 1 targets.
Redundancy HeadRedundancy(const Redundancy& red);

}  // namespace penstock

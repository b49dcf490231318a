// engine.cc — Engine construction: options, device/index pairing (the superblock), replay of
// the index journal, and recovery of the segment table from the index. The data path is in
// engine_ops.cc.
#include "engine/engine.h"

#include <fmt/format.h>

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "common/log.h"
#include "common/thread_pool.h"
#include "engine/commit_request.h"
#include "engine/device.h"
#include "engine/file_device.h"
#include "engine/format.h"
#include "engine/index.h"
#include "engine/io_ring.h"
#include "engine/journal.h"
#include "engine/null_device.h"
#include "engine/segment_owners.h"
#include "engine/segment_table.h"

namespace penstock {

using engine::DeviceHeader;
using engine::kBlockSize;
using engine::kDeviceHeaderBytes;

std::string ShardKey::ToString() const {
  std::string stripe_text = stripe == kHeadStripe ? "head" : std::to_string(stripe);
  return fmt::format("c={} obj={:016x}:{:016x} stripe={} shard={}", container, object.hi,
                     object.lo, stripe_text, shard);
}

namespace {

constexpr uint64_t kMaxSegmentBytes = 1ull << 30;

// CPUs this process may run on.
unsigned UsableCpus() {
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) return static_cast<unsigned>(CPU_COUNT(&cpus));
  return std::max(1u, std::thread::hardware_concurrency());
}

Status ValidateOptions(const EngineOptions& o) {
  if (o.index_dir.empty()) return InvalidArgument("index_dir is empty; set it to a directory");
  if (o.segment_bytes < kBlockSize || o.segment_bytes % kBlockSize != 0 ||
      o.segment_bytes > kMaxSegmentBytes) {
    return InvalidArgument(fmt::format("segment_bytes {} must be a multiple of 4096 between 4 KiB"
                                       " and 1 GiB", o.segment_bytes));
  }
  if (o.queue_depth == 0) return InvalidArgument("queue_depth must be at least 1");
  if (o.device_kind != "file" && o.device_kind != "null") {
    return InvalidArgument(fmt::format("device_kind '{}' is unknown; use \"file\" or \"null\"",
                                       o.device_kind));
  }
  if (o.journal_bytes != 0 && o.journal_bytes < engine::kMaxJournalRecordBytes) {
    return InvalidArgument(fmt::format("journal_bytes {} must be 0 (all of the header region) or "
                                       "at least {}", o.journal_bytes,
                                       engine::kMaxJournalRecordBytes));
  }
  if (o.commit_batches_in_flight > engine::Journal::kMaxRecordsInFlight) {
    return InvalidArgument(fmt::format("commit_batches_in_flight {} must be at most {} (0: chosen by CPU count)",
                                       o.commit_batches_in_flight, engine::Journal::kMaxRecordsInFlight));
  }
  if (!(o.gc_min_dead_fraction > 0 && o.gc_min_dead_fraction <= 1)) {
    return InvalidArgument(fmt::format("gc_min_dead_fraction {} must be in (0, 1]",
                                       o.gc_min_dead_fraction));
  }
  return OkStatus();
}

Status ReadHeaderBlock(engine::Device& device, std::optional<DeviceHeader>& out) {
  AlignedBuffer block(kBlockSize);
  PS_RETURN_IF_ERROR(device.Read(0, {block.data(), block.capacity()}));
  auto header = engine::DecodeDeviceHeader(block.span());
  if (!header.ok()) return header.status().WithContext(device.name());
  out = *header;
  return OkStatus();
}

Status WriteHeaderBlock(engine::Device& device, const DeviceHeader& header) {
  std::string bytes = engine::EncodeDeviceHeader(header);
  AlignedBuffer block(kBlockSize);
  block.resize_within_capacity(0);
  block.ZeroPadding();
  std::memcpy(block.data(), bytes.data(), bytes.size());
  return device.Write(0, {block.data(), block.capacity()});
}

std::string UuidText(const uint8_t (&uuid)[16]) {
  std::string out;
  for (uint8_t b : uuid) out += fmt::format("{:02x}", b);
  return out;
}

// First use (the index holds no superblock): formats the device and the index, unless the
// device already holds a Penstock header (`on_device`) or is too small. Returns the layout.
Result<DeviceHeader> FormatDeviceAndIndex(const EngineOptions& o, engine::Device& device,
                                          engine::Index& index,
                                          const std::optional<DeviceHeader>& on_device) {
  if (on_device) {
    return FailedPrecondition(fmt::format(
        "data path '{}' already holds a Penstock device (uuid {}) but index '{}' is empty; "
        "point index_dir at that device's index, or wipe the device's first 4 KiB to reformat "
        "it (destroys its data)", device.name(), UuidText(on_device->uuid), index.dir()));
  }
  if (device.size() < kDeviceHeaderBytes + o.segment_bytes) {
    return InvalidArgument(fmt::format(
        "data path '{}' has {} bytes, too small for the 1 MiB header plus one segment of {} "
        "bytes; raise capacity_bytes or lower segment_bytes", device.name(), device.size(),
        o.segment_bytes));
  }
  DeviceHeader header;
  std::random_device rd;
  for (uint8_t& b : header.uuid) b = static_cast<uint8_t>(rd());
  header.segment_bytes = o.segment_bytes;
  header.segment_count = (device.size() - kDeviceHeaderBytes) / o.segment_bytes;
  if (header.segment_count >= engine::kNoSegment) {  // segment ids are 32-bit; kNoSegment means none
    return InvalidArgument(fmt::format("data path '{}' would have {} segments of {} bytes, more than the {} a "
                                       "target can address; raise segment_bytes", device.name(),
                                       header.segment_count, o.segment_bytes, engine::kNoSegment - 1));
  }
  // Index first: a crash before the device header is written is repaired on the next Open.
  PS_RETURN_IF_ERROR(index.PutSuperblock(header));
  PS_RETURN_IF_ERROR(WriteHeaderBlock(device, header));
  PS_LOG_INFO("formatted {} ({} segments of {} bytes, uuid {}) with index {}", device.name(),
              header.segment_count, header.segment_bytes, UuidText(header.uuid), index.dir());
  return header;
}

// Pairs the device with the index: formats both on first use, and otherwise checks that the
// device header and the index's superblock are the same. Returns the layout to use.
Result<DeviceHeader> PairDeviceAndIndex(const EngineOptions& o, engine::Device& device,
                                        engine::Index& index) {
  std::optional<DeviceHeader> on_device;
  PS_RETURN_IF_ERROR(ReadHeaderBlock(device, on_device));
  PS_ASSIGN_OR_RETURN(std::optional<DeviceHeader> in_index, index.GetSuperblock());
  if (!in_index) return FormatDeviceAndIndex(o, device, index, on_device);

  const DeviceHeader& header = *in_index;
  if (header.segment_bytes != o.segment_bytes) {
    return InvalidArgument(fmt::format("index '{}' was formatted with segment_bytes={}, not {}; "
                                       "open it with the original value", index.dir(),
                                       header.segment_bytes, o.segment_bytes));
  }
  if (header.data_offset + header.segment_count * header.segment_bytes > device.size()) {
    return FailedPrecondition(fmt::format("data path '{}' has {} bytes but index '{}' expects {} "
                                          "segments of {} bytes; wrong device, or it shrank",
                                          device.name(), device.size(), index.dir(),
                                          header.segment_count, header.segment_bytes));
  }
  if (!on_device && !device.persistent()) return header;  // the null device keeps nothing
  if (!on_device) {
    bool has_shards = false;
    PS_RETURN_IF_ERROR(index.Scan(engine::Index::AllShardsPrefix(), std::nullopt,
                                  [&](const ShardKey&, const engine::ShardRecord&) {
                                    has_shards = true;
                                    return false;
                                  }));
    if (has_shards) {
      return DataLoss(fmt::format("data path '{}' has no Penstock header but index '{}' maps "
                                  "shards onto it; wrong data_path, or the device was wiped",
                                  device.name(), index.dir()));
    }
    PS_RETURN_IF_ERROR(WriteHeaderBlock(device, header));  // finish an interrupted format
    return header;
  }
  if (std::memcmp(on_device->uuid, header.uuid, sizeof(header.uuid)) != 0) {
    return FailedPrecondition(fmt::format(
        "data path '{}' (uuid {}) does not belong to index '{}' (uuid {}); pair each device "
        "with its own index_dir", device.name(), UuidText(on_device->uuid), index.dir(),
        UuidText(header.uuid)));
  }
  if (header.format_version < engine::kDeviceFormatVersion ||
      on_device->format_version < engine::kDeviceFormatVersion) {
    // An older format (1: no index journal; 2: no block maps): mark both as the current one
    // before the journal is used or a block map is written, so an older build refuses them from
    // now on. Index first, as when formatting.
    DeviceHeader upgraded = header;
    upgraded.format_version = engine::kDeviceFormatVersion;
    PS_RETURN_IF_ERROR(index.PutSuperblock(upgraded));
    PS_RETURN_IF_ERROR(WriteHeaderBlock(device, upgraded));
    PS_RETURN_IF_ERROR(device.Sync());
    PS_LOG_INFO("upgraded {} and index {} from device format {} to {}", device.name(), index.dir(),
                header.format_version, engine::kDeviceFormatVersion);
    return upgraded;
  }
  return header;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::Open(const EngineOptions& options) {
  PS_RETURN_IF_ERROR(ValidateOptions(options));
  if (options.device_kind == "null") {
    return Open(options, std::make_unique<engine::NullDevice>(
                             options.capacity_bytes,
                             options.data_path.empty() ? "null" : "null:" + options.data_path));
  }
  PS_ASSIGN_OR_RETURN(std::unique_ptr<engine::FileDevice> device,
                      engine::FileDevice::Open(options.data_path, options.capacity_bytes,
                                               options.queue_depth, options.zero_fill_new_file));
  return Open(options, std::move(device));
}

Result<std::unique_ptr<Engine>> Engine::Open(const EngineOptions& options,
                                             std::unique_ptr<engine::Device> device) {
  PS_RETURN_IF_ERROR(ValidateOptions(options));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<engine::Index> index, engine::Index::Open(options.index_dir, device->persistent()));
  PS_ASSIGN_OR_RETURN(DeviceHeader header, PairDeviceAndIndex(options, *device, *index));
  // The journal first: until it is replayed the index may lack acknowledged batches.
  std::unique_ptr<engine::Journal> journal;
  if (device->persistent()) {
    uint64_t end = header.data_offset;
    if (options.journal_bytes != 0) {
      end = std::min(end, engine::kJournalBegin + options.journal_bytes / kBlockSize * kBlockSize);
    }
    PS_ASSIGN_OR_RETURN(journal, engine::Journal::Open(*device, *index, header, end));
  }
  PS_ASSIGN_OR_RETURN(bool dropped, index->DropSegmentEntries());
  if (dropped) PS_LOG_INFO("index '{}': dropped the segment entries an older version kept there", index->dir());
  uint32_t reserve = options.gc_enabled ? options.gc_reserve_segments : 0;
  reserve = std::min<uint64_t>(reserve, header.segment_count > 0 ? header.segment_count - 1 : 0);
  auto table = std::make_unique<engine::SegmentTable>(
      static_cast<uint32_t>(header.segment_count), header.segment_bytes, reserve);
  std::unique_ptr<Engine> e(new Engine(options, std::move(device), std::move(index),
                                       std::move(journal), std::move(table), header.data_offset));
  PS_RETURN_IF_ERROR(e->Recover());
  if (e->journal_) {
    // Journal::Open left the index durable through its last record.
    e->durable_seq_ = e->journal_->position().seq;
    e->applied_seq_ = e->durable_seq_;
    e->journal_replayed_ = e->journal_->records_replayed();
    e->table_->SetJournalSeq(e->durable_seq_);
    e->table_->SetDurableSeq(e->durable_seq_);
  }
  e->StartThreads();
  return e;
}

Engine::Engine(EngineOptions options, std::unique_ptr<engine::Device> device,
               std::unique_ptr<engine::Index> index, std::unique_ptr<engine::Journal> journal,
               std::unique_ptr<engine::SegmentTable> table, uint64_t data_offset)
    : options_(std::move(options)),
      segment_bytes_(table->segment_bytes()),
      commit_batches_in_flight_(options_.commit_batches_in_flight != 0 ? options_.commit_batches_in_flight
                                : UsableCpus() >= 4                  ? 3u
                                                                     : 1u),
      data_offset_(data_offset),
      device_(std::move(device)),
      index_(std::move(index)),
      journal_(std::move(journal)),
      table_(std::move(table)),
      owners_(std::make_unique<engine::SegmentOwners>(table_->segment_count())),
      gather_(std::chrono::microseconds(options_.commit_gather_us), options_.commit_overlap_min_requests),
      pipeline_(std::make_unique<engine::CommitPipeline>()),
      last_index_sync_(std::chrono::steady_clock::now()) {}

Engine::~Engine() {
  StopThreads();
  // Before the members an asynchronous read's completion uses (the segment table): the device
  // waits for reads still in flight (there should be none: see Ownership in engine.h).
  journal_.reset();  // holds a reference to the device
  device_.reset();
}

void Engine::StartThreads() {
  committer_ = NamedThread("ps-commit", [this] { CommitLoop(); });
  commit_io_thread_ = NamedThread("ps-commit-io", [this] { CommitIoLoop(); });
  applier_ = NamedThread("ps-apply", [this] { ApplyLoop(); });
  if (options_.gc_enabled && options_.gc_background) gc_thread_ = NamedThread("ps-gc", [this] { GcLoop(); });
  if (options_.scrub_rate_bytes_per_sec > 0) scrub_thread_ = NamedThread("ps-scrub", [this] { ScrubLoop(); });
  if (options_.zero_rate_bytes_per_sec > 0 && device_->persistent()) {
    zero_thread_ = NamedThread("ps-zero", [this] { ZeroLoop(); });
  }
}

void Engine::StopThreads() {
  {
    std::lock_guard lock(bg_mu_);
    bg_stop_ = true;
  }
  bg_cv_.notify_all();
  if (gc_thread_.joinable()) gc_thread_.join();  // GC may still need the committer
  if (scrub_thread_.joinable()) scrub_thread_.join();
  if (zero_thread_.joinable()) zero_thread_.join();
  {
    std::lock_guard lock(commit_mu_);
    commit_stop_ = true;
  }
  commit_cv_.notify_all();
  if (committer_.joinable()) committer_.join();
  {
    std::lock_guard lock(commit_mu_);
    commit_io_stop_ = true;
  }
  commit_io_cv_.notify_all();
  if (commit_io_thread_.joinable()) commit_io_thread_.join();
  {
    std::lock_guard lock(pipeline_->mu);
    pipeline_->stop = true;
  }
  pipeline_->work_cv.notify_all();
  if (applier_.joinable()) applier_.join();
}

bool Engine::SleepUntil(std::chrono::steady_clock::time_point until) {
  std::unique_lock lock(bg_mu_);
  return !bg_cv_.wait_until(lock, until, [&] { return bg_stop_; });
}

void Engine::MarkCorrupt(const ShardKey& key) {
  std::lock_guard lock(corrupt_mu_);
  corrupt_.insert(key);
}

std::vector<ShardKey> Engine::CorruptShards() const {
  std::lock_guard lock(corrupt_mu_);
  return {corrupt_.begin(), corrupt_.end()};
}

Status Engine::Recover() {
  uint64_t shards = 0;
  Status bad;
  PS_RETURN_IF_ERROR(index_->Scan(
      engine::Index::AllShardsPrefix(), std::nullopt,
      [&](const ShardKey& key, const engine::ShardRecord& record) {
        ++shards;
        for (const engine::BlockRun& run : record.runs) {
          if (run.hole()) continue;
          if (run.segment >= table_->segment_count() ||
              run.offset + run.block_count * kBlockSize > segment_bytes_) {
            bad = DataLoss(fmt::format("index '{}': shard {} points outside the device (segment "
                                       "{}, offset {}); the index is corrupt, rebuild this target",
                                       index_->dir(), key.ToString(), run.segment, run.offset));
            return false;
          }
          table_->RecoverExtent({run.segment, run.offset, run.block_count * kBlockSize});
        }
        owners_->Add(key, record.runs);
        return true;
      }));
  PS_RETURN_IF_ERROR(bad);
  table_->FinishRecovery();
  shards_ = shards;
  auto stats = table_->Stats();
  PS_LOG_INFO("engine open: {} shards, {} live bytes, {}/{} segments free", shards,
              stats.live_bytes, stats.free_segments, stats.total_segments);
  return OkStatus();
}

EngineStats Engine::Stats() const {
  WaitApplied();  // the space and shards of acknowledged writes are accounted
  engine::SegmentTableStats t = table_->Stats();
  EngineStats s;
  s.capacity_bytes = t.total_segments * segment_bytes_;
  s.used_bytes = t.used_bytes;
  s.live_bytes = t.live_bytes;
  s.dead_bytes = t.dead_bytes;
  s.free_segments = t.free_segments;
  s.total_segments = t.total_segments;
  s.shards = shards_.load();
  s.reads = reads_.load();
  s.writes = writes_.load();
  s.deletes = deletes_.load();
  s.checksum_errors = checksum_errors_.load();
  s.registered_buffer_ios = engine::IoRing::registered_buffer_ios();
  s.bytes_read = bytes_read_.load();
  s.bytes_written = bytes_written_.load();
  s.device_bytes_written = device_bytes_written_.load();
  s.write_amplification = s.bytes_written == 0 ? 0.0
                              : static_cast<double>(s.device_bytes_written) /
                                    static_cast<double>(s.bytes_written);
  s.commit_batches = commit_batches_.load();
  s.commit_ops = commit_ops_.load();
  s.commit_overlapped = commit_overlapped_.load();
  s.commit_redone = commit_redone_.load();
  s.segment_owner_entries = owners_->Entries();
  const engine::Index::CacheCounts index_counts = index_->cache_counts();
  s.index_lookups = index_counts.gets;
  s.index_cache_hits = index_counts.hits;
  s.index_syncs = index_syncs_.load();
  s.journal_replayed = journal_replayed_.load();
  s.gc_segments_cleaned = gc_segments_cleaned_.load();
  s.gc_bytes_moved = gc_bytes_moved_.load();
  s.scrub_bytes_verified = scrub_bytes_verified_.load();
  s.scrub_corrupt_shards = scrub_corrupt_shards_.load();
  s.zero_pending_segments = zero_pending_segments_.load();
  s.zeroed_bytes = zeroed_bytes_.load();
  return s;
}

std::shared_mutex& Engine::KeyLock(const ShardKey& key) {
  return key_locks_[ShardKeyHash{}(key) % kKeyLockStripes];
}

}  // namespace penstock

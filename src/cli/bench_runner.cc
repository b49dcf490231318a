#include "cli/bench_runner.h"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "cli/bench_pattern.h"
#include "common/buffer.h"
#include "common/log.h"

namespace penstock::cli {

namespace {

using Clock = std::chrono::steady_clock;

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// CPU time of the calling thread.
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

const char* ModeName(BenchMode m) {
  switch (m) {
    case BenchMode::kWrite: return "write";
    case BenchMode::kSeq: return "seq";
    case BenchMode::kRand: return "rand";
    case BenchMode::kMixed: return "mixed";
  }
  return "?";
}

struct Slot {
  AlignedBuffer buf;        // reads land here
  AlignedBuffer wbuf;       // writes leave from here: the pattern of what they write
  int64_t wbuf_align = -1;  // offset % 4 KiB of the pattern wbuf holds (-1: none yet)
  Clock::time_point started;
  uint64_t bytes = 0;
  bool write = false;
  size_t object = 0;        // a read's object (index in the run's objects) and offset
  uint64_t offset = 0;
  // verify: what the check of the last read found, and its CPU time (until Handle counts it).
  bool checked = false;
  BenchPatternCheck check;
  double check_cpu_s = 0;
};

// Objects to read (seq, rand, mixed): what an earlier `write --no-cleanup` left.
Result<std::vector<std::shared_ptr<Object>>> OpenBenchObjects(Client& client, const BenchOptions& o) {
  std::vector<std::shared_ptr<Object>> objects;
  PS_ASSIGN_OR_RETURN(auto list, client.List(o.container));
  for (const auto& info : list) {
    if (info.name.rfind("bench-", 0) != 0 || info.size < o.size) continue;
    PS_ASSIGN_OR_RETURN(auto obj, client.Open(o.container, info.name));
    objects.push_back(std::move(obj));
  }
  if (objects.empty()) {
    return FailedPrecondition("container '" + o.container + "' has no bench-* objects of at least " +
                              std::to_string(o.size) + " bytes; run `penstock bench write --size " +
                              std::to_string(o.size) + " --no-cleanup` first");
  }
  return objects;
}

// The latency percentiles of `lat_us` (sorted here) into `r`.
void SummarizeLatencies(std::vector<double>& lat_us, BenchResult* r) {
  if (lat_us.empty()) return;
  std::sort(lat_us.begin(), lat_us.end());
  auto pct = [&](double p) { return lat_us[std::min(lat_us.size() - 1, static_cast<size_t>(p * static_cast<double>(lat_us.size())))]; };
  r->p50_us = pct(0.5);
  r->p99_us = pct(0.99);
  r->p999_us = pct(0.999);
  r->max_us = lat_us.back();
}

// One run: its slots (one operation in flight each), what it has counted so far, and how it
// issues. One thread at a time works on it (see RunOnCallbacks).
class BenchRun {
 public:
  // `objects`: what read modes read (empty for write runs).
  BenchRun(Client& client, const BenchOptions& o, const BenchProgress& progress,
           std::vector<std::shared_ptr<Object>> objects);
  Result<BenchResult> Run();

 private:
  void PrepareBuffers();
  // Issues the next operation of `slot`; false when a write run could not open its object.
  bool Issue(size_t slot);
  // `s`'s write buffer, holding the pattern of object `key` from `offset`.
  IoVec Stamp(Slot& s, uint64_t key, uint64_t offset);
  // verify: checks what the read of `c`'s slot returned against the pattern, into the slot.
  // Touches only that slot (no other thread does until Handle issues it again), so it runs on
  // the thread that delivered `c` before that thread takes the run's state: reads are checked
  // in parallel, not one at a time by the owner.
  void CheckRead(const IoCompletion& c);
  // Counts the slot's check of a read of `bytes` into the result (the owner's part).
  void CountCheck(Slot& s, uint64_t bytes);
  // One completion: counted, and its slot issued again until the time is up.
  void Handle(const IoCompletion& c);
  void Report();    // progress, about once a second
  void IssueAll();  // one operation per slot
  void RunOnCallbacks();

  Client& client_;
  const BenchOptions& o_;
  const BenchProgress& progress_;
  std::vector<std::shared_ptr<Object>> objects_;
  std::vector<uint64_t> keys_;  // BenchObjectKey of each of objects_
  std::map<uint64_t, std::shared_ptr<Object>> written_;
  std::mt19937_64 rng_{12345};
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<MemoryRegistration>> registrations_;
  CompletionQueue* q_ = nullptr;  // where Issue() sends completions (RunOnCallbacks' queue)
  std::vector<double> lat_us_;
  BenchResult r_;
  uint64_t next_object_ = 0, seq_object_ = 0, seq_offset_ = 0;
  Status open_error_;
  Clock::time_point t0_, last_report_;
  // When issuing stops: t0_ + the run's seconds (a double count, as given).
  std::chrono::time_point<Clock, std::chrono::duration<double, std::nano>> stop_;
  size_t inflight_ = 0;
  std::atomic<uint64_t> ops_so_far_{0}, bytes_so_far_{0};  // for progress, read by the run's thread
};

BenchRun::BenchRun(Client& client, const BenchOptions& o, const BenchProgress& progress,
                   std::vector<std::shared_ptr<Object>> objects)
    : client_(client), o_(o), progress_(progress), objects_(std::move(objects)), slots_(o.concurrency) {
  for (const auto& obj : objects_) keys_.push_back(BenchObjectKey(obj->name()));
  PrepareBuffers();
  r_.mode = ModeName(o_.mode);
}

void BenchRun::PrepareBuffers() {
  // Pooled buffers (huge pages from 256 KiB up, buffer_pool.h), as an application moving data
  // at speed should use: a target on this host copying out of or into them (direct copies,
  // transport/local_direct.h) pins 2 MiB pages instead of 4 KiB ones.
  const bool mixed = o_.mode == BenchMode::kMixed;
  const bool reads = o_.mode != BenchMode::kWrite && !(mixed && o_.mixed_write_percent >= 100);
  const bool writes = o_.mode == BenchMode::kWrite || (mixed && o_.mixed_write_percent > 0);
  for (auto& s : slots_) {
    if (writes) {  // its pattern is written at its first write; its pages are had now, untimed
      s.wbuf = AlignedBuffer(o_.size);
      std::memset(s.wbuf.data(), 0, s.wbuf.size());
    }
    if (!reads) continue;
    s.buf = AlignedBuffer(o_.size);
    std::memset(s.buf.data(), 0, s.buf.size());
  }
  // The read buffers are reused for every operation: register them once with the data plane
  // (RDMA then skips per-transfer registration; nothing changes on tcp or shared memory).
  for (auto& s : slots_) {
    if (!reads) break;
    auto reg = client_.RegisterMemory(s.buf.data(), s.buf.size());
    if (!reg.ok()) {
      PS_LOG_WARN("bench: read buffers stay unregistered: {}", reg.status().ToString());
      registrations_.clear();
      break;
    }
    registrations_.push_back(std::move(reg).value());
  }
}

IoVec BenchRun::Stamp(Slot& s, uint64_t key, uint64_t offset) {
  // Offsets are multiples of the size, so the alignment, and the buffer's body, rarely change.
  const double t = ThreadCpuSeconds();
  std::span<std::byte> b(s.wbuf.data(), o_.size);
  const auto align = static_cast<int64_t>(offset % kBenchPatternBlock);
  if (s.wbuf_align == align) {
    RestampBenchPattern(key, offset, b);
  } else {
    FillBenchPattern(key, offset, b);
    s.wbuf_align = align;
  }
  r_.stamp_seconds += ThreadCpuSeconds() - t;
  return {b.data(), b.size()};
}

void BenchRun::CheckRead(const IoCompletion& c) {
  Slot& s = slots_[c.user_data];
  if (!o_.verify || s.write || !c.status.ok() || s.checked) return;
  const double t = ThreadCpuSeconds();
  s.check = CheckBenchPattern(keys_[s.object], s.offset, {s.buf.data(), c.bytes});
  s.check_cpu_s = ThreadCpuSeconds() - t;
  s.checked = true;
}

void BenchRun::CountCheck(Slot& s, uint64_t bytes) {
  r_.verified_bytes += bytes;
  r_.mismatches += s.check.mismatched_blocks;
  r_.verify_seconds += s.check_cpu_s;
  if (s.check.first_offset && r_.first_mismatch_object.empty()) {
    r_.first_mismatch_object = objects_[s.object]->name();
    r_.first_mismatch_offset = *s.check.first_offset;
  }
  s.checked = false;
}

bool BenchRun::Issue(size_t slot) {
  Slot& s = slots_[slot];
  s.started = Clock::now();
  s.bytes = o_.size;
  const bool write = o_.mode == BenchMode::kWrite ||
                     (o_.mode == BenchMode::kMixed && static_cast<int>(rng_() % 100) < o_.mixed_write_percent);
  s.write = write;
  if (o_.mode == BenchMode::kWrite) {
    uint64_t i = o_.objects ? next_object_ % o_.objects : next_object_;
    ++next_object_;
    auto& obj = written_[i];
    if (!obj) {
      auto opened = client_.Open(o_.container, BenchObjectName(i), {.replace = true});
      if (!opened.ok()) {
        open_error_ = opened.status();
        return false;
      }
      obj = *opened;
    }
    obj->WriteAsync(0, {Stamp(s, BenchObjectKey(obj->name()), 0)}, *q_, slot);
    return true;
  }
  uint64_t offset;
  if (o_.mode == BenchMode::kSeq || o_.sequential) {
    s.object = seq_object_ % objects_.size();
    offset = seq_offset_;
    seq_offset_ += o_.size;
    if (seq_offset_ + o_.size > objects_[s.object]->size()) {
      seq_offset_ = 0;
      ++seq_object_;
    }
  } else {
    s.object = rng_() % objects_.size();
    offset = (rng_() % (objects_[s.object]->size() / o_.size)) * o_.size;
  }
  s.offset = offset;
  Object* obj = objects_[s.object].get();
  if (write) {
    obj->WriteAsync(offset, {Stamp(s, keys_[s.object], offset)}, *q_, slot);
  } else {
    obj->ReadAsync(offset, {{s.buf.data(), o_.size}}, *q_, slot);
  }
  return true;
}

void BenchRun::Handle(const IoCompletion& c) {
  --inflight_;
  Slot& s = slots_[c.user_data];
  const auto now = Clock::now();
  ++r_.ops;
  if (c.status.ok()) {
    r_.bytes += c.bytes;
    lat_us_.push_back(std::chrono::duration<double, std::micro>(now - s.started).count());
    if (o_.verify && !s.write) {
      CheckRead(c);  // done already when a callback delivered it
      CountCheck(s, c.bytes);
    }
  } else if (r_.errors++ == 0) {
    r_.first_error = c.status.ToString();
  }
  ops_so_far_.store(r_.ops, std::memory_order_relaxed);
  bytes_so_far_.store(r_.bytes, std::memory_order_relaxed);
  if (now < stop_ && open_error_.ok() && Issue(c.user_data)) ++inflight_;
}

void BenchRun::Report() {
  const auto now = Clock::now();
  if (progress_ && now - last_report_ >= std::chrono::seconds(1)) {
    last_report_ = now;
    progress_(std::chrono::duration<double>(now - t0_).count(), ops_so_far_.load(), bytes_so_far_.load());
  }
}

void BenchRun::IssueAll() {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!Issue(i)) break;
    ++inflight_;
  }
}

void BenchRun::RunOnCallbacks() {
  // Each completion issues the slot's next operation on the transport thread that delivered
  // it, as an application with a callback queue would (bench write opens each new object
  // there: a replace-open sends nothing; only a container lookup after a map change asks
  // mgmt, once),
  // rather than waking this thread for every operation (two thread switches an operation).
  // One thread at a time owns the run's state (`owner`); a completion that arrives while
  // another thread owns it, or during an issue on the owning thread itself (one that fails
  // at once), is left in `deferred` for the owner.
  std::mutex mu;
  std::condition_variable idle;
  bool owner = true;  // this thread, until the first operations are out
  std::vector<IoCompletion> deferred;
  auto drain_and_release = [&] {
    std::unique_lock lock(mu);
    while (!deferred.empty()) {
      std::vector<IoCompletion> todo;
      todo.swap(deferred);
      lock.unlock();
      for (const IoCompletion& c : todo) Handle(c);
      lock.lock();
    }
    owner = false;
    if (inflight_ == 0) idle.notify_all();
  };
  CompletionQueue callback_cq([&](IoCompletion c) {
    CheckRead(c);
    {
      std::lock_guard lock(mu);
      if (owner) {
        deferred.push_back(std::move(c));
        return;
      }
      owner = true;
    }
    Handle(c);
    drain_and_release();
  });
  q_ = &callback_cq;
  IssueAll();
  drain_and_release();
  {
    std::unique_lock lock(mu);
    while (owner || inflight_ > 0) {
      idle.wait_for(lock, std::chrono::milliseconds(500));
      lock.unlock();
      Report();
      lock.lock();
    }
  }
  // The queue counts an operation done only once its callback has returned.
  while (callback_cq.in_flight() > 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

Result<BenchResult> BenchRun::Run() {
  const double cpu0 = CpuSeconds();
  const ReadPathStats reads0 = client_.read_path_stats();
  t0_ = Clock::now();
  stop_ = t0_ + std::chrono::duration<double>(o_.seconds);
  last_report_ = t0_;
  RunOnCallbacks();
  if (!open_error_.ok()) return open_error_;
  r_.seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
  r_.cpu_seconds = std::max(0.0, CpuSeconds() - cpu0 - r_.verify_seconds - r_.stamp_seconds);
  r_.mb_per_s = static_cast<double>(r_.bytes) / r_.seconds / 1e6;
  r_.iops = static_cast<double>(r_.ops - r_.errors) / r_.seconds;
  r_.cpu_seconds_per_gb = r_.bytes ? r_.cpu_seconds / (static_cast<double>(r_.bytes) / 1e9) : 0;
  const ReadPathStats reads1 = client_.read_path_stats();
  r_.read_bytes = reads1.bytes - reads0.bytes;
  r_.read_bytes_copied = reads1.copied - reads0.copied;
  r_.objects = o_.mode == BenchMode::kWrite ? written_.size() : objects_.size();
  SummarizeLatencies(lat_us_, &r_);
  return r_;
}

}  // namespace

std::string BenchObjectName(uint64_t i) { return "bench-" + std::to_string(i); }

Result<BenchResult> RunBench(Client& client, const BenchOptions& o, const BenchProgress& progress) {
  if (o.size == 0) return InvalidArgument("--size must be at least 1 byte");
  if (o.concurrency == 0) return InvalidArgument("--concurrency must be at least 1");
  std::vector<std::shared_ptr<Object>> objects;
  if (o.mode != BenchMode::kWrite) {
    PS_ASSIGN_OR_RETURN(objects, OpenBenchObjects(client, o));
  }
  BenchRun run(client, o, progress, std::move(objects));
  return run.Run();
}

}  // namespace penstock::cli

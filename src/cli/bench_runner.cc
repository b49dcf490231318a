#include "cli/bench_runner.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

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
  AlignedBuffer buf;
  Clock::time_point started;
  uint64_t bytes = 0;
};

}  // namespace

std::string BenchObjectName(uint64_t i) { return "bench-" + std::to_string(i); }

Result<BenchResult> RunBench(Client& client, const BenchOptions& o, const BenchProgress& progress) {
  if (o.size == 0) return InvalidArgument("--size must be at least 1 byte");
  if (o.concurrency == 0) return InvalidArgument("--concurrency must be at least 1");
  // Objects to read (seq, rand, mixed): what an earlier `write --no-cleanup` left.
  std::vector<std::shared_ptr<Object>> objects;
  std::map<uint64_t, std::shared_ptr<Object>> written;
  if (o.mode != BenchMode::kWrite) {
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
  }

  std::mt19937_64 rng(12345);
  std::vector<Slot> slots(o.concurrency);
  // Pooled buffers (huge pages from 256 KiB up, buffer_pool.h), as an application moving data
  // at speed should use: a target on this host copying out of or into them (direct copies,
  // transport/local_direct.h) pins 2 MiB pages instead of 4 KiB ones.
  AlignedBuffer pattern(o.size);
  for (size_t i = 0; i < pattern.size(); ++i) pattern.data()[i] = std::byte{static_cast<unsigned char>(rng())};
  for (auto& s : slots) {
    s.buf = AlignedBuffer(o.size);
    std::memset(s.buf.data(), 0, s.buf.size());
  }
  // The read buffers are reused for every operation: register them once with the data plane
  // (RDMA then skips per-transfer registration; nothing changes on tcp or shared memory).
  std::vector<std::unique_ptr<MemoryRegistration>> registrations;
  for (auto& s : slots) {
    auto reg = client.RegisterMemory(s.buf.data(), s.buf.size());
    if (!reg.ok()) {
      PS_LOG_WARN("bench: read buffers stay unregistered: {}", reg.status().ToString());
      registrations.clear();
      break;
    }
    registrations.push_back(std::move(reg).value());
  }

  CompletionQueue cq;
  CompletionQueue* q = &cq;  // where issue() sends completions
  std::vector<double> lat_us;
  BenchResult r;
  r.mode = ModeName(o.mode);
  uint64_t next_object = 0, seq_object = 0, seq_offset = 0;
  Status open_error;

  auto issue = [&](size_t slot) -> bool {
    Slot& s = slots[slot];
    s.started = Clock::now();
    s.bytes = o.size;
    bool write = o.mode == BenchMode::kWrite ||
                 (o.mode == BenchMode::kMixed && static_cast<int>(rng() % 100) < o.mixed_write_percent);
    if (o.mode == BenchMode::kWrite) {
      uint64_t i = o.objects ? next_object % o.objects : next_object;
      ++next_object;
      auto& obj = written[i];
      if (!obj) {
        auto opened = client.Open(o.container, BenchObjectName(i), {.create = true});
        if (!opened.ok()) {
          open_error = opened.status();
          return false;
        }
        obj = *opened;
      }
      obj->WriteAsync(0, {{pattern.data(), o.size}}, *q, slot);
      return true;
    }
    std::shared_ptr<Object> obj;
    uint64_t offset;
    if (o.mode == BenchMode::kSeq || o.sequential) {
      obj = objects[seq_object % objects.size()];
      offset = seq_offset;
      seq_offset += o.size;
      if (seq_offset + o.size > obj->size()) {
        seq_offset = 0;
        ++seq_object;
      }
    } else {
      obj = objects[rng() % objects.size()];
      offset = (rng() % (obj->size() / o.size)) * o.size;
    }
    if (write) {
      obj->WriteAsync(offset, {{pattern.data(), o.size}}, *q, slot);
    } else {
      obj->ReadAsync(offset, {{s.buf.data(), o.size}}, *q, slot);
    }
    return true;
  };

  const double cpu0 = CpuSeconds();
  const ReadPathStats reads0 = client.read_path_stats();
  const auto t0 = Clock::now();
  const auto stop = t0 + std::chrono::duration<double>(o.seconds);
  auto last_report = t0;
  size_t inflight = 0;
  std::atomic<uint64_t> ops_so_far{0}, bytes_so_far{0};  // for progress, read by this thread
  // One completion: counted, and its slot issued again until the time is up.
  auto handle = [&](const IoCompletion& c) {
    --inflight;
    Slot& s = slots[c.user_data];
    const auto now = Clock::now();
    ++r.ops;
    if (c.status.ok()) {
      r.bytes += c.bytes;
      lat_us.push_back(std::chrono::duration<double, std::micro>(now - s.started).count());
    } else if (r.errors++ == 0) {
      r.first_error = c.status.ToString();
    }
    ops_so_far.store(r.ops, std::memory_order_relaxed);
    bytes_so_far.store(r.bytes, std::memory_order_relaxed);
    if (now < stop && open_error.ok() && issue(c.user_data)) ++inflight;
  };
  auto report = [&] {
    const auto now = Clock::now();
    if (progress && now - last_report >= std::chrono::seconds(1)) {
      last_report = now;
      progress(std::chrono::duration<double>(now - t0).count(), ops_so_far.load(), bytes_so_far.load());
    }
  };
  auto issue_all = [&] {  // one operation per slot
    for (size_t i = 0; i < slots.size(); ++i) {
      if (!issue(i)) break;
      ++inflight;
    }
  };
  if (o.mode == BenchMode::kWrite) {
    // Writes open (and create) objects as they go, which waits for mgmt: from this thread,
    // completions queued.
    issue_all();
    while (inflight > 0) {
      for (const IoCompletion& c : cq.Wait(1, std::chrono::milliseconds(500))) handle(c);
      report();
    }
  } else {
    // Reads and writes of open objects: each completion issues the slot's next operation on
    // the transport thread that delivered it, as an application with a callback queue would,
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
        for (const IoCompletion& c : todo) handle(c);
        lock.lock();
      }
      owner = false;
      if (inflight == 0) idle.notify_all();
    };
    CompletionQueue callback_cq([&](IoCompletion c) {
      {
        std::lock_guard lock(mu);
        if (owner) {
          deferred.push_back(std::move(c));
          return;
        }
        owner = true;
      }
      handle(c);
      drain_and_release();
    });
    q = &callback_cq;
    issue_all();
    drain_and_release();
    {
      std::unique_lock lock(mu);
      while (owner || inflight > 0) {
        idle.wait_for(lock, std::chrono::milliseconds(500));
        lock.unlock();
        report();
        lock.lock();
      }
    }
    // The queue counts an operation done only once its callback has returned.
    while (callback_cq.in_flight() > 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (!open_error.ok()) return open_error;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.cpu_seconds = CpuSeconds() - cpu0;
  r.mb_per_s = static_cast<double>(r.bytes) / r.seconds / 1e6;
  r.iops = static_cast<double>(r.ops - r.errors) / r.seconds;
  r.cpu_seconds_per_gb = r.bytes ? r.cpu_seconds / (static_cast<double>(r.bytes) / 1e9) : 0;
  const ReadPathStats reads1 = client.read_path_stats();
  r.read_bytes = reads1.bytes - reads0.bytes;
  r.read_bytes_copied = reads1.copied - reads0.copied;
  r.objects = o.mode == BenchMode::kWrite ? written.size() : objects.size();
  if (!lat_us.empty()) {
    std::sort(lat_us.begin(), lat_us.end());
    auto pct = [&](double p) { return lat_us[std::min(lat_us.size() - 1, static_cast<size_t>(p * static_cast<double>(lat_us.size())))]; };
    r.p50_us = pct(0.5);
    r.p99_us = pct(0.99);
    r.p999_us = pct(0.999);
    r.max_us = lat_us.back();
  }
  return r;
}

}  // namespace penstock::cli

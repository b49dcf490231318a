// engine_bench — engine-level throughput (no network), for bench/engine_vs_fio.sh.
//
// Usage: engine_bench --dir DIR --mode seqwrite|seqread|randwrite|randread|randwrite-range|
//                     randwrite-async|randread-async
//                     --bs BYTES --qd N --size BYTES [--seconds S] [--device file|null]
//                     [--zero-fill 0|1] [--zero-rate BYTES_PER_S] [--shard BYTES] [--batches-in-flight N]
//                     [--gather-us US]
// Opens (creating) an engine in DIR (data file DIR/engine.dat, index DIR/engine.idx) with room
// for twice --size (a new data file fallocated, as a target's and as fio's own; --zero-fill 1
// writes it with zeros first, untimed, which spares the group commit's flushes the filesystem's
// extent conversions but also makes seqwrite an overwrite; --zero-rate sets the engine's
// background zeroing, 0 = off, default the engine's; --batches-in-flight sets
// EngineOptions::commit_batches_in_flight, default 0: by CPU count; --gather-us sets
// EngineOptions::commit_gather_us, default the engine's), then runs --qd threads, each with
// one synchronous call in flight (the Engine API blocks, so threads are its queue depth):
//   seqwrite   writes --size bytes as shards of --bs, keys in order, each key once;
//   seqread    reads those shards back in key order (prefilling them first if absent);
//   randwrite  overwrites random keys of a --size set of --bs shards for --seconds;
//   randread   reads random keys of that set for --seconds (prefilled first).
//   randwrite-range  WriteRange of --bs bytes at a random --bs-aligned offset of a random shard
//              of a --size set of --shard-byte shards (default 1 MiB; prefilled first) for
//              --seconds: a small write into a large shard without reading it back.
//   randwrite-async, randread-async  as randwrite and randread, but one thread keeps --qd
//              operations in flight through the engine's asynchronous calls, as a target's
//              transport thread does (WriteRangeAsync of whole --bs shards, a multiple of
//              4 KiB; TryReadRangeAsync, falling back to ReadRange when it declines), like fio's
//              one thread with an io_uring queue of --qd.
// Prints one JSON line: {"mode":..,"bs":..,"qd":..,"ops":..,"seconds":..,"mb_s":..,"iops":..},
// with the process's CPU time per operation (user + system, all threads), the commit batches
// and write amplification (device bytes / logical bytes), all of the timed phase only.
// Not a test: no pass/fail, and the directory is left for the next run.
#include <fmt/format.h>
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/buffer_pool.h"
#include "engine/engine.h"

using namespace penstock;
using Clock = std::chrono::steady_clock;

namespace {

ShardKey KeyOf(uint64_t i) { return ShardKey{1, ObjectId{0, i}, 0, 0}; }

struct Args {
  std::string dir, mode, device = "file";
  bool zero_fill = false;
  std::optional<uint64_t> zero_rate;
  uint64_t bs = 1 << 20, qd = 16, size = 1ull << 30, shard = 1 << 20;
  double seconds = 10;
  uint32_t batches_in_flight = 0;  // EngineOptions::commit_batches_in_flight (0: by CPU count)
  uint64_t registered = 32 << 20;  // BufferPool::ReserveArena, as a target's (0: none)
  std::optional<uint32_t> gather_us;  // EngineOptions::commit_gather_us (unset: the default)
};

// CPU seconds (user + system) of this process so far, all threads.
double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

double g_run_cpu_seconds = 0;  // of the last Run or run_async: the timed phase
std::mutex g_lat_mu;
std::vector<double> g_latencies_us;  // guarded by g_lat_mu; of the last Run or run_async

// Percentile `p` (0..1) of sorted `v`.
double Percentile(const std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Runs `op(thread, i)` for i in [0, count) split across threads (count == 0: until `seconds`).
template <typename Op>
std::pair<uint64_t, double> Run(unsigned threads, uint64_t count, double seconds, Op op) {
  const double cpu0 = ProcessCpuSeconds();
  std::atomic<uint64_t> next{0}, done{0};
  std::atomic<bool> failed{false};
  {
    std::lock_guard lock(g_lat_mu);
    g_latencies_us.clear();
  }
  auto start = Clock::now();
  auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(seconds));
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(t * 7 + 1);
      std::vector<double> lat;
      for (;;) {
        uint64_t i = next.fetch_add(1);
        if (count ? i >= count : Clock::now() >= deadline) break;
        const auto t0 = Clock::now();
        Status s = op(rng, count ? i : rng());
        if (!s.ok()) {
          if (!failed.exchange(true)) std::fprintf(stderr, "%s\n", s.ToString().c_str());
          return;
        }
        lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        done.fetch_add(1);
      }
      std::lock_guard lock(g_lat_mu);
      g_latencies_us.insert(g_latencies_us.end(), lat.begin(), lat.end());
    });
  }
  for (auto& t : pool) t.join();
  if (failed) std::exit(1);
  g_run_cpu_seconds = ProcessCpuSeconds() - cpu0;
  return {done.load(), std::chrono::duration<double>(Clock::now() - start).count()};
}

// Reads the command line into `a`. False (the error or the usage printed) when it cannot.
bool ParseArgs(int argc, char** argv, Args& a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--dir") a.dir = v;
    else if (k == "--mode") a.mode = v;
    else if (k == "--device") a.device = v;
    else if (k == "--zero-fill") a.zero_fill = v != "0";
    else if (k == "--zero-rate") a.zero_rate = std::stoull(v);
    else if (k == "--bs") a.bs = std::stoull(v);
    else if (k == "--qd") a.qd = std::stoull(v);
    else if (k == "--size") a.size = std::stoull(v);
    else if (k == "--shard") a.shard = std::stoull(v);
    else if (k == "--seconds") a.seconds = std::stod(v);
    else if (k == "--batches-in-flight") a.batches_in_flight = static_cast<uint32_t>(std::stoul(v));
    else if (k == "--gather-us") a.gather_us = static_cast<uint32_t>(std::stoul(v));
    else if (k == "--registered") a.registered = std::stoull(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return false;
    }
  }
  if (a.dir.empty() || a.mode.empty()) {
    std::fprintf(stderr, "usage: %s --dir DIR --mode seqwrite|seqread|randwrite|randread|"
                 "randwrite-range|randwrite-async|randread-async --bs BYTES --qd N --size BYTES [--seconds S] "
                 "[--device file|null] [--zero-fill 0|1] [--zero-rate BYTES_PER_S] [--shard BYTES] [--batches-in-flight N] [--registered BYTES (32M; 0: no registered buffers)]\n", argv[0]);
    return false;
  }
  return true;
}

// Sets the process's memory up as a target's. False (the error printed) when it cannot.
bool SetUpMemory(const Args& a) {
  // Keep freed shard buffers in the heap instead of unmapping them: otherwise every Read
  // page-faults a fresh zeroed buffer, which costs more than the I/O at these sizes. A daemon
  // serving large shards wants the same setting (or a buffer pool).
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Registered buffers as a target has them (its request and reply buffers come from the
  // arena the engine's rings register): the engine's I/O buffers here come from it too.
  if (a.registered > 0) {
    if (Status s = BufferPool::Global().ReserveArena(a.registered); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return false;
    }
  }
  return true;
}

EngineOptions OptionsFor(const Args& a) {
  EngineOptions o;
  o.data_path = a.dir + "/engine.dat";
  o.index_dir = a.dir + "/engine.idx";
  o.device_kind = a.device;
  o.capacity_bytes = 2 * a.size + (64ull << 20) * 4;
  o.zero_fill_new_file = a.zero_fill;
  o.commit_batches_in_flight = a.batches_in_flight;
  if (a.gather_us) o.commit_gather_us = *a.gather_us;
  if (a.zero_rate) o.zero_rate_bytes_per_sec = *a.zero_rate;
  o.queue_depth = static_cast<unsigned>(std::max<uint64_t>(64, 2 * a.qd));
  return o;
}

// One thread keeps `qd` asynchronous operations in flight for `seconds`; `start(i, done)`
// starts operation i and arranges for done(status) to run once.
template <typename Start>
std::pair<uint64_t, double> RunAsync(uint64_t qd, double seconds, Start start) {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t in_flight = 0, done_ops = 0, issued = 0;
  Status failed;
  const double cpu0 = ProcessCpuSeconds();
  auto t0 = Clock::now();
  auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<double> lat;  // guarded by mu
  std::unique_lock lock(mu);
  for (;;) {
    cv.wait(lock, [&] { return in_flight < qd || !failed.ok(); });
    if (!failed.ok() || Clock::now() >= deadline) break;
    ++in_flight;
    const uint64_t i = issued++;
    lock.unlock();
    const auto started = Clock::now();
    start(i, [&, started](Status st) {
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - started).count();
      std::lock_guard g(mu);
      lat.push_back(us);
      --in_flight;
      if (st.ok()) ++done_ops;
      else if (failed.ok()) failed = st;
      cv.notify_one();
    });
    lock.lock();
  }
  cv.wait(lock, [&] { return in_flight == 0; });
  if (!failed.ok()) {
    std::fprintf(stderr, "%s\n", failed.ToString().c_str());
    std::exit(1);
  }
  g_run_cpu_seconds = ProcessCpuSeconds() - cpu0;
  {
    std::lock_guard g(g_lat_mu);
    g_latencies_us = std::move(lat);
  }
  return std::pair<uint64_t, double>{done_ops, std::chrono::duration<double>(Clock::now() - t0).count()};
}

// A timed phase: operations done, seconds taken.
using Timed = std::pair<uint64_t, double>;

// What the modes work on: the engine, the options, and the --bs bytes every write stores.
struct Bench {
  Engine& e;
  const Args& a;
  const uint64_t keys;  // --size / --bs shards
  AlignedBuffer data;   // aligned, like the payload a target receives from the transport

  Status Write(uint64_t i) { return e.Write(KeyOf(i % keys), data.span(), i); }
  Status Read(uint64_t i) { return e.Read(KeyOf(i % keys)).status(); }
  // Writes the set of shards once unless it is there already.
  void Prefill() {
    if (e.Stat(KeyOf(keys - 1)).ok() && e.Stat(KeyOf(0)).ok()) return;
    Run(static_cast<unsigned>(a.qd), keys, 0, [&](std::mt19937_64&, uint64_t i) { return Write(i); });
  }
};

// randwrite-range (prefills the --shard-byte shards first, then counts from there in
// `before`). nullopt (printed) for --shard and --size that do not fit --bs.
std::optional<Timed> RunRangeWrites(Bench& b, EngineStats& before) {
  const Args& a = b.a;
  Engine& e = b.e;
  if (a.shard < a.bs || a.shard % a.bs != 0 || a.size < a.shard) {
    std::fprintf(stderr, "randwrite-range needs --shard a multiple of --bs and --size >= --shard\n");
    return std::nullopt;
  }
  const uint64_t shards = a.size / a.shard;
  AlignedBuffer whole(a.shard);
  for (size_t i = 0; i < whole.size(); ++i) whole.data()[i] = static_cast<std::byte>(i * 31 + 1);
  if (!e.Stat(KeyOf(shards - 1)).ok() || e.Stat(KeyOf(shards - 1))->length != a.shard) {
    Run(static_cast<unsigned>(a.qd), shards, 0,
        [&](std::mt19937_64&, uint64_t i) { return e.Write(KeyOf(i), whole.span(), i); });
  }
  before = e.Stats();
  const uint64_t slots = a.shard / a.bs;
  return Run(static_cast<unsigned>(a.qd), 0, a.seconds, [&](std::mt19937_64& rng, uint64_t i) {
    return e.WriteRange(KeyOf(rng() % shards), (rng() % slots) * a.bs, b.data.span(), i);
  });
}

// randwrite-async. nullopt (printed) when --bs is not whole blocks.
std::optional<Timed> RunAsyncWrites(Bench& b) {
  if (b.a.bs % 4096 != 0) {
    std::fprintf(stderr, "randwrite-async needs --bs a multiple of 4096\n");
    return std::nullopt;
  }
  std::mt19937_64 rng(1);
  return RunAsync(b.a.qd, b.a.seconds, [&](uint64_t i, auto done) {
    b.e.WriteRangeAsync(KeyOf(rng() % b.keys), 0, b.data.span(), i + 1, done);
  });
}

// randread-async (prefills first, then counts from there in `before`).
Timed RunAsyncReads(Bench& b, EngineStats& before) {
  Engine& e = b.e;
  b.Prefill();
  before = e.Stats();
  std::mt19937_64 rng(1);
  return RunAsync(b.a.qd, b.a.seconds, [&](uint64_t, auto done) {
    const ShardKey k = KeyOf(rng() % b.keys);
    Engine::ReadDone read_done = [done](Result<AlignedBuffer> got, ShardInfo) { done(got.status()); };
    if (!e.TryReadRangeAsync(k, 0, b.a.bs, read_done)) done(e.ReadRange(k, 0, b.a.bs).status());
  });
}

// Runs --mode; a mode that prefills may count from there on in `before`. nullopt (printed)
// for an unknown mode or options it cannot run with.
std::optional<Timed> RunMode(Bench& b, EngineStats& before) {
  const Args& a = b.a;
  const auto threads = static_cast<unsigned>(a.qd);
  auto write = [&](std::mt19937_64&, uint64_t i) { return b.Write(i); };
  auto read = [&](std::mt19937_64&, uint64_t i) { return b.Read(i); };
  if (a.mode == "randwrite-range") return RunRangeWrites(b, before);
  if (a.mode == "randwrite-async") return RunAsyncWrites(b);
  if (a.mode == "randread-async") return RunAsyncReads(b, before);
  if (a.mode == "seqwrite") return Run(threads, b.keys, 0, write);
  if (a.mode == "seqread") {
    b.Prefill();
    return Run(threads, b.keys, 0, read);
  }
  if (a.mode == "randwrite") return Run(threads, 0, a.seconds, write);
  if (a.mode == "randread") {
    b.Prefill();
    return Run(threads, 0, a.seconds, read);
  }
  std::fprintf(stderr, "unknown mode %s\n", a.mode.c_str());
  return std::nullopt;
}

// Prints the JSON line (see the top of this file) for `r`, the engine's counters going from
// `before` to `s`.
void PrintReport(const Args& a, const Timed& r, const EngineStats& before, const EngineStats& s) {
  const uint64_t logical = s.bytes_written - before.bytes_written;
  const double amplification = logical == 0 ? 0.0
                               : static_cast<double>(s.device_bytes_written - before.device_bytes_written) /
                                     static_cast<double>(logical);
  double mb_s = static_cast<double>(r.first * a.bs) / r.second / 1e6;
  // Each operation's latency (from its call to its completion; GC passes a write waits for
  // show here) and how much GC moved meanwhile.
  std::vector<double> lat;
  {
    std::lock_guard lock(g_lat_mu);
    lat.swap(g_latencies_us);
  }
  std::sort(lat.begin(), lat.end());
  std::printf("%s\n", fmt::format("{{\"mode\":\"{}\",\"bs\":{},\"qd\":{},\"ops\":{},\"seconds\":"
                                  "{:.3f},\"mb_s\":{:.1f},\"iops\":{:.0f},\"cpu_us_per_op\":{:.1f},"
                                  "\"commit_batches\":{},\"write_amplification\":{:.3f},\"p50_us\":{:.0f},"
                                  "\"p99_us\":{:.0f},\"p999_us\":{:.0f},\"max_us\":{:.0f},"
                                  "\"gc_segments_cleaned\":{},\"gc_bytes_moved\":{},\"registered_buffer_ios\":{}}}",
                                  a.mode, a.bs, a.qd, r.first, r.second, mb_s,
                                  static_cast<double>(r.first) / r.second,
                                  r.first == 0 ? 0.0 : g_run_cpu_seconds * 1e6 / static_cast<double>(r.first),
                                  s.commit_batches - before.commit_batches, amplification,
                                  Percentile(lat, 0.5), Percentile(lat, 0.99), Percentile(lat, 0.999),
                                  lat.empty() ? 0.0 : lat.back(), s.gc_segments_cleaned - before.gc_segments_cleaned,
                                  s.gc_bytes_moved - before.gc_bytes_moved,
                                  s.registered_buffer_ios - before.registered_buffer_ios).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!ParseArgs(argc, argv, a)) return 2;
  if (!SetUpMemory(a)) return 1;
  auto opened = Engine::Open(OptionsFor(a));
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
    return 1;
  }
  Engine& e = **opened;
  Bench bench{.e = e, .a = a, .keys = a.size / a.bs, .data = AlignedBuffer(a.bs)};
  for (size_t i = 0; i < bench.data.size(); ++i) bench.data.data()[i] = static_cast<std::byte>(i * 131 + 7);
  EngineStats before = e.Stats();
  const std::optional<Timed> r = RunMode(bench, before);
  if (!r) return 2;
  PrintReport(a, *r, before, e.Stats());
  return 0;
}

// Crash consistency: kill -9 a process in the middle of a write-heavy workload of whole writes,
// range writes and deletes (with GC running), reopen, and check that every acknowledged write
// reads back exactly and nothing unacknowledged appears except the one operation per key that
// was in flight.
//
// Each round forks engine_crash_worker (crash_workload.h), lets it run for a random 20-300 ms
// after it reports "ready", SIGKILLs it, then reopens the same engine here and checks each key:
//   * absent   — allowed if its last acked op was a delete (or it never had an acked write), or
//                if a delete was in flight;
//   * version v — allowed if v is the last acked write or the in-flight write, and the bytes
//                must be exactly what that state holds: DataOf(object, v) for a whole write,
//                the state before with RangeOf(object, v) written into it for a range write
//                (so no torn, stale or foreign data, and no range half applied).
// The observed state becomes the model for the next round on the same engine. Most rounds
// recover through the index journal (the index is synced lazily, CrashOptions); the test checks
// that some did.
//
// 5 rounds in the normal suite. Long mode, by hand:
//   PENSTOCK_CRASH_ROUNDS=200 build/src/engine/engine_test --gtest_filter='EngineCrashTest.*'
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/crash_workload.h"

namespace penstock::engine {
namespace {

using namespace crash;

struct KeyModel {
  std::optional<uint64_t> acked;  // version of the last acked write; nullopt = absent
  std::vector<std::byte> bytes;   // what it holds then (when acked)
  bool in_flight = false;         // an op was started and not acked
  bool in_flight_delete = false;
  bool in_flight_range = false;
  uint64_t in_flight_version = 0;
};

// The bytes the key holds if its in-flight write (whole or range) took effect.
std::vector<std::byte> InFlightBytes(const KeyModel& k, uint64_t object) {
  if (!k.in_flight_range) return DataOf(object, k.in_flight_version);
  return AfterRange(k.acked ? k.bytes : std::vector<std::byte>{}, object, k.in_flight_version);
}

int Rounds() {
  const char* env = std::getenv("PENSTOCK_CRASH_ROUNDS");
  return env ? std::max(1, std::atoi(env)) : 5;
}

// Applies one report to the model.
void Apply(std::map<uint64_t, KeyModel>& model, const WireRecord& r) {
  KeyModel& k = model[r.object];
  switch (r.kind) {
    case Wire::kWriteIntent:
    case Wire::kDeleteIntent:
    case Wire::kRangeIntent:
      k.in_flight = true;
      k.in_flight_delete = r.kind == Wire::kDeleteIntent;
      k.in_flight_range = r.kind == Wire::kRangeIntent;
      k.in_flight_version = r.version;
      break;
    case Wire::kWriteAck:
      k.acked = r.version;
      k.bytes = DataOf(r.object, r.version);
      k.in_flight = false;
      break;
    case Wire::kRangeAck:
      k.bytes = AfterRange(k.acked ? k.bytes : std::vector<std::byte>{}, r.object, r.version);
      k.acked = r.version;
      k.in_flight = false;
      break;
    case Wire::kDeleteAck:
      k.acked.reset();
      k.in_flight = false;
      break;
    case Wire::kFailed:  // the engine promises the old value; allowing either is looser
    case Wire::kReady:
      break;
  }
}

// Runs one worker until killed; returns every report it made.
std::vector<WireRecord> RunAndKill(const std::string& dir, uint64_t first_version, uint64_t seed,
                                   std::chrono::milliseconds run_for) {
  int fds[2];
  EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 3);  // dup2 clears O_CLOEXEC on the copy
    std::string v = std::to_string(first_version), s = std::to_string(seed);
    ::execl(PENSTOCK_CRASH_WORKER, PENSTOCK_CRASH_WORKER, dir.c_str(), v.c_str(), s.c_str(),
            static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  ::close(fds[1]);
  std::vector<WireRecord> reports;
  std::string pending;
  auto drain = [&](int timeout_ms) {  // false on EOF
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return true;
    char buf[4096];
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) return false;
    pending.append(buf, static_cast<size_t>(n));
    size_t whole = pending.size() / sizeof(WireRecord) * sizeof(WireRecord);
    for (size_t i = 0; i < whole; i += sizeof(WireRecord)) {
      WireRecord r;
      std::memcpy(&r, pending.data() + i, sizeof r);
      reports.push_back(r);
    }
    pending.erase(0, whole);
    return true;
  };
  // Wait for "ready" (opening includes recovery), then let it run.
  while (reports.empty()) {
    if (!drain(10000)) break;
  }
  EXPECT_FALSE(reports.empty()) << "worker did not start; see its stderr above";
  auto kill_at = std::chrono::steady_clock::now() + run_for;
  while (std::chrono::steady_clock::now() < kill_at) {
    if (!drain(5)) break;
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  while (drain(1000)) {
  }
  ::close(fds[0]);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "worker exited by itself with status " << status;
  return reports;
}

TEST(EngineCrashTest, AcknowledgedWritesSurviveKillNine) {
  testing::ScratchDir dir;
  EngineOptions o = CrashOptions(dir.path());
  o.gc_background = false;
  std::map<uint64_t, KeyModel> model;
  std::mt19937_64 rng(std::random_device{}());
  const int rounds = Rounds();
  uint64_t acks = 0, range_acks = 0, replayed = 0;
  for (int round = 0; round < rounds; ++round) {
    uint64_t seed = rng();
    auto run_for = std::chrono::milliseconds(20 + rng() % 280);
    SCOPED_TRACE("round " + std::to_string(round) + " seed " + std::to_string(seed));
    auto reports = RunAndKill(dir.path(), uint64_t(round + 1) << 40, seed, run_for);
    for (const WireRecord& r : reports) {
      Apply(model, r);
      acks += r.kind == Wire::kWriteAck || r.kind == Wire::kRangeAck;
      range_acks += r.kind == Wire::kRangeAck;
    }

    // The killed process's io_uring is torn down asynchronously by the kernel, and with it the
    // flock on the data file: a restart may see kUnavailable for a moment.
    auto opened = Engine::Open(o);
    for (int i = 0; i < 1000 && opened.status().code() == StatusCode::kUnavailable; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      opened = Engine::Open(o);
    }
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    Engine& e = **opened;
    uint64_t present = 0;
    for (uint64_t object = 0; object < kObjects; ++object) {
      KeyModel& k = model[object];
      auto got = e.Read(KeyOf(object));
      if (got.status().code() == StatusCode::kNotFound) {
        EXPECT_TRUE(!k.acked || (k.in_flight && k.in_flight_delete))
            << "object " << object << ": acked version " << *k.acked << " lost";
        k = KeyModel{};
        continue;
      }
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ++present;
      uint64_t version = e.Stat(KeyOf(object))->version;
      const bool as_acked = k.acked && *k.acked == version;
      const bool as_in_flight = k.in_flight && !k.in_flight_delete && k.in_flight_version == version;
      EXPECT_TRUE(as_acked || as_in_flight) << "object " << object << " holds version " << version
                                            << ", neither the acked one nor the one in flight";
      const bool right = (as_acked && testing::SameBytes(*got, k.bytes)) ||
                         (as_in_flight && testing::SameBytes(*got, InFlightBytes(k, object)));
      EXPECT_TRUE(right) << "object " << object << " version " << version << ": wrong bytes";
      k = KeyModel{.acked = version, .bytes = std::vector<std::byte>(got->data(), got->data() + got->size())};
    }
    EngineStats s = e.Stats();
    replayed += s.journal_replayed;
    EXPECT_EQ(s.shards, present);
    EXPECT_EQ(s.checksum_errors, 0u);
    // GC after recovery works on what the crash left behind.
    ASSERT_TRUE(e.CollectGarbage().ok());
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(acks, 0u);
  EXPECT_GT(range_acks, 0u);
  EXPECT_GT(replayed, 0u);
  std::printf("%d crash rounds, %llu acknowledged writes checked (%llu of them range writes), "
              "%llu journal records replayed\n", rounds, static_cast<unsigned long long>(acks),
              static_cast<unsigned long long>(range_acks),
              static_cast<unsigned long long>(replayed));
}

// The kills above only test overlapping group commits if the workload overlaps them: with
// CrashOptions it does whenever a request waits.
TEST(EngineCrashTest, TheWorkloadKeepsSeveralBatchesInFlight) {
  testing::ScratchDir dir;
  auto opened = Engine::Open(CrashOptions(dir.path()));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Engine& e = **opened;
  std::vector<std::thread> threads;
  for (int t = 0; t < kWorkerThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t v = 1; v <= 60; ++v) {
        const uint64_t object = static_cast<uint64_t>(t) + kWorkerThreads * (v % (kObjects / kWorkerThreads));
        ASSERT_TRUE(e.Write(KeyOf(object), DataOf(object, v), v).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_GT(e.Stats().commit_overlapped, 0u);
}

}  // namespace
}  // namespace penstock::engine

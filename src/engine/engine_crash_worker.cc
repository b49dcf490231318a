// engine_crash_worker — the victim process of engine_crash_test: runs a write-heavy workload
// on an engine until it is killed, reporting intents and acks on file descriptor 3.
//
// Usage: engine_crash_worker DIR FIRST_VERSION SEED
// Each of crash::kWorkerThreads threads owns a slice of the objects and, forever: picks one,
// and either writes it whole at the next version (5 in 10), writes the range RangeOf(object,
// next version) into it (4 in 10) or deletes it, reporting an intent first and an ack only
// after the engine returned OK (see crash_workload.h). Never exits by itself.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "engine/crash_workload.h"

using namespace penstock;
using namespace penstock::engine::crash;

namespace {

constexpr int kReportFd = 3;

void Report(const WireRecord& r) {
  if (::write(kReportFd, &r, sizeof r) != static_cast<ssize_t>(sizeof r)) std::_Exit(3);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s DIR FIRST_VERSION SEED\n", argv[0]);
    return 2;
  }
  const uint64_t first_version = std::strtoull(argv[2], nullptr, 10);
  const uint64_t seed = std::strtoull(argv[3], nullptr, 10);
  auto opened = Engine::Open(CrashOptions(argv[1]));
  if (!opened.ok()) {
    std::fprintf(stderr, "open: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  Engine& e = **opened;
  Report({.kind = Wire::kReady});
  std::vector<std::thread> threads;
  for (int t = 0; t < kWorkerThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed * 31 + t);
      uint64_t version = first_version;
      for (;;) {
        uint64_t object = t + kWorkerThreads * (rng() % (kObjects / kWorkerThreads));
        ++version;
        const uint64_t dice = rng() % 10;
        if (dice >= 6) {
          Range range = RangeOf(object, version);
          WireRecord r{.kind = Wire::kRangeIntent,
                       .length = static_cast<uint32_t>(range.data.size()), .object = object,
                       .version = version,
                       .hash = Fnv1a(range.data.data(), range.data.size())};
          Report(r);
          Status s = e.WriteRange(KeyOf(object), range.offset, range.data, version);
          r.kind = s.ok() ? Wire::kRangeAck : Wire::kFailed;
          Report(r);
          continue;
        }
        if (dice == 0) {
          Report({.kind = Wire::kDeleteIntent, .object = object, .version = version});
          Status s = e.Delete(KeyOf(object));
          Report({.kind = s.ok() || s.code() == StatusCode::kNotFound ? Wire::kDeleteAck
                                                                       : Wire::kFailed,
                  .object = object, .version = version});
          continue;
        }
        auto data = DataOf(object, version);
        WireRecord r{.kind = Wire::kWriteIntent, .length = static_cast<uint32_t>(data.size()),
                     .object = object, .version = version,
                     .hash = Fnv1a(data.data(), data.size())};
        Report(r);
        Status s = e.Write(KeyOf(object), data, version);
        r.kind = s.ok() ? Wire::kWriteAck : Wire::kFailed;
        Report(r);
      }
    });
  }
  for (auto& t : threads) t.join();
  return 0;
}

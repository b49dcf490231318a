// object_io_bench — 4 KiB random reads from one thread through the asynchronous object API,
// at a given number of operations in flight. Prints one JSON line per queue depth:
//   {"qd":64,"ops":...,"seconds":...,"iops":...,"p50_us":...,"p99_us":...}
// Usage: object_io_bench MGMT_ADDR [SECONDS] [QD...]   (creates container "bench-io" if needed)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "penstock/client.h"

using namespace penstock;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MGMT_ADDR [SECONDS] [QD...]\n", argv[0]);
    return 2;
  }
  ClientOptions co;
  co.mgmt_address = argv[1];
  double seconds = argc > 2 ? std::stod(argv[2]) : 5;
  std::vector<int> depths;
  for (int i = 3; i < argc; ++i) depths.push_back(std::stoi(argv[i]));
  if (depths.empty()) depths = {1, 64};
  auto client = Client::Connect(co);
  if (!client.ok()) {
    std::fprintf(stderr, "object_io_bench: %s\n", client.status().ToString().c_str());
    return 1;
  }
  (void)(*client)->CreateContainer("bench-io");
  auto obj = (*client)->Open("bench-io", "iops", {.create = true});
  if (!obj.ok()) {
    std::fprintf(stderr, "object_io_bench: %s\n", obj.status().ToString().c_str());
    return 1;
  }
  const uint64_t size = 64ull << 20;
  if ((*obj)->size() < size) {
    std::vector<std::byte> fill(size, std::byte{0x5a});
    if (Status s = (*obj)->Write(0, fill); !s.ok()) {
      std::fprintf(stderr, "object_io_bench: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::mt19937_64 rng(42);
  for (int qd : depths) {
    CompletionQueue cq;
    std::vector<std::vector<std::byte>> bufs(qd, std::vector<std::byte>(4096));
    std::vector<Clock::time_point> started(qd);
    std::vector<double> lat;
    auto issue = [&](int slot) {
      started[slot] = Clock::now();
      (*obj)->ReadAsync((rng() % (size / 4096)) * 4096, {{bufs[slot].data(), 4096}}, cq,
                        static_cast<uint64_t>(slot));
    };
    auto t0 = Clock::now();
    auto stop = t0 + std::chrono::duration<double>(seconds);
    const ReadPathStats reads0 = (*client)->read_path_stats();
    for (int i = 0; i < qd; ++i) issue(i);
    uint64_t ops = 0, errors = 0;
    int inflight = qd;
    while (inflight > 0) {
      for (auto& c : cq.Wait(1, std::chrono::seconds(30))) {
        --inflight;
        ++ops;
        if (!c.status.ok() && errors++ == 0) {
          std::fprintf(stderr, "object_io_bench: first error: %s\n", c.status.ToString().c_str());
        }
        int slot = static_cast<int>(c.user_data);
        lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - started[slot]).count());
        if (Clock::now() < stop) {
          issue(slot);
          ++inflight;
        }
      }
    }
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    std::sort(lat.begin(), lat.end());
    const ReadPathStats reads1 = (*client)->read_path_stats();
    const double copies = static_cast<double>(reads1.copied - reads0.copied) /
                          static_cast<double>(std::max<uint64_t>(1, reads1.bytes - reads0.bytes));
    std::printf("{\"qd\":%d,\"ops\":%llu,\"errors\":%llu,\"seconds\":%.3f,\"iops\":%.0f,\"p50_us\":%.0f,"
                "\"p99_us\":%.0f,\"copies_per_byte\":%.3f}\n",
                qd, static_cast<unsigned long long>(ops), static_cast<unsigned long long>(errors), secs,
                static_cast<double>(ops) / secs, lat[lat.size() / 2], lat[lat.size() * 99 / 100], copies);
    std::fflush(stdout);
  }
  return 0;
}

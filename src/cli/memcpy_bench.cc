// memcpy_bench — the CPU cost of copying bytes in memory, the baseline of
// `cpu_per_gb_vs_memcpy` in bench/compare.sh. Copies GB gigabytes in 1 MiB blocks out of a
// 64 MiB source (larger than the caches) and prints {"cpu_seconds_per_gb": X, "gb_per_s": Y}.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  const double gb = argc > 1 ? std::atof(argv[1]) : 4.0;
  const size_t block = 1 << 20, span = 64 << 20;
  std::vector<char> src(span, 1), dst(span, 2);
  const size_t blocks = static_cast<size_t>(gb * 1e9 / static_cast<double>(block));
  rusage a{}, b{};
  getrusage(RUSAGE_SELF, &a);
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < blocks; ++i) {
    size_t off = (i * block) % span;
    std::memcpy(dst.data() + off, src.data() + off, block);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  getrusage(RUSAGE_SELF, &b);
  auto cpu = [](const rusage& r) {
    return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
           static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
  };
  const double moved = static_cast<double>(blocks * block) / 1e9;
  std::printf("{\"cpu_seconds_per_gb\": %.5f, \"gb_per_s\": %.2f, \"check\": %d}\n", (cpu(b) - cpu(a)) / moved,
              moved / secs, dst[span / 2]);
  return 0;
}

#include "common/fork_generation.h"

#include <pthread.h>

#include <atomic>

namespace penstock {
namespace {

std::atomic<uint64_t> g_generation{0};

void InChild() { g_generation.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

uint64_t ForkGeneration() {
  static const bool registered = ::pthread_atfork(nullptr, nullptr, InChild) == 0;
  (void)registered;
  return g_generation.load(std::memory_order_relaxed);
}

}  // namespace penstock

// engine_scrub.cc — background scrub: re-reads every live shard and checks its checksums.
//
// A pass walks the index in key order, a page of keys at a time (no iterator is held across
// device reads), and reads each shard through ReadShard (key lock, segment pins, every 4 KiB
// block's crc32c verified, in every run). A shard that fails is recorded in the corrupt set
// (CorruptShards; it leaves the set when it is rewritten or deleted) and counted in
// scrub_corrupt_shards when it was not already there. Shards deleted during the pass are
// skipped. The scrub thread paces
// passes to scrub_rate_bytes_per_sec and rests a second between passes; Scrub() runs one pass
// now, unpaced. The null device has nothing to verify (its reads are not checked).
#include <fmt/format.h>

#include <vector>

#include "common/log.h"
#include "engine/engine.h"
#include "engine/format.h"
#include "engine/index.h"
#include "engine/pacer.h"

namespace penstock {

namespace {

constexpr size_t kKeysPerPage = 256;
constexpr auto kRestBetweenPasses = std::chrono::seconds(1);

}  // namespace

Result<uint64_t> Engine::Scrub() {
  WaitApplied();  // every acknowledged write is in the index it walks
  return ScrubPass(/*throttled=*/false);
}

void Engine::ScrubLoop() {
  for (;;) {
    auto verified = ScrubPass(/*throttled=*/true);
    if (!verified.ok()) PS_LOG_WARN("engine scrub: {}", verified.status().ToString());
    if (!SleepUntil(std::chrono::steady_clock::now() + kRestBetweenPasses)) return;
  }
}

Result<uint64_t> Engine::ScrubPass(bool throttled) {
  engine::Pacer pacer(throttled ? options_.scrub_rate_bytes_per_sec : 0);
  uint64_t verified = 0;
  std::optional<ShardKey> after;
  for (;;) {
    std::vector<ShardKey> page;
    PS_RETURN_IF_ERROR(index_->Scan(engine::Index::AllShardsPrefix(), after,
                                    [&](const ShardKey& key, const engine::ShardRecord&) {
                                      page.push_back(key);
                                      return page.size() < kKeysPerPage;
                                    }));
    if (page.empty()) return verified;
    after = page.back();
    for (const ShardKey& key : page) {
      bool known;
      {
        std::lock_guard lock(corrupt_mu_);
        known = corrupt_.contains(key);
      }
      auto data = ReadShard(key);
      uint64_t bytes = 0;
      if (data.ok()) {
        bytes = engine::BlocksFor(data->size()) * engine::kBlockSize;
      } else if (data.status().code() == StatusCode::kDataLoss) {
        if (!known) scrub_corrupt_shards_.fetch_add(1, std::memory_order_relaxed);
        PS_LOG_WARN("engine scrub: {}", data.status().ToString());
      } else if (data.status().code() != StatusCode::kNotFound) {
        return data.status().WithContext("scrub");
      }
      verified += bytes;
      scrub_bytes_verified_.fetch_add(bytes, std::memory_order_relaxed);
      if (throttled && !SleepUntil(pacer.Account(bytes))) return verified;
    }
  }
}

}  // namespace penstock

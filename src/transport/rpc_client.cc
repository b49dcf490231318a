// rpc_client.cc — RpcClient: its workers (one call engine each, rpc_call_engine.h) and the
// router that hands each call to one of them: round robin, and for a multi-rail server the
// worker's own rail unless that rail failed lately (PickRail, MarkRailDown, RailsDown).
#include "transport/rpc_client.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <tuple>

#include "common/await.h"
#include "common/log.h"
#include "transport/local_direct.h"
#include "transport/registration_cache.h"
#include "transport/rpc_call_engine.h"
#include "transport/socket_address.h"

namespace penstock {
namespace {

// Whether every device of a UCX_NET_DEVICES list ("eth1", "mlx5_0:1,eth2", "all") exists on
// this host, as a network interface or an RDMA device, whether or not UCX can use it now.
bool NetworkDevicesExist(const std::string& devices) {
  std::stringstream list(devices);
  std::string device;
  while (std::getline(list, device, ',')) {
    const std::string name = device.substr(0, device.find(':'));
    if (name == "all") continue;
    if (name.empty() || name.find('/') != std::string::npos) return false;
    std::error_code ec;
    if (!std::filesystem::exists("/sys/class/net/" + name, ec) &&
        !std::filesystem::exists("/sys/class/infiniband/" + name, ec)) {
      return false;
    }
  }
  return true;
}

// A worker's options: each worker gets its share of the per-target window, so the client's
// bound stays the same.
RpcClientOptions PerWorkerOptions(const RpcClientOptions& options) {
  RpcClientOptions per = options;
  auto share = [&](auto total) { return total == 0 ? total : std::max<decltype(total)>(1, (total + options.workers - 1) / options.workers); };
  per.max_inflight_ops = share(options.max_inflight_ops);
  per.max_inflight_bytes = share(options.max_inflight_bytes);
  return per;
}

}  // namespace

Result<std::unique_ptr<RpcClient>> RpcClient::Create(const RpcClientOptions& options) {
  if (options.workers == 0 || options.workers > 64) {
    return InvalidArgument("data-plane client workers must be 1..64, not " + std::to_string(options.workers));
  }
  if (options.local_direct) AllowLocalDirect();
  const RpcClientOptions per = PerWorkerOptions(options);
  // Without per-worker devices the workers share one context (mt_workers_shared): one set of
  // transport resources and memory registrations instead of one per worker.
  const bool shared = options.net_devices.empty() && options.workers > 1;
  auto registry = std::make_shared<RegistrationCache>();
  std::vector<std::unique_ptr<RpcCallEngine>> engines;
  std::vector<size_t> slots;  // engines[k] is worker slots[k]: its rail
  std::vector<std::string> failures;
  for (unsigned i = 0; i < options.workers; ++i) {
    std::string devices = options.net_devices.empty() ? "" : options.net_devices[i % options.net_devices.size()];
    UcxWorker::Options wo{.name = "ps-ucx-client", .net_devices = devices, .shared_context = shared,
                          .context = shared && i > 0 ? engines[0]->context() : nullptr};
    auto engine = std::make_unique<RpcCallEngine>(per, std::move(wo), registry.get());
    Status s = engine->Init();
    if (!s.ok()) {
      const std::string which = "data-plane worker " + std::to_string(i) + " on network devices '" + devices + "'";
      if (devices.empty() || !NetworkDevicesExist(devices)) {
        while (!engines.empty()) engines.pop_back();  // worker 0 last
        return devices.empty() ? s
                               : s.WithContext(which + " (no such network device on this host: fix --net-devices)");
      }
      // The devices exist but UCX cannot use them now (a link down): start without this worker.
      failures.push_back(which + ": " + s.message());
      continue;
    }
    engines.push_back(std::move(engine));
    slots.push_back(i);
  }
  if (engines.empty()) {
    std::string all;
    for (const std::string& f : failures) all += (all.empty() ? "" : "; ") + f;
    return Unavailable("no data-plane worker could start (" + all + "); bring a link of --net-devices up");
  }
  for (const std::string& f : failures) {
    PS_LOG_WARN("{}; starting without it, its calls go to the other workers", f);
  }
  return std::unique_ptr<RpcClient>(new RpcClient(std::move(engines), std::move(slots), std::move(registry),
                                                  options.rail_retry_after));
}

RpcClient::RpcClient(std::vector<std::unique_ptr<RpcCallEngine>> engines, std::vector<size_t> slots,
                     std::shared_ptr<RegistrationCache> registry, std::chrono::milliseconds rail_retry_after)
    : engines_(std::move(engines)),
      slots_(std::move(slots)),
      registry_(std::move(registry)),
      calls_(new std::atomic<uint64_t>[engines_.size()]()),
      rail_retry_after_(rail_retry_after) {}
RpcClient::~RpcClient() {
  while (!engines_.empty()) engines_.pop_back();  // worker 0, which may own the shared context, last
}

void RpcClient::Call(const std::string& address, uint16_t opcode,
                     std::span<const std::byte> header, std::span<const std::byte> payload,
                     std::function<void(RpcReply)> done, std::shared_ptr<ReplyDestination> into,
                     std::shared_ptr<CallAbandon> abandon) {
  size_t i = next_worker_.fetch_add(1, std::memory_order_relaxed) % engines_.size();
  if (address.find(',') != std::string::npos) {  // a multi-rail server: this worker's rail
    std::string rail;
    std::tie(i, rail) = PickRail(address, i);
    calls_[i].fetch_add(1, std::memory_order_relaxed);
    auto observe = [this, rail, done = std::move(done)](RpcReply reply) mutable {
      const StatusCode code = reply.status.code();
      if (!reply.from_peer && (code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded)) {
        MarkRailDown(rail);
      }
      done(std::move(reply));
    };
    engines_[i]->Call(rail, opcode, header, payload, std::move(observe), std::move(into), std::move(abandon));
    return;
  }
  calls_[i].fetch_add(1, std::memory_order_relaxed);
  engines_[i]->Call(address, opcode, header, payload, std::move(done), std::move(into), std::move(abandon));
}

std::pair<size_t, std::string> RpcClient::PickRail(const std::string& address, size_t first) {
  std::string own(RailFor(address, slots_[first]));
  if (!any_rail_down_.load(std::memory_order_relaxed)) return {first, std::move(own)};
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(rails_mu_);
  std::erase_if(rails_down_, [&](const auto& r) { return r.second <= now; });  // the next call retries it
  if (rails_down_.empty()) any_rail_down_.store(false, std::memory_order_relaxed);
  if (!rails_down_.contains(own)) return {first, std::move(own)};
  // Another worker whose own rail works (it may be pinned to that rail's network devices).
  for (size_t k = 1; k < engines_.size(); ++k) {
    const size_t j = (first + k) % engines_.size();
    std::string rail(RailFor(address, slots_[j]));
    if (!rails_down_.contains(rail)) return {j, std::move(rail)};
  }
  // No worker's own rail works (fewer workers than rails): a rail no worker calls by default.
  const size_t rails = static_cast<size_t>(std::count(address.begin(), address.end(), ',')) + 1;
  for (size_t r = 0; r < rails; ++r) {
    std::string rail(RailFor(address, r));
    if (!rails_down_.contains(rail)) return {first, std::move(rail)};
  }
  return {first, std::move(own)};  // every rail down: try it anyway
}

void RpcClient::MarkRailDown(const std::string& rail) {
  std::lock_guard lock(rails_mu_);
  const bool added = rails_down_.insert_or_assign(rail, std::chrono::steady_clock::now() + rail_retry_after_).second;
  if (added) {
    PS_LOG_WARN("data plane: rail {} failed; calls go to the other rails for {} ms", rail,
                rail_retry_after_.count());
  }
  any_rail_down_.store(true, std::memory_order_relaxed);
}

std::vector<std::string> RpcClient::RailsDown() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::string> out;
  std::lock_guard lock(rails_mu_);
  for (const auto& [rail, until] : rails_down_) {
    if (until > now) out.push_back(rail);
  }
  return out;
}

Result<std::shared_ptr<RpcClient::Registration>> RpcClient::Register(void* data, size_t size) {
  std::vector<ucp_context_h> contexts;
  for (const auto& engine : engines_) contexts.push_back(engine->context());
  return RegistrationCache::Register(registry_, contexts, data, size);
}

RpcReply RpcClient::CallSync(const std::string& address, uint16_t opcode,
                             std::span<const std::byte> header,
                             std::span<const std::byte> payload) {
  for (const auto& engine : engines_) {
    if (engine->OnProgressThread()) {
      return ErrorReply(FailedPrecondition(
          "RpcClient::CallSync called on the transport thread; use Call() from callbacks"));
    }
  }
  return Await<RpcReply>([&](auto done) { Call(address, opcode, header, payload, std::move(done)); });
}

std::string RpcClient::TransportName(const std::string& address) {
  std::string names;  // each worker's, distinct ones joined with '+'
  for (size_t i = 0; i < engines_.size(); ++i) {
    std::string n = engines_[i]->TransportName(std::string(RailFor(address, slots_[i])));
    if (n.empty() || ("+" + names + "+").find("+" + n + "+") != std::string::npos) continue;
    names += names.empty() ? n : "+" + n;
  }
  return names;
}

std::vector<uint64_t> RpcClient::CallsPerWorker() const {
  std::vector<uint64_t> out;
  for (size_t i = 0; i < engines_.size(); ++i) out.push_back(calls_[i].load(std::memory_order_relaxed));
  return out;
}

}  // namespace penstock

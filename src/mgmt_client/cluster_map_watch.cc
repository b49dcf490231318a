#include "mgmt_client/cluster_map_watch.h"

#include <grpcpp/grpcpp.h>

#include "common/log.h"
#include "mgmt_client/mgmt_client.h"

namespace penstock {

ClusterMapWatch::ClusterMapWatch(MgmtClient* client, std::function<void(v1::ClusterMap)> on_map,
                                 uint64_t since_epoch)
    : client_(client), on_map_(std::move(on_map)), epoch_(since_epoch) {
  thread_ = std::thread([this] { Run(); });
}

ClusterMapWatch::~ClusterMapWatch() { Stop(); }

uint64_t ClusterMapWatch::epoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return epoch_;
}

void ClusterMapWatch::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (ctx_) ctx_->TryCancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ClusterMapWatch::Run() {
  const auto kBackoff = std::chrono::milliseconds(200);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    auto leader = client_->Leader(std::chrono::system_clock::now() + client_->timeout_);
    lock.lock();
    if (stopping_) break;
    if (!leader.ok()) {
      PS_LOG_DEBUG("map watch: {}", leader.status().ToString());
      cv_.wait_for(lock, kBackoff, [this] { return stopping_; });
      continue;
    }
    ctx_ = std::make_unique<grpc::ClientContext>();
    grpc::ClientContext* ctx = ctx_.get();
    v1::WatchClusterMapRequest req;
    req.set_since_epoch(epoch_);
    lock.unlock();

    std::unique_ptr<grpc::ClientReader<v1::ClusterMap>> reader =
        leader->second->WatchClusterMap(ctx, req);
    v1::ClusterMap map;
    while (reader->Read(&map)) {
      {
        std::lock_guard<std::mutex> g(mu_);
        if (stopping_) break;
        if (map.epoch() < epoch_ || (map.epoch() == epoch_ && req.since_epoch() != 0)) continue;
        epoch_ = map.epoch();
      }
      on_map_(map);
    }
    grpc::Status s = reader->Finish();

    lock.lock();
    ctx_.reset();
    if (stopping_) break;
    PS_LOG_DEBUG("map watch on mgmt {} ended: {}", leader->first, s.error_message());
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) client_->ForgetLeader(leader->first);
    cv_.wait_for(lock, kBackoff, [this] { return stopping_; });
  }
}

}  // namespace penstock

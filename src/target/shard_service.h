// shard_service.h — the target's data-plane request handler: decodes shard requests
// (protocol/shard_protocol.h), runs them against the engine on a pool of I/O threads and
// replies. The transport calls Handle() on its own thread; Handle() never blocks it.
//
// Borrowed: the engine and the metrics registry must outlive the service. Thread-safe.
#pragma once

#include <memory>

#include "common/metrics.h"
#include "common/thread_pool.h"
#include "engine/engine.h"
#include "transport/rpc.h"

namespace penstock {

class ShardService {
 public:
  ShardService(Engine* engine, MetricsRegistry* metrics, unsigned io_threads);

  // RpcHandler: queues the request for an I/O thread and returns at once.
  void Handle(RpcRequest request, Responder respond);

  // Runs one request to completion on the calling thread (used by the pool; exposed for tests).
  RpcReply Execute(const RpcRequest& request);

 private:
  RpcReply Write(const RpcRequest& request);
  RpcReply Read(const RpcRequest& request);
  RpcReply ReadRange(const RpcRequest& request);
  RpcReply Delete(const RpcRequest& request);
  RpcReply Stat(const RpcRequest& request);
  RpcReply List(const RpcRequest& request);

  Engine* engine_;
  MetricsRegistry* metrics_;
  ThreadPool pool_;
};

}  // namespace penstock

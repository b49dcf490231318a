// raw_am_client.h — a bare UCX client that sends arbitrary active-message headers to an
// RpcServer and collects the request ids and status codes of the replies. Test support only:
// the malformed-message tests (rpc_malformed_test.cc) and the malformed peer that probes a
// live target (src/target/malformed_peer.cc). It speaks the wire format (wire.h) with no
// checks of its own, so it can send what RpcClient never would.
// Thread-safe: Send* and WaitForReplies may be called from any thread; replies arrive on the
// client's own UCX worker thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "penstock/status.h"
#include "transport/ucx_worker.h"

namespace penstock {

class RawAmClient {
 public:
  // Connects to the RpcServer at `address` (host:port), with peer-failure handling.
  static Result<std::unique_ptr<RawAmClient>> Connect(const std::string& address);
  ~RawAmClient();
  RawAmClient(const RawAmClient&) = delete;
  RawAmClient& operator=(const RawAmClient&) = delete;

  // A request AM with this header (wire.h: message header, op header) and a payload of
  // `payload_bytes` bytes of 0x33, sent as they are.
  void Send(std::vector<std::byte> am_header, size_t payload_bytes);
  // A request AM with this header and payload.
  void SendWithPayload(std::vector<std::byte> am_header, std::vector<std::byte> payload);
  // A batch AM (wire.h: its data holds the batch header) with this AM header and data.
  void SendBatch(std::vector<std::byte> am_header, std::vector<std::byte> data);

  // Waits until `n` replies came in all, or `timeout`; returns (request id, status code) of
  // each reply so far, in arrival order (a batch's replies each as if it had come alone).
  std::vector<std::pair<uint64_t, StatusCode>> WaitForReplies(size_t n, std::chrono::milliseconds timeout);
  // What arrived that was not a well-formed reply (a reply that does not decode, a bad batch).
  std::vector<std::string> bad_replies() const;

 private:
  RawAmClient() = default;
  void SendAs(uint8_t am_id, std::vector<std::byte> am_header, std::shared_ptr<std::vector<std::byte>> payload);
  static ucs_status_t OnBatch(void* arg, const void* header, size_t header_length, void* data, size_t length,
                              const ucp_am_recv_param_t* param);
  static ucs_status_t OnReply(void* arg, const void* header, size_t header_length, void* data, size_t length,
                              const ucp_am_recv_param_t* param);

  std::unique_ptr<UcxWorker> worker_;
  ucp_ep_h ep_ = nullptr;  // owned by the worker thread
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<uint64_t, StatusCode>> replies_;  // guarded by mu_
  std::vector<std::string> bad_;                          // guarded by mu_
};

}  // namespace penstock

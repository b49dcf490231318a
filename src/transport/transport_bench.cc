// transport_bench — request-payload throughput of RpcClient against an in-process RpcServer.
// Usage: transport_bench [payload_bytes=1048576] [in_flight=8] [calls=2000]
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "transport/rpc_client.h"
#include "transport/rpc_server.h"

using namespace penstock;

int main(int argc, char** argv) {
  size_t size = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (1 << 20);
  int in_flight = argc > 2 ? std::atoi(argv[2]) : 8;
  int calls = argc > 3 ? std::atoi(argv[3]) : 2000;
  auto server = RpcServer::Start({}, [](RpcRequest, Responder respond) { respond(RpcReply{}); });
  if (!server.ok()) return std::fprintf(stderr, "%s\n", server.status().ToString().c_str()), 1;
  auto client = RpcClient::Create({});
  if (!client.ok()) return 1;
  std::string address = (*server)->address();
  std::vector<std::byte> payload(size, std::byte{0x5a});
  (*client)->CallSync(address, 1, {}, payload);  // connect + warm up

  std::mutex mu;
  std::condition_variable cv;
  int issued = 0, completed = 0, failed = 0;
  std::function<void()> issue;
  issue = [&] {
    (*client)->Call(address, 1, {}, payload, [&](RpcReply r) {
      std::lock_guard lock(mu);
      if (!r.status.ok()) ++failed;
      ++completed;
      if (issued < calls) {
        ++issued;
        issue();
      }
      cv.notify_all();
    });
  };
  auto start = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu);
    for (; issued < in_flight && issued < calls; ++issued) issue();
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return completed == calls; });
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("transports=%s payload=%zu in_flight=%d calls=%d failed=%d: %.1f MB/s, %.0f calls/s\n",
              (*client)->TransportName(address).c_str(), size, in_flight, calls, failed,
              double(size) * calls / secs / 1e6, calls / secs);
  return failed == 0 ? 0 : 1;
}

// transport_peer — a test helper process for rpc_process_test (incast, a peer dying mid-transfer).
//
//   transport_peer serve MAX_INCOMING_BYTES HANDLER_DELAY_US [WORKERS]
//       Runs an RpcServer on 127.0.0.1 (free port) and prints "PORT <n>". Opcode 1 answers an
//       empty OK; opcode 2 echoes the payload; opcode 3 answers PatternBytes(N) for the 8-byte
//       N in its header. Replies come from one worker thread, each after HANDLER_DELAY_US, so
//       requests pile up as on a busy target. On stdin EOF prints "STATS deferred=<n>
//       hwm_kib=<peak RSS> pulled=<bytes> placed=<bytes>" and exits.
//   transport_peer write ADDRESS CALLS PAYLOAD_BYTES
//       Issues CALLS opcode-1 calls with PAYLOAD_BYTES each, all at once (the client's flow
//       control window bounds what is in flight), waits for all, prints "OK <n>" and exits 0, or
//       prints the first error and exits 1.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "transport/rpc_client.h"
#include "transport/rpc_server.h"

using namespace penstock;

namespace {

}  // namespace

// Bytes a test can recompute: byte i is i * 7 + (i >> 12).
std::vector<std::byte> PatternBytes(size_t n) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::byte(i * 7 + (i >> 12));
  return v;
}

namespace {

long PeakRssKib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

int Serve(uint64_t max_incoming, int delay_us, unsigned workers) {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<RpcRequest, Responder>> work;
  bool done = false;
  std::thread responder([&] {
    std::unique_lock lock(mu);
    while (true) {
      cv.wait(lock, [&] { return done || !work.empty(); });
      if (work.empty()) return;
      auto [request, respond] = std::move(work.front());
      work.pop_front();
      lock.unlock();
      if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
      if (request.opcode == 2) {
        respond(RpcReply{OkStatus(), std::move(request.header), std::move(request.payload)});
      } else if (request.opcode == 3 && request.header.size() == 8) {
        uint64_t n = 0;
        std::memcpy(&n, request.header.data(), 8);
        respond(RpcReply{OkStatus(), {}, AlignedBuffer::CopyOf(PatternBytes(n))});
      } else {
        respond(RpcReply{});
      }
      lock.lock();
    }
  });
  MetricsRegistry metrics;
  auto server = RpcServer::Start(
      {.host = "127.0.0.1", .port = 0, .metrics = &metrics, .max_incoming_bytes = max_incoming, .workers = workers},
      [&](RpcRequest request, Responder respond) {
        std::lock_guard lock(mu);
        work.emplace_back(std::move(request), std::move(respond));
        cv.notify_one();
      });
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  std::printf("PORT %u\n", (*server)->port());
  std::fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  auto count = [&](const char* name) {
    return static_cast<unsigned long long>(metrics.GetCounter(name, "").value());
  };
  std::printf("STATS deferred=%llu hwm_kib=%ld pulled=%llu placed=%llu\n",
              count("penstock_transport_server_deferred_receives_total"), PeakRssKib(),
              count("penstock_transport_server_pulled_bytes_total"),
              count("penstock_transport_server_placed_bytes_total"));
  std::fflush(stdout);
  {
    std::lock_guard lock(mu);
    done = true;
    cv.notify_one();
  }
  responder.join();
  return 0;
}

int Write(const std::string& address, int calls, size_t size) {
  auto client = RpcClient::Create({.timeout = std::chrono::seconds(60)});
  if (!client.ok()) return 1;
  std::vector<std::byte> payload(size, std::byte{0x42});
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  Status first_error;
  for (int i = 0; i < calls; ++i) {
    (*client)->Call(address, 1, {}, payload, [&](RpcReply r) {
      std::lock_guard lock(mu);
      if (!r.status.ok() && first_error.ok()) first_error = r.status;
      ++finished;
      cv.notify_one();
    });
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return finished == calls; });
  if (!first_error.ok()) {
    std::printf("ERROR %s\n", first_error.ToString().c_str());
    return 1;
  }
  std::printf("OK %d\n", calls);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "serve" && (argc == 4 || argc == 5)) {
    return Serve(std::strtoull(argv[2], nullptr, 10), std::atoi(argv[3]),
                 argc == 5 ? static_cast<unsigned>(std::atoi(argv[4])) : 1u);
  }
  if (mode == "write" && argc == 5) {
    return Write(argv[2], std::atoi(argv[3]), std::strtoull(argv[4], nullptr, 10));
  }
  std::fprintf(stderr, "usage: transport_peer serve MAX_INCOMING_BYTES DELAY_US [WORKERS] | "
                       "write ADDRESS CALLS PAYLOAD_BYTES\n");
  return 2;
}

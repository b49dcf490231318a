// transport_bench — Penstock's side of bench/transport_vs_ucx.sh: RpcClient -> RpcServer
// throughput and latency, server and client in separate processes (as ucx_perftest runs).
//
//   transport_bench serve
//       Starts an RpcServer on 127.0.0.1, prints "PORT <n>", serves until stdin closes.
//       Opcode 1 (write-like): answers an empty OK. Opcode 2 (read-like): answers a payload of
//       the size in the 8-byte request header.
//   transport_bench run ADDRESS read|write SIZE IN_FLIGHT CALLS
//       Keeps IN_FLIGHT calls of SIZE payload bytes going until CALLS completed, then prints
//       "mode=M size=S in_flight=N calls=C failed=F mib_s=X ops_s=Y p50_us=A p99_us=B transports=T".
//       Latency is per call, from Call() to its reply. Direct copies with a server on the same
//       host (RpcClientOptions::local_direct) are off, so the bytes go through UCX, unless
//       PENSTOCK_LOCAL_DIRECT=1: then the server may copy a read's reply into the memory the
//       read lends for it, and write payloads of 64 KiB or more may be pulled from the
//       client's memory (rpc_client.h). Reads lend memory for their replies as the shard
//       client does (a ReplyDestination that knows the length), which UCX receives into.
//       Memory, as ucx_perftest uses it: every write sends the same payload, and every read
//       lends the same reply buffer (perftest's am_bw receives each message into one buffer),
//       both pooled AlignedBuffers (huge-page backed, as the client's own buffers are). With
//       PENSTOCK_BENCH_BUFFERS=per-call each read lends a buffer of its own instead: 8 reads
//       in flight then touch 8 MiB, more than a core's L2 here, and the copy slows with it.
//   transport_bench            (no arguments) both in one process: write, 1 MiB, 8 in flight.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "common/buffer.h"
#include "transport/rpc_client.h"
#include "transport/rpc_server.h"

using namespace penstock;
using Clock = std::chrono::steady_clock;

namespace {

Result<std::unique_ptr<RpcServer>> StartServer() {
  return RpcServer::Start({}, [](RpcRequest request, Responder respond) {
    if (request.opcode != 2) return respond(RpcReply{});
    uint64_t size = 0;
    if (request.header.size() == sizeof size) std::memcpy(&size, request.header.data(), sizeof size);
    respond(RpcReply{OkStatus(), {}, AlignedBuffer(size)});
  });
}

int Serve() {
  auto server = StartServer();
  if (!server.ok()) return std::fprintf(stderr, "%s\n", server.status().ToString().c_str()), 1;
  std::printf("PORT %u\n", (*server)->port());
  std::fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  return 0;
}

// Memory lent to one read for its reply: a buffer of its own (recycled by BufferPool between
// reads), or memory shared by every read (`shared`, which outlives the reads).
class BufferDestination final : public ReplyDestination {
 public:
  BufferDestination(size_t size, std::span<std::byte> shared)
      : own_(shared.empty() ? AlignedBuffer(size) : AlignedBuffer()),
        memory_(shared.empty() ? own_.span() : shared.first(size)) {}
  std::vector<std::span<std::byte>> Borrow(uint64_t length) override {
    if (length > memory_.size()) return {};
    return {memory_.first(length)};
  }
  void Return(bool) override {}
  uint64_t UpFrontLength() const override { return memory_.size(); }

 private:
  AlignedBuffer own_;
  std::span<std::byte> memory_;
};

int Run(const std::string& address, bool read_like, size_t size, int in_flight, int calls) {
  // By default the transport's speed, as ucx_perftest measures UCX's: no same-host direct copies.
  const char* direct_env = std::getenv("PENSTOCK_LOCAL_DIRECT");
  const bool direct = direct_env != nullptr && std::strcmp(direct_env, "1") == 0;
  auto client = RpcClient::Create({.local_direct = direct});
  if (!client.ok()) return std::fprintf(stderr, "%s\n", client.status().ToString().c_str()), 1;
  const char* buffers_env = std::getenv("PENSTOCK_BENCH_BUFFERS");
  const bool per_call = buffers_env != nullptr && std::strcmp(buffers_env, "per-call") == 0;
  AlignedBuffer payload(read_like ? 0 : size);
  if (!payload.empty()) std::memset(payload.data(), 0x5a, payload.size());
  AlignedBuffer shared_reply(read_like && !per_call ? size : 0);
  std::vector<std::byte> header(sizeof(uint64_t));
  uint64_t want = size;
  std::memcpy(header.data(), &want, sizeof want);
  uint16_t opcode = read_like ? 2 : 1;
  for (int i = 0; i < 16; ++i) (*client)->CallSync(address, opcode, header, payload.span());  // warm up

  std::mutex mu;
  std::condition_variable cv;
  int issued = 0, completed = 0, failed = 0;
  std::vector<double> latencies_us;
  latencies_us.reserve(calls);
  std::function<void()> issue;
  issue = [&] {  // called with mu held
    auto start = Clock::now();
    std::shared_ptr<ReplyDestination> into;
    if (read_like) into = std::make_shared<BufferDestination>(size, shared_reply.span());
    (*client)->Call(address, opcode, header, payload.span(), [&, start, into](RpcReply r) {
      double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
      std::lock_guard lock(mu);
      const uint64_t got = r.placed > 0 ? r.placed : r.payload.size();
      if (!r.status.ok() || (read_like && got != size)) ++failed;
      latencies_us.push_back(us);
      ++completed;
      if (issued < calls) {
        ++issued;
        issue();
      }
      if (completed == calls) cv.notify_all();  // only the waiter at the end needs waking
    }, into);
  };
  auto start = Clock::now();
  {
    std::lock_guard lock(mu);
    for (; issued < in_flight && issued < calls; ++issued) issue();
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return completed == calls; });
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  std::sort(latencies_us.begin(), latencies_us.end());
  auto pct = [&](double p) { return latencies_us[std::min(latencies_us.size() - 1, size_t(p * latencies_us.size()))]; };
  std::printf("mode=%s size=%zu in_flight=%d calls=%d failed=%d mib_s=%.1f ops_s=%.0f "
              "p50_us=%.1f p99_us=%.1f transports=%s\n",
              read_like ? "read" : "write", size, in_flight, calls, failed,
              double(size) * calls / secs / (1 << 20), calls / secs, pct(0.5), pct(0.99),
              (*client)->TransportName(address).c_str());
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "serve") return Serve();
  if (mode == "run" && argc == 7) {
    return Run(argv[2], std::string(argv[3]) == "read", std::strtoull(argv[4], nullptr, 10),
               std::atoi(argv[5]), std::atoi(argv[6]));
  }
  if (argc == 1) {
    auto server = StartServer();
    if (!server.ok()) return std::fprintf(stderr, "%s\n", server.status().ToString().c_str()), 1;
    return Run((*server)->address(), false, 1 << 20, 8, 2000);
  }
  std::fprintf(stderr, "usage: transport_bench serve | run ADDRESS read|write SIZE IN_FLIGHT CALLS\n");
  return 2;
}

// Tests with several processes (transport_peer): incast of 8 client processes onto one server
// with bounded memory, and a server dying mid-transfer failing only its own calls.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "transport/rpc_client.h"

extern char** environ;

namespace penstock {
namespace {

using namespace std::chrono_literals;

// A child process running transport_peer with its stdin and stdout piped to us.
class Peer {
 public:
  explicit Peer(std::vector<std::string> args) {
    int in[2], out[2];
    EXPECT_EQ(pipe(in), 0);
    EXPECT_EQ(pipe(out), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    args.insert(args.begin(), TRANSPORT_PEER_PATH);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    stdout_ = out[0];
  }
  ~Peer() {
    if (stdin_ >= 0) close(stdin_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Wait();
    }
    close(stdout_);
  }

  // The next line the child prints that starts with one of `prefixes` (log lines are
  // skipped); "" at EOF.
  std::string ReadLine(std::initializer_list<const char*> prefixes) {
    while (true) {
      std::string line;
      char c;
      bool eof = true;
      while (read(stdout_, &c, 1) == 1) {
        eof = false;
        if (c == '\n') break;
        line += c;
      }
      if (eof) return "";
      for (const char* p : prefixes) {
        if (line.rfind(p, 0) == 0) return line;
      }
    }
  }
  void CloseStdin() {
    close(stdin_);
    stdin_ = -1;
  }
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  void Kill() { kill(pid_, SIGKILL); }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
};

std::string StartServer(Peer& server) {
  std::string line = server.ReadLine({"PORT "});
  EXPECT_EQ(line.rfind("PORT ", 0), 0u) << line;
  return "127.0.0.1:" + line.substr(5);
}

// The same with one server worker and with three (connections spread over them, the budget
// shared: a request deferred on one worker is admitted when another returns memory).
class RpcIncastTest : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Workers, RpcIncastTest, ::testing::Values(1, 3));

TEST_P(RpcIncastTest, IncastOfEightClientsFinishesWithBoundedServerMemory) {
  constexpr uint64_t kBudget = 32 << 20;
  constexpr int kClients = 8, kCalls = 32;
  constexpr size_t kPayload = 1 << 20;  // rendezvous on tcp and shm
  // A slow target (2 ms per request, one at a time), so requests pile up at it.
  Peer server({"serve", std::to_string(kBudget), "2000", std::to_string(GetParam())});
  std::string address = StartServer(server);
  std::vector<std::unique_ptr<Peer>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<Peer>(std::vector<std::string>{
        "write", address, std::to_string(kCalls), std::to_string(kPayload)}));
  }
  for (auto& c : clients) {
    std::string line = c->ReadLine({"OK", "ERROR"});
    EXPECT_EQ(line, "OK " + std::to_string(kCalls));
    EXPECT_EQ(c->Wait(), 0);
  }
  server.CloseStdin();
  std::string stats = server.ReadLine({"STATS"});
  EXPECT_EQ(server.Wait(), 0);
  std::cout << "incast server: " << stats << "\n";
  long deferred = -1, hwm_kib = -1;
  ASSERT_EQ(std::sscanf(stats.c_str(), "STATS deferred=%ld hwm_kib=%ld", &deferred, &hwm_kib), 2)
      << stats;
  // 8 clients x 32 MiB would all be in the server's memory without flow control (each client's
  // window alone is 64 MiB). Bounded: the budget plus the process's own footprint.
  EXPECT_GT(deferred, 0);
  EXPECT_LT(hwm_kib * 1024, int64_t{kBudget} + (160 << 20)) << stats;
}

TEST(RpcProcessTest, PeerDyingMidTransferFailsOnlyItsOwnCalls) {
  // Over UCX's shared-memory transports (posix, sysv) a peer that dies while it writes an
  // active message into our receive FIFO leaves that element reserved and never marked written,
  // and UCX 1.13 stops reading the FIFO there: every other peer's messages stall behind it
  // (src/transport/README.md, open issues). Only over tcp can the doomed peer die in the middle
  // of its replies; over shared memory it is killed while it receives or holds the requests
  // (opcode 1: empty reply, each 20 ms after the request, so the kill finds them unanswered).
  const char* tls = std::getenv("UCX_TLS");
  const bool mm = tls != nullptr && (std::strstr(tls, "posix") != nullptr || std::strstr(tls, "sysv") != nullptr);
  const uint16_t doomed_opcode = mm ? 1 : 2;
  Peer doomed({"serve", "0", mm ? "20000" : "0"});
  Peer healthy({"serve", "0", "0"});
  std::string doomed_address = StartServer(doomed);
  std::string healthy_address = StartServer(healthy);
  auto c = RpcClient::Create({.timeout = 60s});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto& client = *c;
  std::vector<std::byte> payload(16 << 20, std::byte{0x17});
  // The doomed server's replies are received into caller memory: a transfer cut off by the
  // peer's death still gives the memory back, before its call completes.
  struct Lent : ReplyDestination {
    std::vector<std::byte> memory = std::vector<std::byte>(16 << 20);
    std::atomic<int> borrows{0}, returns{0};
    std::vector<std::span<std::byte>> Borrow(uint64_t length) override {
      if (length > memory.size()) return {};
      ++borrows;
      return {{memory.data(), length}};
    }
    void Return(bool) override { ++returns; }
  };
  std::vector<std::shared_ptr<Lent>> lent;
  auto call = [&](const std::string& address) {
    auto p = std::make_shared<std::promise<RpcReply>>();
    std::shared_ptr<Lent> into;
    if (address == doomed_address) into = lent.emplace_back(std::make_shared<Lent>());
    client->Call(address, address == doomed_address ? doomed_opcode : uint16_t{2}, {}, payload, [p, into](RpcReply r) {
      if (into != nullptr) {
        EXPECT_EQ(into->borrows.load(), into->returns.load());  // returned before the call completes
      }
      p->set_value(std::move(r));
    }, into);
    return p->get_future();
  };
  ASSERT_TRUE(client->CallSync(doomed_address, 2, {}, payload).status.ok());
  std::vector<std::future<RpcReply>> doomed_calls, healthy_calls;
  for (int i = 0; i < 4; ++i) {
    doomed_calls.push_back(call(doomed_address));
    healthy_calls.push_back(call(healthy_address));
  }
  std::this_thread::sleep_for(5ms);  // 16 MiB transfers are under way
  doomed.Kill();
  for (int i = 0; i < 8; ++i) healthy_calls.push_back(call(healthy_address));
  int cut_off = 0;
  for (auto& f : doomed_calls) {
    RpcReply r = f.get();  // done or failed, never hung (the 60 s timeout is a backstop)
    if (!r.status.ok()) {
      EXPECT_EQ(r.status.code(), StatusCode::kUnavailable) << r.status.ToString();
      ++cut_off;
    }
  }
  EXPECT_GT(cut_off, 0) << "every call to the doomed peer finished before it was killed";
  for (auto& l : lent) EXPECT_EQ(l->borrows.load(), l->returns.load());
  for (auto& f : healthy_calls) {
    RpcReply r = f.get();
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.payload.size(), payload.size());
  }
  EXPECT_EQ(client->CallSync(doomed_address, 2, {}, {}).status.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(client->CallSync(healthy_address, 2, {}, payload).status.ok());
}

// Direct copies between processes: a server process writes 16 MiB replies straight into this
// process's memory (nothing arrives over the transport), into one piece and into several, and
// copies a 16 MiB request payload straight out of it.
TEST(RpcProcessTest, AServerProcessCopiesStraightIntoAndOutOfTheClientsMemory) {
  Peer server({"serve", "0", "0"});
  const std::string address = StartServer(server);
  MetricsRegistry metrics;
  auto c = RpcClient::Create({.timeout = 30s, .metrics = &metrics});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Counter& rx = metrics.GetCounter("penstock_transport_client_bytes_total", "Data-plane payload bytes",
                                   {{"direction", "rx"}});
  std::vector<std::byte> payload(16 << 20);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = std::byte(i * 7 + (i >> 12));
  struct UpFront : ReplyDestination {
    std::vector<std::byte> memory = std::vector<std::byte>((16 << 20) + 8192);
    std::vector<std::span<std::byte>> pieces;
    std::atomic<int> borrows{0}, returns{0};
    std::vector<std::span<std::byte>> Borrow(uint64_t length) override {
      if (length != UpFrontLength()) return {};
      ++borrows;
      return pieces;
    }
    void Return(bool) override { ++returns; }
    uint64_t UpFrontLength() const override { return 16 << 20; }
  };
  const uint64_t length = payload.size();
  std::vector<std::byte> header(8);
  std::memcpy(header.data(), &length, 8);
  for (int split : {1, 2}) {
    auto into = std::make_shared<UpFront>();
    if (split == 1) {
      into->pieces = {{into->memory.data(), payload.size()}};
    } else {  // second half first in memory
      into->pieces = {{into->memory.data() + (8 << 20) + 8192, 8 << 20}, {into->memory.data(), 8 << 20}};
    }
    auto p = std::make_shared<std::promise<RpcReply>>();
    (*c)->Call(address, 3, header, {}, [p](RpcReply r) { p->set_value(std::move(r)); }, into);
    RpcReply r = p->get_future().get();
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.placed, payload.size());
    EXPECT_EQ(into->borrows.load(), 1);
    EXPECT_EQ(into->returns.load(), 1);
    EXPECT_EQ(0, std::memcmp(into->pieces[0].data(), payload.data(), into->pieces[0].size()));
    EXPECT_EQ(0, std::memcmp(into->pieces.back().data(), payload.data() + payload.size() - into->pieces.back().size(),
                             into->pieces.back().size()));
  }
  EXPECT_EQ(rx.value(), 0u) << "the replies came over the transport, not placed";
  RpcReply echo = (*c)->CallSync(address, 2, {}, payload);
  ASSERT_TRUE(echo.status.ok()) << echo.status.ToString();
  ASSERT_EQ(echo.payload.size(), payload.size());
  EXPECT_EQ(0, std::memcmp(echo.payload.data(), payload.data(), payload.size()));
  server.CloseStdin();
  unsigned long long deferred = 0, pulled = 0, placed = 0;
  long hwm = 0;
  const std::string stats = server.ReadLine({"STATS"});
  ASSERT_EQ(std::sscanf(stats.c_str(), "STATS deferred=%llu hwm_kib=%ld pulled=%llu placed=%llu", &deferred,
                        &hwm, &pulled, &placed), 4) << stats;
  EXPECT_EQ(pulled, payload.size()) << stats;
  EXPECT_EQ(placed, 2 * payload.size()) << stats;
  EXPECT_EQ(server.Wait(), 0);
}

}  // namespace
}  // namespace penstock

// End-to-end tests of RpcServer and RpcClient over whatever UCX_TLS selects (CTest runs this
// binary once over tcp and once over shared memory).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>
#include <random>
#include <string_view>
#include <thread>

#include "common/metrics.h"
#include "transport/rpc_client.h"
#include "transport/rpc_server.h"
#include "transport/socket_address.h"

namespace penstock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint16_t kEcho = 1;
constexpr uint16_t kFail = 2;
constexpr uint16_t kNever = 3;     // the handler never responds
constexpr uint16_t kDeferred = 4;  // responds from another thread after a while
constexpr uint16_t kGenerate = 5;  // header: 8-byte length, 4-byte seed; replies RandomBytes(length, seed)

std::vector<std::byte> RandomBytes(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = std::byte(rng());
  return v;
}

std::span<const std::byte> Span(const std::vector<std::byte>& v) { return {v.data(), v.size()}; }

// Makes `calls` echo calls at once (call i carries i * step % max random bytes) and returns how
// many replies were not OK or did not carry the same bytes back.
int BadEchoes(RpcClient& client, const std::string& address, int calls, size_t step, size_t max) {
  std::atomic<int> bad{0}, left{calls};
  std::promise<void> all;
  std::vector<std::vector<std::byte>> payloads;
  for (int i = 0; i < calls; ++i) payloads.push_back(RandomBytes(static_cast<size_t>(i) * step % max, i));
  for (int i = 0; i < calls; ++i) {
    client.Call(address, kEcho, {}, Span(payloads[i]), [&, i](RpcReply r) {
      if (!r.status.ok() || r.payload.size() != payloads[i].size() ||
          (r.payload.size() && std::memcmp(r.payload.data(), payloads[i].data(), r.payload.size()) != 0)) {
        ++bad;
      }
      if (--left == 0) all.set_value();
    });
  }
  all.get_future().wait();
  return bad.load();
}

// A server whose handler echoes, fails, stalls or defers, by opcode.
class TestServer {
 public:
  explicit TestServer(uint16_t port = 0, unsigned workers = 1)
      : TestServer(RpcServerOptions{.host = "127.0.0.1", .port = port, .workers = workers}) {}
  explicit TestServer(const RpcServerOptions& options) {
    auto s = RpcServer::Start(options, [this](RpcRequest r, Responder respond) { Handle(std::move(r), respond); });
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) server = std::move(s).value();
  }
  ~TestServer() {
    server.reset();
    std::lock_guard lock(mu);
    stalled.clear();
  }

  void Handle(RpcRequest r, Responder respond) {
    switch (r.opcode) {
      case kEcho:
        ++echoes;
        respond(RpcReply{OkStatus(), std::move(r.header), std::move(r.payload)});
        break;
      case kGenerate: {
        uint64_t length = 0;
        uint32_t seed = 0;
        if (r.header.size() == 12) {
          std::memcpy(&length, r.header.data(), 8);
          std::memcpy(&seed, r.header.data() + 8, 4);
        }
        respond(RpcReply{OkStatus(), {}, AlignedBuffer::CopyOf(RandomBytes(length, seed))});
        break;
      }
      case kFail:
        respond(RpcReply{NotFound("shard 17 not found on this target"), {}, AlignedBuffer()});
        break;
      case kNever: {
        std::lock_guard lock(mu);
        stalled.push_back(respond);
        break;
      }
      case kDeferred: {
        auto req = std::make_shared<RpcRequest>(std::move(r));
        std::thread([req, respond] {
          std::this_thread::sleep_for(20ms);
          respond(RpcReply{OkStatus(), std::move(req->header), std::move(req->payload)});
        }).detach();
        break;
      }
      default:
        respond(RpcReply{Unimplemented("opcode"), {}, AlignedBuffer()});
    }
  }

  std::unique_ptr<RpcServer> server;
  std::mutex mu;
  std::vector<Responder> stalled;
  std::atomic<int> echoes{0};
};

std::unique_ptr<RpcClient> MakeClient(std::chrono::milliseconds timeout = 10s) {
  auto c = RpcClient::Create({.timeout = timeout});
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

uint16_t UnusedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

TEST(RpcTest, EchoesPayloadsOfEverySize) {
  TestServer ts;
  auto client = MakeClient();
  ASSERT_TRUE(ts.server && client);
  const char* tls = std::getenv("UCX_TLS");
  for (size_t size : {size_t{0}, size_t{1}, size_t{4095}, size_t{1 << 20} + 1, size_t{16} << 20}) {
    auto payload = RandomBytes(size, static_cast<uint32_t>(size));
    auto header = RandomBytes(size % 4097, 7);
    RpcReply reply = client->CallSync(ts.server->address(), kEcho, Span(header), Span(payload));
    ASSERT_TRUE(reply.status.ok()) << size << ": " << reply.status.ToString();
    EXPECT_EQ(reply.header, header) << size;
    ASSERT_EQ(reply.payload.size(), size);
    EXPECT_TRUE(size == 0 || std::memcmp(reply.payload.data(), payload.data(), size) == 0) << size;
  }
  std::string tl = client->TransportName(ts.server->address());
  std::cout << "UCX_TLS=" << (tls ? tls : "(unset)") << " -> transports: " << tl << "\n";
  EXPECT_FALSE(tl.empty());
  if (tls != nullptr && std::string(tls) == "tcp") {
    EXPECT_EQ(tl, "tcp");
  }
  if (tls != nullptr && std::string(tls).find("posix") == 0) {
    EXPECT_NE(tl.find("posix"), std::string::npos) << tl;
    // With the shared-memory setting from README.md no byte goes over tcp (the TCP connection
    // manager is not a lane).
    const char* rndv = std::getenv("UCX_RNDV_SCHEME");
    if (rndv != nullptr && std::string(rndv) == "get_zcopy") {
      EXPECT_EQ(tl.find("tcp"), std::string::npos) << tl;
    }
  }
}

// Caller memory for a reply (ReplyDestination): `pieces` in order; counts the loans.
class TestDestination : public ReplyDestination {
 public:
  // With `up_front`, the destination offers that many bytes when the call is sent (placement).
  explicit TestDestination(std::vector<std::span<std::byte>> pieces, uint64_t up_front = 0)
      : pieces_(std::move(pieces)), up_front_(up_front) {}
  uint64_t UpFrontLength() const override { return up_front_; }
  std::vector<std::span<std::byte>> Borrow(uint64_t length) override {
    std::vector<std::span<std::byte>> out;
    for (auto p : pieces_) {
      if (length == 0) break;
      out.push_back(p.first(std::min<uint64_t>(p.size(), length)));
      length -= out.back().size();
    }
    if (length > 0) return {};  // too small: deliver in the reply instead
    ++borrows;
    return out;
  }
  void Return(bool ok) override {
    ++returns;
    all_ok = all_ok && ok;
  }
  std::atomic<int> borrows{0}, returns{0};
  std::atomic<bool> all_ok{true};

 private:
  std::vector<std::span<std::byte>> pieces_;
  const uint64_t up_front_;
};

RpcReply CallInto(RpcClient& client, const std::string& address, std::span<const std::byte> payload,
                  std::shared_ptr<ReplyDestination> into, uint16_t opcode = kEcho,
                  std::span<const std::byte> header = {}) {
  std::promise<RpcReply> p;
  client.Call(address, opcode, header, payload, [&p](RpcReply r) { p.set_value(std::move(r)); }, std::move(into));
  return p.get_future().get();
}

// A kGenerate call for RandomBytes(length, seed), its reply received into `into`.
RpcReply GenerateInto(RpcClient& client, const std::string& address, uint64_t length, uint32_t seed,
                      std::shared_ptr<ReplyDestination> into) {
  std::vector<std::byte> header(12);
  std::memcpy(header.data(), &length, 8);
  std::memcpy(header.data() + 8, &seed, 4);
  return CallInto(client, address, {}, std::move(into), kGenerate, header);
}

// Replies land in the caller's memory: eager and rendezvous sizes, one piece (registered or
// not) and several (UCP_DATATYPE_IOV); memory that is too small gets the reply as usual.
TEST(RpcTest, RepliesAreReceivedIntoTheCallersMemory) {
  TestServer ts;
  auto client = MakeClient();
  ASSERT_TRUE(ts.server && client);
  std::vector<std::byte> memory((16 << 20) + 4096);  // room for the gaps between pieces
  auto reg = client->Register(memory.data(), memory.size());
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  EXPECT_EQ(client->Register(memory.data() + 4096, 100).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client->Register(nullptr, 0).status().code(), StatusCode::kInvalidArgument);
  for (size_t size : {size_t{1}, size_t{4095}, size_t{1 << 20} + 1, size_t{16} << 20}) {
    const auto payload = RandomBytes(size, static_cast<uint32_t>(size) + 1);
    for (int pieces : {1, 3}) {
      std::fill(memory.begin(), memory.end(), std::byte{0});
      std::vector<std::span<std::byte>> spans;
      const size_t cut1 = size / 3, cut2 = 2 * size / 3;
      if (pieces == 1) {
        spans.emplace_back(memory.data(), size);
      } else {  // out of order in memory, so a wrong scatter shows
        spans.emplace_back(memory.data() + cut2 + 64, cut1);
        spans.emplace_back(memory.data(), cut2 - cut1);
        spans.emplace_back(memory.data() + cut2 - cut1 + 32, size - cut2);
      }
      auto dest = std::make_shared<TestDestination>(spans);
      RpcReply r = CallInto(*client, ts.server->address(), Span(payload), dest);
      ASSERT_TRUE(r.status.ok()) << size << ": " << r.status.ToString();
      EXPECT_EQ(r.placed, size);
      EXPECT_EQ(r.payload.size(), 0u);
      EXPECT_EQ(dest->borrows.load(), 1);
      EXPECT_EQ(dest->returns.load(), 1);
      EXPECT_TRUE(dest->all_ok.load());
      size_t at = 0;
      for (auto sp : spans) {
        if (sp.empty()) continue;
        ASSERT_EQ(0, std::memcmp(sp.data(), payload.data() + at, sp.size())) << size << " pieces " << pieces;
        at += sp.size();
      }
    }
    auto small = std::make_shared<TestDestination>(std::vector<std::span<std::byte>>{{memory.data(), size - 1}});
    RpcReply r = CallInto(*client, ts.server->address(), Span(payload), small);
    ASSERT_TRUE(r.status.ok());
    EXPECT_EQ(r.placed, 0u);
    ASSERT_EQ(r.payload.size(), size);
    EXPECT_EQ(0, std::memcmp(r.payload.data(), payload.data(), size));
    EXPECT_EQ(small->returns.load(), 0);
  }
}

// Three pieces of `memory` for a `size`-byte reply, out of order so a wrong scatter shows.
std::vector<std::span<std::byte>> Scattered(std::vector<std::byte>& memory, size_t size) {
  const size_t cut1 = size / 3, cut2 = 2 * size / 3;
  return {{memory.data() + cut2 + 64, cut1},
          {memory.data(), cut2 - cut1},
          {memory.data() + cut2 - cut1 + 32, size - cut2}};
}

bool Holds(const std::vector<std::span<std::byte>>& spans, const std::vector<std::byte>& bytes) {
  size_t at = 0;
  for (auto sp : spans) {
    const size_t n = std::min(sp.size(), bytes.size() - at);
    if (std::memcmp(sp.data(), bytes.data() + at, n) != 0) return false;
    at += n;
  }
  return at == bytes.size();
}

// Small messages a transport thread sends in one pass go to their peer together, in batches
// (wire.h), over tcp: a fresh connection carries one call until its first reply, and then the
// client sends the 63 calls queued behind it in one go; the server's handler answers each at
// once, and the replies leave together too. Over shared memory each goes alone (BatchesPay).
// Every call gets its own bytes back either way.
TEST(RpcTest, SmallMessagesOfOnePassTravelTogether) {
  MetricsRegistry server_metrics, client_metrics;
  TestServer ts(RpcServerOptions{.host = "127.0.0.1", .metrics = &server_metrics});
  auto c = RpcClient::Create({.metrics = &client_metrics});
  ASSERT_TRUE(ts.server && c.ok()) << c.status().ToString();
  auto& client = *c;
  EXPECT_EQ(BadEchoes(*client, ts.server->address(), 64, 61, 3000), 0);
  const uint64_t requests =
      client_metrics.GetCounter("penstock_transport_client_batched_requests_total", "").value();
  const uint64_t replies =
      server_metrics.GetCounter("penstock_transport_server_batched_replies_total", "").value();
  if (client->TransportName(ts.server->address()) == "tcp") {
    EXPECT_GE(requests, 60u);
    EXPECT_GE(replies, 60u);
  } else {
    EXPECT_EQ(requests, 0u);
    EXPECT_EQ(replies, 0u);
  }
  // Large payloads go alone, beside the batches: echoes of up to 200 KB, mixed.
  EXPECT_EQ(BadEchoes(*client, ts.server->address(), 64, 9973, 200000), 0);
}

struct PlacementCounters {
  MetricsRegistry metrics;
  Counter& placed = metrics.GetCounter("penstock_transport_server_placed_bytes_total", "");
  Counter& pulled = metrics.GetCounter("penstock_transport_server_pulled_bytes_total", "");
  Counter& fallbacks = metrics.GetCounter("penstock_transport_server_placement_fallbacks_total", "");
};

// Reply placement (local_direct.h): a destination that knows its length up front lends it with
// the request, and the server (same host, same user) writes the reply straight into it. A
// reply shorter than the memory fills its start; one larger than it, or below the threshold,
// or from a client that turned placement off, travels over the transport as before.
TEST(RpcTest, ServersOnThisHostWriteRepliesIntoTheLentMemory) {
  PlacementCounters m;
  TestServer ts(RpcServerOptions{.host = "127.0.0.1", .metrics = &m.metrics});
  auto client = MakeClient();
  ASSERT_TRUE(ts.server && client);
  std::vector<std::byte> memory((16 << 20) + 4096);
  for (size_t size : {size_t{64} << 10, size_t{1 << 20} + 1, size_t{16} << 20}) {
    const auto payload = RandomBytes(size, static_cast<uint32_t>(size) + 5);
    for (int pieces : {1, 3}) {
      std::fill(memory.begin(), memory.end(), std::byte{0});
      auto spans = pieces == 1 ? std::vector<std::span<std::byte>>{{memory.data(), size}} : Scattered(memory, size);
      auto dest = std::make_shared<TestDestination>(spans, size);
      const uint64_t before = m.placed.value();
      RpcReply r = GenerateInto(*client, ts.server->address(), size, static_cast<uint32_t>(size) + 5, dest);
      ASSERT_TRUE(r.status.ok()) << size << ": " << r.status.ToString();
      EXPECT_EQ(r.placed, size);
      EXPECT_EQ(r.payload.size(), 0u);
      EXPECT_EQ(m.placed.value() - before, size) << "written by the server, not sent";
      EXPECT_EQ(dest->borrows.load(), 1);
      EXPECT_EQ(dest->returns.load(), 1);
      EXPECT_TRUE(dest->all_ok.load());
      EXPECT_TRUE(Holds(spans, payload)) << size << " pieces " << pieces;
    }
  }
  EXPECT_EQ(m.fallbacks.value(), 0u);

  const size_t size = 1 << 20;
  const auto payload = RandomBytes(size, 99);
  // A reply shorter than the memory lent.
  std::fill(memory.begin(), memory.end(), std::byte{0});
  auto roomy = std::make_shared<TestDestination>(std::vector<std::span<std::byte>>{{memory.data(), 2 * size}}, 2 * size);
  RpcReply r = GenerateInto(*client, ts.server->address(), size, 99, roomy);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.placed, size);
  EXPECT_EQ(0, std::memcmp(memory.data(), payload.data(), size));
  EXPECT_EQ(memory[size], std::byte{0});
  // A reply larger than the memory lent: sent, and delivered in the reply.
  auto tight = std::make_shared<TestDestination>(std::vector<std::span<std::byte>>{{memory.data(), size - 1}}, size - 1);
  r = GenerateInto(*client, ts.server->address(), size, 99, tight);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.placed, 0u);
  ASSERT_EQ(r.payload.size(), size);
  EXPECT_EQ(0, std::memcmp(r.payload.data(), payload.data(), size));
  EXPECT_EQ(tight->returns.load(), 1);
  EXPECT_EQ(m.fallbacks.value(), 1u);
  // Below the threshold: received into the memory by the transport, not placed.
  const uint64_t placed_before = m.placed.value();
  auto small = std::make_shared<TestDestination>(std::vector<std::span<std::byte>>{{memory.data(), 4096}}, 4096);
  r = GenerateInto(*client, ts.server->address(), 4096, 99, small);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.placed, 4096u);
  // A client with placement off.
  auto off = RpcClient::Create({.timeout = 10s, .local_direct = false});
  ASSERT_TRUE(off.ok());
  auto big = std::make_shared<TestDestination>(std::vector<std::span<std::byte>>{{memory.data(), size}}, size);
  r = GenerateInto(**off, ts.server->address(), size, 99, big);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.placed, size);
  EXPECT_EQ(0, std::memcmp(memory.data(), payload.data(), size));
  EXPECT_EQ(m.placed.value(), placed_before);
  EXPECT_EQ(m.fallbacks.value(), 1u);
  EXPECT_EQ(m.pulled.value(), 0u);
}

// The other direction: a large request payload stays in the caller's memory and the server
// copies it from there (nothing goes over the transport); small ones, and those of a client
// with direct copies off, are sent.
TEST(RpcTest, ServersOnThisHostCopyLargePayloadsOutOfTheCallersMemory) {
  PlacementCounters m;
  TestServer ts(RpcServerOptions{.host = "127.0.0.1", .metrics = &m.metrics});
  auto client = MakeClient();
  ASSERT_TRUE(ts.server && client);
  for (size_t size : {size_t{64} << 10, size_t{1 << 20} + 1, size_t{16} << 20}) {
    const auto payload = RandomBytes(size, static_cast<uint32_t>(size) + 9);
    const uint64_t before = m.pulled.value();
    RpcReply r = client->CallSync(ts.server->address(), kEcho, {}, Span(payload));
    ASSERT_TRUE(r.status.ok()) << size << ": " << r.status.ToString();
    ASSERT_EQ(r.payload.size(), size);
    EXPECT_EQ(0, std::memcmp(r.payload.data(), payload.data(), size)) << size;
    EXPECT_EQ(m.pulled.value() - before, size) << "copied by the server, not sent";
  }
  const uint64_t pulled = m.pulled.value();
  EXPECT_TRUE(client->CallSync(ts.server->address(), kEcho, {}, Span(RandomBytes(4096, 1))).status.ok());
  auto off = RpcClient::Create({.timeout = 10s, .local_direct = false});
  ASSERT_TRUE(off.ok());
  const auto payload = RandomBytes(1 << 20, 2);
  RpcReply r = (*off)->CallSync(ts.server->address(), kEcho, {}, Span(payload));
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(0, std::memcmp(r.payload.data(), payload.data(), payload.size()));
  EXPECT_EQ(m.pulled.value(), pulled);
  EXPECT_EQ(m.fallbacks.value(), 0u);
}

// A server that does not copy (direct copies off here; another user in practice) refuses the
// first payload it is offered without running the request; the client sends it again with the
// payload and offers that server no more. The reply memory it is offered is refused too (the
// reply is sent into it); after that the client offers none.
TEST(RpcTest, AServerThatWillNotCopyGetsThePayloadSent) {
  PlacementCounters m;
  TestServer ts(RpcServerOptions{.host = "127.0.0.1", .metrics = &m.metrics, .local_direct = false});
  auto client = MakeClient();
  ASSERT_TRUE(ts.server && client);
  for (int i = 0; i < 3; ++i) {
    const auto payload = RandomBytes(1 << 20, 40 + i);
    RpcReply r = client->CallSync(ts.server->address(), kEcho, {}, Span(payload));
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    ASSERT_EQ(r.payload.size(), payload.size());
    EXPECT_EQ(0, std::memcmp(r.payload.data(), payload.data(), payload.size()));
  }
  EXPECT_EQ(ts.echoes.load(), 3) << "the refused offer did not run the request";
  EXPECT_EQ(m.fallbacks.value(), 1u) << "offered once, then sent";
  std::vector<std::byte> memory(1 << 20);
  for (uint32_t seed : {8, 9}) {
    auto dest = std::make_shared<TestDestination>(std::vector<std::span<std::byte>>{{memory.data(), memory.size()}},
                                                  memory.size());
    RpcReply r = GenerateInto(*client, ts.server->address(), memory.size(), seed, dest);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.placed, memory.size());
    EXPECT_EQ(0, std::memcmp(memory.data(), RandomBytes(memory.size(), seed).data(), memory.size()));
  }
  EXPECT_EQ(m.placed.value(), 0u);
  EXPECT_EQ(m.pulled.value(), 0u);
  EXPECT_EQ(m.fallbacks.value(), 2u) << "one refused reply offer, then no more offers";
}

// A payload the client gave up on (the call timed out while it waited for the server's memory
// budget) is never copied and its request never runs: the ticket was cleared first.
TEST(RpcTest, APayloadGivenUpOnIsNeitherCopiedNorRun) {
  PlacementCounters m;
  TestServer ts(RpcServerOptions{.host = "127.0.0.1", .metrics = &m.metrics, .max_incoming_bytes = 1 << 20});
  auto client = MakeClient(500ms);
  ASSERT_TRUE(ts.server && client);
  const auto held = RandomBytes(1 << 20, 5), late = RandomBytes(1 << 20, 6);
  std::promise<RpcReply> first;
  client->Call(ts.server->address(), kNever, {}, Span(held), [&first](RpcReply r) { first.set_value(std::move(r)); });
  RpcReply r = client->CallSync(ts.server->address(), kEcho, {}, Span(late));  // waits for budget
  EXPECT_EQ(r.status.code(), StatusCode::kDeadlineExceeded) << r.status.ToString();
  EXPECT_EQ(first.get_future().get().status.code(), StatusCode::kDeadlineExceeded);
  Responder release;
  {
    std::lock_guard lock(ts.mu);
    ASSERT_EQ(ts.stalled.size(), 1u);
    release = ts.stalled[0];
  }
  release(RpcReply{});  // the budget comes back; the deferred request is admitted now
  auto deadline = Clock::now() + 5s;
  while (m.fallbacks.value() == 0 && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(m.fallbacks.value(), 1u);
  EXPECT_EQ(m.pulled.value(), 1u << 20) << "only the first payload was copied";
  EXPECT_EQ(ts.echoes.load(), 0);
  EXPECT_TRUE(client->CallSync(ts.server->address(), kEcho, {}, {}).status.ok());
}

// A call given up through its CallAbandon ends at once with the reason, whether the server holds
// its request (its payload copied) or it waits behind it for room (in flight or queued); a
// payload given up so is never copied and its request never runs; the connection serves the
// next calls.
TEST(RpcTest, ACallGivenUpEndsWithItsReasonAndItsPayloadIsNotCopied) {
  PlacementCounters m;
  TestServer ts(RpcServerOptions{.host = "127.0.0.1", .metrics = &m.metrics, .max_incoming_bytes = 1 << 20});
  auto client = MakeClient(30s);
  ASSERT_TRUE(ts.server && client);
  const auto held = RandomBytes(1 << 20, 15), late = RandomBytes(1 << 20, 16);
  std::promise<RpcReply> first, second;
  auto give_up_first = std::make_shared<CallAbandon>(), give_up_second = std::make_shared<CallAbandon>();
  client->Call(ts.server->address(), kNever, {}, Span(held), [&first](RpcReply r) { first.set_value(std::move(r)); },
               nullptr, give_up_first);
  auto deadline = Clock::now() + 5s;
  while (m.pulled.value() == 0 && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(m.pulled.value(), 1u << 20);
  client->Call(ts.server->address(), kEcho, {}, Span(late), [&second](RpcReply r) { second.set_value(std::move(r)); },
               nullptr, give_up_second);  // waits for room behind the first
  give_up_second->GiveUp(Unavailable("second given up"));
  RpcReply r2 = second.get_future().get();
  EXPECT_EQ(r2.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(r2.status.message(), "second given up");
  give_up_first->GiveUp(Unavailable("first given up"));
  EXPECT_EQ(first.get_future().get().status.message(), "first given up");
  give_up_first->GiveUp(Unavailable("again"));  // ended: nothing happens
  Responder release;
  {
    std::lock_guard lock(ts.mu);
    ASSERT_EQ(ts.stalled.size(), 1u);
    release = ts.stalled[0];
  }
  release(RpcReply{});  // room again: a second request that had reached the server is admitted
  EXPECT_TRUE(client->CallSync(ts.server->address(), kEcho, {}, {}).status.ok());
  // Had the second request reached the server, its copy was refused (the ticket was cleared).
  EXPECT_EQ(m.pulled.value(), 1u << 20) << "only the first payload was copied";
  EXPECT_EQ(ts.echoes.load(), 1) << "only the last echo ran";
}

// A call the client gave up on (timed out) has its ticket cleared before the memory goes back:
// the server's late reply leaves that memory alone.
TEST(RpcTest, ALateReplyIsNotWrittenIntoMemoryGivenBack) {
  PlacementCounters m;
  TestServer ts(RpcServerOptions{.host = "127.0.0.1", .metrics = &m.metrics});
  auto client = MakeClient(300ms);
  ASSERT_TRUE(ts.server && client);
  std::vector<std::byte> memory(1 << 20, std::byte{0xaa});
  auto dest = std::make_shared<TestDestination>(std::vector<std::span<std::byte>>{{memory.data(), memory.size()}},
                                                memory.size());
  std::promise<RpcReply> p;
  client->Call(ts.server->address(), kNever, {}, {}, [&p](RpcReply r) { p.set_value(std::move(r)); }, dest);
  RpcReply r = p.get_future().get();
  EXPECT_EQ(r.status.code(), StatusCode::kDeadlineExceeded) << r.status.ToString();
  EXPECT_EQ(dest->returns.load(), 1);
  Responder late;
  {
    std::lock_guard lock(ts.mu);
    ASSERT_EQ(ts.stalled.size(), 1u);
    late = ts.stalled[0];
  }
  late(RpcReply{OkStatus(), {}, AlignedBuffer::CopyOf(RandomBytes(memory.size(), 3))});
  EXPECT_EQ(m.fallbacks.value(), 1u);
  EXPECT_EQ(m.placed.value(), 0u);
  EXPECT_TRUE(std::all_of(memory.begin(), memory.end(), [](std::byte b) { return b == std::byte{0xaa}; }));
  EXPECT_TRUE(client->CallSync(ts.server->address(), kEcho, {}, {}).status.ok());
}

TEST(RpcTest, HeaderAtTheLimitAndBeyond) {
  TestServer ts;
  auto client = MakeClient();
  auto header = RandomBytes(4096, 1);
  RpcReply ok = client->CallSync(ts.server->address(), kEcho, Span(header), {});
  ASSERT_TRUE(ok.status.ok()) << ok.status.ToString();
  EXPECT_EQ(ok.header, header);
  header.push_back(std::byte{1});
  RpcReply bad = client->CallSync(ts.server->address(), kEcho, Span(header), {});
  EXPECT_EQ(bad.status.code(), StatusCode::kInvalidArgument) << bad.status.ToString();
}

// A reply's length is the server's word: one longer than max_reply_bytes is refused before
// anything is allocated for it (the call fails naming the option), unless the call lends
// memory for it; the connection keeps serving.
TEST(RpcTest, RepliesOverTheClientsLimitAreRefusedUnlessMemoryIsLent) {
  TestServer ts;
  auto c = RpcClient::Create({.timeout = 10s, .max_reply_bytes = 1 << 20});
  ASSERT_TRUE(ts.server && c.ok());
  RpcClient& client = **c;
  const std::string address = ts.server->address();
  for (uint64_t size : {uint64_t{(1 << 20) + 1}, uint64_t{8} << 20}) {
    RpcReply big = GenerateInto(client, address, size, 3, nullptr);
    EXPECT_EQ(big.status.code(), StatusCode::kResourceExhausted) << size << ": " << big.status.ToString();
    EXPECT_NE(big.status.message().find("max_reply_bytes"), std::string::npos) << big.status.ToString();
    RpcReply at_limit = GenerateInto(client, address, 1 << 20, 4, nullptr);
    ASSERT_TRUE(at_limit.status.ok()) << at_limit.status.ToString();
    EXPECT_EQ(at_limit.payload.size(), 1u << 20);
    EXPECT_EQ(std::memcmp(at_limit.payload.data(), RandomBytes(1 << 20, 4).data(), 1 << 20), 0);
  }
  std::vector<std::byte> memory(8 << 20);
  auto dest = std::make_shared<TestDestination>(std::vector<std::span<std::byte>>{memory});
  RpcReply lent = GenerateInto(client, address, 8 << 20, 5, dest);
  ASSERT_TRUE(lent.status.ok()) << lent.status.ToString();
  EXPECT_EQ(lent.placed, 8u << 20);
  EXPECT_EQ(std::memcmp(memory.data(), RandomBytes(8 << 20, 5).data(), memory.size()), 0);
}

TEST(RpcTest, HandlerStatusArrivesUnchanged) {
  TestServer ts;
  auto client = MakeClient();
  RpcReply reply = client->CallSync(ts.server->address(), kFail, {}, {});
  EXPECT_EQ(reply.status, NotFound("shard 17 not found on this target"));
}

TEST(RpcTest, ManyConcurrentCallsFromSeveralThreads) {
  TestServer ts;
  auto client = MakeClient();
  constexpr int kThreads = 4, kPerThread = 16;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::vector<std::byte>> payloads;
      std::vector<std::future<RpcReply>> futures;
      for (int i = 0; i < kPerThread; ++i) {
        payloads.push_back(RandomBytes(static_cast<size_t>(i) * 40000 + t, t * 100 + i));
      }
      for (int i = 0; i < kPerThread; ++i) {
        auto p = std::make_shared<std::promise<RpcReply>>();
        futures.push_back(p->get_future());
        client->Call(ts.server->address(), i % 2 ? kDeferred : kEcho, {}, Span(payloads[i]),
                     [p](RpcReply r) { p->set_value(std::move(r)); });
      }
      for (int i = 0; i < kPerThread; ++i) {
        RpcReply r = futures[i].get();
        if (r.status.ok() && r.payload.size() == payloads[i].size() &&
            (r.payload.empty() || std::memcmp(r.payload.data(), payloads[i].data(), r.payload.size()) == 0)) {
          ++good;
        } else {
          ADD_FAILURE() << r.status.ToString();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), kThreads * kPerThread);
}

TEST(RpcTest, NothingListeningFailsPromptlyNamingTheAddress) {
  auto client = MakeClient();
  std::string address = "127.0.0.1:" + std::to_string(UnusedPort());
  auto start = Clock::now();
  RpcReply reply = client->CallSync(address, kEcho, {}, {});
  EXPECT_EQ(reply.status.code(), StatusCode::kUnavailable) << reply.status.ToString();
  EXPECT_NE(reply.status.message().find(address), std::string::npos) << reply.status.ToString();
  EXPECT_LT(Clock::now() - start, 5s);
  // A malformed address is the caller's mistake.
  EXPECT_EQ(client->CallSync("no-port", kEcho, {}, {}).status.code(), StatusCode::kInvalidArgument);
}

TEST(RpcTest, ServerStopFailsPendingCallsAndRestartIsReachable) {
  auto ts = std::make_unique<TestServer>();
  uint16_t port = ts->server->port();
  std::string address = ts->server->address();
  auto client = MakeClient(20s);
  ASSERT_TRUE(client->CallSync(address, kEcho, {}, {}).status.ok());
  std::promise<RpcReply> pending;
  client->Call(address, kNever, {}, {}, [&](RpcReply r) { pending.set_value(std::move(r)); });
  while (true) {  // wait until the server holds the call
    std::lock_guard lock(ts->mu);
    if (!ts->stalled.empty()) break;
  }
  auto start = Clock::now();
  ts->server->Stop();
  auto f = pending.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready) << "pending call hung after server stop";
  RpcReply r = f.get();
  EXPECT_EQ(r.status.code(), StatusCode::kUnavailable) << r.status.ToString();
  EXPECT_LT(Clock::now() - start, 10s);
  {
    std::lock_guard lock(ts->mu);  // responding after Stop is a harmless no-op
    ts->stalled.front()(RpcReply{});
  }
  ts.reset();

  TestServer again(port);
  ASSERT_TRUE(again.server) << "restart on port " << port;
  RpcReply ok = client->CallSync(address, kEcho, {}, {});
  EXPECT_TRUE(ok.status.ok()) << ok.status.ToString();
}

TEST(RpcTest, UnansweredCallTimesOut) {
  TestServer ts;
  auto client = MakeClient(300ms);
  auto start = Clock::now();
  RpcReply r = client->CallSync(ts.server->address(), kNever, {}, {});
  auto elapsed = Clock::now() - start;
  EXPECT_EQ(r.status.code(), StatusCode::kDeadlineExceeded) << r.status.ToString();
  EXPECT_GE(elapsed, 300ms);
  EXPECT_LT(elapsed, 3s);
  // The connection survives a timeout.
  EXPECT_TRUE(client->CallSync(ts.server->address(), kEcho, {}, {}).status.ok());
}

TEST(RpcTest, PortInUseNamesThePort) {
  TestServer first;
  ASSERT_TRUE(first.server);
  auto second = RpcServer::Start({.host = "127.0.0.1", .port = first.server->port()},
                                 [](RpcRequest, Responder) {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find(std::to_string(first.server->port())), std::string::npos)
      << second.status().ToString();
}

TEST(RpcTest, DestroyingTheClientCancelsPendingCalls) {
  TestServer ts;
  auto client = MakeClient();
  std::promise<RpcReply> pending;
  client->Call(ts.server->address(), kNever, {}, {}, [&](RpcReply r) { pending.set_value(std::move(r)); });
  while (true) {
    std::lock_guard lock(ts.mu);
    if (!ts.stalled.empty()) break;
  }
  client.reset();
  auto f = pending.get_future();
  ASSERT_EQ(f.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(f.get().status.code(), StatusCode::kCancelled);
}

// Several workers on both sides (threads, each client worker with its own connection, the
// server's listener handing connections to its workers in turn): calls are spread over all of
// them and every reply matches its request.
TEST(RpcTest, SeveralWorkersShareTheCalls) {
  TestServer ts(0, 2);
  auto c = RpcClient::Create({.timeout = 10s, .workers = 3, .net_devices = {"", "lo", ""}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto& client = **c;
  constexpr int kCalls = 300;
  EXPECT_EQ(BadEchoes(client, ts.server->address(), kCalls, 997, 200000), 0);
  auto per = client.CallsPerWorker();
  ASSERT_EQ(per.size(), 3u);
  for (uint64_t n : per) EXPECT_EQ(n, kCalls / 3);
  EXPECT_FALSE(client.TransportName(ts.server->address()).empty());
  EXPECT_EQ(ts.server->ConnectionsPerWorker(), (std::vector<uint64_t>{2, 1}));
}

// A multi-rail server: one listener per rail, each on a UCX context of its own limited to the
// rail's devices. Its address lists the rails; each client worker calls the rail of its own
// index, and a rail's connections are accepted by that rail's workers only. (Both rails are on
// loopback here, on ports of their own: UCX accepts connections only on an address some
// interface has, and loopback has only 127.0.0.1. tests/e2e/test_rails.py runs rails on two
// networks.)
TEST(RpcTest, RailsEachHaveTheirOwnListenerAndWorkers) {
  TestServer ts(RpcServerOptions{.workers = 2, .rails = {{"127.0.0.1", "lo"}, {"127.0.0.1", ""}}});
  ASSERT_TRUE(ts.server);
  const std::string address = ts.server->address();
  const size_t comma = address.find(',');
  ASSERT_NE(comma, std::string::npos) << address;
  EXPECT_EQ(address.substr(0, comma), "127.0.0.1:" + std::to_string(ts.server->port()));
  EXPECT_EQ(address.substr(comma + 1).rfind("127.0.0.1:", 0), 0u) << address;
  EXPECT_NE(address.substr(0, comma), address.substr(comma + 1));
  EXPECT_EQ(RailFor(address, 0), address.substr(0, comma));
  EXPECT_EQ(RailFor(address, 3), address.substr(comma + 1));
  EXPECT_EQ(RailFor("10.0.0.1:7", 5), "10.0.0.1:7");

  auto c = RpcClient::Create({.timeout = 10s, .workers = 4});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(BadEchoes(**c, address, 200, 7919, 300000), 0);
  // Workers 0 and 2 connected to the first rail, 1 and 3 to the second; each rail handed its
  // two connections to its two workers.
  EXPECT_EQ(ts.server->ConnectionsPerWorker(), (std::vector<uint64_t>{1, 1, 1, 1}));
  EXPECT_FALSE((*c)->TransportName(address).empty());
  // One rail alone is an address too.
  RpcReply alone = (*c)->CallSync(address.substr(comma + 1), kEcho, {}, {});
  EXPECT_TRUE(alone.status.ok()) << address << ": " << alone.status.ToString();
}

// A rail whose connection fails gets no calls for rail_retry_after: they go to a worker whose
// rail works, or (one worker) through the worker to another rail; then one call tries it again.
TEST(RpcTest, CallsLeaveARailWhoseConnectionFails) {
  TestServer ts;
  ASSERT_TRUE(ts.server);
  const std::string live = ts.server->address();
  const std::string dead = "127.0.0.1:" + std::to_string(UnusedPort());
  for (unsigned workers : {2u, 1u}) {
    SCOPED_TRACE(workers);
    // With two workers the dead rail is worker 1's; with one, it is the worker's own (rail 0).
    const std::string address = workers == 2 ? live + "," + dead : dead + "," + live;
    auto c = RpcClient::Create({.timeout = 10s, .workers = workers, .rail_retry_after = 500ms});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    auto failures = [&](int calls) {
      int failed = 0;
      for (int i = 0; i < calls; ++i) {
        RpcReply r = (*c)->CallSync(address, kEcho, {}, {});
        if (r.status.ok()) continue;
        ++failed;
        EXPECT_EQ(r.status.code(), StatusCode::kUnavailable) << r.status.ToString();
        EXPECT_NE(r.status.message().find(dead), std::string::npos) << r.status.ToString();
        EXPECT_FALSE(r.from_peer);
      }
      return failed;
    };
    EXPECT_EQ(failures(20), 1);  // the first call on the dead rail; none after
    EXPECT_EQ((*c)->RailsDown(), std::vector<std::string>{dead});
    if (workers == 2) {
      EXPECT_EQ((*c)->CallsPerWorker()[1], 1u);  // the rest went to worker 0
    }
    // Once rail_retry_after has passed, one call tries the dead rail again, and fails over again.
    std::this_thread::sleep_for(600ms);
    EXPECT_TRUE((*c)->RailsDown().empty());
    EXPECT_EQ(failures(20), 1);
    EXPECT_EQ((*c)->RailsDown(), std::vector<std::string>{dead});
  }
  // A handler's error is the server's answer, not the rail's: it marks nothing down.
  auto c = RpcClient::Create({.timeout = 10s, .workers = 2});
  ASSERT_TRUE(c.ok());
  RpcReply r = (*c)->CallSync(live + "," + live, kFail, {}, {});
  EXPECT_FALSE(r.status.ok());
  EXPECT_TRUE(r.from_peer);
  EXPECT_TRUE((*c)->RailsDown().empty());
}

// on_worker_start: runs on the worker's thread before any request; an event source it adds is
// progressed on that thread (the one that runs the handler) when its eventfd fires, and what it
// returns runs on that thread when the server stops.
TEST(RpcTest, WorkerEventSourcesRunOnTheWorkerThread) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::thread::id started_on, progressed_on, handled_on, stopped_on;
    bool pending = false;
    int progressed = 0;
    int efd = -1;
  };
  auto sh = std::make_shared<Shared>();
  RpcServerOptions o;
  o.on_worker_start = [sh](const RpcServerOptions::AddSource& add) {
    std::lock_guard lock(sh->mu);
    sh->started_on = std::this_thread::get_id();
    sh->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    add(sh->efd, [sh] {
      std::lock_guard lock(sh->mu);
      if (!sh->pending) return false;
      sh->pending = false;
      sh->progressed_on = std::this_thread::get_id();
      ++sh->progressed;
      sh->cv.notify_all();
      return true;
    });
    return std::function<void()>([sh] {
      std::lock_guard lock(sh->mu);
      sh->stopped_on = std::this_thread::get_id();
      close(sh->efd);
    });
  };
  auto server = RpcServer::Start(o, [sh](RpcRequest, Responder respond) {
    {
      std::lock_guard lock(sh->mu);
      sh->handled_on = std::this_thread::get_id();
    }
    respond(RpcReply{});
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto client = MakeClient();
  ASSERT_TRUE(client->CallSync((*server)->address(), kEcho, {}, {}).status.ok());
  {
    std::unique_lock lock(sh->mu);
    sh->pending = true;
    uint64_t one = 1;
    ASSERT_EQ(write(sh->efd, &one, sizeof one), ssize_t(sizeof one));
    ASSERT_TRUE(sh->cv.wait_for(lock, 5s, [&] { return sh->progressed > 0; }));
    EXPECT_NE(sh->started_on, std::thread::id());
    EXPECT_NE(sh->started_on, std::this_thread::get_id());
    EXPECT_EQ(sh->progressed_on, sh->started_on);
    EXPECT_EQ(sh->handled_on, sh->started_on);
  }
  server->reset();
  std::lock_guard lock(sh->mu);
  EXPECT_EQ(sh->stopped_on, sh->started_on);
}

TEST(RpcTest, BadWorkerSettingsAreRefusedByName) {
  auto zero = RpcClient::Create({.workers = 0});
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero.status().message().find("workers"), std::string::npos);
  // A device that does not exist: over tcp the client cannot be made (the error names the
  // device); with shared memory too the worker exists, but nothing reaches the server.
  const char* tls = std::getenv("UCX_TLS");
  const bool tcp_only = tls != nullptr && std::string_view(tls) == "tcp";
  TestServer ts;
  auto c = RpcClient::Create({.timeout = 5s, .net_devices = {"nosuchdev9"}});
  EXPECT_TRUE(!c.ok() || !tcp_only) << "over tcp a client on a missing device must not be made";
  if (!c.ok()) {
    EXPECT_NE(c.status().message().find("nosuchdev9"), std::string::npos) << c.status().ToString();
  } else {
    EXPECT_EQ((*c)->CallSync(ts.server->address(), kEcho, {}, {}).status.code(), StatusCode::kUnavailable);
  }
  // The same for a server rail (over tcp the server does not start, naming rail and device).
  auto s = RpcServer::Start({.rails = {{"127.0.0.1", "nosuchdev9"}}}, [](RpcRequest, Responder) {});
  EXPECT_TRUE(!s.ok() || !tcp_only) << "over tcp a rail on a missing device must not start";
  if (!s.ok()) {
    EXPECT_NE(s.status().message().find("nosuchdev9"), std::string::npos) << s.status().ToString();
    EXPECT_NE(s.status().message().find("rail 127.0.0.1"), std::string::npos) << s.status().ToString();
  }
  auto many = RpcServer::Start({.workers = 40, .rails = {{"127.0.0.2", ""}, {"127.0.0.1", ""}}},
                               [](RpcRequest, Responder) {});
  EXPECT_EQ(many.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace penstock

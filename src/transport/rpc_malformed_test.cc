// A live RpcServer fed malformed messages over a raw UCX endpoint: garbage, bad magic, unknown
// version or kind, lengths that disagree with the bytes sent, truncated headers, a reply sent
// as a request, with and without (rendezvous-sized) payloads, payload sources the server cannot
// copy. Each must be answered with kInvalidArgument (kFailedPrecondition for the payload
// sources; or dropped when no request id is readable), and the server must keep serving good
// requests on the same connection and on new ones.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include "transport/am_message.h"
#include "transport/raw_am_client.h"
#include "transport/rpc_client.h"
#include "transport/rpc_server.h"
#include "transport/socket_address.h"
#include "transport/ucx_worker.h"
#include "transport/wire.h"

namespace penstock {
namespace {

using namespace std::chrono_literals;

std::vector<std::byte> Request(uint64_t id, size_t payload_len,
                               std::vector<std::byte> op_header = {}) {
  return wire::EncodeRequest(id, 1, op_header, payload_len).value();
}

template <typename T>
void Poke(std::vector<std::byte>& bytes, size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof value);
}

TEST(RpcMalformedTest, ServerRejectsBadMessagesAndKeepsServing) {
  auto server = RpcServer::Start({.max_payload_bytes = 8 << 20}, [](RpcRequest r, Responder respond) {
    respond(RpcReply{OkStatus(), std::move(r.header), std::move(r.payload)});
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::string address = (*server)->address();
  auto connected = RawAmClient::Connect(address);
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  RawAmClient& raw = **connected;

  struct Case {
    const char* what;
    std::vector<std::byte> header;
    size_t payload;
    uint64_t id;  // expected request id in the reply
    StatusCode code;
  };
  std::vector<Case> cases;
  auto add = [&](const char* what, std::vector<std::byte> h, size_t payload, uint64_t id,
                 StatusCode code = StatusCode::kInvalidArgument) {
    cases.push_back({what, std::move(h), payload, id, code});
  };
  std::mt19937 rng(7);
  std::vector<std::byte> garbage(200);
  for (auto& b : garbage) b = std::byte(rng());
  add("garbage", garbage, 0, 0);
  add("garbage with rendezvous payload", garbage, 4 << 20, 0);
  add("empty header", {}, 0, 0);
  auto h = Request(11, 0);
  h.resize(20);
  add("truncated", h, 0, 0);
  h = Request(12, 0);
  Poke<uint32_t>(h, 0, 0xdeadbeef);
  add("bad magic", h, 0, 0);
  h = Request(13, 0);
  Poke<uint8_t>(h, 4, 99);
  add("unknown version", h, 0, 13);
  h = Request(14, 0);
  Poke<uint8_t>(h, 5, 9);
  add("unknown kind", h, 0, 14);
  h = Request(15, 0, std::vector<std::byte>(8));
  Poke<uint32_t>(h, 16, 4000);
  add("op header length beyond the bytes sent", h, 0, 15);
  h = Request(16, 0, std::vector<std::byte>(8));
  h.resize(h.size() - 3);
  add("op header truncated", h, 0, 16);
  // (An eager 5000-byte payload here went unanswered in ~1 of 10 shm runs on a loaded machine;
  // not yet understood, see the transport README's open issues. The rendezvous case is below.)
  add("payload length disagrees", Request(17, 100), 0, 17);
  add("payload length disagrees (rendezvous)", Request(18, 1), 4 << 20, 18);
  h = wire::EncodeReply(19, 1, OkStatus(), {}, 0).value();
  add("a reply sent as a request", h, 0, 19);
  h = Request(20, 0);
  Poke<int32_t>(h, 24, 5);  // status_code
  add("a request carrying a status", h, 0, 20);
  // Payload sources (local_direct.h) the server cannot copy: refused (kPullRefused,
  // kFailedPrecondition), the request not run; payloads over max_payload_bytes, sent or not:
  // kInvalidArgument, nothing allocated for the claimed size.
  const uint32_t pid = static_cast<uint32_t>(getpid());
  wire::Placement unmapped{pid, 0x10, 5, {{0x1000, 4096}}};
  add("a payload source in memory that is not there",
      wire::EncodeRequest(21, 1, {}, 4096, &unmapped, wire::kPayloadSource).value(), 0, 21,
      StatusCode::kFailedPrecondition);
  wire::Placement huge{pid, 0x10, 5, {{0x1000, uint64_t{1} << 40}}};
  add("a payload source of a terabyte",
      wire::EncodeRequest(22, 1, {}, uint64_t{1} << 40, &huge, wire::kPayloadSource).value(), 0, 22);
  add("a rendezvous payload over the server's limit", Request(24, 16 << 20), 16 << 20, 24);
  // (The decoder refuses a payload source with AM data: see WireTest.PayloadSourceRequests-
  // AndRefusals. Sent here, it would be the eager-payload case noted above.)

  // Batches (several requests in one AM): one that does not parse is answered kInvalidArgument
  // to request id 0; in one that does, each request is answered as if it had come alone.
  struct BatchCase {
    const char* what;
    std::vector<std::byte> header, data;  // the AM's (a batch's own header is in its data)
    std::vector<std::pair<uint64_t, StatusCode>> replies;
  };
  auto batch = [](uint16_t count, const std::vector<std::vector<std::byte>>& headers) {
    wire::BatchHeader h = wire::MakeBatchHeader(count);
    std::vector<std::byte> data(sizeof h);
    std::memcpy(data.data(), &h, sizeof h);
    for (const auto& m : headers) {
      const size_t at = data.size();
      data.resize(at + wire::BatchEntryBytes(m.size(), 0));
      wire::WriteBatchEntry(data.data() + at, m, {});
    }
    return data;
  };
  const auto bad = StatusCode::kInvalidArgument;
  std::vector<BatchCase> batches;
  {
    auto data = batch(1, {Request(30, 0)});
    std::copy(garbage.begin(), garbage.begin() + 8, data.begin());
    batches.push_back({"batch: garbage header", {}, std::move(data), {{0, bad}}});
  }
  batches.push_back({"batch: an AM header too", std::vector<std::byte>(8), batch(1, {Request(31, 0)}), {{0, bad}}});
  batches.push_back({"batch: more messages than it holds", {}, batch(3, {Request(32, 0), Request(33, 0)}), {{0, bad}}});
  batches.push_back({"batch: no messages", {}, batch(0, {}), {{0, bad}}});
  batches.push_back({"batch: bytes after its last message", {}, batch(1, {Request(34, 0)}), {{0, bad}}});
  batches.back().data.push_back(std::byte{7});
  {
    auto data = batch(1, {Request(35, 0)});
    Poke<uint32_t>(data, sizeof(wire::BatchHeader) + 4, 1 << 30);  // data_len far beyond the bytes sent
    batches.push_back({"batch: an entry longer than the batch", {}, std::move(data), {{0, bad}}});
  }
  {
    auto data = batch(1, {Request(36, 0)});
    Poke<uint8_t>(data, 4, 99);
    batches.push_back({"batch: unknown version", {}, std::move(data), {{0, bad}}});
  }
  {
    auto broken = Request(38, 0);
    Poke<uint32_t>(broken, 0, 0xdeadbeef);
    auto truncated = Request(39, 0, std::vector<std::byte>(8));
    truncated.resize(truncated.size() - 3);
    batches.push_back({"batch: good and bad requests", {}, batch(4, {Request(37, 0), broken, truncated, Request(40, 0)}),
                       {{37, StatusCode::kOk}, {0, bad}, {39, bad}, {40, StatusCode::kOk}}});
  }

  // A first call and its reply: the connection is wired up before the rest go. (UCX 1.13
  // replays AMs queued during wire-up with the first lane's limits: a ~100-250 byte batch then
  // fails on shared memory, "Invalid am_short_iov length". RpcClient sends one call on a new
  // connection until its first reply, for this.)
  raw.Send(Request(98, 0), 0);
  ASSERT_EQ(raw.WaitForReplies(1, 10s).size(), 1u);
  size_t expected = cases.size() + 2;
  for (auto& c : cases) raw.Send(c.header, c.payload);
  for (auto& b : batches) {
    raw.SendBatch(b.header, b.data);
    expected += b.replies.size();
  }
  raw.Send(Request(99, 4 << 20), 4 << 20);  // a good request on the same connection
  auto replies = raw.WaitForReplies(expected, 10s);
  // UCX does not keep eager and rendezvous messages in order, so match replies by id.
  std::multiset<std::pair<uint64_t, StatusCode>> want, got(replies.begin(), replies.end());
  for (auto& c : cases) want.emplace(c.id, c.code);
  for (auto& b : batches) want.insert(b.replies.begin(), b.replies.end());
  want.emplace(98, StatusCode::kOk);
  want.emplace(99, StatusCode::kOk);
  EXPECT_EQ(got, want);
  ASSERT_EQ(replies.size(), expected);
  EXPECT_TRUE(raw.bad_replies().empty()) << raw.bad_replies().front();

  auto client = RpcClient::Create({});
  ASSERT_TRUE(client.ok());
  std::vector<std::byte> payload(2 << 20, std::byte{1});
  RpcReply ok = (*client)->CallSync(address, 1, {}, payload);
  EXPECT_TRUE(ok.status.ok()) << ok.status.ToString();
  EXPECT_EQ(ok.payload.size(), payload.size());
}

// Direct copies go only to the process that holds the connection's client end: a request that
// names another process of the server's user, with a ticket that does read back there, is
// refused (before, the server copied that process's memory into the request's payload).
TEST(RpcMalformedTest, PlacementsNamingAnotherProcessAreRefused) {
  auto server = RpcServer::Start({.max_payload_bytes = 8 << 20}, [](RpcRequest r, Responder respond) {
    respond(RpcReply{OkStatus(), std::move(r.header), std::move(r.payload)});
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  // The other process: a child with the same memory (a ticket and a page to copy), which does
  // not hold the connection made below.
  static uint64_t ticket = 0x5eed5eed12345678;
  static std::byte secret[4096];
  std::memset(secret, 0x5a, sizeof secret);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (;;) pause();
  }
  auto connected = RawAmClient::Connect((*server)->address());
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  RawAmClient& raw = **connected;
  raw.Send(Request(1, 0), 0);  // wired up first (see above)
  ASSERT_EQ(raw.WaitForReplies(1, 10s).size(), 1u);
  wire::Placement other{static_cast<uint32_t>(child), reinterpret_cast<uintptr_t>(&ticket), ticket,
                        {{reinterpret_cast<uintptr_t>(secret), sizeof secret}}};
  raw.Send(wire::EncodeRequest(2, 1, {}, sizeof secret, &other, wire::kPayloadSource).value(), 0);
  // The same naming this process, which holds the connection: copied and echoed.
  wire::Placement mine{static_cast<uint32_t>(getpid()), reinterpret_cast<uintptr_t>(&ticket), ticket,
                       {{reinterpret_cast<uintptr_t>(secret), sizeof secret}}};
  raw.Send(wire::EncodeRequest(3, 1, {}, sizeof secret, &mine, wire::kPayloadSource).value(), 0);
  auto replies = raw.WaitForReplies(3, 10s);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  std::map<uint64_t, StatusCode> got(replies.begin(), replies.end());
  EXPECT_EQ(got[2], StatusCode::kFailedPrecondition);
  EXPECT_EQ(got[3], StatusCode::kOk);
}

}  // namespace
}  // namespace penstock

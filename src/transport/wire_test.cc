#include "transport/wire.h"

#include <gtest/gtest.h>

#include <cstring>

namespace penstock::wire {
namespace {

std::vector<std::byte> Bytes(std::string_view s) {
  std::vector<std::byte> v(s.size());
  std::memcpy(v.data(), s.data(), s.size());
  return v;
}

TEST(WireTest, RequestRoundTrip) {
  auto op = Bytes("hello");
  auto enc = EncodeRequest(42, 7, op, 1000);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->size(), sizeof(MessageHeader) + 5);
  auto dec = DecodeMessage(*enc, 1000);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(dec->kind, MessageKind::kRequest);
  EXPECT_EQ(dec->request_id, 42u);
  EXPECT_EQ(dec->opcode, 7);
  EXPECT_EQ(std::vector<std::byte>(dec->op_header.begin(), dec->op_header.end()), op);
  EXPECT_EQ(dec->payload_len, 1000u);
}

TEST(WireTest, ReplyCarriesStatus) {
  auto enc = EncodeReply(9, 3, NotFound("shard 5 not found"), Bytes("hdr"), 0);
  ASSERT_TRUE(enc.ok());
  auto dec = DecodeMessage(*enc, 0);
  ASSERT_TRUE(dec.ok());
  EXPECT_EQ(dec->kind, MessageKind::kReply);
  EXPECT_EQ(dec->status_code, StatusCode::kNotFound);
  EXPECT_EQ(dec->status_message, "shard 5 not found");
  EXPECT_EQ(dec->op_header.size(), 3u);
}

TEST(WireTest, LittleEndianLayout) {
  auto enc = EncodeRequest(0x0102030405060708ull, 0x0a0b, {}, 0);
  ASSERT_TRUE(enc.ok());
  const auto* b = reinterpret_cast<const uint8_t*>(enc->data());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b), 4), "PSTK");
  EXPECT_EQ(b[4], kVersion);
  EXPECT_EQ(b[6], 0x0b);
  EXPECT_EQ(b[8], 0x08);
  EXPECT_EQ(b[15], 0x01);
}

TEST(WireTest, LongStatusMessageIsTruncated) {
  auto enc = EncodeReply(1, 1, Internal(std::string(10000, 'x')), {}, 0);
  ASSERT_TRUE(enc.ok());
  auto dec = DecodeMessage(*enc, 0);
  ASSERT_TRUE(dec.ok());
  EXPECT_EQ(dec->status_message.size(), kMaxStatusMessage);
}

TEST(WireTest, OversizedOpHeaderIsRejected) {
  std::vector<std::byte> big(kMaxOpHeader + 1);
  EXPECT_EQ(EncodeRequest(1, 1, big, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(EncodeRequest(1, 1, std::span(big).first(kMaxOpHeader), 0).ok());
}

TEST(WireTest, TruncatedInputIsRejected) {
  auto enc = *EncodeReply(5, 1, Aborted("why"), Bytes("header"), 0);
  for (size_t n = 0; n < enc.size(); ++n) {
    auto dec = DecodeMessage(std::span(enc).first(n), 0);
    EXPECT_EQ(dec.status().code(), StatusCode::kInvalidArgument) << "length " << n;
  }
  // Extra trailing bytes are just as wrong.
  enc.push_back(std::byte{0});
  EXPECT_FALSE(DecodeMessage(enc, 0).ok());
}

TEST(WireTest, CorruptFieldsAreRejected) {
  auto good = *EncodeReply(5, 1, Aborted("why"), Bytes("header"), 10);
  auto corrupt = [&](size_t offset, uint8_t value) {
    auto b = good;
    b[offset] = std::byte{value};
    return DecodeMessage(b, 10);
  };
  EXPECT_FALSE(corrupt(0, 'X').ok());            // magic
  EXPECT_FALSE(corrupt(4, 99).ok());             // version
  EXPECT_FALSE(corrupt(5, 7).ok());              // kind
  EXPECT_FALSE(corrupt(16, 200).ok());           // header_len
  EXPECT_FALSE(corrupt(19, 0xff).ok());          // header_len huge
  EXPECT_FALSE(corrupt(20, 0xff).ok());          // message_len
  EXPECT_FALSE(corrupt(24, 77).ok());            // status code out of range
  EXPECT_FALSE(corrupt(27, 0x80).ok());          // negative status code
  EXPECT_FALSE(DecodeMessage(good, 11).ok());    // payload length disagrees
  auto req = *EncodeRequest(1, 1, {}, 0);
  req[24] = std::byte{3};                        // a request with a status
  EXPECT_FALSE(DecodeMessage(req, 0).ok());
}

TEST(WireTest, RequestCarriesItsReplyPlacement) {
  Placement p{4242, 0x7000, 0xfeed, {{0x10000, 4096}, {0x30000, 8192}}};
  auto enc = EncodeRequest(3, 6, Bytes("op"), 0, &p);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  EXPECT_EQ(enc->size(), sizeof(MessageHeader) + 2 + sizeof(PlacementFixed) + 2 * 16);
  auto dec = DecodeMessage(*enc, 0);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  ASSERT_TRUE(dec->placement.has_value());
  EXPECT_EQ(dec->placement->pid, 4242u);
  EXPECT_EQ(dec->placement->ticket_addr, 0x7000u);
  EXPECT_EQ(dec->placement->ticket, 0xfeedu);
  ASSERT_EQ(dec->placement->iovs.size(), 2u);
  EXPECT_EQ(dec->placement->iovs[1].addr, 0x30000u);
  EXPECT_EQ(dec->placement->capacity(), 12288u);
  EXPECT_EQ(dec->op_header.size(), 2u);
  EXPECT_FALSE(DecodeMessage(*EncodeRequest(3, 6, {}, 0), 0)->placement.has_value());
}

TEST(WireTest, BadPlacementsAreRefused) {
  Placement none{1, 8, 9, {}};
  EXPECT_FALSE(EncodeRequest(1, 1, {}, 0, &none).ok());
  Placement no_ticket{1, 8, 0, {{4096, 4096}}};
  EXPECT_FALSE(EncodeRequest(1, 1, {}, 0, &no_ticket).ok());
  Placement wraps{1, 8, 9, {{~uint64_t{0} - 10, 4096}}};
  EXPECT_FALSE(EncodeRequest(1, 1, {}, 0, &wraps).ok());
  Placement many{1, 8, 9, std::vector<PlacementIov>(kMaxPlacementIovs + 1, {4096, 1})};
  EXPECT_FALSE(EncodeRequest(1, 1, {}, 0, &many).ok());

  Placement good{1, 8, 9, {{4096, 4096}}};
  auto enc = *EncodeRequest(1, 1, {}, 0, &good);
  auto corrupt = [&](size_t offset, uint8_t value) {
    auto b = enc;
    b[sizeof(MessageHeader) + offset] = std::byte{value};
    return DecodeMessage(b, 0);
  };
  EXPECT_FALSE(corrupt(4, 0).ok());    // no pieces
  EXPECT_FALSE(corrupt(4, 2).ok());    // more pieces than bytes
  EXPECT_FALSE(corrupt(4, 200).ok());  // over the limit
  EXPECT_FALSE(corrupt(16, 0).ok());   // ticket 9 -> 0
  EXPECT_FALSE(corrupt(33, 0).ok());   // piece length 4096 -> 0 (its second byte)
  EXPECT_FALSE(DecodeMessage(std::span(enc).first(enc.size() - 1), 0).ok());
}

TEST(WireTest, PlacedReplyHasNoData) {
  auto enc = EncodeReply(8, 6, OkStatus(), Bytes("hdr"), 1 << 20, kPlaced);
  ASSERT_TRUE(enc.ok());
  auto dec = DecodeMessage(*enc, 0);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_TRUE(dec->placed);
  EXPECT_EQ(dec->payload_len, 1u << 20);
  EXPECT_FALSE(DecodeMessage(*enc, 1 << 20).ok());  // a placed reply with data is malformed
  EXPECT_FALSE(DecodeMessage(*EncodeReply(8, 6, OkStatus(), {}, 5), 5)->placed);
  auto req = *EncodeRequest(1, 1, {}, 0);
  req[28] = std::byte{kPlaced};  // flags on a request
  EXPECT_FALSE(DecodeMessage(req, 0).ok());
  auto rep = *EncodeReply(1, 1, OkStatus(), {}, 0);
  rep[29] = std::byte{1};  // an unknown flag
  EXPECT_FALSE(DecodeMessage(rep, 0).ok());
}

// A request whose payload stays in the client's memory for the server to copy, and the reply
// that refuses to.
TEST(WireTest, PayloadSourceRequestsAndRefusals) {
  Placement src{77, 0x5000, 0x42, {{0x100000, 8192}}};
  auto enc = EncodeRequest(4, 1, Bytes("op"), 8192, &src, kPayloadSource);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  auto dec = DecodeMessage(*enc, 0);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_TRUE(dec->payload_source);
  EXPECT_EQ(dec->payload_len, 8192u);
  ASSERT_TRUE(dec->placement.has_value());
  EXPECT_EQ(dec->placement->iovs[0].addr, 0x100000u);
  EXPECT_FALSE(DecodeMessage(*enc, 8192).ok());  // AM data with a payload source
  EXPECT_FALSE(EncodeRequest(4, 1, {}, 4096, &src, kPayloadSource).ok());  // wrong length
  EXPECT_FALSE(EncodeRequest(4, 1, {}, 8192, nullptr, kPayloadSource).ok());
  EXPECT_FALSE(EncodeRequest(4, 1, {}, 8192, &src, kPlaced).ok());
  auto wrong = *enc;
  wrong[sizeof(MessageHeader) - 8] = std::byte{1};  // payload_len 8193 against 8192 of memory
  EXPECT_FALSE(DecodeMessage(wrong, 0).ok());

  auto refused = EncodeReply(4, 1, FailedPrecondition("cannot read"), {}, 0, kPullRefused);
  ASSERT_TRUE(refused.ok());
  auto r = DecodeMessage(*refused, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->pull_refused);
  EXPECT_FALSE(r->placed);
  EXPECT_FALSE(EncodeReply(4, 1, OkStatus(), {}, 10, kPullRefused).ok());
  EXPECT_FALSE(EncodeReply(4, 1, OkStatus(), {}, 0, kPlaced | kPullRefused).ok());
  EXPECT_FALSE(EncodeReply(4, 1, OkStatus(), {}, 0, kPayloadSource).ok());
}

TEST(WireTest, GarbageNeverCrashes) {
  uint32_t seed = 12345;
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::byte> b(seed % 128);
    for (auto& x : b) {
      seed = seed * 1103515245 + 12345;
      x = std::byte(seed >> 16);
    }
    if (i % 2 == 0 && b.size() >= 6) {  // get past the magic and version checks sometimes
      std::memcpy(b.data(), &kMagic, 4);
      b[4] = std::byte{kVersion};
    }
    auto dec = DecodeMessage(b, seed % 3);
    (void)dec;
    (void)PeekRequestId(b);
  }
}

TEST(WireTest, PeekRequestId) {
  auto enc = *EncodeRequest(77, 1, {}, 0);
  EXPECT_EQ(PeekRequestId(enc), 77u);
  EXPECT_EQ(PeekRequestId(std::span(enc).first(10)), 0u);
  enc[0] = std::byte{0};
  EXPECT_EQ(PeekRequestId(enc), 0u);
}

// Several messages in one batch come back out, in order, each decodable as it was.
TEST(WireTest, BatchRoundTrip) {
  std::vector<std::vector<std::byte>> headers = {
      EncodeReply(1, 2, OkStatus(), Bytes("h1"), 4).value(),
      EncodeReply(2, 2, NotFound("shard 7 not found"), {}, 0).value(),
      EncodeReply(3, 2, OkStatus(), {}, 5).value(),
  };
  std::vector<std::vector<std::byte>> payloads = {Bytes("abcd"), {}, Bytes("12345")};
  size_t bytes = sizeof(BatchHeader);
  for (size_t i = 0; i < headers.size(); ++i) bytes += BatchEntryBytes(headers[i].size(), payloads[i].size());
  std::vector<std::byte> data(bytes);
  BatchHeader h = MakeBatchHeader(3);
  std::memcpy(data.data(), &h, sizeof h);
  std::byte* at = data.data() + sizeof h;
  for (size_t i = 0; i < headers.size(); ++i) at = WriteBatchEntry(at, headers[i], payloads[i]);
  ASSERT_EQ(at, data.data() + data.size());
  auto items = DecodeBatch(data);
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  ASSERT_EQ(items->size(), 3u);
  for (size_t i = 0; i < headers.size(); ++i) {
    const BatchItem& item = (*items)[i];
    EXPECT_EQ(std::vector<std::byte>(item.am_header.begin(), item.am_header.end()), headers[i]);
    EXPECT_EQ(std::vector<std::byte>(item.data.begin(), item.data.end()), payloads[i]);
    auto m = DecodeMessage(item.am_header, item.data.size());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->request_id, i + 1);
  }
}

// Every way a batch can disagree with itself is refused with a message saying how.
TEST(WireTest, MalformedBatchesAreRejected) {
  const auto one = EncodeRequest(5, 1, {}, 3).value();
  // A batch's data: its header (count), then the entries.
  auto batch = [](uint16_t count, std::vector<std::byte> entries) {
    BatchHeader h = MakeBatchHeader(count);
    std::vector<std::byte> out(sizeof h);
    std::memcpy(out.data(), &h, sizeof h);
    out.insert(out.end(), entries.begin(), entries.end());
    return out;
  };
  std::vector<std::byte> entry(BatchEntryBytes(one.size(), 3));
  WriteBatchEntry(entry.data(), one, Bytes("xyz"));
  auto rejects = [](std::vector<std::byte> d, const std::string& why) {
    auto r = DecodeBatch(d);
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << why;
    EXPECT_NE(r.status().message().find("batch"), std::string::npos) << r.status().message();
  };
  ASSERT_TRUE(DecodeBatch(batch(1, entry)).ok());
  rejects({}, "empty");
  auto d = batch(1, entry);
  rejects(std::vector<std::byte>(d.begin(), d.begin() + 7), "header cut off");
  d[0] = std::byte{0};
  rejects(d, "bad magic");
  d = batch(1, entry);
  d[5] = std::byte{1};
  rejects(d, "a message header's kind");
  d = batch(1, entry);
  d[4] = std::byte{kVersion + 1};
  auto r = DecodeBatch(d);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("upgrade"), std::string::npos) << r.status().message();
  rejects(batch(0, {}), "no messages");
  rejects(batch(kMaxBatchCount + 1, entry), "too many messages");
  rejects(batch(2, entry), "fewer messages than counted");
  d = batch(1, entry);
  d.push_back(std::byte{0});
  rejects(d, "trailing bytes");
  d = batch(1, entry);
  d.pop_back();
  rejects(d, "payload cut off");
  rejects(batch(1, std::vector<std::byte>(entry.begin(), entry.begin() + 5)), "entry header cut off");
  auto small = entry;
  const uint32_t tiny = sizeof(MessageHeader) - 1;
  std::memcpy(small.data(), &tiny, 4);
  rejects(batch(1, small), "message header shorter than a MessageHeader");
  auto huge = entry;
  const uint32_t big = 0xffffffffu;
  std::memcpy(huge.data() + 4, &big, 4);
  rejects(batch(1, huge), "data length beyond the batch");
}

}  // namespace
}  // namespace penstock::wire

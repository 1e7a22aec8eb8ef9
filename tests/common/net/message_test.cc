#include "common/net/message.h"

#include <gtest/gtest.h>

namespace nereus {
namespace {

Buffer HeaderFrame(Message* m) {
  const std::string h = EncodeHeader(m);
  return Buffer::CopyOf(h.data(), h.size());
}

TEST(MessageTest, EncodeDecodeRoundTrip) {
  Message m;
  m.header.set_op(pb::PUSH);
  m.header.set_request_id(42);
  m.header.set_tensor(3);
  m.header.set_partition(7);
  m.header.set_clock(19);
  m.header.set_priority(3007);
  m.header.set_dtype(pb::FLOAT32);
  auto v = std::make_shared<std::vector<float>>(std::vector<float>{1.5f, -2.0f, 3.25f});
  m.payload.push_back(Buffer::Of(v));
  Buffer header = HeaderFrame(&m);
  EXPECT_EQ(m.header.version(), static_cast<uint32_t>(pb::PROTOCOL_VERSION_CURRENT));
  EXPECT_EQ(m.header.payload_bytes(), 12u);

  auto d = DecodeMessage(header, m.payload);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->header.op(), pb::PUSH);
  EXPECT_EQ(d->header.request_id(), 42u);
  EXPECT_EQ(d->header.tensor(), 3);
  EXPECT_EQ(d->header.partition(), 7);
  EXPECT_EQ(d->header.clock(), 19);
  EXPECT_EQ(d->header.priority(), 3007);
  EXPECT_EQ(d->header.dtype(), pb::FLOAT32);
  ASSERT_EQ(d->payload.size(), 1u);
  // Zero copy: the decoded payload is the very same bytes.
  EXPECT_EQ(d->payload[0].data(), reinterpret_cast<const char*>(v->data()));
  EXPECT_EQ(d->payload[0].floats()[2], 3.25f);
}

TEST(MessageTest, RefusesOtherProtocolVersionNamingBoth) {
  Message m;
  m.header.set_op(pb::PULL);
  m.header.set_request_id(5);
  Buffer good = HeaderFrame(&m);
  m.header.set_version(7);
  std::string bytes;
  ASSERT_TRUE(m.header.SerializeToString(&bytes));
  pb::Header partial;
  auto d = DecodeMessage(Buffer::CopyOf(bytes.data(), bytes.size()), {}, &partial);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(d.status().message(), "protocol version mismatch: peer speaks version 7, this node speaks version 1");
  EXPECT_EQ(partial.request_id(), 5u);  // Enough to address the error reply.
  EXPECT_TRUE(DecodeMessage(good, {}).ok());
}

TEST(MessageTest, RefusesTruncatedHeader) {
  Message m;
  m.header.set_op(pb::PUSH);
  m.header.set_error("a string field that a truncation cuts in the middle");
  Buffer h = HeaderFrame(&m);
  auto d = DecodeMessage(h.Slice(0, h.size() - 10), {});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(d.status().message().find("does not parse"), std::string::npos) << d.status();
}

TEST(MessageTest, RefusesPayloadLengthThatDisagreesWithFrames) {
  Message m;
  m.header.set_op(pb::PUSH);
  auto v = std::make_shared<std::vector<float>>(10, 1.0f);
  m.payload.push_back(Buffer::Of(v));
  Buffer h = HeaderFrame(&m);  // Says 40 bytes.
  auto d = DecodeMessage(h, {Buffer::Of(v).Slice(0, 36)});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(),
            "malformed message: header says payload_bytes=40 but 1 payload frame(s) carry 36 bytes");
  // Two frames adding up to the right size are fine.
  auto ok = DecodeMessage(h, {Buffer::Of(v).Slice(0, 16), Buffer::Of(v).Slice(16, 24)});
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST(MessageTest, NodeNames) {
  EXPECT_EQ(NodeName(pb::WORKER, 2), "worker 2");
  EXPECT_EQ(NodeName(pb::SERVER, 0), "server 0");
  EXPECT_EQ(NodeName(pb::COORDINATOR, 0), "coordinator");
}

}  // namespace
}  // namespace nereus

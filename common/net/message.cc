#include "common/net/message.h"

#include <cstring>
#include <iterator>

#include "common/base/enum_names.h"

namespace nereus {

Buffer Buffer::CopyOf(const void* data, size_t size) {
  // uint64_t storage: the copy is aligned for any element type we send.
  auto words = std::make_shared<std::vector<uint64_t>>((size + 7) / 8);
  if (size > 0) std::memcpy(words->data(), data, size);
  const void* p = words->data();
  return Buffer(std::move(words), p, size);
}

Buffer Buffer::Of(std::shared_ptr<const std::vector<float>> v) {
  const void* p = v->data();
  const size_t n = v->size() * sizeof(float);
  return Buffer(std::move(v), p, n);
}

Buffer Buffer::Slice(size_t offset, size_t size) const {
  CHECK_LE(offset + size, size_) << "Buffer::Slice out of range";
  return Buffer(owner_, data_ + offset, size);
}

char* CopyFrames(const std::vector<Buffer>& frames, char* out) {
  for (const Buffer& b : frames) {
    if (b.size() == 0) continue;
    std::memcpy(out, b.data(), b.size());
    out += b.size();
  }
  return out;
}

size_t Message::payload_bytes() const {
  size_t n = 0;
  for (const auto& b : payload) n += b.size();
  return n;
}

std::string EncodeHeader(Message* msg) {
  msg->header.set_version(pb::PROTOCOL_VERSION_CURRENT);
  msg->header.set_payload_bytes(msg->payload_bytes());
  std::string out;
  CHECK(msg->header.SerializeToString(&out));
  return out;
}

StatusOr<Message> DecodeMessage(const Buffer& header_frame, std::vector<Buffer> payload, pb::Header* partial) {
  Message msg;
  const bool parsed = msg.header.ParseFromArray(header_frame.data(), static_cast<int>(header_frame.size()));
  if (partial != nullptr) {
    partial->Clear();
    // ParsePartial keeps the fields read before the damage, if any.
    partial->ParsePartialFromArray(header_frame.data(), static_cast<int>(header_frame.size()));
  }
  if (!parsed) {
    return DataLossError("malformed message: header frame of " + std::to_string(header_frame.size()) +
                         " bytes does not parse as nereus.pb.Header (truncated or corrupt)");
  }
  if (msg.header.version() != pb::PROTOCOL_VERSION_CURRENT) {
    return FailedPreconditionError("protocol version mismatch: peer speaks version " +
                                   std::to_string(msg.header.version()) + ", this node speaks version " +
                                   std::to_string(static_cast<int>(pb::PROTOCOL_VERSION_CURRENT)));
  }
  msg.payload = std::move(payload);
  const size_t actual = msg.payload_bytes();
  if (msg.header.payload_bytes() != actual) {
    return DataLossError("malformed message: header says payload_bytes=" + std::to_string(msg.header.payload_bytes()) +
                         " but " + std::to_string(msg.payload.size()) + " payload frame(s) carry " +
                         std::to_string(actual) + " bytes");
  }
  return msg;
}

const char* RoleName(pb::Role role) {
  static constexpr const char* kNames[] = {"unknown-role", "coordinator", "server", "worker"};
  static_assert(std::size(kNames) == pb::Role_ARRAYSIZE, "a pb::Role without a name");
  return NameOf(role, kNames, "unknown-role");
}

const char* OpName(pb::Op op) {
  const std::string& n = pb::Op_Name(op);
  return n.empty() ? "UNKNOWN_OP" : n.c_str();
}

std::string NodeName(pb::Role role, int rank) {
  if (role == pb::COORDINATOR) return "coordinator";
  return std::string(RoleName(role)) + " " + std::to_string(rank);
}

}  // namespace nereus

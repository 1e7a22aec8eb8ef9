// Message: a protobuf header plus payload frames that travel without copies.
#ifndef NEREUS_COMMON_NET_MESSAGE_H_
#define NEREUS_COMMON_NET_MESSAGE_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "proto/nereus.pb.h"

namespace nereus {

// An immutable, reference-counted byte range. Copies share the bytes; the
// owner keeps them alive for as long as any copy (or a message in flight)
// exists. Cheap to copy; safe to pass between threads.
class Buffer {
 public:
  Buffer() = default;
  Buffer(std::shared_ptr<const void> owner, const void* data, size_t size)
      : owner_(std::move(owner)), data_(static_cast<const char*>(data)), size_(size) {}

  // A buffer owning a copy of [data, data + size).
  static Buffer CopyOf(const void* data, size_t size);
  // A buffer sharing `v`'s storage.
  static Buffer Of(std::shared_ptr<const std::vector<float>> v);

  const char* data() const { return data_; }
  size_t size() const { return size_; }
  const float* floats() const { return reinterpret_cast<const float*>(data_); }
  const std::shared_ptr<const void>& owner() const { return owner_; }
  // A sub-range sharing this buffer's owner.
  Buffer Slice(size_t offset, size_t size) const;

 private:
  std::shared_ptr<const void> owner_;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

struct Message {
  pb::Header header;
  std::vector<Buffer> payload;

  size_t payload_bytes() const;
};

// Copies `frames` one after the other to `out` (room for their total size);
// returns the end. Empty frames (null data) are skipped, not handed to
// memcpy.
char* CopyFrames(const std::vector<Buffer>& frames, char* out);

// The endpoint string of a node ("tcp://127.0.0.1:40123") doubles as its
// transport identity.
using Endpoint = std::string;

// Frames of a message as they travel: frame 0 is the serialized header.
// Sets header.version to the current protocol version and header.payload_bytes
// to the payload's size before serializing.
std::string EncodeHeader(Message* msg);

// Decodes a received message. Errors name the problem:
//  - DataLoss: the header frame does not parse, or payload_bytes disagrees
//    with the frames that came with it;
//  - FailedPrecondition: the peer speaks another protocol version (the
//    message names both versions).
// On error, `partial` (if not null) receives whatever of the header parsed, so
// the receiver can echo request_id and op in its error reply.
StatusOr<Message> DecodeMessage(const Buffer& header_frame, std::vector<Buffer> payload, pb::Header* partial = nullptr);

const char* RoleName(pb::Role role);
const char* OpName(pb::Op op);

// "server 1", "worker 0", "coordinator".
std::string NodeName(pb::Role role, int rank);

}  // namespace nereus

#endif  // NEREUS_COMMON_NET_MESSAGE_H_

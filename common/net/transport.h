// Transport: moves Messages between nodes. Server and client logic only see
// this interface; ZeroMQ lives behind it in zmq_transport.cc.
#ifndef NEREUS_COMMON_NET_TRANSPORT_H_
#define NEREUS_COMMON_NET_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "common/net/message.h"

namespace nereus {

// Called on the transport's receive thread, once per received message, in
// arrival order. `from` is the sender's endpoint (replies go there); the
// transport has checked that its host is the address the message came from
// (a peer cannot make this node connect to a third party), and drops, with a
// rate-limited log line, messages whose identity is not a tcp endpoint of the
// sending host. `msg` is
// an error when the message could not be decoded (see DecodeMessage); then
// `partial` holds whatever of its header could be read.
using ReceiveHandler = std::function<void(const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial)>;

class Transport {
 public:
  virtual ~Transport() = default;

  // Binds to `bind_endpoint` ("tcp://127.0.0.1:0" picks a free port) and starts
  // the receive thread, which calls `handler` until Stop(). Call once.
  virtual Status Start(const std::string& bind_endpoint, ReceiveHandler handler) = 0;

  // The endpoint peers send to; valid after Start() succeeded.
  virtual const Endpoint& endpoint() const = 0;

  // Sends `msg` to the node at `to`, connecting on first use. Thread-safe.
  // Returns once the message is queued; delivery is not confirmed (a dead peer
  // is detected by heartbeats, not here). Payload bytes are not copied: each
  // payload Buffer's owner is kept alive until the transport is done with it.
  // `stream` selects one of the parallel connections to that peer (modulo
  // the number configured).
  virtual Status Send(const Endpoint& to, Message msg, int stream = 0) = 0;

  // Like Send, but returns Unavailable at once instead of blocking where the
  // connection cannot queue the message (e.g. no pipe: a refused handshake).
  virtual Status SendIfRoom(const Endpoint& to, Message msg) = 0;

  // Sends `frames` exactly as given, header frame included (fault injection).
  virtual Status SendFrames(const Endpoint& to, std::vector<Buffer> frames) = 0;

  // Closes the connection(s) to `peer`, dropping whatever is still queued
  // for it; a later Send connects anew. For a peer that left the job (its
  // process is gone): ZeroMQ would otherwise keep reconnecting to its address
  // and deliver the queue to whatever binds there next.
  virtual void Disconnect(const Endpoint& peer) = 0;

  // Whether a connection to `peer` brought this node's own messages back to
  // it: a TCP self-connection, which the kernel makes when it picks the
  // destination port as the connection's source port (the port lies in its
  // ephemeral range, ip_local_port_range, and nothing listens there yet: a
  // node started before its coordinator). Such a connection reaches no one;
  // the caller disconnects it, and the next Send connects anew. Drops what
  // came back. Thread-safe.
  virtual bool LoopedBack(const Endpoint& peer) = 0;

  // Stops the receive thread and closes every connection, waiting at most the
  // linger time for queued messages. Idempotent; after it returns the handler
  // is never called again. Must not be called from the handler.
  virtual void Stop() = 0;
};

// ZeroMQ CURVE keys of a job (z85 text, 40 characters each; see
// common/net/curve_keys.h for where they come from). Every node's receiving socket
// serves with the job's key pair; every node connects with its own pair, and
// a ZAP handler admits only the public keys in `members`.
struct CurveKeys {
  std::string job_public, job_secret;
  std::string node_public, node_secret;
  std::map<std::string, std::string> members;  // Public key -> key name ("worker-1").
};

// What one received message may hold. A peer that announces a larger frame
// is disconnected by ZeroMQ before anything is allocated (ZMQ_MAXMSGSIZE); a
// message over the frame count or total is drained and refused.
constexpr uint64_t kDefaultMaxFrameBytes = uint64_t{256} << 20;
constexpr int kDefaultMaxFrames = 65536;
constexpr uint64_t kDefaultMaxMessageBytes = uint64_t{4} << 30;

struct ZmqTransportOptions {
  int io_threads = 1;        // ZeroMQ I/O threads.
  int streams_per_peer = 1;  // Parallel connections to each peer.
  int linger_ms = 2000;      // How long Stop() waits for queued messages.
  int send_hwm = 0;          // Messages queued per connection before Send blocks; 0 = no limit.
  uint64_t max_frame_bytes = kDefaultMaxFrameBytes;
  int max_frames = kDefaultMaxFrames;  // Payload frames plus the header frame.
  uint64_t max_message_bytes = kDefaultMaxMessageBytes;
  std::optional<CurveKeys> curve;  // Unset: plain TCP, anyone who can connect is heard.
};

std::unique_ptr<Transport> NewZmqTransport(const ZmqTransportOptions& options);

}  // namespace nereus

#endif  // NEREUS_COMMON_NET_TRANSPORT_H_

// The only place in Nereus that talks to ZeroMQ.
//
// Each node binds one ROUTER socket and receives everything there. To send to
// a peer it connects DEALER sockets (one per stream) to the peer's ROUTER,
// with its own endpoint as the routing identity, so the receiver knows whom to
// answer. The receive thread blocks in recv; Stop() wakes it with a message
// from a private identity.
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <zmq.hpp>

#include "common/transport.h"

namespace nereus {
namespace {

// zmq calls this when it no longer needs a zero-copy frame.
void ReleaseOwner(void* /*data*/, void* hint) { delete static_cast<std::shared_ptr<const void>*>(hint); }

zmq::message_t ZeroCopyFrame(const Buffer& b) {
  if (b.size() == 0) return zmq::message_t();
  auto* hint = new std::shared_ptr<const void>(b.owner());
  return zmq::message_t(const_cast<char*>(b.data()), b.size(), &ReleaseOwner, hint);
}

class ZmqTransport final : public Transport {
 public:
  explicit ZmqTransport(const ZmqTransportOptions& o) : options_(o), ctx_(o.io_threads) {
    std::random_device rd;
    stop_identity_ = "__stop__" + std::to_string(rd()) + std::to_string(rd());
  }
  ~ZmqTransport() override { Stop(); }

  Status Start(const std::string& bind_endpoint, ReceiveHandler handler) override {
    CHECK(!started_) << "Transport::Start called twice";
    handler_ = std::move(handler);
    try {
      router_ = zmq::socket_t(ctx_, zmq::socket_type::router);
      router_.set(zmq::sockopt::linger, 0);
      router_.set(zmq::sockopt::rcvhwm, 0);
      std::string ep = bind_endpoint;
      // "tcp://host:0" means any free port; ZeroMQ spells that "*".
      if (ep.size() > 2 && ep.compare(ep.size() - 2, 2, ":0") == 0) ep = ep.substr(0, ep.size() - 1) + "*";
      router_.bind(ep);
      endpoint_ = router_.get(zmq::sockopt::last_endpoint);
    } catch (const zmq::error_t& e) {
      return UnavailableError("cannot bind " + bind_endpoint + ": " + e.what());
    }
    started_ = true;
    receiver_ = std::thread([this] { ReceiveLoop(); });
    return Status::OK();
  }

  const Endpoint& endpoint() const override { return endpoint_; }

  Status Send(const Endpoint& to, Message msg, int stream) override {
    const std::string header = EncodeHeader(&msg);
    std::vector<zmq::message_t> frames;
    frames.reserve(1 + msg.payload.size());
    frames.emplace_back(header.data(), header.size());
    for (const Buffer& b : msg.payload) frames.push_back(ZeroCopyFrame(b));
    return SendRaw(to, std::move(frames), stream);
  }

  Status SendFrames(const Endpoint& to, std::vector<Buffer> frames) override {
    std::vector<zmq::message_t> out;
    for (const Buffer& b : frames) out.emplace_back(b.data(), b.size());
    return SendRaw(to, std::move(out), 0);
  }

  void Stop() override {
    std::lock_guard<std::mutex> stop_lock(stop_mu_);
    if (!started_ || stopped_) return;
    stopped_ = true;
    try {
      zmq::socket_t waker(ctx_, zmq::socket_type::dealer);
      waker.set(zmq::sockopt::routing_id, stop_identity_);
      waker.set(zmq::sockopt::linger, 1000);
      waker.connect(endpoint_);
      waker.send(zmq::str_buffer("stop"), zmq::send_flags::none);
      receiver_.join();
      waker.close();
    } catch (const zmq::error_t& e) {
      LOG(ERROR) << "transport stop: " << e.what();
      if (receiver_.joinable()) receiver_.join();
    }
    std::lock_guard<std::mutex> lock(peers_mu_);
    for (auto& [name, peer] : peers_) {
      std::lock_guard<std::mutex> plock(peer->mu);
      peer->socket.set(zmq::sockopt::linger, options_.linger_ms);
      peer->socket.close();
    }
    peers_.clear();
    router_.close();
    ctx_.close();
  }

 private:
  struct Peer {
    std::mutex mu;  // Guards socket: ZeroMQ sockets are not thread-safe.
    zmq::socket_t socket;
  };

  StatusOr<Peer*> GetPeer(const Endpoint& to, int stream) {
    if (!started_) return FailedPreconditionError("transport not started");
    const int s = options_.streams_per_peer > 1 ? stream % options_.streams_per_peer : 0;
    const std::string key = to + "#" + std::to_string(s);
    std::lock_guard<std::mutex> lock(peers_mu_);
    if (stopped_) return FailedPreconditionError("transport stopped");
    auto it = peers_.find(key);
    if (it != peers_.end()) return it->second.get();
    auto peer = std::make_unique<Peer>();
    try {
      peer->socket = zmq::socket_t(ctx_, zmq::socket_type::dealer);
      // Each stream needs its own identity at the receiving ROUTER.
      peer->socket.set(zmq::sockopt::routing_id, s == 0 ? endpoint_ : endpoint_ + "#" + std::to_string(s));
      peer->socket.set(zmq::sockopt::sndhwm, options_.send_hwm);
      peer->socket.set(zmq::sockopt::linger, options_.linger_ms);
      peer->socket.set(zmq::sockopt::reconnect_ivl, 100);
      peer->socket.connect(to);
    } catch (const zmq::error_t& e) {
      return InvalidArgumentError("cannot connect to \"" + to + "\": " + e.what());
    }
    Peer* raw = peer.get();
    peers_.emplace(key, std::move(peer));
    return raw;
  }

  Status SendRaw(const Endpoint& to, std::vector<zmq::message_t> frames, int stream) {
    ASSIGN_OR_RETURN(Peer * peer, GetPeer(to, stream));
    std::lock_guard<std::mutex> lock(peer->mu);
    try {
      for (size_t i = 0; i < frames.size(); ++i) {
        const auto flags = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
        peer->socket.send(frames[i], flags);
      }
    } catch (const zmq::error_t& e) {
      return UnavailableError("send to " + to + " failed: " + e.what());
    }
    return Status::OK();
  }

  void ReceiveLoop() {
    std::vector<zmq::message_t> frames;
    while (true) {
      frames.clear();
      try {
        do {
          frames.emplace_back();
          if (!router_.recv(frames.back(), zmq::recv_flags::none)) frames.pop_back();
        } while (router_.get(zmq::sockopt::rcvmore));
      } catch (const zmq::error_t& e) {
        LOG(ERROR) << "transport receive loop ends: " << e.what();
        return;
      }
      if (frames.empty()) continue;
      std::string from(static_cast<const char*>(frames[0].data()), frames[0].size());
      if (from == stop_identity_) return;
      // Extra streams of one peer carry "#k" after the endpoint.
      const size_t hash = from.rfind('#');
      if (hash != std::string::npos) from.resize(hash);
      if (frames.size() < 2) {
        pb::Header none;
        handler_(from, DataLossError("malformed message: no header frame"), none);
        continue;
      }
      Buffer header = Own(std::move(frames[1]));
      std::vector<Buffer> payload;
      payload.reserve(frames.size() - 2);
      for (size_t i = 2; i < frames.size(); ++i) payload.push_back(OwnAligned(std::move(frames[i])));
      pb::Header partial;
      StatusOr<Message> msg = DecodeMessage(header, std::move(payload), &partial);
      handler_(from, std::move(msg), partial);
    }
  }

  // Payload frames are read as floats: ZeroMQ packs small frames into one
  // receive buffer at any offset, so a misaligned one (small by nature) is
  // copied; large frames arrive in their own allocation and stay zero-copy.
  static Buffer OwnAligned(zmq::message_t&& m) {
    if (reinterpret_cast<uintptr_t>(m.data()) % 8 == 0) return Own(std::move(m));
    return Buffer::CopyOf(m.data(), m.size());
  }

  static Buffer Own(zmq::message_t&& m) {
    auto owner = std::make_shared<zmq::message_t>(std::move(m));
    const void* data = owner->data();
    const size_t size = owner->size();
    return Buffer(std::move(owner), data, size);
  }

  const ZmqTransportOptions options_;
  zmq::context_t ctx_;
  zmq::socket_t router_;  // Used by the receive thread only (after Start).
  Endpoint endpoint_;
  std::string stop_identity_;
  ReceiveHandler handler_;
  std::thread receiver_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};
  std::mutex stop_mu_;
  std::mutex peers_mu_;  // Guards peers_.
  std::map<std::string, std::unique_ptr<Peer>> peers_;
};

}  // namespace

std::unique_ptr<Transport> NewZmqTransport(const ZmqTransportOptions& options) {
  return std::make_unique<ZmqTransport>(options);
}

}  // namespace nereus

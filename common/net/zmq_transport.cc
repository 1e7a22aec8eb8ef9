// The only place in Nereus that talks to ZeroMQ.
//
// Each node binds one ROUTER socket and receives everything there. To send to
// a peer it connects DEALER sockets (one per stream) to the peer's ROUTER,
// with its own endpoint as the routing identity, so the receiver knows whom to
// answer. The receive thread blocks in recv; Stop() wakes it with a message
// from a private identity.
//
// Hostile peers: a received identity must be a tcp endpoint on the host the
// message came from (else the message is dropped: answering it would connect
// to an address the peer chose); frames are capped in size (ZeroMQ refuses a
// larger announced size before allocating), count and total. With CURVE keys
// a third thread, the security thread, answers ZeroMQ's ZAP requests
// (admitting only the job's public keys) and logs failed handshakes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <zmq.hpp>

#include "common/base/mutex.h"
#include "common/net/refusal_log.h"
#include "common/net/transport.h"

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
      router_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(options_.max_frame_bytes));
      // A peer's identity is its endpoint, so a second connection under an
      // identity this socket still holds is that peer again: reconnected, or
      // restarted at its address (a coordinator restarted with --resume). It
      // takes over from the first. ZeroMQ's default keeps the first and
      // silently drops everything the second brings, for as long as it stays
      // connected: a server stopped (SIGSTOP) while its coordinator was
      // killed and restarted saw the new connection before the old one's
      // close, and never heard the restarted coordinator again.
      router_.set(zmq::sockopt::router_handover, 1);
      if (options_.curve) {
        // The ZAP handler must be bound before the first handshake.
        zap_ = zmq::socket_t(ctx_, zmq::socket_type::rep);
        zap_.bind("inproc://zeromq.zap.01");
        monitor_ = zmq::socket_t(ctx_, zmq::socket_type::pair);
        const std::string monitor_ep = "inproc://nereus.monitor." + stop_identity_;
        if (zmq_socket_monitor(router_.handle(), monitor_ep.c_str(),
                               ZMQ_EVENT_MONITOR_STOPPED | ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED |
                                   ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                                   ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0)
          throw zmq::error_t();
        monitor_.connect(monitor_ep);
        router_.set(zmq::sockopt::curve_server, 1);
        router_.set(zmq::sockopt::curve_secretkey, options_.curve->job_secret);
        router_.set(zmq::sockopt::zap_domain, "nereus");
      }
      std::string ep = bind_endpoint;
      // "tcp://host:0" means any free port; ZeroMQ spells that "*".
      if (ep.size() > 2 && ep.compare(ep.size() - 2, 2, ":0") == 0) ep = ep.substr(0, ep.size() - 1) + "*";
      router_.bind(ep);
      endpoint_ = router_.get(zmq::sockopt::last_endpoint);
      // Stop wakes the receive loop through this, not through TCP: a
      // connection to our own port can fail (no source port left in the
      // ephemeral range, a firewall), and Stop would then wait for ever.
      router_.bind(StopEndpoint());
    } catch (const zmq::error_t& e) {
      StopSecurity();
      return UnavailableError("cannot bind " + bind_endpoint + ": " + e.what());
    }
    refusals_ = std::make_unique<RefusalLog>("transport at " + endpoint_);
    // Per kind, so that one kind of refusal from a host does not hide another.
    zap_refusals_ = std::make_unique<RefusalLog>("transport at " + endpoint_);
    handshake_refusals_ = std::make_unique<RefusalLog>("transport at " + endpoint_);
    // ZAP requests wait in the socket until the thread is there.
    if (options_.curve) security_ = std::thread([this] { SecurityLoop(); });
    started_ = true;
    receiver_ = std::thread([this] { ReceiveLoop(); });
    return Status::OK();
  }

  const Endpoint& endpoint() const override { return endpoint_; }

  Status Send(const Endpoint& to, Message msg, int stream) override { return SendRaw(to, Frames(&msg), stream); }

  Status SendIfRoom(const Endpoint& to, Message msg) override {
    return SendRaw(to, Frames(&msg), 0, /*dontwait=*/true);
  }

  Status SendFrames(const Endpoint& to, std::vector<Buffer> frames) override {
    std::vector<zmq::message_t> out;
    for (const Buffer& b : frames) out.emplace_back(b.data(), b.size());
    return SendRaw(to, std::move(out), 0);
  }

  void Stop() override {
    MutexLock stop_lock(&stop_mu_);
    if (!started_ || stopped_) return;
    stopped_ = true;
    try {
      zmq::socket_t waker(ctx_, zmq::socket_type::dealer);
      waker.set(zmq::sockopt::routing_id, stop_identity_);
      waker.set(zmq::sockopt::linger, 1000);
      waker.connect(StopEndpoint());
      waker.send(zmq::str_buffer("stop"), zmq::send_flags::none);
      receiver_.join();
      waker.close();
    } catch (const zmq::error_t& e) {
      LOG(ERROR) << "transport stop: " << e.what();
      if (receiver_.joinable()) receiver_.join();
    }
    MutexLock lock(&peers_mu_);
    for (auto& [name, peer] : peers_) {
      MutexLock plock(&peer->mu);
      peer->socket.set(zmq::sockopt::linger, options_.linger_ms);
      peer->socket.close();
      peer->closed = true;
    }
    peers_.clear();
    StopSecurity();
    router_.close();
    ctx_.close();
  }

  void Disconnect(const Endpoint& peer_endpoint) override {
    MutexLock lock(&peers_mu_);
    const std::string prefix = peer_endpoint + "#";
    for (auto it = peers_.lower_bound(prefix);
         it != peers_.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
      const std::shared_ptr<Peer> peer = it->second;  // Outlives the lock below.
      it = peers_.erase(it);
      MutexLock plock(&peer->mu);
      peer->socket.set(zmq::sockopt::linger, 0);  // Whatever is still queued for it is dropped.
      peer->socket.close();
      peer->closed = true;
    }
  }

  bool LoopedBack(const Endpoint& peer_endpoint) override {
    // The sending sockets (DEALER) never receive: whatever one holds came
    // from itself.
    std::vector<std::shared_ptr<Peer>> peers;
    {
      MutexLock lock(&peers_mu_);
      const std::string prefix = peer_endpoint + "#";
      for (auto it = peers_.lower_bound(prefix); it != peers_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
           ++it)
        peers.push_back(it->second);
    }
    bool looped = false;
    for (const auto& peer : peers) {
      MutexLock plock(&peer->mu);
      if (peer->closed) continue;
      zmq::message_t frame;
      try {
        while (peer->socket.recv(frame, zmq::recv_flags::dontwait)) looped = true;
      } catch (const zmq::error_t& e) {
        LOG(WARNING) << "reading the connection to " << peer_endpoint << ": " << e.what();
      }
    }
    return looped;
  }

 private:
  // Shared: a sender holds its Peer while Disconnect or Stop close it.
  struct Peer {
    Mutex mu;  // ZeroMQ sockets are not thread-safe.
    zmq::socket_t socket NEREUS_GUARDED_BY(mu);
    bool closed NEREUS_GUARDED_BY(mu) = false;
  };

  std::string StopEndpoint() const { return "inproc://nereus.stop." + stop_identity_; }

  StatusOr<std::shared_ptr<Peer>> GetPeer(const Endpoint& to, int stream) {
    if (!started_) return FailedPreconditionError("transport not started");
    const int s =
        options_.streams_per_peer > 1
            ? static_cast<int>(static_cast<unsigned>(stream) % static_cast<unsigned>(options_.streams_per_peer))
            : 0;
    const std::string key = to + "#" + std::to_string(s);
    MutexLock lock(&peers_mu_);
    if (stopped_) return FailedPreconditionError("transport stopped");
    auto it = peers_.find(key);
    if (it != peers_.end()) return it->second;
    auto peer = std::make_shared<Peer>();
    MutexLock plock(&peer->mu);  // Not shared yet, but the analysis cannot know.
    try {
      peer->socket = zmq::socket_t(ctx_, zmq::socket_type::dealer);
      // Each stream needs its own identity at the receiving ROUTER.
      peer->socket.set(zmq::sockopt::routing_id, s == 0 ? endpoint_ : endpoint_ + "#" + std::to_string(s));
      peer->socket.set(zmq::sockopt::sndhwm, options_.send_hwm);
      peer->socket.set(zmq::sockopt::linger, options_.linger_ms);
      peer->socket.set(zmq::sockopt::reconnect_ivl, 100);
      SetClientKeys(&peer->socket);
      peer->socket.connect(SourceBound(to));
    } catch (const zmq::error_t& e) {
      return InvalidArgumentError("cannot connect to \"" + to + "\": " + e.what());
    }
    peers_.emplace(key, peer);
    return peer;
  }

  static std::vector<zmq::message_t> Frames(Message* msg) {
    const std::string header = EncodeHeader(msg);
    std::vector<zmq::message_t> frames;
    frames.reserve(1 + msg->payload.size());
    frames.emplace_back(header.data(), header.size());
    for (const Buffer& b : msg->payload) frames.push_back(ZeroCopyFrame(b));
    return frames;
  }

  // `dontwait`: give up (Unavailable) rather than block when the connection
  // cannot queue the message; a multipart message is queued whole once its
  // first frame is.
  Status SendRaw(const Endpoint& to, std::vector<zmq::message_t> frames, int stream, bool dontwait = false) {
    ASSIGN_OR_RETURN(std::shared_ptr<Peer> peer, GetPeer(to, stream));
    MutexLock lock(&peer->mu);
    if (peer->closed) return UnavailableError("send to " + to + ": the connection was closed");
    try {
      for (size_t i = 0; i < frames.size(); ++i) {
        auto flags = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
        if (i == 0 && dontwait) flags = flags | zmq::send_flags::dontwait;
        if (!peer->socket.send(frames[i], flags))
          return UnavailableError("send to " + to + ": no room to queue the message (no connection)");
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
      int count = 0;
      uint64_t bytes = 0;
      bool over = false;
      try {
        do {
          zmq::message_t m;
          if (!router_.recv(m, zmq::recv_flags::none)) continue;
          if (++count > 1) bytes += m.size();  // Frame 0 is the identity.
          // Past a limit the rest is received and dropped at once: memory
          // stays bounded whatever the peer sends. Identity and header stay.
          if (!over && (count > options_.max_frames + 1 || bytes > options_.max_message_bytes)) {
            over = true;
            frames.resize(std::min<size_t>(frames.size(), 2));
          }
          if (!over || frames.size() < 2) frames.push_back(std::move(m));
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
      const char* peer_address = frames.size() > 1 ? frames[1].gets("Peer-Address") : nullptr;
      Status identity = CheckIdentity(from, peer_address);
      if (!identity.ok()) {
        refusals_->Refuse(from, "refused a message: " + identity.message());
        continue;
      }
      if (frames.size() < 2) {
        pb::Header none;
        handler_(from, DataLossError("malformed message: no header frame"), none);
        continue;
      }
      Buffer header = Own(std::move(frames[1]));
      pb::Header partial;
      if (over) {
        partial.ParsePartialFromArray(header.data(), static_cast<int>(header.size()));
        handler_(
            from,
            DataLossError("message too large: " + std::to_string(count - 1) + " frames of " + std::to_string(bytes) +
                          " bytes in all exceed the limit of " + std::to_string(options_.max_frames) + " frames or " +
                          std::to_string(options_.max_message_bytes) + " bytes"),
            partial);
        continue;
      }
      std::vector<Buffer> payload;
      payload.reserve(frames.size() - 2);
      for (size_t i = 2; i < frames.size(); ++i) payload.push_back(OwnAligned(std::move(frames[i])));
      StatusOr<Message> msg = DecodeMessage(header, std::move(payload), &partial);
      handler_(from, std::move(msg), partial);
    }
  }

  // `to` with this node's own host as the connection's source address
  // (ZeroMQ's "tcp://source;destination"): the receiver checks that a
  // message's identity (our endpoint) names the host it comes from, and on a
  // host with several addresses the kernel would otherwise pick the source by
  // route (a process bound to 127.0.0.2, or to a cluster's second network,
  // connects from another address).
  std::string SourceBound(const std::string& to) const {
    const std::string kScheme = "tcp://";
    const size_t colon = endpoint_.rfind(':');
    if (to.compare(0, kScheme.size(), kScheme) != 0 || endpoint_.compare(0, kScheme.size(), kScheme) != 0 ||
        colon == std::string::npos || colon <= kScheme.size())
      return to;
    const std::string host = endpoint_.substr(kScheme.size(), colon - kScheme.size());
    if (host == "*" || host == "0.0.0.0" || host == "[::]") return to;
    return kScheme + host + ":0;" + to.substr(kScheme.size());
  }

  // A reply goes to the sender's identity, so the identity must name the
  // sending host: else a peer could make this node connect anywhere.
  // `peer_address` is ZeroMQ's "Peer-Address" (null for non-tcp transports).
  static Status CheckIdentity(const std::string& from, const char* peer_address) {
    if (peer_address == nullptr) return Status::OK();
    const std::string kScheme = "tcp://";
    const size_t colon = from.rfind(':');
    if (from.compare(0, kScheme.size(), kScheme) != 0 || colon == std::string::npos || colon <= kScheme.size())
      return InvalidArgumentError("its routing identity is not a tcp://host:port endpoint");
    std::string host = from.substr(kScheme.size(), colon - kScheme.size());
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    const std::string port = from.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
      return InvalidArgumentError("its routing identity has no numeric port");
    if (host != peer_address)
      return InvalidArgumentError("its routing identity names host " + host + " but it comes from " + peer_address +
                                  " (replies go to the identity, so it must be the sender's own address)");
    return Status::OK();
  }

  void SetClientKeys(zmq::socket_t* socket) const {
    if (!options_.curve) return;
    socket->set(zmq::sockopt::curve_serverkey, options_.curve->job_public);
    socket->set(zmq::sockopt::curve_publickey, options_.curve->node_public);
    socket->set(zmq::sockopt::curve_secretkey, options_.curve->node_secret);
  }

  // Stops the security thread (if any): stopping the router's monitor sends
  // MONITOR_STOPPED, on which the thread closes its sockets and returns.
  void StopSecurity() {
    if (!security_.joinable()) {
      if (zap_) zap_.close();
      if (monitor_) monitor_.close();
      return;
    }
    zmq_socket_monitor(router_.handle(), nullptr, 0);
    security_.join();
  }

  // The security thread: ZAP requests and the router's handshake events.
  void SecurityLoop() {
    std::map<int, std::pair<std::string, std::string>> accepted;  // fd -> (host, port) of accepted connections
    std::string failed;  // A handshake failure waiting for its connection's DISCONNECTED.
    while (true) {
      zmq::pollitem_t items[] = {{zap_.handle(), 0, ZMQ_POLLIN, 0}, {monitor_.handle(), 0, ZMQ_POLLIN, 0}};
      try {
        zmq::poll(items, 2, std::chrono::milliseconds(-1));
        if (items[0].revents & ZMQ_POLLIN) AnswerZap();
        if (!(items[1].revents & ZMQ_POLLIN)) continue;
        zmq::message_t event, address;
        (void)monitor_.recv(event);
        (void)monitor_.recv(address);
        if (event.size() < 6) continue;
        uint16_t id;
        uint32_t value;
        std::memcpy(&id, event.data(), 2);
        std::memcpy(&value, static_cast<const char*>(event.data()) + 2, 4);
        switch (id) {
          case ZMQ_EVENT_MONITOR_STOPPED:
            zap_.close();
            monitor_.close();
            return;
          case ZMQ_EVENT_ACCEPTED:
            accepted[static_cast<int>(value)] = PeerName(static_cast<int>(value));
            break;
          case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
            failed.clear();
            break;
          case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
          case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
            // NO_DETAIL carries an errno (the peer hung up first), PROTOCOL a ZMTP error.
            failed = id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
                         ? "its handshake failed: it does not speak CURVE (no --curve_dir?)"
                         : std::string("its handshake failed (no CURVE, or another job's keys?): ") +
                               (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ? "ZMTP error 0x" + Hex(value)
                                                                          : std::string(zmq_strerror(value)));
            break;
          case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
            failed.clear();  // The ZAP handler logged it, with the key.
            break;
          case ZMQ_EVENT_DISCONNECTED: {
            // The engine reports a failed handshake and then its disconnect,
            // in that order, on the same I/O thread.
            auto it = accepted.find(static_cast<int>(value));
            if (!failed.empty()) {
              const std::pair<std::string, std::string> unknown{"an unknown address", "?"};
              const auto& [host, port] = it != accepted.end() ? it->second : unknown;
              handshake_refusals_->Refuse(host, "refused a connection (from port " + port + "): " + failed);
              failed.clear();
            }
            if (it != accepted.end()) accepted.erase(it);
            break;
          }
          default:
            break;
        }
      } catch (const zmq::error_t& e) {
        LOG(ERROR) << "transport security thread ends: " << e.what();
        return;
      }
    }
  }

  // Answers one ZAP request (ZeroMQ RFC 27): 200 for the job's keys, else 400.
  void AnswerZap() {
    std::vector<zmq::message_t> req;
    do {
      req.emplace_back();
      (void)zap_.recv(req.back());
    } while (zap_.get(zmq::sockopt::rcvmore));
    auto text = [&](size_t i) {
      return i < req.size() ? std::string(static_cast<const char*>(req[i].data()), req[i].size()) : std::string();
    };
    // version, request id, domain, address, identity, mechanism, credentials...
    std::string status = "400", reason = "not one of the job's keys", user;
    const std::string address = text(3), mechanism = text(5);
    std::string key;
    if (mechanism == "CURVE" && req.size() >= 7 && req[6].size() == 32) {
      char z85[41] = {0};
      zmq_z85_encode(z85, static_cast<const uint8_t*>(req[6].data()), 32);
      key = z85;
      auto it = options_.curve->members.find(key);
      if (it != options_.curve->members.end()) {
        status = "200";
        reason = "OK";
        user = it->second;
      }
    }
    if (status != "200") {
      zap_refusals_->Refuse(address, "refused a connection: " + std::string(mechanism) + " public key " +
                                         (key.empty() ? std::string("(none)") : key) +
                                         " is not one of the job's (--curve_dir)");
    }
    const std::string reply[] = {"1.0", text(1), status, reason, user, ""};
    for (int i = 0; i < 6; ++i)
      zap_.send(zmq::buffer(reply[i]), i < 5 ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }

  // (host, port) of the peer of socket `fd`.
  static std::pair<std::string, std::string> PeerName(int fd) {
    const std::pair<std::string, std::string> unknown{"an unknown address", "?"};
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return unknown;
    char host[INET6_ADDRSTRLEN] = {0};
    int port = 0;
    if (addr.ss_family == AF_INET) {
      auto* a = reinterpret_cast<sockaddr_in*>(&addr);
      inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
      port = ntohs(a->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
      inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
      port = ntohs(a->sin6_port);
    } else {
      return unknown;
    }
    return {host, std::to_string(port)};
  }

  static std::string Hex(uint32_t v) {
    char buf[16];
    snprintf(buf, sizeof(buf), "%x", v);
    return buf;
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
  Mutex stop_mu_;                                   // Serializes Stop().
  Mutex peers_mu_ NEREUS_ACQUIRED_AFTER(stop_mu_);  // Taken before any Peer::mu.
  std::map<std::string, std::shared_ptr<Peer>> peers_ NEREUS_GUARDED_BY(peers_mu_);
  std::unique_ptr<RefusalLog> refusals_;                           // Set by Start(); used by the receive thread.
  std::unique_ptr<RefusalLog> zap_refusals_, handshake_refusals_;  // Used by the security thread.
  // CURVE only: the security thread and its sockets (used by it alone once
  // started; closed by it, or by Stop() if it never ran).
  zmq::socket_t zap_, monitor_;
  std::thread security_;
};

}  // namespace

std::unique_ptr<Transport> NewZmqTransport(const ZmqTransportOptions& options) {
  return std::make_unique<ZmqTransport>(options);
}

}  // namespace nereus

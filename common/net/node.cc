#include "common/net/node.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace nereus {

std::string NormalizeEndpoint(const std::string& address) {
  if (address.find("://") != std::string::npos) return address;
  return "tcp://" + address;
}

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.compare(0, 4, "127.") == 0;
}

Status CheckBindHost(const std::string& host, bool curve) {
  if (host.empty()) return InvalidArgumentError("--bind_host is empty: give the address peers reach this node at");
  if (host == "0.0.0.0" || host == "*" || host == "::" || host == "[::]")
    return InvalidArgumentError("--bind_host=" + host +
                                " is a wildcard, but a node's bind address is also the address its peers answer "
                                "it at: give this host's own address");
  if (!IsLoopbackHost(host) && !curve)
    LOG(WARNING) << "listening on " << host << " without --curve_dir: this job is open to anyone who can reach " << host
                 << " (they can register, push gradients and read the weights); make keys with "
                    "nereus_keygen and pass --curve_dir to every process";
  return Status::OK();
}

std::optional<std::pair<int, int>> EphemeralPortRange() {
  std::ifstream in(kPortRangeFile);
  int first = 0, last = 0;
  if (!(in >> first >> last) || first <= 0 || last < first) return std::nullopt;
  return std::make_pair(first, last);
}

std::string PortOf(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon + 1 == endpoint.size()) return "";
  const std::string port = endpoint.substr(colon + 1);
  return port.find_first_not_of("0123456789") == std::string::npos ? port : "";
}

std::string HostOf(const std::string& endpoint) {
  const size_t scheme = endpoint.find("://");
  const size_t from = scheme == std::string::npos ? 0 : scheme + 3;
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon < from || PortOf(endpoint).empty()) return endpoint.substr(from);
  return endpoint.substr(from, colon - from);
}

std::vector<int> HostGroupOf(const std::vector<std::string>& workers, int rank) {
  std::vector<int> group;
  const std::string host = HostOf(workers.at(rank));
  for (size_t r = 0; r < workers.size(); ++r)
    if (HostOf(workers[r]) == host) group.push_back(static_cast<int>(r));
  return group;
}

std::vector<int> Node::HostGroup(int worker_rank) const {
  if (!job_.host_aggregation()) return {worker_rank};
  return HostGroupOf(workers_, worker_rank);
}

Node::Node(NodeOptions options) : options_(std::move(options)), transport_(NewZmqTransport(options_.transport)) {}

Node::~Node() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  if (heartbeat_.joinable()) heartbeat_.join();
  transport_->Stop();
  if (abort_notifier_.joinable()) abort_notifier_.join();
}

bool Node::Lookup(const Endpoint& endpoint, pb::Role* role, int* rank) const {
  auto it = by_endpoint_.find(endpoint);
  if (it == by_endpoint_.end()) return false;
  *role = it->second.first;
  *rank = it->second.second;
  return true;
}

Status Node::Start(DataHandler on_data, AbortHandler on_abort) {
  on_data_ = std::move(on_data);
  on_abort_ = std::move(on_abort);
  coordinator_ = NormalizeEndpoint(options_.coordinator);
  RETURN_IF_ERROR(CheckBindHost(options_.bind_host, options_.transport.curve.has_value()));
  refusals_ = std::make_unique<RefusalLog>(std::string(RoleName(options_.role)) + " at " + options_.bind_host);
  RETURN_IF_ERROR(transport_->Start("tcp://" + options_.bind_host + ":0",
                                    [this](const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) {
                                      OnMessage(from, std::move(msg), partial);
                                    }));
  Message reg;
  reg.header.set_op(pb::REGISTER);
  reg.header.set_sender_role(options_.role);
  reg.header.set_sender_rank(options_.rank);
  auto* self = reg.header.add_nodes();
  self->set_role(options_.role);
  self->set_rank(options_.rank);
  self->set_endpoint(transport_->endpoint());
  self->set_resume(options_.resume);
  for (int64_t clock : options_.checkpoint_clocks) self->add_checkpoint_clocks(clock);
  self->set_checkpoint_every(options_.checkpoint_every);
  RETURN_IF_ERROR(transport_->Send(coordinator_, reg));
  LOG(INFO) << RoleName(options_.role) << " at " << transport_->endpoint() << " registering with coordinator "
            << coordinator_;

  // REGISTER is repeated every second until the coordinator answers: a node
  // started before the coordinator listens can hand its first REGISTER to a
  // connection that breaks (another process briefly on that port), and
  // ZeroMQ drops what it had queued on it. The coordinator ignores repeats,
  // or answers them with the address book once the job has started.
  MutexLock lock(&mu_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options_.startup_timeout_s);
  auto repeat_at = std::chrono::steady_clock::now() + kRegisterRepeat;
  int self_connections = 0;
  while (!registered_ && register_error_.ok() && abort_.ok()) {
    const auto now = std::chrono::steady_clock::now();
    const auto until = register_held_until_ ? std::max(deadline, *register_held_until_) : deadline;
    if (now >= until) break;
    if (now < repeat_at) {
      cv_.WaitUntil(&mu_, std::min(until, repeat_at));
      continue;
    }
    repeat_at = now + kRegisterRepeat;
    mu_.Unlock();
    if (transport_->LoopedBack(coordinator_)) {
      // Refused: the connection reaches this node itself, not the
      // coordinator. A new one gets another source port.
      LOG(WARNING) << name() << ": refused the connection to the coordinator at " << coordinator_
                   << ": it reached this node itself (TCP self-connection on port " << PortOf(coordinator_)
                   << ", which is in this host's ephemeral port range, " << kPortRangeFile
                   << ", and had no listener yet); connecting again. Give the coordinator a port below that range.";
      transport_->Disconnect(coordinator_);
      ++self_connections;
    }
    // Never blocks: a connection that cannot queue it (a refused CURVE
    // handshake leaves none) must not keep Start past its deadline.
    Status st = transport_->SendIfRoom(coordinator_, reg);
    if (!st.ok()) VLOG(1) << "repeating REGISTER: " << st;
    mu_.Lock();
  }
  if (!abort_.ok()) return abort_;
  if (!register_error_.ok()) return register_error_;
  if (!registered_) {
    if (self_connections > 0) {
      return DeadlineExceededError("no answer from the coordinator at " + coordinator_ + " within " +
                                   std::to_string(options_.startup_timeout_s) +
                                   " s (--startup_timeout_s): the connection reached this node "
                                   "itself " +
                                   std::to_string(self_connections) + " time(s) (TCP self-connection: port " +
                                   PortOf(coordinator_) + " is in this host's ephemeral port range, " + kPortRangeFile +
                                   "); give the coordinator a port below that range");
    }
    return DeadlineExceededError("no answer from the coordinator at " + coordinator_ + " within " +
                                 std::to_string(options_.startup_timeout_s) +
                                 " s (--startup_timeout_s): is it running at that address, and have all "
                                 "servers and workers been started?");
  }
  last_ack_ = std::chrono::steady_clock::now();
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  LOG(INFO) << name() << " joined the job: " << job_.num_servers() << " server(s), " << job_.num_workers()
            << " worker(s)";
  return Status::OK();
}

Status Node::Send(const Endpoint& to, Message msg, int stream) {
  msg.header.set_sender_role(options_.role);
  msg.header.set_sender_rank(rank_);
  msg.header.set_epoch(job_.epoch());
  return transport_->Send(to, std::move(msg), stream);
}

Status Node::Barrier(const std::string& name, pb::Role group, uint64_t model_digest, std::vector<double>* min_values,
                     const std::string& note) {
  Message m;
  m.header.set_op(pb::BARRIER);
  m.header.set_barrier_name(name);
  m.header.set_barrier_group(group);
  m.header.set_model_digest(model_digest);
  if (!note.empty()) m.header.set_barrier_note(note);
  if (min_values != nullptr)
    for (double v : *min_values) m.header.add_barrier_min(v);
  RETURN_IF_ERROR(Send(coordinator_, std::move(m)));
  MutexLock lock(&mu_);
  while (barrier_released_.count(name) == 0 && abort_.ok() && !stopping_) cv_.Wait(&mu_);
  if (!abort_.ok()) return abort_;
  if (stopping_) return FailedPreconditionError("node stopping");
  barrier_released_.erase(name);
  auto reduced = barrier_min_.find(name);
  if (min_values != nullptr) {
    const size_t got = reduced == barrier_min_.end() ? 0 : reduced->second.size();
    if (got != min_values->size())
      return InternalError("barrier \"" + name + "\": the release carries " + std::to_string(got) +
                           " reduced value(s), this node sent " + std::to_string(min_values->size()));
    if (got > 0) *min_values = reduced->second;
  }
  if (reduced != barrier_min_.end()) barrier_min_.erase(reduced);
  return Status::OK();
}

Status Node::Finish() {
  if (options_.role == pb::WORKER) {
    Message m;
    m.header.set_op(pb::DONE);
    RETURN_IF_ERROR(Send(coordinator_, std::move(m)));
  }
  MutexLock lock(&mu_);
  while (!shutdown_ && abort_.ok() && !stopping_) cv_.Wait(&mu_);
  if (!abort_.ok()) return abort_;
  return Status::OK();
}

void Node::ReportFailure(const Status& why) {
  {
    MutexLock lock(&mu_);
    if (!abort_.ok() || shutdown_ || !registered_) return;
  }
  Message m;
  m.header.set_op(pb::ABORT);
  // A long error (a whole parse report) is cut: the coordinator repeats it
  // to every node.
  constexpr size_t kMaxError = 2000;
  m.header.set_error(why.message().size() > kMaxError ? why.message().substr(0, kMaxError) + "..." : why.message());
  if (Status st = Send(coordinator_, std::move(m)); !st.ok())
    LOG(WARNING) << name() << ": telling the coordinator that this node failed: " << st;
  Abort(why);
}

Status Node::aborted() const {
  MutexLock lock(&mu_);
  return abort_;
}

void Node::Abort(const Status& why) {
  {
    MutexLock lock(&mu_);
    if (!abort_.ok() || shutdown_) return;
    abort_ = why;
  }
  const std::string who = rank_ >= 0 ? name() : std::string(RoleName(options_.role));
  if (IsRollback(why)) {
    LOG(WARNING) << who << ": " << why.message();
  } else {
    LOG(ERROR) << who << ": job aborted: " << why.message();
  }
  cv_.SignalAll();
  // The owner's handler may block or take locks: run it off the receive and
  // heartbeat threads. Joined by the destructor.
  if (on_abort_) abort_notifier_ = std::thread([this, why] { on_abort_(why); });
}

void Node::OnMessage(const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) {
  if (from != coordinator_) {
    // Only members of the job are heard (and so answered): a stranger's
    // message never reaches the server or the client, and costs at most a
    // rate-limited log line.
    bool member;
    {
      MutexLock lock(&mu_);
      if (!registered_ && early_.size() < kMaxEarlyMessages) {
        // A peer that got the address book first may already send (its
        // REGISTER_REPLY arrived before ours): held until ours is here.
        early_.push_back(EarlyMessage{from, std::move(msg), partial});
        return;
      }
      member = registered_ && by_endpoint_.count(from) > 0;
    }
    if (!member) {
      refusals_->Refuse(from, std::string("refused a message (") +
                                  (msg.ok() ? OpName(msg->header.op()) : "undecodable") +
                                  "): the sender is not a member of this job");
      return;
    }
    // A member's endpoint is new in each epoch, so this only catches a peer
    // of an earlier formation that reached a reused port.
    if (msg.ok() && msg->header.epoch() != job_.epoch()) {
      refusals_->Refuse(from, std::string("refused a message (") + OpName(msg->header.op()) + ") of epoch " +
                                  std::to_string(msg->header.epoch()) + ": this job is in epoch " +
                                  std::to_string(job_.epoch()));
      return;
    }
  }
  if (!msg.ok() || from != coordinator_) {
    if (on_data_) on_data_(from, std::move(msg), partial);
    return;
  }
  const pb::Header& h = msg->header;
  switch (h.op()) {
    case pb::REGISTER_REPLY: {
      std::vector<EarlyMessage> early;
      {
        MutexLock lock(&mu_);
        if (registered_) break;
        job_ = h.job();
        servers_.assign(job_.num_servers(), "");
        workers_.assign(job_.num_workers(), "");
        for (const auto& n : h.nodes()) {
          if (n.role() == pb::SERVER && n.rank() >= 0 && n.rank() < job_.num_servers())
            servers_[n.rank()] = n.endpoint();
          if (n.role() == pb::WORKER && n.rank() >= 0 && n.rank() < job_.num_workers())
            workers_[n.rank()] = n.endpoint();
          by_endpoint_[n.endpoint()] = {n.role(), n.rank()};
          if (n.endpoint() == transport_->endpoint()) rank_ = n.rank();
        }
        if (rank_ < 0) {
          register_error_ = InternalError("coordinator's address book does not list this node");
        } else {
          registered_ = true;
        }
        cv_.SignalAll();
        early.swap(early_);
      }
      // Messages that came before the address book, now judged by it
      // (without the lock: the handler may block).
      for (EarlyMessage& e : early) OnMessage(e.from, std::move(e.msg), e.partial);
      break;
    }
    case pb::ERROR: {
      MutexLock lock(&mu_);
      if (!registered_) {
        register_error_ = InvalidArgumentError("coordinator refused registration: " + h.error());
        cv_.SignalAll();
      } else {
        LOG(ERROR) << "coordinator reports: " << h.error();
      }
      break;
    }
    case pb::BARRIER_RELEASE: {
      MutexLock lock(&mu_);
      barrier_released_[h.barrier_name()]++;
      if (h.barrier_min_size() > 0)
        barrier_min_[h.barrier_name()].assign(h.barrier_min().begin(), h.barrier_min().end());
      cv_.SignalAll();
      break;
    }
    case pb::HEARTBEAT_ACK: {
      MutexLock lock(&mu_);
      last_ack_ = std::chrono::steady_clock::now();
      if (coordinator_silent_) {
        coordinator_silent_ = false;
        LOG(INFO) << name() << ": the coordinator at " << coordinator_ << " answers again";
      }
      break;
    }
    case pb::REGISTER_HELD: {
      // The coordinator holds this node's REGISTER while it finds out
      // whether the member of this rank is dead: Start waits as long as it
      // is told to, past --startup_timeout_s (a rejoin can take the whole
      // heartbeat timeout), and then a whole --startup_timeout_s more. The
      // start-up timeout counts from the coordinator's last word, not from
      // the first REGISTER: once the hold ends and this node is let in, the
      // job is formed again, and every other node rolls back and registers
      // anew, which takes as long as a fresh start (it takes several seconds
      // on a loaded machine; a node that counted from its first REGISTER gave
      // up while the coordinator was waiting for the last of them).
      MutexLock lock(&mu_);
      if (registered_) break;
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(h.hold_ms()) +
                         std::chrono::seconds(options_.startup_timeout_s);
      if (!register_held_until_ || until > *register_held_until_) {
        if (!register_held_until_) LOG(INFO) << name() << ": the coordinator holds this registration: " << h.error();
        register_held_until_ = until;
      }
      cv_.SignalAll();
      break;
    }
    case pb::PROBE: {
      // The coordinator asks whether this node is alive (another node
      // registered in its name): answered here, on the receive thread,
      // whatever the heartbeat thread is doing.
      Message ack;
      ack.header.set_op(pb::PROBE_ACK);
      Status st = Send(coordinator_, std::move(ack));
      if (!st.ok()) LOG(WARNING) << name() << ": answering the coordinator's probe: " << st;
      break;
    }
    case pb::ABORT:
      Abort(AbortedError(h.error()));
      break;
    case pb::ROLLBACK: {
      bool current;
      {
        MutexLock lock(&mu_);
        current = registered_ && h.epoch() > job_.epoch();
      }
      if (current)
        Abort(RollbackError("the job rolls back to its newest checkpoint (epoch " + std::to_string(h.epoch()) +
                            "): " + h.error()));
      break;
    }
    case pb::SHUTDOWN: {
      MutexLock lock(&mu_);
      shutdown_ = true;
      cv_.SignalAll();
      break;
    }
    default:
      if (on_data_) on_data_(from, std::move(msg), partial);
  }
}

void Node::HeartbeatLoop() {
  const auto interval = std::chrono::milliseconds(std::max(1, job_.heartbeat_interval_ms()));
  const auto timeout = std::chrono::milliseconds(std::max(1, job_.heartbeat_timeout_ms()));
  mu_.Lock();
  while (!stopping_ && !shutdown_ && abort_.ok()) {
    mu_.Unlock();
    Message hb;
    hb.header.set_op(pb::HEARTBEAT);
    Status st = Send(coordinator_, std::move(hb));
    if (!st.ok()) LOG(WARNING) << "heartbeat: " << st;
    mu_.Lock();
    // A timed wait, not a sleep: Stop, shutdown and abort wake it at once.
    const auto next = std::chrono::steady_clock::now() + interval;
    while (!stopping_ && !shutdown_ && abort_.ok()) {
      if (!cv_.WaitUntil(&mu_, next)) break;
    }
    if (stopping_ || shutdown_ || !abort_.ok()) break;
    const auto silent = std::chrono::steady_clock::now() - last_ack_;
    if (silent > std::max<std::chrono::milliseconds>(3 * interval, std::chrono::seconds(1)) && silent <= timeout &&
        !coordinator_silent_) {
      // The job goes on without it (pushes and pulls do not pass through
      // it); a coordinator restarted with --resume takes the job back.
      coordinator_silent_ = true;
      LOG(WARNING) << name() << ": no heartbeat reply from the coordinator at " << coordinator_ << " for "
                   << std::chrono::duration_cast<std::chrono::milliseconds>(silent).count()
                   << " ms; waiting for it up to --heartbeat_timeout_ms=" << timeout.count()
                   << " (a coordinator restarted with --resume takes the job back)";
    }
    if (silent > timeout) {
      const double s = std::chrono::duration<double>(silent).count();
      mu_.Unlock();
      std::ostringstream os;
      os.precision(2);
      os << std::fixed << "lost contact with the coordinator at " << coordinator_ << ": no heartbeat reply for " << s
         << " s";
      Abort(UnavailableError(os.str()));
      return;
    }
  }
  mu_.Unlock();
}

}  // namespace nereus

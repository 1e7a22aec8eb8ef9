#include "server/coordinator.h"

#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/net/node.h"
#include "server/checkpoint.h"

namespace nereus {

Status ValidateJobConfig(const pb::JobConfig& job) {
  if (job.num_servers() < 1)
    return InvalidArgumentError("--num_servers must be >= 1, got " + std::to_string(job.num_servers()));
  if (job.num_workers() < 1)
    return InvalidArgumentError("--num_workers must be >= 1, got " + std::to_string(job.num_workers()));
  if (job.consistency() == pb::CONSISTENCY_UNSPECIFIED) return InvalidArgumentError("consistency model not set");
  if (job.staleness() < 0)
    return InvalidArgumentError("--staleness must be >= 0, got " + std::to_string(job.staleness()));
  if (job.partition_bytes() < 4)
    return InvalidArgumentError("--partition_bytes must be >= 4, got " + std::to_string(job.partition_bytes()));
  if (job.partition_bytes() > kDefaultMaxFrameBytes)
    return InvalidArgumentError("--partition_bytes must be <= " + std::to_string(kDefaultMaxFrameBytes) +
                                " (the largest frame a node accepts), got " + std::to_string(job.partition_bytes()));
  if (job.heartbeat_interval_ms() < 1 || job.heartbeat_timeout_ms() <= job.heartbeat_interval_ms())
    return InvalidArgumentError("--heartbeat_timeout_ms must exceed --heartbeat_interval_ms (got " +
                                std::to_string(job.heartbeat_timeout_ms()) + " and " +
                                std::to_string(job.heartbeat_interval_ms()) + ")");
  return Status::OK();
}

StatusOr<HostAggregation> ParseHostAggregation(const std::string& text) {
  if (text == "auto") return HostAggregation::kAuto;
  if (text == "on") return HostAggregation::kOn;
  if (text == "off") return HostAggregation::kOff;
  return InvalidArgumentError("--host_aggregation must be auto, on or off, got \"" + text + "\"");
}

namespace {
ZmqTransportOptions CoordinatorTransport(const CoordinatorOptions& o) {
  ZmqTransportOptions t;
  t.curve = o.curve;
  return t;
}

// The nodes that disagree at a barrier, one group per key:
// " {a, b} <verb> <key>; {c} <verb> <key>;" (keys in hex with `hex`).
template <typename Key>
std::string NodeGroups(const std::map<Key, std::vector<std::string>>& groups, const std::string& verb, bool hex,
                       const std::map<Key, std::string>& notes = {}) {
  std::ostringstream os;
  for (const auto& [key, names] : groups) {
    os << " {";
    for (size_t i = 0; i < names.size(); ++i) os << (i ? ", " : "") << names[i];
    os << "} " << verb << " ";
    if (hex) {
      os << std::hex << key << std::dec;
    } else {
      os << key;
    }
    if (auto note = notes.find(key); note != notes.end()) os << " (" << note->second << ")";
    os << ";";
  }
  return os.str();
}
}  // namespace

Coordinator::Coordinator(CoordinatorOptions options)
    : options_(std::move(options)),
      transport_(NewZmqTransport(CoordinatorTransport(options_))),
      refusals_("coordinator"),
      resume_(options_.resume) {}

Coordinator::~Coordinator() { transport_->Stop(); }

bool Coordinator::HostAggregationFor(const pb::Header& reply) const {
  if (options_.host_aggregation == HostAggregation::kOff || options_.job.consistency() == pb::ASYNC) return false;
  std::vector<std::string> workers(options_.job.num_workers());
  for (const pb::NodeInfo& n : reply.nodes())
    if (n.role() == pb::WORKER) workers.at(n.rank()) = n.endpoint();
  // Hosts and their workers, in order of their first worker.
  std::map<std::string, std::vector<int>> hosts;
  std::vector<std::string> order;
  for (int r = 0; r < static_cast<int>(workers.size()); ++r) {
    auto [it, fresh] = hosts.try_emplace(HostOf(workers[r]));
    if (fresh) order.push_back(it->first);
    it->second.push_back(r);
  }
  const bool shared = hosts.size() < workers.size();
  const bool on = options_.host_aggregation == HostAggregation::kOn || shared;
  if (on) {
    std::string groups;
    for (const std::string& host : order) {
      groups += (groups.empty() ? "" : "; ") + host + ": workers {";
      for (size_t i = 0; i < hosts[host].size(); ++i) groups += (i ? ", " : "") + std::to_string(hosts[host][i]);
      groups += "}";
    }
    LOG(INFO) << "coordinator: host-local aggregation on (--host_aggregation="
              << (options_.host_aggregation == HostAggregation::kOn ? "on" : "auto")
              << "): each host's first worker pushes the sum of its workers' gradients; " << groups;
  }
  return on;
}

Status Coordinator::Start() {
  RETURN_IF_ERROR(ValidateJobConfig(options_.job));
  if (options_.host_aggregation == HostAggregation::kOn && options_.job.consistency() == pb::ASYNC)
    return InvalidArgumentError(
        "--host_aggregation=on needs --consistency=bsp or ssp: under async the servers apply each worker's "
        "gradients as they come, and summing a host's first would hold its workers to each other's pace");
  {
    const std::string ep = NormalizeEndpoint(options_.bind);
    const size_t scheme = ep.find("://"), colon = ep.rfind(':');
    if (ep.compare(0, 6, "tcp://") == 0 && colon > scheme + 3)
      RETURN_IF_ERROR(CheckBindHost(ep.substr(scheme + 3, colon - scheme - 3), options_.curve.has_value())
                          .Annotate("--coordinator"));
  }
  // Read before binding: a coordinator that may not take the job over
  // touches nothing (and one whose job's coordinator still runs fails to
  // bind its address).
  ASSIGN_OR_RETURN(std::optional<pb::CoordinatorState> previous, PreviousState());
  Status st = transport_->Start(NormalizeEndpoint(options_.bind),
                                [this](const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) {
                                  OnMessage(from, std::move(msg), partial);
                                });
  if (!st.ok()) return st.Annotate("coordinator");
  {
    MutexLock lock(&mu_);
    formation_deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(options_.startup_timeout_s);
    if (previous.has_value()) {
      RETURN_IF_ERROR(TakeBack(*previous));
    } else {
      persisted_.set_coordinator(transport_->endpoint());
      *persisted_.mutable_job() = options_.job;
      RETURN_IF_ERROR(Persist());
    }
  }
  LOG(INFO) << "coordinator listening at " << transport_->endpoint() << " for " << options_.job.num_servers()
            << " server(s) and " << options_.job.num_workers() << " worker(s)";
  return Status::OK();
}

StatusOr<std::optional<pb::CoordinatorState>> Coordinator::PreviousState() const {
  if (options_.state_dir.empty()) return std::optional<pb::CoordinatorState>();
  const std::string path = CoordinatorStatePath(options_.state_dir);
  auto read = ReadCoordinatorState(options_.state_dir);
  if (!read.ok()) {
    if (read.status().code() == StatusCode::kNotFound) return std::optional<pb::CoordinatorState>();
    return Status(read.status().code(),
                  "cannot start: " + read.status().message() +
                      ". It holds what the coordinator of a job knows; if no process of that job runs any more, "
                      "remove it (and restart the job with --resume from its servers' checkpoints, or anew)");
  }
  const pb::CoordinatorState& s = *read;
  if (s.ended()) {
    LOG(INFO) << "coordinator: the job " << path << " describes ended (" << s.outcome() << "); "
              << (options_.resume ? "this one resumes from its servers' checkpoints" : "starting a new job");
    return std::optional<pb::CoordinatorState>();
  }
  std::ostringstream what;
  what << path << " holds a job that has not ended (epoch " << s.epoch() << ", "
       << (s.finished()  ? "finished"
           : s.started() ? "running"
                         : "forming")
       << ", coordinator " << s.coordinator() << ")";
  if (!options_.resume) {
    return FailedPreconditionError(
        what.str() +
        ": its coordinator was killed, or still runs. Restart the coordinator with --resume to take the job back, "
        "or remove the file to start a new job");
  }
  const pb::JobConfig& was = s.job();
  const pb::JobConfig& now = options_.job;
  auto differs = [&](const std::string& flag, const std::string& mine, const std::string& theirs) {
    return InvalidArgumentError("cannot take the job back: " + flag + "=" + mine + " but the job in " + path + " has " +
                                theirs + "; restart the coordinator with the job's flags");
  };
  if (now.num_servers() != was.num_servers())
    return differs("--num_servers", std::to_string(now.num_servers()), std::to_string(was.num_servers()));
  if (now.num_workers() != was.num_workers())
    return differs("--num_workers", std::to_string(now.num_workers()), std::to_string(was.num_workers()));
  if (now.consistency() != was.consistency())
    return differs("--consistency", pb::Consistency_Name(now.consistency()), pb::Consistency_Name(was.consistency()));
  if (now.staleness() != was.staleness())
    return differs("--staleness", std::to_string(now.staleness()), std::to_string(was.staleness()));
  if (now.partition_bytes() != was.partition_bytes())
    return differs("--partition_bytes", std::to_string(now.partition_bytes()), std::to_string(was.partition_bytes()));
  if (!s.finished() && (s.started() || s.epoch() > 0)) {
    if (was.consistency() != pb::BSP) {
      return FailedPreconditionError(
          "cannot take the job back: " + what.str() + " runs under " + pb::Consistency_Name(was.consistency()) +
          ", and taking a job back rolls it back to a checkpoint (BSP only); restart every process of the job "
          "instead");
    }
    if (was.checkpoint_every() <= 0) {
      return FailedPreconditionError("cannot take the job back: " + what.str() +
                                     ": its servers write no checkpoints (--checkpoint_every), so there is no state "
                                     "to roll the job back to");
    }
  }
  return std::optional<pb::CoordinatorState>(s);
}

Status Coordinator::TakeBack(const pb::CoordinatorState& previous) {
  const std::string path = CoordinatorStatePath(options_.state_dir);
  if (previous.coordinator() != transport_->endpoint()) {
    return FailedPreconditionError("cannot take the job back: its coordinator listened at " + previous.coordinator() +
                                   " (" + path + "), this one at " + transport_->endpoint() +
                                   "; its nodes reconnect to the old address: restart it there");
  }
  persisted_ = previous;
  if (previous.finished()) {
    // SHUTDOWN went out, perhaps not to everyone: again.
    LOG(WARNING) << "coordinator: restarted with --resume; the job of " << path
                 << " had finished: telling its nodes to shut down";
    for (const pb::NodeInfo& n : previous.members()) SendTo(n.endpoint(), pb::SHUTDOWN);
    finished_ = true;
    return Status::OK();
  }
  if (!previous.started() && previous.epoch() == 0) {
    // No node holds an address book: the nodes go on repeating their
    // REGISTER, and the job forms as it was going to.
    resume_ = previous.job().resume();
    LOG(WARNING) << "coordinator: restarted with --resume while the job of " << path
                 << " was forming; waiting for its nodes to register";
    return Status::OK();
  }
  // The members hold the address book of an epoch whose coordinator is
  // gone: a new epoch, formed as a --resume start is.
  epoch_ = previous.epoch() + 1;
  resume_ = true;
  persisted_.set_epoch(epoch_);
  persisted_.set_started(false);
  RETURN_IF_ERROR(Persist());  // Before any node hears of the new epoch.
  std::ostringstream index;
  for (const pb::NodeInfo& n : previous.members()) {
    if (n.role() != pb::SERVER) continue;
    index << (index.tellp() > 0 ? "; " : "") << NodeName(n.role(), n.rank()) << " ";
    if (n.checkpoint_clocks().empty()) index << "none";
    for (int i = 0; i < n.checkpoint_clocks_size(); ++i) index << (i ? ", " : "clocks ") << n.checkpoint_clocks(i);
  }
  const std::string why = "the coordinator restarted and takes the job back";
  LOG(WARNING) << "coordinator: restarted with --resume: taking back the job of " << path << " (epoch "
               << previous.epoch() << (previous.started() ? ", running" : ", re-forming") << "; it started at clock "
               << previous.job().start_clock() << "; the servers' checkpoints then: " << index.str() << "); epoch "
               << epoch_ << ": every node rolls back to the newest checkpoint every server holds and registers again";
  for (const pb::NodeInfo& n : previous.members()) {
    previous_[{n.role(), n.rank()}] = n.endpoint();
    SendTo(n.endpoint(), pb::ROLLBACK, why);
  }
  return Status::OK();
}

Status Coordinator::Persist() {
  if (options_.state_dir.empty()) return Status::OK();
  return WriteCoordinatorState(options_.state_dir, persisted_).Annotate("the coordinator's state");
}

void Coordinator::PersistOrFail() {
  Status st = Persist();
  if (!st.ok()) Fail(st);
}

bool Coordinator::IsPrevious(const Endpoint& e) const {
  for (const auto& [who, ep] : previous_)
    if (ep == e) return true;
  return false;
}

Coordinator::Member* Coordinator::Find(const Endpoint& e) {
  auto it = members_.find(e);
  return it == members_.end() ? nullptr : &it->second;
}

void Coordinator::SendTo(const Endpoint& to, pb::Op op, const std::string& error) {
  Message m;
  m.header.set_op(op);
  m.header.set_sender_role(pb::COORDINATOR);
  m.header.set_sender_rank(0);
  m.header.set_epoch(epoch_);
  if (!error.empty()) m.header.set_error(error);
  Status st = transport_->Send(to, std::move(m));
  if (!st.ok()) LOG(WARNING) << "coordinator: " << st;
}

void Coordinator::OnMessage(const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) {
  if (!msg.ok()) {
    refusals_.Refuse(from, "refused a message: " + msg.status().message());
    Message err;
    err.header.set_op(pb::ERROR);
    err.header.set_error_op(partial.op());
    err.header.set_request_id(partial.request_id());
    err.header.set_error(msg.status().message());
    MutexLock lock(&mu_);
    if (Find(from) != nullptr || partial.op() == pb::REGISTER) (void)transport_->Send(from, std::move(err));
    return;
  }
  const pb::Header& h = msg->header;
  MutexLock lock(&mu_);
  if (Member* m = Find(from)) m->last_seen = std::chrono::steady_clock::now();
  switch (h.op()) {
    case pb::REGISTER:
      HandleRegister(from, h);
      break;
    case pb::HEARTBEAT:
      if (Find(from) != nullptr) {
        SendTo(from, pb::HEARTBEAT_ACK);
      } else if (h.epoch() < epoch_ && IsPrevious(from)) {
        // A member of an earlier formation that has not heard of this epoch
        // (its ROLLBACK was lost with a connection, or went to a coordinator
        // that was restarted since): again.
        SendTo(from, pb::ROLLBACK, "the job re-forms in epoch " + std::to_string(epoch_));
      }
      break;
    case pb::BARRIER:
      HandleBarrier(from, h);
      break;
    case pb::PROBE_ACK:
      // A member answered: every node waiting to take its place is refused.
      if (Find(from) == nullptr) break;
      for (auto w = rejoin_waiting_.begin(); w != rejoin_waiting_.end();) {
        if (w->second.member != from) {
          ++w;
          continue;
        }
        const auto waited = std::chrono::steady_clock::now() - w->second.since;
        RefuseRejoin(w->first,
                     w->second.who + " is alive at " + from + " (it answered the coordinator's probe after " +
                         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()) +
                         " ms)");
        w = rejoin_waiting_.erase(w);
      }
      break;
    case pb::ABORT: {
      // A member that cannot go on (Node::ReportFailure): the job ends now,
      // naming it and why, rather than when its silence reaches the
      // heartbeat timeout.
      Member* m = Find(from);
      if (m == nullptr) {
        refusals_.Refuse(from, "refused a message (ABORT): the sender is not a member of this job");
        break;
      }
      std::ostringstream os;
      os << NodeName(m->role, m->rank) << " (" << from << ") failed: " << EscapeBytes(h.error(), 2100);
      Fail(AbortedError(os.str()));
      break;
    }
    case pb::DONE: {
      Member* m = Find(from);
      if (m == nullptr || m->role != pb::WORKER || m->done) break;
      m->done = true;
      LOG(INFO) << "coordinator: " << NodeName(m->role, m->rank) << " finished";
      if (++workers_done_ == options_.job.num_workers()) {
        persisted_.set_finished(true);
        PersistOrFail();
        for (auto& [ep, member] : members_) SendTo(ep, pb::SHUTDOWN);
        finished_ = true;
        cv_.SignalAll();
      }
      break;
    }
    default:
      refusals_.Refuse(from, std::string("refused a message: unexpected ") + OpName(h.op()));
  }
}

void Coordinator::HandleRegister(const Endpoint& from, const pb::Header& h) {
  if (h.nodes_size() != 1 || h.nodes(0).endpoint() != from) {
    SendTo(from, pb::ERROR, "REGISTER must describe the sending node");
    return;
  }
  const pb::NodeInfo& n = h.nodes(0);
  if (Find(from) != nullptr) {
    // A repeat: the node re-sends REGISTER every second until it hears back
    // (node.cc), since a message can be lost with a connection that breaks
    // before the coordinator listens. Once the job has started it is given
    // the address book again; before that it waits like the others.
    if (started_ && register_reply_.has_value()) {
      Status st = transport_->Send(from, *register_reply_);
      if (!st.ok()) LOG(WARNING) << st;
    }
    return;
  }
  if (started_ && (n.role() == pb::SERVER || n.role() == pb::WORKER)) {
    // A node restarted alone, with the rank of a member: it may take that
    // member's place, rolling the job back (HandleRejoin).
    const Member* old = nullptr;
    for (const auto& [ep, m] : members_)
      if (m.role == n.role() && m.rank == n.rank()) old = &m;
    if (old != nullptr) {
      if (!HandleRejoin(from, n, *old)) return;
    }
  }
  if (started_) {
    SendTo(from, pb::ERROR, "the job has already started; no more nodes are accepted");
    return;
  }
  if (Status st = CheckRegistration(n); !st.ok()) {
    SendTo(from, pb::ERROR, st.message());
    Fail(st);
    return;
  }
  if (n.role() != pb::SERVER && n.role() != pb::WORKER) {
    SendTo(from, pb::ERROR, "only servers and workers register, not " + std::string(RoleName(n.role())));
    return;
  }
  const int count = n.role() == pb::SERVER ? options_.job.num_servers() : options_.job.num_workers();
  std::vector<bool> taken(count, false);
  for (auto& [ep, m] : members_)
    if (m.role == n.role()) taken[m.rank] = true;
  int rank = n.rank();
  if (rank >= count) {
    SendTo(from, pb::ERROR,
           std::string(RoleName(n.role())) + " rank " + std::to_string(rank) + " is out of range: the job has " +
               std::to_string(count) + " " + RoleName(n.role()) + "(s)");
    return;
  }
  if (rank >= 0 && taken[rank]) {
    SendTo(from, pb::ERROR, NodeName(n.role(), rank) + " is already registered");
    return;
  }
  if (rank < 0) {
    // The lowest free rank. Mixing explicit and automatic ranks in one job
    // can make a later explicit request collide; the scripts give every
    // node an explicit rank.
    for (int r = count - 1; r >= 0; --r)
      if (!taken[r]) rank = r;
  }
  if (rank < 0) {
    SendTo(from, pb::ERROR, "all " + std::to_string(count) + " " + RoleName(n.role()) + " ranks are taken");
    return;
  }
  if (auto prev = previous_.find({n.role(), rank}); prev != previous_.end()) {
    // This node's previous endpoint read ROLLBACK and is gone.
    transport_->Disconnect(prev->second);
    previous_.erase(prev);
  }
  Member m;
  m.role = n.role();
  m.rank = rank;
  m.endpoint = from;
  m.last_seen = std::chrono::steady_clock::now();
  m.checkpoint_clocks.assign(n.checkpoint_clocks().begin(), n.checkpoint_clocks().end());
  m.checkpoint_every = n.checkpoint_every();
  members_[from] = m;
  LOG(INFO) << "coordinator: " << NodeName(m.role, rank) << " registered from " << from << " (" << members_.size()
            << "/" << options_.job.num_servers() + options_.job.num_workers() << ")";
  if (static_cast<int>(members_.size()) < options_.job.num_servers() + options_.job.num_workers()) return;

  Message reply;
  reply.header.set_op(pb::REGISTER_REPLY);
  reply.header.set_sender_role(pb::COORDINATOR);
  *reply.header.mutable_job() = options_.job;
  reply.header.mutable_job()->set_epoch(epoch_);
  reply.header.set_epoch(epoch_);
  for (const auto& [ep, member] : members_)
    if (member.checkpoint_every > reply.header.job().checkpoint_every())
      reply.header.mutable_job()->set_checkpoint_every(member.checkpoint_every);
  if (resume_) {
    auto clock = ResumeClock();
    if (!clock.ok()) {
      Fail(clock.status());
      return;
    }
    reply.header.mutable_job()->set_resume(true);
    reply.header.mutable_job()->set_start_clock(*clock);
    if (epoch_ == 0) {
      LOG(INFO) << "coordinator: the job resumes from the checkpoint of clock " << *clock;
    } else {
      LOG(WARNING) << "coordinator: epoch " << epoch_ << ": the job rolled back to the checkpoint of clock " << *clock;
    }
  }
  for (auto& [ep, member] : members_) {
    auto* info = reply.header.add_nodes();
    info->set_role(member.role);
    info->set_rank(member.rank);
    info->set_endpoint(ep);
  }
  reply.header.mutable_job()->set_host_aggregation(HostAggregationFor(reply.header));
  // Kept before any node holds the address book: a restarted coordinator
  // must know whom to roll back.
  persisted_.set_epoch(epoch_);
  persisted_.set_started(true);
  *persisted_.mutable_job() = reply.header.job();
  persisted_.clear_members();
  for (auto& [ep, member] : members_) {
    pb::NodeInfo* info = persisted_.add_members();
    info->set_role(member.role);
    info->set_rank(member.rank);
    info->set_endpoint(ep);
    for (int64_t c : member.checkpoint_clocks) info->add_checkpoint_clocks(c);
    info->set_checkpoint_every(member.checkpoint_every);
  }
  if (Status st = Persist(); !st.ok()) {
    Fail(st);
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  for (auto& [ep, member] : members_) {
    member.last_seen = now;
    Status st = transport_->Send(ep, reply);
    if (!st.ok()) LOG(WARNING) << st;
  }
  register_reply_ = std::move(reply);
  started_ = true;
  if (epoch_ == 0) {
    LOG(INFO) << "coordinator: every node registered; job started";
  } else {
    LOG(INFO) << "coordinator: every node registered again; epoch " << epoch_ << " started";
  }
  cv_.SignalAll();
}

Status Coordinator::CheckRejoin(const pb::NodeInfo& n) const {
  const std::string who = NodeName(n.role(), n.rank());
  const pb::JobConfig& job = register_reply_->header.job();
  if (job.consistency() != pb::BSP) {
    return FailedPreconditionError(
        who + " cannot rejoin a running " + pb::Consistency_Name(job.consistency()) +
        " job: rejoining rolls the job back to a checkpoint, and under SSP and async no clock boundary gives a "
        "state to roll back to (checkpoints are BSP only); restart every process of the job instead");
  }
  if (job.checkpoint_every() <= 0) {
    return FailedPreconditionError(
        who +
        " cannot rejoin: the job's servers write no checkpoints (--checkpoint_every), so there is no "
        "state to roll the job back to");
  }
  if (!n.resume()) {
    return FailedPreconditionError(
        who +
        " registered again without --resume while the job runs: to rejoin, restart it with its flags and "
        "--resume (it loads the checkpoint the job rolls back to)");
  }
  return Status::OK();
}

bool Coordinator::HandleRejoin(const Endpoint& from, const pb::NodeInfo& n, const Member& old) {
  const std::string who = NodeName(n.role(), n.rank());
  if (Status st = CheckRejoin(n); !st.ok()) {
    // The job is left alone: the old member's silence (if it is dead) ends
    // it after --heartbeat_timeout_ms, as without the restart.
    refusals_.Refuse(from, "refused: " + st.message());
    SendTo(from, pb::ERROR, st.message());
    return false;
  }
  const auto now = std::chrono::steady_clock::now();
  const auto timeout = std::chrono::milliseconds(options_.job.heartbeat_timeout_ms());
  const auto silent = now - old.last_seen;
  if (silent < timeout) {
    // The member of that rank is not dead: it was heard from within the
    // heartbeat timeout. Slow is not dead (a loaded host, a sanitizer, a
    // page-cache stall can delay heartbeats by far more than their
    // interval), so the node waits, unanswered (it repeats REGISTER every
    // second), while the member is probed directly: a PROBE_ACK refuses the
    // node at once (OnMessage); a member that stays silent for the whole
    // timeout is dead, and the next REGISTER takes its place. Entries of
    // nodes that stopped repeating (they gave up, or were strangers) go once
    // two timeouts have passed, so they cannot fill the table and shut out a
    // real rejoin.
    for (auto w = rejoin_waiting_.begin(); w != rejoin_waiting_.end();)
      w = w->first != from && now - w->second.since > 2 * timeout ? rejoin_waiting_.erase(w) : std::next(w);
    auto it = rejoin_waiting_.find(from);
    if (it == rejoin_waiting_.end()) {
      if (rejoin_waiting_.size() >= kMaxRejoinWaiting) return false;
      it = rejoin_waiting_.emplace(from, RejoinWait{now, old.endpoint, who, n}).first;
      LOG(INFO) << "coordinator: " << who << " registered again from " << from << "; probing " << who << " at "
                << old.endpoint << " (heard from "
                << std::chrono::duration_cast<std::chrono::milliseconds>(silent).count()
                << " ms ago): it is replaced only if it stays silent for --heartbeat_timeout_ms=" << timeout.count();
      SendTo(old.endpoint, pb::PROBE);
    }
    if (now - it->second.since > timeout) {
      // Heard from all along, though the probe went unanswered.
      rejoin_waiting_.erase(it);
      RefuseRejoin(from, who + " is alive at " + old.endpoint + " (heard from " +
                             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(silent).count()) +
                             " ms ago)");
      return false;
    }
    // Told to wait, and for how long at most: its --startup_timeout_s may
    // be shorter than the heartbeat timeout.
    Message held;
    held.header.set_op(pb::REGISTER_HELD);
    held.header.set_sender_role(pb::COORDINATOR);
    held.header.set_epoch(epoch_);
    held.header.set_hold_ms(
        std::chrono::duration_cast<std::chrono::milliseconds>(timeout - (now - it->second.since)).count());
    held.header.set_error("probing " + who + " at " + old.endpoint +
                          ": this node takes its place only if it stays silent for --heartbeat_timeout_ms=" +
                          std::to_string(timeout.count()));
    if (Status st = transport_->Send(from, std::move(held)); !st.ok()) LOG(WARNING) << "coordinator: " << st;
    return false;
  }
  // Roll back: a new epoch, formed as a --resume start is.
  ++epoch_;
  resume_ = true;
  persisted_.set_epoch(epoch_);
  persisted_.set_started(false);
  if (Status st = Persist(); !st.ok()) {
    Fail(st);
    return false;
  }
  const std::string why = who + " rejoined from " + from + " in the place of " + old.endpoint + " (silent for " +
                          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(silent).count()) +
                          " ms)";
  LOG(WARNING) << "coordinator: " << why << "; epoch " << epoch_
               << ": every node rolls back to the newest checkpoint every server holds and registers again";
  const Endpoint replaced = old.endpoint;  // `old` lives in members_, cleared below.
  for (const auto& [ep, m] : members_) {
    if (ep == replaced) continue;
    SendTo(ep, pb::ROLLBACK, why);
    previous_[{m.role, m.rank}] = ep;
  }
  transport_->Disconnect(replaced);
  members_.clear();
  started_ = false;
  register_reply_.reset();
  workers_done_ = 0;
  barriers_.clear();
  rejoin_waiting_.clear();
  formation_deadline_ = now + std::chrono::seconds(options_.startup_timeout_s);
  cv_.SignalAll();
  return true;
}

void Coordinator::RefuseRejoin(const Endpoint& node, const std::string& alive) {
  const std::string why = alive + ": a node rejoins only in the place of a member that is dead (silent for " +
                          std::to_string(options_.job.heartbeat_timeout_ms()) + " ms, --heartbeat_timeout_ms)";
  refusals_.Refuse(node, "refused: " + why);
  SendTo(node, pb::ERROR, why);
}

Status Coordinator::CheckRegistration(const pb::NodeInfo& n) const {
  const std::string who = n.rank() >= 0 ? NodeName(n.role(), n.rank()) : std::string("a ") + RoleName(n.role());
  if (n.resume() != resume_) {
    if (epoch_ > 0)
      return InvalidArgumentError(who +
                                  " registered without --resume while the job re-forms after a rollback "
                                  "(epoch " +
                                  std::to_string(epoch_) + "): restart it with --resume");
    return InvalidArgumentError(who + " was started " + (n.resume() ? "with" : "without") +
                                " --resume but the coordinator " + (resume_ ? "with" : "without") +
                                " it: give --resume to every process of the job, or to none");
  }
  if (n.checkpoint_every() > 0 && options_.job.consistency() != pb::BSP) {
    return InvalidArgumentError(
        who + " was started with --checkpoint_every=" + std::to_string(n.checkpoint_every()) +
        " but the job's consistency is " + pb::Consistency_Name(options_.job.consistency()) +
        ": checkpoints are refused there, since a server's partitions never stand at one clock together (SSP lets them "
        "drift up to the staleness bound, async applies each push on arrival) and no clock boundary gives a state "
        "the workers could restart from; use --consistency=bsp for resumable jobs");
  }
  return Status::OK();
}

StatusOr<int64_t> Coordinator::ResumeClock() const {
  std::vector<const Member*> servers(options_.job.num_servers(), nullptr);
  for (const auto& [ep, m] : members_)
    if (m.role == pb::SERVER) servers[m.rank] = &m;
  std::set<int64_t> common(servers[0]->checkpoint_clocks.begin(), servers[0]->checkpoint_clocks.end());
  for (const Member* m : servers) {
    std::set<int64_t> mine(m->checkpoint_clocks.begin(), m->checkpoint_clocks.end()), both;
    for (int64_t c : common)
      if (mine.count(c)) both.insert(c);
    common.swap(both);
  }
  if (!common.empty()) return *common.rbegin();
  std::ostringstream os;
  os << "--resume: no checkpoint is complete on every server:";
  for (const Member* m : servers) {
    os << " " << NodeName(pb::SERVER, m->rank) << " has ";
    if (m->checkpoint_clocks.empty()) os << "none";
    for (size_t i = 0; i < m->checkpoint_clocks.size(); ++i) os << (i ? ", " : "clocks ") << m->checkpoint_clocks[i];
    os << ";";
  }
  os << " (see each server's log for checkpoints it skipped)";
  return NotFoundError(os.str());
}

void Coordinator::HandleBarrier(const Endpoint& from, const pb::Header& h) {
  Member* m = Find(from);
  if (m == nullptr) {  // Not a member: not answered.
    refusals_.Refuse(from, "refused a message: BARRIER from a node that is not in the job");
    return;
  }
  if (!started_) {
    SendTo(from, pb::ERROR, "BARRIER before the job started");
    return;
  }
  BarrierState& b = barriers_[h.barrier_name()];
  b.arrived.insert(from);
  if (h.model_digest() != 0) {
    b.digests[h.model_digest()].push_back(NodeName(m->role, m->rank));
    if (!h.barrier_note().empty()) b.notes[h.model_digest()] = h.barrier_note();
  }
  b.value_counts[h.barrier_min_size()].push_back(NodeName(m->role, m->rank));
  if (b.min.size() < static_cast<size_t>(h.barrier_min_size()))
    b.min.resize(h.barrier_min_size(), std::numeric_limits<double>::quiet_NaN());
  for (int i = 0; i < h.barrier_min_size(); ++i) b.min[i] = std::fmin(b.min[i], h.barrier_min(i));
  int expected = 0;
  if (h.barrier_group() == pb::SERVER || h.barrier_group() == pb::ROLE_UNSPECIFIED)
    expected += options_.job.num_servers();
  if (h.barrier_group() == pb::WORKER || h.barrier_group() == pb::ROLE_UNSPECIFIED)
    expected += options_.job.num_workers();
  if (static_cast<int>(b.arrived.size()) < expected) return;
  if (b.digests.size() > 1) {
    Fail(InvalidArgumentError("nodes registered different models at barrier \"" + h.barrier_name() +
                              "\":" + NodeGroups(b.digests, "have digest", /*hex=*/true, b.notes)));
    return;
  }
  if (b.value_counts.size() > 1) {
    Fail(InvalidArgumentError("nodes sent different numbers of values to reduce at barrier \"" + h.barrier_name() +
                              "\":" + NodeGroups(b.value_counts, "sent", /*hex=*/false)));
    return;
  }
  Message rel;
  rel.header.set_op(pb::BARRIER_RELEASE);
  for (double v : b.min) rel.header.add_barrier_min(v);
  rel.header.set_sender_role(pb::COORDINATOR);
  rel.header.set_barrier_name(h.barrier_name());
  for (const Endpoint& ep : b.arrived) (void)transport_->Send(ep, rel);
  barriers_.erase(h.barrier_name());
}

void Coordinator::Stop(const std::string& why) {
  MutexLock lock(&mu_);
  LOG(WARNING) << "coordinator: " << why << "; ending the job";
  Fail(AbortedError(why));
}

void Coordinator::Fail(const Status& why) {
  if (!failure_.ok() || finished_) return;
  failure_ = why;
  for (auto& [ep, member] : members_) SendTo(ep, pb::ABORT, why.message());
  cv_.SignalAll();
}

std::string Coordinator::MissingNodes() const {
  std::ostringstream os;
  bool first = true;
  for (pb::Role role : {pb::SERVER, pb::WORKER}) {
    const int count = role == pb::SERVER ? options_.job.num_servers() : options_.job.num_workers();
    std::vector<bool> seen(count, false);
    for (auto& [ep, m] : members_)
      if (m.role == role) seen[m.rank] = true;
    for (int r = 0; r < count; ++r) {
      if (seen[r]) continue;
      os << (first ? "" : ", ") << NodeName(role, r);
      first = false;
    }
  }
  return os.str();
}

Status Coordinator::Run() {
  const auto timeout = std::chrono::milliseconds(options_.job.heartbeat_timeout_ms());
  const auto check_every = std::chrono::milliseconds(std::max(1, options_.job.heartbeat_interval_ms() / 2));
  mu_.Lock();
  while (true) {
    if (finished_) break;
    if (!failure_.ok()) break;
    const auto now = std::chrono::steady_clock::now();
    if (!started_) {
      if (now >= formation_deadline_) {
        const std::string what =
            epoch_ == 0 ? "start-up" : "re-forming the job after the rollback to epoch " + std::to_string(epoch_);
        Fail(DeadlineExceededError(what + " timed out after " + std::to_string(options_.startup_timeout_s) +
                                   " s (--startup_timeout_s): missing " + MissingNodes()));
        break;
      }
      cv_.WaitUntil(&mu_, formation_deadline_);
      continue;
    }
    // A dead member with a node waiting to take its place: the rejoin goes
    // ahead (HandleRejoin sees it dead now) instead of the job ending.
    std::optional<std::pair<Endpoint, pb::NodeInfo>> rejoin;
    for (const auto& [node, wait] : rejoin_waiting_) {
      const Member* m = Find(wait.member);
      if (m != nullptr && now - m->last_seen > timeout) rejoin.emplace(node, wait.info);
    }
    if (rejoin) {
      pb::Header h;
      h.set_op(pb::REGISTER);
      *h.add_nodes() = rejoin->second;
      HandleRegister(rejoin->first, h);
      continue;
    }
    for (auto& [ep, m] : members_) {
      const auto silent = now - m.last_seen;
      if (silent > timeout) {
        std::ostringstream os;
        os.precision(1);
        os << std::fixed << NodeName(m.role, m.rank) << " (" << ep << ") is dead: no heartbeat for "
           << std::chrono::duration<double>(silent).count() << " s";
        Fail(UnavailableError(os.str()));
        break;
      }
    }
    if (!failure_.ok()) break;
    // A timed wait: a heartbeat deadline can pass without any message arriving.
    cv_.WaitFor(&mu_, check_every);
  }
  const Status result = failure_;
  // Nothing is left to take back.
  persisted_.set_ended(true);
  persisted_.set_outcome(result.ok() ? "finished" : result.message());
  if (Status st = Persist(); !st.ok()) LOG(ERROR) << "coordinator: " << st.message();
  mu_.Unlock();
  if (!result.ok()) {
    LOG(ERROR) << "coordinator: job aborted: " << result.message();
  } else {
    LOG(INFO) << "coordinator: every worker finished; job shut down cleanly";
  }
  transport_->Stop();  // Lingers until the SHUTDOWN/ABORT messages are out.
  return result;
}

}  // namespace nereus

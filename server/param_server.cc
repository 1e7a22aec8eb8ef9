#include "server/param_server.h"

#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <ctime>
#include <limits>
#include <set>
#include <tuple>
#include <utility>

#include "common/update/sgd.h"

namespace nereus {

ParamServer::ParamServer(ParamServerOptions options, ReplySink* sink)
    : options_(options), sink_(sink), refusals_("server " + std::to_string(options.rank)) {
  CHECK(sink_ != nullptr);
  CHECK_GE(options_.num_workers, 1);
  CHECK_GE(options_.apply_threads, 0);
  if (options_.apply_threads > 0) pool_ = std::make_unique<ApplyPool>(options_.apply_threads);
}

ParamServer::~ParamServer() { StopApplyThreads(); }

void ParamServer::WaitIdle() const {
  MutexLock lock(&mu_);
  while (in_flight_ != 0) idle_cv_.Wait(&mu_);
}

void ParamServer::StopApplyThreads() {
  std::unique_ptr<ApplyPool> pool;
  {
    MutexLock lock(&mu_);
    inline_only_ = true;  // Handle() submits nothing from here on.
    while (in_flight_ != 0) idle_cv_.Wait(&mu_);
    pool = std::move(pool_);
  }
  pool.reset();  // Joins the (idle) threads, without the lock.
}

int ParamServer::num_partitions() const {
  MutexLock lock(&mu_);
  return static_cast<int>(partitions_.size());
}

StatusOr<std::pair<std::vector<float>, int64_t>> ParamServer::Snapshot(int tensor, int partition) const {
  MutexLock lock(&mu_);
  while (in_flight_ != 0) idle_cv_.Wait(&mu_);
  auto it = partitions_.find({tensor, partition});
  if (it == partitions_.end())
    return NotFoundError("no partition " + std::to_string(partition) + " of tensor " + std::to_string(tensor));
  return std::make_pair(*it->second.weights, it->second.version);
}

namespace {
int64_t MonotonicMicros() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}
}  // namespace

// A piggybacked pull's priority: tensor-major, as the client orders them
// (clamped: a peer's numbers must not overflow).
static int32_t PullPriority(int64_t tensor, int64_t partition) {
  return static_cast<int32_t>(std::clamp<int64_t>(tensor * 1000 + partition, INT32_MIN, INT32_MAX));
}

int64_t ParamServer::MinVersion(int64_t clock) const {
  switch (options_.consistency) {
    case pb::BSP:
      return clock;
    case pb::SSP:
      return clock - options_.staleness;
    default:
      return 0;  // ASYNC: whatever is there.
  }
}

void ParamServer::Handle(const Endpoint& from, int worker_rank, StatusOr<Message> msg, const pb::Header& partial) {
  MutexLock lock(&mu_);
  if (!msg.ok()) {
    refusals_.Refuse(from, "refused a message: " + msg.status().message());
    SendError(from, partial, msg.status());
    return;
  }
  const pb::Header& h = msg->header;
  Status st;
  switch (h.op()) {
    case pb::INIT_PARTITION:
      st = HandleInit(from, *msg);
      break;
    case pb::PUSH:
      st = HandlePush(from, worker_rank, *msg);
      break;
    case pb::PULL:
      st = HandlePull(from, *msg);
      break;
    case pb::LEND:
      st = HandleLend(from, worker_rank, *msg);
      break;
    case pb::HAND_BACK:
      st = HandleHandBack(from, worker_rank, *msg);
      break;
    case pb::PING: {
      Message pong;
      pong.header.set_op(pb::PONG);
      pong.header.set_request_id(h.request_id());
      sink_->Reply(from, std::move(pong));
      break;
    }
    case pb::ERROR:
    case pb::INIT_ACK:
    case pb::PUSH_ACK:
    case pb::PULL_REPLY:
    case pb::PONG:
    case pb::LEND_REPLY:
    case pb::HAND_BACK_ACK:
      // A reply is never answered (two nodes must not bounce ERRORs forever).
      refusals_.Refuse(from, std::string("refused ") + OpName(h.op()) + ": a server sends replies, it takes none");
      return;
    default:
      st = InvalidArgumentError(std::string("server cannot handle op ") + OpName(h.op()));
  }
  if (!st.ok()) {
    refusals_.Refuse(from, std::string("refused ") + OpName(h.op()) + ": " + st.message());
    SendError(from, h, st);
  }
  StartUpdates();
  FlushReplies();
}

// The distinct request ids of a batch's parts, in order (empty: not a batch).
static std::vector<uint64_t> BatchIds(const pb::Header& h) {
  std::vector<uint64_t> ids;
  for (const pb::Part& p : h.parts())
    if (p.request_id() != 0 && std::find(ids.begin(), ids.end(), p.request_id()) == ids.end())
      ids.push_back(p.request_id());
  return ids;
}

void ParamServer::FlushReplies() {
  for (auto& [to, parts] : outbox_) {
    if (parts.empty()) continue;
    Message m;
    m.header.set_op(pb::PULL_REPLY);
    m.header.set_dtype(pb::FLOAT32);
    if (parts.size() == 1) {
      const pb::Part& p = parts[0].part;
      m.header.set_request_id(p.request_id());
      m.header.set_tensor(p.tensor());
      m.header.set_partition(p.partition());
      m.header.set_clock(p.clock());
      m.header.set_apply_begin_us(p.apply_begin_us());
      m.header.set_apply_us(p.apply_us());
      m.header.set_priority(parts[0].priority);
    } else {
      int32_t priority = parts[0].priority;
      for (const OutPart& o : parts) {
        *m.header.add_parts() = o.part;
        priority = std::min(priority, o.priority);
      }
      m.header.set_priority(priority);
    }
    for (OutPart& o : parts) m.payload.push_back(std::move(o.weights));
    sink_->Reply(to, std::move(m));
  }
  outbox_.clear();
}

void ParamServer::SendError(const Endpoint& to, const pb::Header& request, const Status& status) {
  Message m;
  m.header.set_op(pb::ERROR);
  m.header.set_request_id(request.request_id());
  m.header.set_error_op(request.op());
  m.header.set_tensor(request.tensor());
  m.header.set_partition(request.partition());
  m.header.set_clock(request.clock());
  m.header.set_error("server " + std::to_string(options_.rank) + ": " + status.message());
  // A batch is refused whole: the ERROR names every unit in it.
  for (uint64_t id : BatchIds(request)) m.header.add_parts()->set_request_id(id);
  sink_->Reply(to, std::move(m));
}

void ParamServer::Ack(const Endpoint& to, pb::Op op, const pb::Header& request) {
  Message m;
  m.header.set_op(op);
  m.header.set_request_id(request.request_id());
  m.header.set_tensor(request.tensor());
  m.header.set_partition(request.partition());
  m.header.set_clock(request.clock());
  m.header.set_priority(request.priority());
  // A batch is acked once, naming every unit in it.
  for (uint64_t id : BatchIds(request)) m.header.add_parts()->set_request_id(id);
  sink_->Reply(to, std::move(m));
}

StatusOr<ParamServer::Partition*> ParamServer::FindPartition(const pb::Header& h) {
  auto it = partitions_.find({h.tensor(), h.partition()});
  if (it == partitions_.end()) {
    return NotFoundError("unknown tensor " + std::to_string(h.tensor()) + " partition " +
                         std::to_string(h.partition()) + " (not initialized on this server)");
  }
  return &it->second;
}

static Status CheckFloatPayload(const pb::Header& h, uint64_t elements) {
  if (h.dtype() != pb::FLOAT32) {
    return InvalidArgumentError("unsupported dtype " + pb::DType_Name(h.dtype()) + " for " + OpName(h.op()) +
                                " (only FLOAT32)");
  }
  // Divided, not multiplied: a lying element count must not wrap around.
  if (h.payload_bytes() % sizeof(float) != 0 || h.payload_bytes() / sizeof(float) != elements) {
    return InvalidArgumentError("wrong shape: tensor " + std::to_string(h.tensor()) + " partition " +
                                std::to_string(h.partition()) + " holds " + std::to_string(elements) + " floats (" +
                                std::to_string(elements * sizeof(float)) + " bytes) but the payload has " +
                                std::to_string(h.payload_bytes()) + " bytes");
  }
  return Status::OK();
}

// Copies a message's payload (possibly several frames) into contiguous floats
// only when it is split; one frame is used in place.
static const float* ContiguousPayload(const Message& msg, std::vector<float>* scratch) {
  if (msg.payload.size() == 1) return msg.payload[0].floats();
  scratch->resize(msg.payload_bytes() / sizeof(float));
  CopyFrames(msg.payload, reinterpret_cast<char*>(scratch->data()));
  return scratch->data();
}

Status ParamServer::HandleInit(const Endpoint& from, const Message& msg) {
  const pb::Header& h = msg.header;
  const pb::PartitionMeta& meta = h.partition_meta();
  if (meta.tensor() != h.tensor() || meta.partition() != h.partition())
    return InvalidArgumentError("INIT_PARTITION header and partition_meta name different partitions");
  if (meta.length() == 0) return InvalidArgumentError("INIT_PARTITION of an empty partition");
  RETURN_IF_ERROR(CheckFloatPayload(h, meta.length()));
  RETURN_IF_ERROR(ValidateSgdConfig(h.sgd()));
  if (h.sgd().type() == pb::SOLVER_AVERAGE && options_.consistency != pb::BSP)
    return InvalidArgumentError(std::string("solver type Average (the servers only average) needs BSP; this job is ") +
                                pb::Consistency_Name(options_.consistency));
  if (have_sgd_ && !google::protobuf::util::MessageDifferencer::Equals(sgd_, h.sgd()))
    return InvalidArgumentError(
        "INIT_PARTITION carries solver settings that differ from the ones this server already has");
  auto it = partitions_.find({h.tensor(), h.partition()});
  if (it != partitions_.end()) {
    if (!google::protobuf::util::MessageDifferencer::Equals(it->second.meta, meta)) {
      if (!it->second.initialized) {
        return InvalidArgumentError("tensor " + std::to_string(h.tensor()) + " partition " +
                                    std::to_string(h.partition()) + " differs from this server's checkpoint of clock " +
                                    std::to_string(restored_clock_) + ": the job has " + meta.ShortDebugString() +
                                    ", the checkpoint " + it->second.meta.ShortDebugString() +
                                    " (resume with the same model, --partition_bytes and --num_servers)");
      }
      return InvalidArgumentError("tensor " + std::to_string(h.tensor()) + " partition " +
                                  std::to_string(h.partition()) + " was already initialized with another layout");
    }
    if (!have_sgd_) {
      // The first INIT_PARTITION after Restore(): the job's solver settings win.
      if (!google::protobuf::util::MessageDifferencer::Equals(sgd_, h.sgd()))
        LOG(INFO) << "server " << options_.rank << ": resumed with new solver settings " << h.sgd().ShortDebugString()
                  << " (the checkpoint had " << sgd_.ShortDebugString() << ")";
      sgd_ = h.sgd();
      have_sgd_ = true;
    }
    it->second.initialized = true;
    Ack(from, pb::INIT_ACK, h);  // Idempotent re-initialization keeps the current values.
    return Status::OK();
  }
  if (restored_clock_ >= 0) {
    return InvalidArgumentError("tensor " + std::to_string(h.tensor()) + " (" + meta.tensor_name() + ") partition " +
                                std::to_string(h.partition()) + " is not in this server's checkpoint of clock " +
                                std::to_string(restored_clock_) +
                                ": the job places other partitions here than the checkpointed job did (resume with the "
                                "same model, --partition_bytes and --num_servers)");
  }
  if (!have_sgd_) {
    // Set once (the later ones were checked equal above): an update in
    // flight on the pool reads it.
    sgd_ = h.sgd();
    have_sgd_ = true;
  }
  Partition p;
  p.meta = meta;
  std::vector<float> scratch;
  const float* src = ContiguousPayload(msg, &scratch);
  p.weights = std::make_shared<std::vector<float>>(src, src + meta.length());
  p.history.assign(meta.length(), 0.0f);
  if (NumHistoryBlobs(sgd_.type()) == 2) p.history2.assign(meta.length(), 0.0f);
  partitions_.emplace(Key{h.tensor(), h.partition()}, std::move(p));
  RecountMin();
  Ack(from, pb::INIT_ACK, h);
  return Status::OK();
}

// A PUSH or PULL with parts either gives every part a request id (a batch)
// or none (a merged PUSH); anything else is refused.
static Status CheckBatchIds(const pb::Header& h, bool* batch) {
  int with = 0;
  for (const pb::Part& p : h.parts()) with += p.request_id() != 0 ? 1 : 0;
  *batch = with > 0;
  if (with != 0 && with != h.parts_size())
    return InvalidArgumentError("batched " + std::string(OpName(h.op())) + " with " + std::to_string(h.parts_size()) +
                                " parts, only " + std::to_string(with) + " of which carry a request id");
  if (with == 0 && h.op() == pb::PULL)
    return InvalidArgumentError("PULL with " + std::to_string(h.parts_size()) + " parts and no request ids");
  return Status::OK();
}

Status ParamServer::HandlePush(const Endpoint& from, int worker, const Message& msg) {
  const pb::Header& h = msg.header;
  if (worker < 0 || worker >= options_.num_workers)
    return InvalidArgumentError("PUSH from " + EscapeBytes(from) + ", which is not a worker of this job");
  if (h.dtype() != pb::FLOAT32)
    return InvalidArgumentError("unsupported dtype " + pb::DType_Name(h.dtype()) + " for PUSH (only FLOAT32)");
  std::vector<int> covers(h.covers().begin(), h.covers().end());
  if (covers.empty()) covers.push_back(worker);
  RETURN_IF_ERROR(CheckCovers(worker, covers));
  std::vector<PushPart> parts;
  std::vector<uint64_t> bytes;
  bool batch = false;
  if (h.parts_size() == 0) {
    parts.push_back(PushPart{h.tensor(), h.partition(), h.clock(), h.pull_request_id(), msg.payload, covers});
    bytes.push_back(h.payload_bytes());
  } else {
    // A merged push or a batch: one payload frame per part.
    RETURN_IF_ERROR(CheckBatchIds(h, &batch));
    const std::string what = batch ? "batched PUSH" : "merged PUSH";
    if (static_cast<int>(msg.payload.size()) != h.parts_size())
      return InvalidArgumentError(what + " has " + std::to_string(h.parts_size()) + " parts but " +
                                  std::to_string(msg.payload.size()) + " payload frames");
    std::set<std::tuple<int, int, int64_t>> seen;
    for (int i = 0; i < h.parts_size(); ++i) {
      const pb::Part& p = h.parts(i);
      if (p.payload_bytes() != msg.payload[i].size())
        return InvalidArgumentError(what + " part " + std::to_string(i) + " says " + std::to_string(p.payload_bytes()) +
                                    " bytes but its frame has " + std::to_string(msg.payload[i].size()));
      // Two gradients of one partition and clock from one worker would both pass
      // the duplicate check below (it looks at what is already stored).
      if (!seen.emplace(p.tensor(), p.partition(), p.clock()).second)
        return InvalidArgumentError(what + " part " + std::to_string(i) + " repeats tensor " +
                                    std::to_string(p.tensor()) + " partition " + std::to_string(p.partition()) +
                                    " for clock " + std::to_string(p.clock()));
      parts.push_back(PushPart{p.tensor(), p.partition(), p.clock(), p.pull_request_id(), {msg.payload[i]}, covers});
      bytes.push_back(p.payload_bytes());
    }
  }
  if (!restored_checked_) RETURN_IF_ERROR(CheckRestoredInitialized());
  // Every part is checked before any is stored: a refused message changes nothing.
  for (size_t i = 0; i < parts.size(); ++i) {
    Status st = CheckPush(worker, parts[i], bytes[i]);
    if (!st.ok())
      return parts.size() > 1 ? st.Annotate((batch ? "batched PUSH part " : "merged PUSH part ") + std::to_string(i))
                              : st;
  }
  Ack(from, pb::PUSH_ACK, h);
  for (PushPart& p : parts) StorePush(from, worker, std::move(p));
  return Status::OK();
}

static std::string RankList(const std::vector<int>& ranks) {
  std::string out = "{";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "}";
}

Status ParamServer::CheckCovers(int worker, const std::vector<int>& covers) const {
  if (options_.host_groups.empty()) {
    if (covers.size() == 1 && covers[0] == worker) return Status::OK();
    return InvalidArgumentError("PUSH from worker " + std::to_string(worker) + " covers workers " + RankList(covers) +
                                ", but this job does not aggregate per host");
  }
  const std::vector<int>& group = options_.host_groups.at(worker);
  if (covers == group) return Status::OK();
  if (group.front() != worker)
    return InvalidArgumentError("PUSH from worker " + std::to_string(worker) + ", whose host's gradients worker " +
                                std::to_string(group.front()) + " pushes (host-local aggregation, workers " +
                                RankList(group) + ")");
  return InvalidArgumentError("PUSH from worker " + std::to_string(worker) + " covers workers " + RankList(covers) +
                              ", but its host's are " + RankList(group));
}

Status ParamServer::CheckPush(int worker, const PushPart& part, uint64_t bytes) {
  auto it = partitions_.find({part.tensor, part.partition});
  if (it == partitions_.end()) {
    return NotFoundError("unknown tensor " + std::to_string(part.tensor) + " partition " +
                         std::to_string(part.partition) + " (not initialized on this server)");
  }
  const Partition& p = it->second;
  const uint64_t elements = p.meta.length();
  if (bytes % sizeof(float) != 0 || bytes / sizeof(float) != elements) {
    return InvalidArgumentError("wrong shape: tensor " + std::to_string(part.tensor) + " partition " +
                                std::to_string(part.partition) + " holds " + std::to_string(elements) + " floats (" +
                                std::to_string(elements * sizeof(float)) + " bytes) but the payload has " +
                                std::to_string(bytes) + " bytes");
  }
  if (part.clock < 0) return InvalidArgumentError("negative clock " + std::to_string(part.clock));
  if (part.clock > kMaxClock) return InvalidArgumentError("clock " + std::to_string(part.clock) + " is out of range");
  if (options_.consistency == pb::ASYNC) return Status::OK();
  if (part.clock < p.version) {
    return InvalidArgumentError("stale PUSH for clock " + std::to_string(part.clock) + ": tensor " +
                                std::to_string(part.tensor) + " partition " + std::to_string(part.partition) +
                                " has already applied " + std::to_string(p.version) + " update(s)");
  }
  if (p.lent_from >= 0 && part.clock >= p.lent_from) {
    // Held until the hand-back, which may come any number of clocks later:
    // the gradients of one clock only (the one the hand-back resumes from),
    // so that a peer cannot fill this server's memory.
    for (const auto& [clock, pending] : p.pending) {
      if (clock >= p.lent_from && clock != part.clock)
        return InvalidArgumentError(
            "PUSH for clock " + std::to_string(part.clock) + ": tensor " + std::to_string(part.tensor) + " partition " +
            std::to_string(part.partition) + " is lent to the workers from version " + std::to_string(p.lent_from) +
            " and gradients of clock " + std::to_string(clock) + " already wait for its hand-back");
    }
  } else if (part.clock >= p.version + options_.staleness + options_.max_clocks_ahead) {
    return InvalidArgumentError("PUSH for clock " + std::to_string(part.clock) + " is too far ahead of version " +
                                std::to_string(p.version));
  }
  auto pending = p.pending.find(part.clock);
  if (pending != p.pending.end()) {
    for (int w : part.covers) {
      if (!pending->second.covered[w]) continue;
      return InvalidArgumentError(std::string("duplicate PUSH ") + (w == worker ? "from worker " : "covering worker ") +
                                  std::to_string(w) + " for clock " + std::to_string(part.clock));
    }
  }
  return Status::OK();
}

void ParamServer::StorePush(const Endpoint& from, int worker, PushPart part) {
  Partition* p = &partitions_.at({part.tensor, part.partition});
  Buffer grad;
  if (part.payload.size() == 1) {
    grad = part.payload[0];  // Zero copy: keeps the received frame.
  } else {
    auto v = std::make_shared<std::vector<float>>(p->meta.length());
    CopyFrames(part.payload, reinterpret_cast<char*>(v->data()));
    grad = Buffer::Of(v);
  }
  if (part.pull_request_id != 0) {
    const int32_t priority = PullPriority(part.tensor, part.partition);
    p->pulls.push_back(PendingPull{from, part.pull_request_id, MinVersion(part.clock + 1), priority});
  }
  if (options_.consistency == pb::ASYNC) {
    p->async_grads.emplace_back(part.clock, std::move(grad));
  } else {
    PendingClock& pending = p->pending[part.clock];
    if (pending.grads.empty()) {
      pending.grads.resize(options_.num_workers);
      pending.covered.assign(options_.num_workers, false);
    }
    pending.grads[part.covers.front()] = std::move(grad);
    for (int w : part.covers) pending.covered[w] = true;
    pending.count += static_cast<int>(part.covers.size());
  }
  // The partition's next update is started at the end of this Handle() call
  // (StartUpdates); its pulls, the piggybacked one included, are answered
  // when it ends. Else a piggybacked pull may be answerable already (SSP).
  if (!p->applying && TakeUpdateReady(p)) {
    if (std::find(ready_.begin(), ready_.end(), p) == ready_.end()) ready_.push_back(p);
  } else {
    AnswerPulls(p);
  }
}

bool ParamServer::TakeUpdateReady(const Partition* p) const {
  if (options_.consistency == pb::ASYNC) return !p->async_grads.empty();
  if (p->pending.empty()) return false;
  auto it = p->pending.begin();
  if (p->lent_from >= 0 && it->first >= p->lent_from) return false;  // The workers' update until the hand-back.
  return it->first == p->version && it->second.count >= options_.num_workers;
}

bool ParamServer::TakeUpdate(Partition* p, Update* u) {
  if (p->applying || !TakeUpdateReady(p)) return false;
  u->partition = p;
  u->bytes = p->meta.length() * sizeof(float);
  if (options_.consistency == pb::ASYNC) {
    u->clock = p->async_grads.front().first;
    u->async_grad = std::move(p->async_grads.front().second);
    p->async_grads.pop_front();
  } else {
    // The received frames themselves, held by p->pending until Complete
    // (one worker: x * (1/1) == x exactly, so the frame is the average), in
    // rank order: one per worker, or one per host under host-local
    // aggregation.
    auto it = p->pending.begin();
    u->clock = it->first;
    u->grads.clear();
    for (const Buffer& g : it->second.grads)
      if (g.size() != 0) u->grads.push_back(g.floats());
    u->bytes *= u->grads.size();
  }
  p->applying = true;
  ++applying_;
  return true;
}

void ParamServer::StartUpdates() {
  std::vector<Update> group;
  uint64_t bytes = 0;
  for (Partition* p : ready_) {
    Update u;
    if (!TakeUpdate(p, &u)) continue;
    bytes += u.bytes;
    group.push_back(std::move(u));
  }
  ready_.clear();
  if (group.empty()) return;
  if (pool_ != nullptr && !inline_only_ && bytes >= options_.inline_apply_bytes) {
    ++in_flight_;
    pool_->Submit([this, g = std::move(group)]() mutable { RunUpdates(std::move(g)); });
    return;
  }
  // On this thread, under the lock, as before there was a pool; and then
  // whatever those updates made ready (SSP: a later clock already in).
  while (!group.empty()) {
    for (Update& u : group) Compute(&u);
    for (Update& u : group) Complete(&u);
    std::vector<Update> next;
    for (Update& u : group) {
      Update n;
      if (TakeUpdate(u.partition, &n)) next.push_back(std::move(n));
    }
    group = std::move(next);
  }
}

void ParamServer::RunUpdates(std::vector<Update> group) {
  while (!group.empty()) {
    // Without the lock: these partitions' arrays are this task's (applying).
    for (Update& u : group) Compute(&u);
    MutexLock lock(&mu_);
    for (Update& u : group) Complete(&u);
    // Every partition first completes, then the next updates are taken: a
    // clock's hooks (checkpoints) see no partition of the group still applying.
    std::vector<Update> next;
    for (Update& u : group) {
      Update n;
      if (TakeUpdate(u.partition, &n)) next.push_back(std::move(n));
    }
    FlushReplies();
    group = std::move(next);
    if (group.empty() && --in_flight_ == 0) idle_cv_.SignalAll();
  }
}

void ParamServer::Compute(Update* u) {
  Partition* p = u->partition;
  if (options_.before_update) options_.before_update(p->meta.tensor(), p->meta.partition(), u->clock);
  u->begin_us = MonotonicMicros();
  const int64_t iter = u->clock;
  const float rate = LearningRate(sgd_, iter);
  const size_t n = p->meta.length();
  const float lr_mult = p->meta.lr_mult(), decay_mult = p->meta.decay_mult();
  std::vector<const float*> async_src;
  const std::vector<const float*>* grads = &u->grads;
  if (options_.consistency == pb::ASYNC) {
    // Each worker's gradient counts 1/num_workers of a synchronous step.
    const float scale = 1.0f / static_cast<float>(options_.num_workers);
    p->average.resize(n);
    const float* g = u->async_grad.floats();
    for (size_t i = 0; i < n; ++i) p->average[i] = g[i] * scale;
    async_src.push_back(p->average.data());
    grads = &async_src;
  }
  CHECK(!grads->empty());
  // The gradients' sum is scaled by 1/divisor: one per worker, or host sums
  // (host-local aggregation) that stand for every worker.
  const size_t divisor = options_.consistency == pb::ASYNC ? 1 : static_cast<size_t>(options_.num_workers);
  if (sgd_.type() == pb::SOLVER_SGD) {
    // Several workers' gradients are averaged on the fly: bitwise
    // AverageInOrder and then the step, in one pass over the partition. (ASYNC:
    // the step reads p->average, which it does not write.)
    UpdateHeldWeights(&p->weights, &p->spare, [&](const float* in, float* out) {
      SgdStepAveraged(sgd_, rate, lr_mult, decay_mult, grads->data(), grads->size(), in, out, p->history.data(), n,
                      divisor);
    });
  } else if (sgd_.type() == pb::SOLVER_AVERAGE) {
    // The workers' average gradient becomes the values, in worker-rank order.
    UpdateHeldWeights(&p->weights, &p->spare,
                      [&](const float*, float* out) { AverageInOrder(grads->data(), grads->size(), out, n, divisor); });
  } else {
    // The other solvers step on the average, made first, and in place (on a
    // copy of the weights when a reply holds them).
    const float* diff = (*grads)[0];
    if (grads->size() > 1 || divisor != 1) {
      p->average.resize(n);
      AverageInOrder(grads->data(), grads->size(), p->average.data(), n, divisor);
      diff = p->average.data();
    }
    // A partition restored from a checkpoint of a one-history solver and resumed
    // with AdaDelta or Adam starts its second history at zero.
    if (NumHistoryBlobs(sgd_.type()) == 2 && p->history2.size() != n) p->history2.assign(n, 0.0f);
    float* history2 = p->history2.empty() ? nullptr : p->history2.data();
    UpdateHeldWeights(&p->weights, &p->spare, [&](const float* in, float* out) {
      if (in != out) std::copy(in, in + n, out);
      SolverStep(sgd_, iter, rate, lr_mult, decay_mult, diff, out, p->history.data(), history2, n);
    });
  }
  u->end_us = MonotonicMicros();
}

void ParamServer::Complete(Update* u) {
  Partition* p = u->partition;
  // Releases the gradient frames (BSP/SSP; ASYNC's goes with *u).
  if (options_.consistency != pb::ASYNC) p->pending.erase(u->clock);
  u->grads.clear();
  u->async_grad = Buffer();
  p->applying = false;
  --applying_;
  ++p->version;
  p->apply_begin_us = u->begin_us;
  p->apply_us = u->end_us - u->begin_us;
  VersionAdvanced(p->version - 1);
  AnswerPulls(p);
  AnswerLends(p);
}

void ParamServer::RecountMin() {
  min_version_ = std::numeric_limits<int64_t>::max();
  at_min_ = 0;
  for (const auto& [key, p] : partitions_) {
    if (p.version < min_version_) {
      min_version_ = p.version;
      at_min_ = 0;
    }
    if (p.version == min_version_) ++at_min_;
  }
  if (partitions_.empty()) min_version_ = 0;
}

void ParamServer::VersionAdvanced(int64_t old_version) {
  if (old_version != min_version_ || --at_min_ > 0) return;
  const int64_t before = min_version_;
  RecountMin();                                   // Once per clock: every partition has left the old minimum.
  if (options_.consistency == pb::ASYNC) return;  // Versions count pushes, not clocks.
  for (int64_t clock = before + 1; clock <= min_version_; ++clock) OnClock(clock);
}

void ParamServer::VersionsJumped() {
  const int64_t before = min_version_;
  RecountMin();
  // The hooks of the version reached only: the servers made no update of
  // the clocks a hand-back skipped (and a checkpoint needs BSP without
  // lending anyway: workers lend nothing while the servers checkpoint).
  if (options_.consistency != pb::ASYNC && min_version_ > before) OnClock(min_version_);
}

void ParamServer::OnClock(int64_t clock) {
  if (options_.checkpoint_every > 0 && options_.checkpoint_sink && clock % options_.checkpoint_every == 0 &&
      clock != restored_clock_) {
    if (options_.consistency != pb::BSP) {
      LOG_FIRST_N(WARNING, 1) << "server " << options_.rank << ": no checkpoints under "
                              << pb::Consistency_Name(options_.consistency)
                              << ": the partitions of a shard reach a clock at different times";
    } else if (min_version_ != clock || at_min_ != partitions_.size() || applying_ > 0) {
      // Only a client that pushes before pulling can get a partition a clock ahead.
      LOG(WARNING) << "server " << options_.rank << ": no checkpoint at clock " << clock
                   << ": some partition has already applied (or is applying) a later update";
    } else {
      options_.checkpoint_sink(ExportLocked(clock));
    }
  }
  if (options_.on_clock) options_.on_clock(clock);
}

std::unique_ptr<ShardState> ParamServer::ExportState() const {
  MutexLock lock(&mu_);
  while (in_flight_ != 0) idle_cv_.Wait(&mu_);
  return ExportLocked(min_version_);
}

std::unique_ptr<ShardState> ParamServer::ExportLocked(int64_t clock) const {
  auto s = std::make_unique<ShardState>();
  s->info.set_clock(clock);
  s->info.set_server_rank(options_.rank);
  s->info.set_num_servers(options_.num_servers);
  s->info.set_num_workers(options_.num_workers);
  s->info.set_partition_bytes(options_.partition_bytes);
  s->info.set_consistency(options_.consistency);
  *s->info.mutable_sgd() = sgd_;
  for (const auto& [key, p] : partitions_) {
    PartitionState cs;
    cs.meta = p.meta;
    cs.version = p.version;
    // A copy, as the histories: sharing the buffer copy-on-write (as pull
    // replies do) would let the next Apply write in place as soon as the
    // writer thread dropped it, and use_count() (a relaxed load) gives no
    // happens-before with the writer's last read (TSan: a race in the
    // update loop against CheckpointWriter's thread).
    cs.arrays.emplace_back("weights", std::make_shared<const std::vector<float>>(*p.weights));
    // The solver's history, whatever it holds: stored by name, generically.
    cs.arrays.emplace_back("history", std::make_shared<const std::vector<float>>(p.history));
    // AdaDelta and Adam: Caffe's second history ("update history").
    if (!p.history2.empty())
      cs.arrays.emplace_back("update_history", std::make_shared<const std::vector<float>>(p.history2));
    s->partitions.push_back(std::move(cs));
  }
  return s;
}

Status ParamServer::Restore(ShardState state) {
  MutexLock lock(&mu_);
  const pb::CheckpointShard& info = state.info;
  const std::string what =
      "the checkpoint of clock " + std::to_string(info.clock()) + " of server " + std::to_string(info.server_rank());
  if (!partitions_.empty()) return FailedPreconditionError("Restore after INIT_PARTITION");
  auto differs = [&](const std::string& field, const std::string& ckpt, const std::string& job) {
    return InvalidArgumentError(what + " was made by a job with " + field + " " + ckpt + ", this job has " + job +
                                ": the partitions would be placed differently (resume with the same job shape)");
  };
  if (info.server_rank() != options_.rank)
    return differs("server rank", std::to_string(info.server_rank()), std::to_string(options_.rank));
  if (info.num_servers() != options_.num_servers)
    return differs("--num_servers", std::to_string(info.num_servers()), std::to_string(options_.num_servers));
  if (info.partition_bytes() != options_.partition_bytes)
    return differs("--partition_bytes", std::to_string(info.partition_bytes()),
                   std::to_string(options_.partition_bytes));
  if (info.num_workers() != options_.num_workers)
    return differs("--num_workers", std::to_string(info.num_workers()), std::to_string(options_.num_workers));
  if (info.consistency() != options_.consistency)
    return differs("--consistency", pb::Consistency_Name(info.consistency()),
                   pb::Consistency_Name(options_.consistency));
  std::map<Key, Partition> partitions;
  for (PartitionState& cs : state.partitions) {
    const std::string name =
        "tensor " + std::to_string(cs.meta.tensor()) + " partition " + std::to_string(cs.meta.partition());
    if (cs.version != info.clock())
      return DataLossError(what + ": " + name + " is at version " + std::to_string(cs.version));
    Partition p;
    p.meta = cs.meta;
    p.version = cs.version;
    p.initialized = false;
    for (auto& [array, values] : cs.arrays) {
      if (values->size() != cs.meta.length())
        return DataLossError(what + ": array " + array + " of " + name + " holds " + std::to_string(values->size()) +
                             " floats, the partition " + std::to_string(cs.meta.length()));
      if (array == "weights") {
        p.weights = std::make_shared<std::vector<float>>(*values);
      } else if (array == "history") {
        p.history = *values;
      } else if (array == "update_history") {
        p.history2 = *values;
      } else {
        return InvalidArgumentError(what + ": " + name + " holds solver state \"" + array +
                                    "\" that this server does not keep (a checkpoint of a newer Nereus?)");
      }
    }
    if (p.weights == nullptr) return DataLossError(what + ": " + name + " has no weights");
    if (p.history.empty()) p.history.assign(cs.meta.length(), 0.0f);
    if (!partitions.emplace(Key{cs.meta.tensor(), cs.meta.partition()}, std::move(p)).second)
      return DataLossError(what + ": " + name + " appears twice");
  }
  partitions_ = std::move(partitions);
  sgd_ = info.sgd();
  have_sgd_ = false;  // The first INIT_PARTITION's settings replace these.
  restored_clock_ = info.clock();
  restored_checked_ = false;
  RecountMin();
  LOG(INFO) << "server " << options_.rank << ": restored " << partitions_.size() << " partition(s) from " << what;
  return Status::OK();
}

Status ParamServer::CheckRestoredInitialized() {
  for (const auto& [key, p] : partitions_) {
    if (!p.initialized) {
      return InvalidArgumentError("tensor " + std::to_string(key.first) + " (" + p.meta.tensor_name() + ") partition " +
                                  std::to_string(key.second) + " of this server's checkpoint of clock " +
                                  std::to_string(restored_clock_) +
                                  " was not initialized by the resumed job: its model differs from the "
                                  "checkpointed one");
    }
  }
  restored_checked_ = true;
  return Status::OK();
}

void ParamServer::SendWeights(Partition* p, const Endpoint& to, uint64_t request_id, int32_t priority) {
  OutPart o;
  o.part.set_tensor(p->meta.tensor());
  o.part.set_partition(p->meta.partition());
  o.part.set_clock(p->version);
  o.part.set_request_id(request_id);
  o.part.set_payload_bytes(p->meta.length() * sizeof(float));
  o.part.set_apply_begin_us(p->apply_begin_us);
  o.part.set_apply_us(p->apply_us);
  o.weights = Buffer::Of(p->weights);
  o.priority = priority;
  outbox_[to].push_back(std::move(o));
}

void ParamServer::AnswerPulls(Partition* p) {
  if (p->pulls.empty() || p->applying) return;  // Applying: answered when the update ends.
  std::vector<PendingPull> still;
  for (const PendingPull& pull : p->pulls) {
    if (p->version >= pull.min_version) {
      SendWeights(p, pull.to, pull.request_id, pull.priority);
    } else {
      still.push_back(pull);
    }
  }
  p->pulls.swap(still);
}

Status ParamServer::HandlePull(const Endpoint& from, const Message& msg) {
  const pb::Header& h = msg.header;
  if (msg.payload_bytes() != 0) return InvalidArgumentError("PULL must not carry a payload");
  if (h.parts_size() == 0) {
    ASSIGN_OR_RETURN(Partition * p, FindPartition(h));
    if (h.clock() < 0 || h.clock() > kMaxClock)
      return InvalidArgumentError("PULL for clock " + std::to_string(h.clock()) + " is out of range");
    const int64_t min_version = MinVersion(h.clock());
    if (p->version >= min_version && !p->applying) {
      SendWeights(p, from, h.request_id(), h.priority());
    } else {
      // Answered by AnswerPulls the moment the update lands (or, while one
      // is being made, ends): no polling.
      p->pulls.push_back(PendingPull{from, h.request_id(), min_version, h.priority()});
    }
    return Status::OK();
  }
  // A batch of pulls: every part is checked before any is answered; those
  // whose version exists go back together in one PULL_REPLY (FlushReplies),
  // the others each as soon as their update lands.
  bool batch = false;
  RETURN_IF_ERROR(CheckBatchIds(h, &batch));
  std::vector<Partition*> partitions;
  for (int i = 0; i < h.parts_size(); ++i) {
    const pb::Part& part = h.parts(i);
    if (part.payload_bytes() != 0)
      return InvalidArgumentError("batched PULL part " + std::to_string(i) + " says " +
                                  std::to_string(part.payload_bytes()) + " payload bytes (a PULL carries none)");
    if (part.clock() < 0 || part.clock() > kMaxClock)
      return InvalidArgumentError("batched PULL part " + std::to_string(i) + " for clock " +
                                  std::to_string(part.clock()) + " is out of range");
    auto it = partitions_.find({part.tensor(), part.partition()});
    if (it == partitions_.end())
      return NotFoundError("batched PULL part " + std::to_string(i) + ": unknown tensor " +
                           std::to_string(part.tensor()) + " partition " + std::to_string(part.partition()) +
                           " (not initialized on this server)");
    partitions.push_back(&it->second);
  }
  for (int i = 0; i < h.parts_size(); ++i) {
    const pb::Part& part = h.parts(i);
    Partition* p = partitions[i];
    const int32_t priority = part.tensor() * 1000 + part.partition();
    const int64_t min_version = MinVersion(part.clock());
    if (p->version >= min_version && !p->applying) {
      SendWeights(p, from, part.request_id(), priority);
    } else {
      p->pulls.push_back(PendingPull{from, part.request_id(), min_version, priority});
    }
  }
  return Status::OK();
}

std::vector<std::string> ParamServer::StateArrays() const {
  std::vector<std::string> names = {"weights", "history"};
  if (NumHistoryBlobs(sgd_.type()) == 2) names.push_back("update_history");
  return names;
}

// "a, b, c" of `names` (for errors).
static std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : ", ") + EscapeBytes(names[i]);
  return out.empty() ? "none" : out;
}

Status ParamServer::HandleLend(const Endpoint& from, int worker, const Message& msg) {
  const pb::Header& h = msg.header;
  if (worker < 0 || worker >= options_.num_workers)
    return InvalidArgumentError("LEND from " + EscapeBytes(from) + ", which is not a worker of this job");
  if (options_.consistency != pb::BSP)
    return InvalidArgumentError("LEND needs BSP (this job is " + pb::Consistency_Name(options_.consistency) +
                                "): a lent partition's updates are the workers' one per clock");
  if (msg.payload_bytes() != 0 || h.parts_size() != 0)
    return InvalidArgumentError("LEND carries no payload and no parts");
  ASSIGN_OR_RETURN(Partition * p, FindPartition(h));
  const std::string what = "tensor " + std::to_string(h.tensor()) + " partition " + std::to_string(h.partition());
  if (h.clock() < 0 || h.clock() > kMaxClock)
    return InvalidArgumentError("LEND of version " + std::to_string(h.clock()) + " is out of range");
  if (h.clock() < p->version)
    return InvalidArgumentError("LEND of version " + std::to_string(h.clock()) + ", but " + what +
                                " has already applied " + std::to_string(p->version) + " update(s)");
  if (p->lent_from >= 0 && p->lent_from > h.clock())
    return InvalidArgumentError("LEND of version " + std::to_string(h.clock()) + ", but " + what +
                                " is already lent from version " + std::to_string(p->lent_from));
  for (const auto& [clock, pending] : p->pending) {
    if (clock >= h.clock())
      return InvalidArgumentError("LEND of version " + std::to_string(h.clock()) + ", but gradients of clock " +
                                  std::to_string(clock) + " of " + what + " were pushed to this server");
  }
  const std::vector<std::string> known = StateArrays();
  std::vector<std::string> arrays;
  for (const std::string& a : h.state_arrays()) {
    if (std::find(known.begin(), known.end(), a) == known.end())
      return InvalidArgumentError("LEND asks for state array \"" + EscapeBytes(a) + "\"; " + what + " has " +
                                  JoinNames(known));
    if (std::find(arrays.begin(), arrays.end(), a) != arrays.end())
      return InvalidArgumentError("LEND asks for state array \"" + EscapeBytes(a) + "\" twice");
    arrays.push_back(a);
  }
  if (p->lent_from >= 0 && p->lent_from < h.clock()) {
    // Lent again from a later version: held until the HAND_BACK of the
    // current lend, which must come first (one per worker at most).
    if (p->deferred_lends.size() >= static_cast<size_t>(options_.num_workers))
      return InvalidArgumentError("LEND of version " + std::to_string(h.clock()) + ", but " + what +
                                  " is lent from version " + std::to_string(p->lent_from) + " and already holds " +
                                  std::to_string(p->deferred_lends.size()) + " LEND(s) for after its HAND_BACK");
    p->deferred_lends.emplace_back(h.clock(), PendingLend{from, h.request_id(), std::move(arrays)});
    return Status::OK();
  }
  p->lent_from = h.clock();
  p->lends.push_back(PendingLend{from, h.request_id(), std::move(arrays)});
  AnswerLends(p);
  return Status::OK();
}

void ParamServer::TakeDeferredLends(Partition* p) {
  std::vector<std::pair<int64_t, PendingLend>> deferred;
  deferred.swap(p->deferred_lends);
  for (auto& [version, lend] : deferred) {
    pb::Header request;
    request.set_op(pb::LEND);
    request.set_request_id(lend.request_id);
    request.set_tensor(p->meta.tensor());
    request.set_partition(p->meta.partition());
    request.set_clock(version);
    const std::string what =
        "tensor " + std::to_string(p->meta.tensor()) + " partition " + std::to_string(p->meta.partition());
    if (version < p->version) {
      SendError(lend.to, request,
                InvalidArgumentError("LEND of version " + std::to_string(version) + ", but " + what +
                                     " was handed back at version " + std::to_string(p->version)));
      continue;
    }
    if (p->lent_from >= 0 && p->lent_from != version) {
      SendError(lend.to, request,
                InvalidArgumentError("LEND of version " + std::to_string(version) + ", but " + what +
                                     " is already lent from version " + std::to_string(p->lent_from)));
      continue;
    }
    p->lent_from = version;
    p->lends.push_back(std::move(lend));
  }
  AnswerLends(p);
}

void ParamServer::AnswerLends(Partition* p) {
  if (p->lends.empty() || p->applying || p->version != p->lent_from) return;
  for (PendingLend& lend : p->lends) {
    Message m;
    m.header.set_op(pb::LEND_REPLY);
    m.header.set_request_id(lend.request_id);
    m.header.set_tensor(p->meta.tensor());
    m.header.set_partition(p->meta.partition());
    m.header.set_clock(p->version);
    m.header.set_dtype(pb::FLOAT32);
    for (const std::string& a : lend.arrays) {
      m.header.add_state_arrays(a);
      // The weights are shared as with pulls (an update writes a copy while
      // they are held); the histories are copied: a HAND_BACK replaces them
      // in place while this reply may still be sending.
      if (a == "weights") {
        m.payload.push_back(Buffer::Of(p->weights));
      } else {
        auto copy = std::make_shared<std::vector<float>>(a == "history" ? p->history : p->history2);
        copy->resize(p->meta.length(), 0.0f);  // A second history not yet made is zero.
        m.payload.push_back(Buffer::Of(copy));
      }
    }
    sink_->Reply(lend.to, std::move(m));
  }
  p->lends.clear();
}

Status ParamServer::HandleHandBack(const Endpoint& from, int worker, const Message& msg) {
  const pb::Header& h = msg.header;
  if (worker < 0 || worker >= options_.num_workers)
    return InvalidArgumentError("HAND_BACK from " + EscapeBytes(from) + ", which is not a worker of this job");
  if (options_.consistency != pb::BSP)
    return InvalidArgumentError("HAND_BACK needs BSP (this job is " + pb::Consistency_Name(options_.consistency) + ")");
  if (h.parts_size() != 0) return InvalidArgumentError("HAND_BACK carries no parts");
  if (h.dtype() != pb::FLOAT32)
    return InvalidArgumentError("unsupported dtype " + pb::DType_Name(h.dtype()) + " for HAND_BACK (only FLOAT32)");
  ASSIGN_OR_RETURN(Partition * p, FindPartition(h));
  const std::string what = "tensor " + std::to_string(h.tensor()) + " partition " + std::to_string(h.partition());
  if (p->lent_from < 0) return InvalidArgumentError("HAND_BACK of " + what + ", which is not lent to the workers");
  if (h.clock() < p->lent_from || h.clock() > kMaxClock)
    return InvalidArgumentError("HAND_BACK of version " + std::to_string(h.clock()) + " of " + what +
                                ", which was lent from version " + std::to_string(p->lent_from));
  if (p->version != p->lent_from || p->applying)
    return InvalidArgumentError("HAND_BACK of " + what + " before it reached version " + std::to_string(p->lent_from) +
                                ", the one it was lent from (it has " + std::to_string(p->version) + ")");
  const std::vector<std::string> expected = StateArrays();
  const std::vector<std::string> arrays(h.state_arrays().begin(), h.state_arrays().end());
  if (arrays != expected)
    return InvalidArgumentError("HAND_BACK of " + what + " carries " + JoinNames(arrays) + "; the solver's state is " +
                                JoinNames(expected));
  if (msg.payload.size() != expected.size())
    return InvalidArgumentError("HAND_BACK of " + what + " names " + std::to_string(expected.size()) +
                                " arrays but has " + std::to_string(msg.payload.size()) + " payload frames");
  const uint64_t bytes = p->meta.length() * sizeof(float);
  for (size_t i = 0; i < msg.payload.size(); ++i) {
    if (msg.payload[i].size() != bytes)
      return InvalidArgumentError("HAND_BACK of " + what + ": array " + expected[i] + " has " +
                                  std::to_string(msg.payload[i].size()) + " bytes, the partition " +
                                  std::to_string(bytes));
  }
  for (const auto& [clock, pending] : p->pending) {
    if (clock < h.clock())
      return InvalidArgumentError("HAND_BACK of version " + std::to_string(h.clock()) + " of " + what +
                                  ", but gradients of clock " + std::to_string(clock) + " wait here");
  }
  // Checked whole: now the partition takes the workers' state.
  const size_t n = p->meta.length();
  const float* w = msg.payload[0].floats();
  p->weights = std::make_shared<std::vector<float>>(w, w + n);
  p->spare.reset();
  p->history.assign(msg.payload[1].floats(), msg.payload[1].floats() + n);
  if (expected.size() == 3) p->history2.assign(msg.payload[2].floats(), msg.payload[2].floats() + n);
  p->version = h.clock();
  p->lent_from = -1;
  p->lends.clear();
  VersionsJumped();
  Ack(from, pb::HAND_BACK_ACK, h);
  TakeDeferredLends(p);
  if (TakeUpdateReady(p) && std::find(ready_.begin(), ready_.end(), p) == ready_.end()) ready_.push_back(p);
  AnswerPulls(p);
  return Status::OK();
}

}  // namespace nereus

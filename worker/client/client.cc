#include "nereus/client.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <mutex>

#include "common/message.h"
#include "common/node.h"
#include "common/shard_map.h"
#include "worker/client/merge_plan.h"
#include "worker/client/priority_scheduler.h"
#include "worker/client/timeline.h"

namespace nereus {

StatusOr<Schedule> ParseSchedule(const std::string& name) {
  if (name == "sequential") return Schedule::kSequential;
  if (name == "wfbp") return Schedule::kWfbp;
  if (name == "priority") return Schedule::kPriority;
  if (name == "full") return Schedule::kFull;
  return InvalidArgumentError("--schedule must be sequential, wfbp, priority or full, got \"" + name + "\"");
}

const char* ScheduleName(Schedule s) {
  switch (s) {
    case Schedule::kSequential: return "sequential";
    case Schedule::kWfbp: return "wfbp";
    case Schedule::kPriority: return "priority";
    case Schedule::kFull: return "full";
  }
  return "?";
}

struct Handle::State {
  std::mutex mu;
  std::condition_variable cv;
  int pending = 0;         // Completions still expected.   GUARDED_BY(mu)
  bool done = false;       // GUARDED_BY(mu)
  Status status;           // GUARDED_BY(mu)
  int64_t version = std::numeric_limits<int64_t>::max();  // GUARDED_BY(mu)

  explicit State(int n) : pending(n), done(n == 0) {
    if (n == 0) version = 0;
  }

  void Complete(int64_t v = -1) {
    std::lock_guard<std::mutex> lock(mu);
    if (done) return;
    if (v >= 0 && v < version) version = v;
    if (--pending == 0) {
      done = true;
      cv.notify_all();
    }
  }
  void Fail(const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (done) return;
    status = s;
    done = true;
    cv.notify_all();
  }
};

Handle::Handle() : state_(std::make_shared<State>(0)) {}

Status Handle::Wait() const {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [this] { return state_->done; });
  return state_->status;
}

bool Handle::WaitFor(std::chrono::milliseconds timeout, Status* status) const {
  std::unique_lock<std::mutex> lock(state_->mu);
  if (!state_->cv.wait_for(lock, timeout, [this] { return state_->done; })) return false;
  if (status != nullptr) *status = state_->status;
  return true;
}

bool Handle::done() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

int64_t Handle::version() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->version;
}

Client::~Client() = default;

namespace {

using StatePtr = std::shared_ptr<Handle::State>;

// Completes one unit of a push when the transport releases the gradient bytes.
struct SendGuard {
  StatePtr state;
  ~SendGuard() { state->Complete(); }
};

uint64_t Fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

// One chunk of one tensor, as the servers store it.
struct ChunkRef {
  int tensor;
  const ChunkPlacement* placement;
};

class ClientImpl final : public Client {
 public:
  explicit ClientImpl(const ClientOptions& o) : options_(o), node_(MakeNodeOptions(o)) {}

  ~ClientImpl() override { FailAll(AbortedError("client destroyed")); }

  Status Start() {
    RETURN_IF_ERROR(node_.Start(
        [this](const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) {
          OnData(from, std::move(msg), partial);
        },
        [this](const Status& why) { FailAll(why); }));
    const bool prioritized = options_.schedule == Schedule::kPriority || options_.schedule == Schedule::kFull;
    scheduler_ = std::make_unique<PriorityScheduler>(node_.job().num_servers(), prioritized ? options_.credit_bytes : 0);
    if (!options_.timeline.empty()) {
      timeline_path_ = options_.timeline;
      const size_t at = timeline_path_.find("{rank}");
      if (at != std::string::npos) timeline_path_.replace(at, 6, std::to_string(node_.rank()));
      timeline_ = std::make_unique<Timeline>(node_.rank(), options_.timeline_every);
    }
    return Status::OK();
  }

  int rank() const override { return node_.rank(); }
  int num_workers() const override { return node_.job().num_workers(); }
  int num_servers() const override { return node_.job().num_servers(); }
  const pb::JobConfig& job() const override { return node_.job(); }

  StatusOr<int> RegisterTensor(const TensorSpec& spec) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (initialized_) return FailedPreconditionError("RegisterTensor(\"" + spec.name + "\") after Init");
    if (spec.shape.empty()) return InvalidArgumentError("tensor \"" + spec.name + "\" has no shape");
    uint64_t n = 1;
    for (int64_t d : spec.shape) {
      if (d <= 0) return InvalidArgumentError("tensor \"" + spec.name + "\" has a non-positive dimension");
      n *= static_cast<uint64_t>(d);
    }
    if ((spec.data == nullptr) != (spec.diff == nullptr))
      return InvalidArgumentError("tensor \"" + spec.name + "\": give both data and diff buffers, or neither");
    tensors_.push_back(spec);
    elements_.push_back(n);
    return static_cast<int>(tensors_.size()) - 1;
  }

  Status Init(const pb::SgdConfig& sgd, const std::vector<const float*>& initial) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (initialized_) return FailedPreconditionError("Init called twice");
      if (initial.size() != tensors_.size())
        return InvalidArgumentError("Init got " + std::to_string(initial.size()) + " initial values for " +
                                    std::to_string(tensors_.size()) + " registered tensors");
      ASSIGN_OR_RETURN(ShardMap map, ShardMap::Build(elements_, node_.job().chunk_bytes(), node_.job().num_servers()));
      shards_ = std::make_unique<ShardMap>(std::move(map));
      BuildLayers();
      initialized_ = true;
    }
    RETURN_IF_ERROR(node_.Barrier("nereus.model", pb::WORKER, ModelDigest()));
    if (rank() == 0) {
      std::vector<Handle> handles;
      for (size_t t = 0; t < tensors_.size(); ++t) handles.push_back(SendInit(static_cast<int>(t), sgd, initial[t]));
      for (auto& h : handles) RETURN_IF_ERROR(h.Wait().Annotate("initializing the servers"));
    }
    RETURN_IF_ERROR(node_.Barrier("nereus.init", pb::WORKER));
    if (options_.schedule == Schedule::kFull && options_.merge && layered_) {
      auto link = Calibrate();
      if (!link.ok()) return link.status().Annotate("measuring the link for merging");
      link_ = *link;
      LOG(INFO) << "worker " << rank() << ": link model alpha " << link_.alpha * 1e6 << " us, beta "
                << link_.beta * 1e9 << " ns/byte (" << 8e-9 / std::max(link_.beta, 1e-15) << " Gbit/s)";
    }
    if (layered_ && options_.schedule != Schedule::kSequential) {
      // Prefetch clock 0's weights, the input layer first.
      for (size_t l = 0; l < layers_.size(); ++l) IssuePulls({static_cast<int>(l)}, 0);
    }
    return Status::OK();
  }

  Handle Push(int tensor, const float* grad, int64_t clock) override {
    std::vector<Work> work;
    Handle h;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Status st = CheckTensor(tensor, "PUSH");
      if (!st.ok()) return Failed(st);
      std::vector<ChunkRef> refs = Refs(tensor);
      StatePtr push = std::make_shared<Handle::State>(static_cast<int>(refs.size()) + 1);
      auto guard = std::make_shared<SendGuard>(SendGuard{push});
      BuildPushes(refs, {grad}, {tensor}, clock, /*pull_of=*/nullptr, push, guard, TensorPriority(tensor), &work);
      h = Handle(push);
    }
    Submit(std::move(work));
    return h;
  }

  Handle Pull(int tensor, float* dst, int64_t clock) override {
    std::vector<Work> work;
    Handle h;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Status st = CheckTensor(tensor, "PULL");
      if (!st.ok()) return Failed(st);
      std::vector<ChunkRef> refs = Refs(tensor);
      StatePtr pull = std::make_shared<Handle::State>(static_cast<int>(refs.size()));
      BuildPulls(refs, dst, clock, pull, TensorPriority(tensor), &work);
      h = Handle(pull);
    }
    Submit(std::move(work));
    return h;
  }

  Status GradientsReady(int layer, int64_t clock) override {
    const int64_t now = MonotonicMicros();
    std::vector<Work> work;
    {
      std::lock_guard<std::mutex> lock(mu_);
      RETURN_IF_ERROR(CheckLayered("GradientsReady"));
      auto it = layer_index_.find(layer);
      if (it == layer_index_.end()) return Status::OK();
      const int li = it->second;
      MaybePlanMerges(clock);
      if (Profiling()) Profile(clock).ready_us[li] = now;
      LayerState& L = layers_[li];
      if (L.ready_clock >= clock) return FailedPreconditionError("GradientsReady(" + std::to_string(layer) + ", " +
                                                                 std::to_string(clock) + ") called twice");
      L.ready_clock = clock;
      if (options_.schedule == Schedule::kSequential) {
        // Everything goes out once the whole backward is done.
        for (const LayerState& x : layers_)
          if (x.ready_clock < clock) return Status::OK();
        std::vector<int> all(layers_.size());
        for (size_t l = 0; l < all.size(); ++l) all[l] = static_cast<int>(l);
        BuildLayerPushes(all, clock, /*piggyback=*/false, &work);
      } else {
        const MergeGroup& g = groups_[group_of_[li]];
        for (int l = g.first; l <= g.last; ++l)
          if (layers_[l].ready_clock < clock) return Status::OK();
        std::vector<int> members;
        for (int l = g.first; l <= g.last; ++l) members.push_back(l);
        BuildLayerPushes(members, clock, /*piggyback=*/true, &work);
      }
    }
    Submit(std::move(work));
    return Status::OK();
  }

  Status WaitWeights(int layer, int64_t clock) override {
    Handle pull, push;
    std::vector<Work> work;
    {
      std::lock_guard<std::mutex> lock(mu_);
      RETURN_IF_ERROR(CheckLayered("WaitWeights"));
      auto it = layer_index_.find(layer);
      if (it == layer_index_.end()) return Status::OK();
      const int li = it->second;
      LayerState& L = layers_[li];
      if (L.pulled_clock > clock)
        return FailedPreconditionError("WaitWeights(" + std::to_string(layer) + ", " + std::to_string(clock) +
                                       ") after the weights of clock " + std::to_string(L.pulled_clock) +
                                       " were requested");
      if (L.pulled_clock < clock) {
        std::vector<int> which;
        if (options_.schedule == Schedule::kSequential) {
          // Everything is pulled before the forward starts.
          for (size_t l = 0; l < layers_.size(); ++l)
            if (layers_[l].pulled_clock < clock) which.push_back(static_cast<int>(l));
        } else {
          which.push_back(li);
        }
        BuildLayerPulls(which, clock, &work);
      }
      pull = L.pull;
      push = L.push;
    }
    Submit(std::move(work));
    Status st = pull.Wait();
    if (st.ok()) st = push.Wait();  // The diff buffers are free again.
    std::lock_guard<std::mutex> lock(mu_);
    if (Profiling()) Profile(clock).last_wait_us = std::max(Profile(clock).last_wait_us, MonotonicMicros());
    return st;
  }

  void TraceSpan(const std::string& name, int64_t clock, int64_t begin_us, int64_t end_us) override {
    if (timeline_) timeline_->Span(Lane::kCompute, name, clock, begin_us, end_us);
  }

  ClientStats stats() const override {
    ClientStats s;
    s.push_messages = push_messages_.load();
    s.push_bytes = push_bytes_.load();
    s.pull_messages = pull_messages_.load();
    return s;
  }

  Status Barrier(const std::string& name) override { return node_.Barrier("user." + name, pb::WORKER); }

  Status Finish() override {
    if (timeline_) {
      Status st = timeline_->Write(timeline_path_);
      if (!st.ok()) LOG(ERROR) << st;
      else LOG(INFO) << "worker " << rank() << ": wrote " << timeline_->size() << " spans to " << timeline_path_;
    }
    return node_.Finish();
  }

 private:
  enum class Kind { kAck, kPull, kPong };
  struct Request {
    Kind kind = Kind::kAck;
    StatePtr state;
    int server = 0;
    uint64_t credit = 0;   // Released to the scheduler on completion.
    float* dst = nullptr;  // kPull: where the chunk goes.
    uint64_t length = 0;   // kPull: chunk elements.
    std::string what;      // For error messages and the timeline.
    int64_t clock = 0;
    int64_t enqueue_us = 0, dispatch_us = 0;
    std::vector<uint64_t> piggyback;  // kAck: pulls that ride on this push.
  };
  // A message waiting for the scheduler.
  struct Work {
    int server;
    uint64_t priority;
    uint64_t bytes;
    int stream;
    uint64_t request_id;  // Stamped with its dispatch time.
    Message msg;
  };
  struct LayerState {
    std::vector<int> tensors;
    uint64_t bytes = 0;
    int64_t ready_clock = -1;   // Last clock GradientsReady was called for.
    int64_t pulled_clock = -1;  // Clock whose weights were requested.
    Handle pull;                // Weights for pulled_clock.
    Handle push;                // Gradients of pulled_clock - 1.
  };
  struct ClockProfile {
    std::vector<int64_t> ready_us;  // By comm layer.
    int64_t last_wait_us = 0;
  };

  static NodeOptions MakeNodeOptions(const ClientOptions& o) {
    NodeOptions n;
    n.coordinator = o.coordinator;
    n.role = pb::WORKER;
    n.rank = o.rank;
    n.bind_host = o.bind_host;
    n.startup_timeout_s = o.startup_timeout_s;
    n.transport.io_threads = o.io_threads;
    n.transport.streams_per_peer = o.schedule == Schedule::kFull ? std::max(1, o.streams) : 1;
    return n;
  }

  uint64_t ModelDigest() const {
    uint64_t h = 1469598103934665603ull;
    for (const auto& t : tensors_) {
      h = Fnv1a(h, t.name.data(), t.name.size());
      for (int64_t d : t.shape) h = Fnv1a(h, &d, sizeof(d));
      h = Fnv1a(h, &t.lr_mult, sizeof(t.lr_mult));
      h = Fnv1a(h, &t.decay_mult, sizeof(t.decay_mult));
    }
    return h == 0 ? 1 : h;
  }

  // Groups tensors into layers (REQUIRES(mu_)).
  void BuildLayers() {
    layered_ = !tensors_.empty();
    std::map<int, std::vector<int>> by_layer;
    for (size_t t = 0; t < tensors_.size(); ++t) {
      if (tensors_[t].data == nullptr) layered_ = false;
      const int layer = tensors_[t].layer >= 0 ? tensors_[t].layer : static_cast<int>(t);
      by_layer[layer].push_back(static_cast<int>(t));
    }
    for (auto& [layer, ts] : by_layer) {
      layer_index_[layer] = static_cast<int>(layers_.size());
      LayerState L;
      L.tensors = ts;
      for (int t : ts) L.bytes += elements_[t] * sizeof(float);
      layers_.push_back(std::move(L));
    }
    for (size_t l = 0; l < layers_.size(); ++l) {
      groups_.push_back(MergeGroup{static_cast<int>(l), static_cast<int>(l)});
      group_of_.push_back(static_cast<int>(l));
    }
  }

  Status CheckTensor(int tensor, const char* op) const {
    if (!initialized_) return FailedPreconditionError(std::string(op) + " before Init");
    if (tensor < 0 || tensor >= static_cast<int>(tensors_.size()))
      return NotFoundError("unknown tensor id " + std::to_string(tensor));
    return abort_;
  }

  Status CheckLayered(const char* op) const {
    if (!initialized_) return FailedPreconditionError(std::string(op) + " before Init");
    if (!layered_)
      return FailedPreconditionError(std::string(op) + " needs every tensor registered with data and diff buffers");
    return abort_;
  }

  std::vector<ChunkRef> Refs(int tensor) const {
    std::vector<ChunkRef> refs;
    for (const ChunkPlacement& c : shards_->chunks(tensor)) refs.push_back(ChunkRef{tensor, &c});
    return refs;
  }

  uint64_t TensorPriority(int tensor) const {
    if (layered_) return static_cast<uint64_t>(layer_index_.at(tensors_[tensor].layer >= 0 ? tensors_[tensor].layer : tensor)) << 32;
    return static_cast<uint64_t>(tensor) << 32;
  }

  bool Prioritized() const {
    return options_.schedule == Schedule::kPriority || options_.schedule == Schedule::kFull;
  }

  // Queue order: (layer, partition) when prioritized, arrival order otherwise.
  uint64_t Priority(uint64_t base, uint64_t partition) const { return Prioritized() ? base + partition : 0; }

  int StreamFor(uint64_t k) const {
    const int n = std::max(1, options_.streams);
    return options_.schedule == Schedule::kFull ? static_cast<int>(k % n) : 0;
  }

  // Whether backward times are still being recorded for the merge plan.
  bool Profiling() const { return options_.schedule == Schedule::kFull && options_.merge && !planned_; }

  ClockProfile& Profile(int64_t clock) {
    ClockProfile& p = profiles_[clock];
    if (p.ready_us.empty()) p.ready_us.assign(layers_.size(), 0);
    return p;
  }

  // Appends the PUSH messages of `refs` (chunks of `tensors`, whose gradient
  // buffers are `grads`) to `out`: one per chunk, or merged per server up to
  // chunk_bytes when `merge` (REQUIRES(mu_)). Each message's ack completes
  // one unit of `push`; the payloads hold `guard`, which completes one more
  // when the transport has released them all. With `pull_of`, each chunk's
  // weights for clock + 1 ride along, land in the tensor's data buffer and
  // complete one unit of pull_of(tensor).
  void BuildPushes(const std::vector<ChunkRef>& refs, const std::vector<const float*>& grads,
                   const std::vector<int>& tensors, int64_t clock,
                   const std::function<StatePtr(int)>& pull_of, const StatePtr& push,
                   const std::shared_ptr<SendGuard>& guard, uint64_t base_priority, std::vector<Work>* out,
                   bool merge = false) {
    auto grad_of = [&](int tensor) {
      for (size_t i = 0; i < tensors.size(); ++i)
        if (tensors[i] == tensor) return grads[i];
      LOG(FATAL) << "no gradient buffer for tensor " << tensor;
      return static_cast<const float*>(nullptr);
    };
    const int64_t now = MonotonicMicros();
    // Index in `out` of the message being filled per server (merge only).
    const size_t first = out->size();
    std::map<int, size_t> open;
    uint64_t partition = 0;
    for (const ChunkRef& r : refs) {
      const ChunkPlacement& c = *r.placement;
      const uint64_t bytes = c.length * sizeof(float);
      Buffer payload(guard, grad_of(r.tensor) + c.offset, bytes);
      uint64_t pull_id = 0;
      if (pull_of) {
        pull_id = next_request_id_++;
        Request pr;
        pr.kind = Kind::kPull;
        pr.state = pull_of(r.tensor);
        pr.server = c.server;
        pr.dst = tensors_[r.tensor].data + c.offset;
        pr.length = c.length;
        pr.what = "weights of tensor \"" + tensors_[r.tensor].name + "\" chunk " + std::to_string(c.chunk);
        pr.clock = clock + 1;
        pr.enqueue_us = now;
        requests_.emplace(pull_id, std::move(pr));
      }
      Work* w = nullptr;
      auto it = open.find(c.server);
      if (merge && it != open.end() && (*out)[it->second].bytes + bytes <= shards_->chunk_bytes()) w = &(*out)[it->second];
      if (w == nullptr) {
        out->push_back(Work{c.server, Priority(base_priority, partition), 0, StreamFor(partition), next_request_id_++,
                            Message()});
        ++partition;
        w = &out->back();
        open[c.server] = out->size() - 1;
        w->msg.header.set_op(pb::PUSH);
        w->msg.header.set_request_id(w->request_id);
        w->msg.header.set_dtype(pb::FLOAT32);
        Request ack;
        ack.kind = Kind::kAck;
        ack.state = push;
        ack.server = c.server;
        ack.what = "PUSH of tensor \"" + tensors_[r.tensor].name + "\" chunk " + std::to_string(c.chunk);
        ack.clock = clock;
        ack.enqueue_us = now;
        requests_.emplace(w->request_id, std::move(ack));
      }
      Request& ack = requests_.at(w->request_id);
      if (pull_id != 0) ack.piggyback.push_back(pull_id);
      w->bytes += bytes;
      ack.credit = w->bytes;
      pb::Part part;
      part.set_tensor(r.tensor);
      part.set_chunk(c.chunk);
      part.set_clock(clock);
      part.set_payload_bytes(bytes);
      part.set_pull_request_id(pull_id);
      *w->msg.header.add_parts() = part;
      w->msg.payload.push_back(std::move(payload));
      if (!merge) open.erase(c.server);
    }
    // Single-part messages use the plain header fields.
    for (size_t i = first; i < out->size(); ++i) {
      pb::Header& h = (*out)[i].msg.header;
      if (h.parts_size() != 1) continue;
      const pb::Part p = h.parts(0);
      h.clear_parts();
      h.set_tensor(p.tensor());
      h.set_chunk(p.chunk());
      h.set_clock(p.clock());
      h.set_pull_request_id(p.pull_request_id());
      h.set_priority(static_cast<int32_t>(p.tensor() * 1000 + p.chunk()));
    }
  }

  void BuildPulls(const std::vector<ChunkRef>& refs, float* dst, int64_t clock, const StatePtr& pull,
                  uint64_t base_priority, std::vector<Work>* out, const std::vector<float*>* dsts = nullptr) {
    const int64_t now = MonotonicMicros();
    uint64_t partition = 0;
    for (size_t i = 0; i < refs.size(); ++i) {
      const ChunkPlacement& c = *refs[i].placement;
      const uint64_t id = next_request_id_++;
      Request r;
      r.kind = Kind::kPull;
      r.state = pull;
      r.server = c.server;
      // A pull request is a few bytes and its reply leaves the server when
      // the update exists: it is ordered by priority but takes no credit
      // (holding credit while the server waits for other workers would stall
      // the pushes that update needs).
      r.credit = 0;
      r.dst = (dsts ? (*dsts)[i] : dst) + c.offset;
      r.length = c.length;
      r.what = "PULL of tensor \"" + tensors_[refs[i].tensor].name + "\" chunk " + std::to_string(c.chunk);
      r.clock = clock;
      r.enqueue_us = now;
      requests_.emplace(id, std::move(r));
      Work w{c.server, Priority(base_priority, partition), 0, StreamFor(partition), id, Message()};
      ++partition;
      w.msg.header.set_op(pb::PULL);
      w.msg.header.set_request_id(id);
      w.msg.header.set_tensor(refs[i].tensor);
      w.msg.header.set_chunk(c.chunk);
      w.msg.header.set_clock(clock);
      w.msg.header.set_priority(static_cast<int32_t>(refs[i].tensor * 1000 + c.chunk));
      out->push_back(std::move(w));
    }
  }

  // Pushes the gradients of comm layers `which` for `clock` (REQUIRES(mu_)).
  void BuildLayerPushes(const std::vector<int>& which, int64_t clock, bool piggyback, std::vector<Work>* out) {
    std::vector<ChunkRef> refs;
    std::vector<const float*> grads;
    std::vector<int> tensors;
    for (int li : which) {
      for (int t : layers_[li].tensors) {
        for (const ChunkRef& r : Refs(t)) refs.push_back(r);
        grads.push_back(tensors_[t].diff);
        tensors.push_back(t);
      }
    }
    const bool merge = options_.schedule == Schedule::kFull && options_.merge && which.size() > 1;
    // The push state's units (one per message, plus the guard) are known
    // only once the messages are built; nothing completes before Submit.
    std::vector<Work> built;
    StatePtr push = std::make_shared<Handle::State>(1);
    auto guard = std::make_shared<SendGuard>(SendGuard{push});
    // One pull state per layer, so WaitWeights(l) waits for l alone.
    std::map<int, StatePtr> pull_of_tensor;
    std::function<StatePtr(int)> pull_of;
    if (piggyback) {
      for (int li : which) {
        int chunks = 0;
        for (int t : layers_[li].tensors) chunks += static_cast<int>(shards_->chunks(t).size());
        auto st = std::make_shared<Handle::State>(chunks);
        for (int t : layers_[li].tensors) pull_of_tensor[t] = st;
        layers_[li].pull = Handle(st);
        layers_[li].pulled_clock = clock + 1;
      }
      pull_of = [&pull_of_tensor](int tensor) { return pull_of_tensor.at(tensor); };
    }
    // Several layers go together only in sequential mode (everything at the
    // end of backward) or as a merge group: they share the most urgent
    // layer's priority.
    const uint64_t base = static_cast<uint64_t>(*std::min_element(which.begin(), which.end())) << 32;
    BuildPushes(refs, grads, tensors, clock, pull_of, push, guard, base, &built, merge);
    {
      std::lock_guard<std::mutex> lock(push->mu);
      push->pending = static_cast<int>(built.size()) + 1;
    }
    for (int li : which) layers_[li].push = Handle(push);
    for (Work& w : built) out->push_back(std::move(w));
  }

  // Explicit pulls of comm layers `which` for `clock` (REQUIRES(mu_)).
  void BuildLayerPulls(const std::vector<int>& which, int64_t clock, std::vector<Work>* out) {
    int total = 0;
    for (int li : which)
      for (int t : layers_[li].tensors) total += static_cast<int>(shards_->chunks(t).size());
    // Sequential mode waits for all of them at once; otherwise per layer.
    StatePtr all = std::make_shared<Handle::State>(total);
    for (int li : which) {
      StatePtr st = all;
      if (options_.schedule != Schedule::kSequential) {
        int chunks = 0;
        for (int t : layers_[li].tensors) chunks += static_cast<int>(shards_->chunks(t).size());
        st = std::make_shared<Handle::State>(chunks);
      }
      for (int t : layers_[li].tensors)
        BuildPulls(Refs(t), tensors_[t].data, clock, st, static_cast<uint64_t>(li) << 32, out);
      layers_[li].pull = Handle(st);
      layers_[li].pulled_clock = clock;
    }
  }

  void IssuePulls(const std::vector<int>& which, int64_t clock) {
    std::vector<Work> work;
    {
      std::lock_guard<std::mutex> lock(mu_);
      BuildLayerPulls(which, clock, &work);
    }
    Submit(std::move(work));
  }

  // Hands messages to the scheduler (never under mu_).
  void Submit(std::vector<Work> work) {
    for (Work& w : work) {
      PriorityScheduler::Item item;
      item.server = w.server;
      item.priority = w.priority;
      item.bytes = w.bytes;
      const Endpoint* to = &node_.server(w.server);
      auto shared = std::make_shared<Work>(std::move(w));
      item.send = [this, to, shared] {
        {
          std::lock_guard<std::mutex> lock(mu_);
          auto it = requests_.find(shared->request_id);
          if (it != requests_.end()) it->second.dispatch_us = MonotonicMicros();
        }
        if (shared->msg.header.op() == pb::PUSH) {
          push_messages_.fetch_add(1);
          push_bytes_.fetch_add(shared->msg.payload_bytes());
        } else if (shared->msg.header.op() == pb::PULL) {
          pull_messages_.fetch_add(1);
        }
        Status st = node_.Send(*to, std::move(shared->msg), shared->stream);
        if (!st.ok()) LOG(ERROR) << "worker " << rank() << ": send failed: " << st;
      };
      scheduler_->Enqueue(std::move(item));
    }
  }

  Handle SendInit(int tensor, const pb::SgdConfig& sgd, const float* values) {
    std::vector<Work> work;
    StatePtr state;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<ChunkRef> refs = Refs(tensor);
      state = std::make_shared<Handle::State>(static_cast<int>(refs.size()) + 1);
      auto guard = std::make_shared<SendGuard>(SendGuard{state});
      for (const ChunkRef& r : refs) {
        const ChunkPlacement& c = *r.placement;
        const uint64_t id = next_request_id_++;
        Request req;
        req.kind = Kind::kAck;
        req.state = state;
        req.server = c.server;
        req.what = "INIT_CHUNK of tensor \"" + tensors_[tensor].name + "\" chunk " + std::to_string(c.chunk);
        requests_.emplace(id, std::move(req));
        Work w{c.server, 0, 0, 0, id, Message()};
        pb::Header& h = w.msg.header;
        h.set_op(pb::INIT_CHUNK);
        h.set_request_id(id);
        h.set_tensor(tensor);
        h.set_chunk(c.chunk);
        h.set_dtype(pb::FLOAT32);
        auto* meta = h.mutable_chunk_meta();
        meta->set_tensor(tensor);
        meta->set_chunk(c.chunk);
        meta->set_offset(c.offset);
        meta->set_length(c.length);
        meta->set_lr_mult(tensors_[tensor].lr_mult);
        meta->set_decay_mult(tensors_[tensor].decay_mult);
        meta->set_tensor_name(tensors_[tensor].name);
        *h.mutable_sgd() = sgd;
        w.msg.payload.emplace_back(guard, values + c.offset, c.length * sizeof(float));
        work.push_back(std::move(w));
      }
    }
    Submit(std::move(work));
    return Handle(state);
  }

  // Times PING round trips of 32 KB..2 MB to every server and fits
  // t(p) = alpha + beta * p (averaged over servers).
  StatusOr<LinkModel> Calibrate() {
    auto scratch = std::make_shared<std::vector<float>>((2 << 20) / sizeof(float), 0.0f);
    std::vector<std::pair<double, double>> samples;
    for (int s = 0; s < num_servers(); ++s) {
      for (uint64_t bytes = 32 << 10; bytes <= (2u << 20); bytes *= 2) {
        std::vector<double> times;
        for (int rep = 0; rep < 3; ++rep) {
          const uint64_t id = [&] {
            std::lock_guard<std::mutex> lock(mu_);
            return next_request_id_++;
          }();
          auto state = std::make_shared<Handle::State>(1);
          {
            std::lock_guard<std::mutex> lock(mu_);
            Request r;
            r.kind = Kind::kPong;
            r.state = state;
            r.server = s;
            r.what = "PING of server " + std::to_string(s);
            requests_.emplace(id, std::move(r));
          }
          Message m;
          m.header.set_op(pb::PING);
          m.header.set_request_id(id);
          m.payload.push_back(Buffer::Of(scratch).Slice(0, bytes));
          const int64_t t0 = MonotonicMicros();
          RETURN_IF_ERROR(node_.Send(node_.server(s), std::move(m)));
          RETURN_IF_ERROR(Handle(state).Wait());
          times.push_back((MonotonicMicros() - t0) * 1e-6);
        }
        std::sort(times.begin(), times.end());
        samples.emplace_back(static_cast<double>(bytes), times[times.size() / 2]);
      }
    }
    return FitLinkModel(samples);
  }

  // After merge_profile_iterations timed clocks, plans the groups once
  // (REQUIRES(mu_)). Called at the first GradientsReady of each clock.
  void MaybePlanMerges(int64_t clock) {
    if (planned_ || options_.schedule != Schedule::kFull || !options_.merge) return;
    const int64_t K = std::max(1, options_.merge_profile_iterations);
    if (clock <= K) return;
    // Only at an iteration boundary: no layer of `clock` reported yet.
    for (const LayerState& l : layers_)
      if (l.ready_clock >= clock) return;
    planned_ = true;
    const int L = static_cast<int>(layers_.size());
    std::vector<double> bytes(L), tb(L, 0.0);
    for (int l = 0; l < L; ++l) bytes[l] = static_cast<double>(layers_[l].bytes);
    for (int l = 0; l < L; ++l) {
      std::vector<double> v;
      for (int64_t c = 1; c <= K; ++c) {
        auto it = profiles_.find(c);
        if (it == profiles_.end()) continue;
        const auto& p = it->second;
        const int64_t end = p.ready_us[l];
        const int64_t begin = l + 1 < L ? p.ready_us[l + 1] : p.last_wait_us;
        if (end > 0 && begin > 0 && end >= begin) v.push_back((end - begin) * 1e-6);
      }
      if (!v.empty()) {
        std::sort(v.begin(), v.end());
        tb[l] = v[v.size() / 2];
      }
    }
    groups_ = PlanMerges(link_, bytes, tb);
    group_of_.assign(L, 0);
    for (size_t g = 0; g < groups_.size(); ++g)
      for (int l = groups_[g].first; l <= groups_[g].last; ++l) group_of_[l] = static_cast<int>(g);
    LOG(INFO) << "worker " << rank() << ": merging " << L << " layers into " << groups_.size()
              << " groups (modelled communication end " << ModelledFinish(link_, bytes, tb, groups_) * 1e3
              << " ms after backward start, unmerged "
              << ModelledFinish(link_, bytes, tb, OnePerLayer(L)) * 1e3 << " ms)";
    profiles_.clear();
  }

  static std::vector<MergeGroup> OnePerLayer(int L) {
    std::vector<MergeGroup> g;
    for (int l = 0; l < L; ++l) g.push_back(MergeGroup{l, l});
    return g;
  }

  static Handle Failed(const Status& s) {
    auto state = std::make_shared<Handle::State>(1);
    state->Fail(s);
    return Handle(state);
  }

  // Removes request `id` into `out`; false if there is none (already failed).
  bool Take(uint64_t id, Request* out) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = requests_.find(id);
    if (it == requests_.end()) return false;
    *out = std::move(it->second);
    requests_.erase(it);
    return true;
  }

  void Finished(const Request& r) {
    if (r.credit > 0) scheduler_->Complete(r.server, r.credit);
  }

  void OnData(const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) {
    if (!msg.ok()) {
      LOG(ERROR) << "worker " << rank() << ": bad message from " << from << ": " << msg.status().message();
      Request r;
      if (partial.request_id() != 0 && Take(partial.request_id(), &r)) {
        r.state->Fail(msg.status());
        Finished(r);
      }
      return;
    }
    const pb::Header& h = msg->header;
    const int64_t now = MonotonicMicros();
    switch (h.op()) {
      case pb::PUSH_ACK:
      case pb::INIT_ACK:
      case pb::PONG: {
        Request r;
        if (!Take(h.request_id(), &r)) break;
        if (timeline_ && r.kind == Kind::kAck && h.op() == pb::PUSH_ACK) {
          timeline_->Span(Lane::kQueue, r.what, r.clock, r.enqueue_us, r.dispatch_us);
          timeline_->Span(Lane::kPush, r.what, r.clock, r.dispatch_us, now);
        }
        r.state->Complete();
        Finished(r);
        break;
      }
      case pb::ERROR: {
        Request r;
        if (!Take(h.request_id(), &r)) break;
        const Status err = InvalidArgumentError(h.error());
        r.state->Fail(err);
        for (uint64_t pid : r.piggyback) {
          Request p;
          if (Take(pid, &p)) p.state->Fail(err.Annotate("the push carrying this pull was refused"));
        }
        Finished(r);
        break;
      }
      case pb::PULL_REPLY: {
        if (h.dtype() != pb::FLOAT32) {
          LOG(ERROR) << "worker " << rank() << ": PULL_REPLY with dtype " << pb::DType_Name(h.dtype());
          break;
        }
        if (h.parts_size() == 0) {
          ReceiveWeights(h.request_id(), h.clock(), h.apply_begin_us(), h.apply_us(), msg->payload, now);
        } else {
          if (static_cast<int>(msg->payload.size()) != h.parts_size()) {
            LOG(ERROR) << "worker " << rank() << ": merged PULL_REPLY with " << h.parts_size() << " parts and "
                       << msg->payload.size() << " frames";
            break;
          }
          for (int i = 0; i < h.parts_size(); ++i) {
            const pb::Part& p = h.parts(i);
            ReceiveWeights(p.request_id(), p.clock(), p.apply_begin_us(), p.apply_us(), {msg->payload[i]}, now);
          }
        }
        break;
      }
      default:
        LOG(WARNING) << "worker " << rank() << ": unexpected " << OpName(h.op()) << " from " << from;
    }
  }

  void ReceiveWeights(uint64_t id, int64_t version, int64_t apply_begin, int64_t apply_us,
                      const std::vector<Buffer>& payload, int64_t now) {
    Request r;
    if (!Take(id, &r)) return;
    size_t bytes = 0;
    for (const Buffer& b : payload) bytes += b.size();
    if (bytes != r.length * sizeof(float)) {
      r.state->Fail(DataLossError(r.what + ": reply carries " + std::to_string(bytes) + " bytes, expected " +
                                  std::to_string(r.length * sizeof(float))));
      Finished(r);
      return;
    }
    char* out = reinterpret_cast<char*>(r.dst);
    for (const Buffer& b : payload) {
      std::memcpy(out, b.data(), b.size());
      out += b.size();
    }
    if (timeline_) {
      if (r.dispatch_us > 0) {  // An explicit pull: it queued here, then travelled.
        timeline_->Span(Lane::kQueue, r.what, r.clock, r.enqueue_us, r.dispatch_us);
        timeline_->Span(Lane::kPull, r.what, r.clock, r.dispatch_us, now);
      } else if (apply_begin > 0) {  // Rode on a push: apply, then the way back.
        timeline_->Span(Lane::kServerApply, r.what, r.clock, apply_begin, apply_begin + apply_us);
        timeline_->Span(Lane::kPull, r.what, r.clock, apply_begin + apply_us, now);
      }
    }
    r.state->Complete(version);
    Finished(r);
  }

  void FailAll(const Status& why) {
    std::map<uint64_t, Request> requests;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (abort_.ok()) abort_ = why;
      requests.swap(requests_);
    }
    for (auto& [id, r] : requests) r.state->Fail(why.Annotate(r.what));
  }

  const ClientOptions options_;
  std::unique_ptr<PriorityScheduler> scheduler_;  // Set by Start, then read-only.
  std::unique_ptr<Timeline> timeline_;            // Likewise; internally synchronized.
  std::string timeline_path_;                     // options_.timeline with {rank} filled in.
  LinkModel link_;                                // Set by Init.

  std::mutex mu_;
  bool initialized_ = false;                   // GUARDED_BY(mu_)
  bool layered_ = false;                       // Set by Init.
  std::vector<TensorSpec> tensors_;            // GUARDED_BY(mu_) until Init, then read-only.
  std::vector<uint64_t> elements_;             // Likewise.
  std::unique_ptr<ShardMap> shards_;           // Set by Init, then read-only.
  std::map<int, int> layer_index_;             // User layer -> comm layer; set by Init.
  std::vector<LayerState> layers_;             // GUARDED_BY(mu_)
  std::vector<MergeGroup> groups_;             // GUARDED_BY(mu_)
  std::vector<int> group_of_;                  // GUARDED_BY(mu_)
  bool planned_ = false;                       // GUARDED_BY(mu_)
  std::map<int64_t, ClockProfile> profiles_;   // GUARDED_BY(mu_)
  uint64_t next_request_id_ = 1;               // GUARDED_BY(mu_)
  std::map<uint64_t, Request> requests_;       // GUARDED_BY(mu_)
  Status abort_;                               // GUARDED_BY(mu_)
  std::atomic<uint64_t> push_messages_{0}, push_bytes_{0}, pull_messages_{0};
  // Last, so it is destroyed first: its threads call into the members above.
  Node node_;
};

}  // namespace

StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  if (options.credit_bytes == 0 && (options.schedule == Schedule::kPriority || options.schedule == Schedule::kFull))
    return InvalidArgumentError("--credit_bytes must be > 0 with --schedule=priority or full");
  auto client = std::make_unique<ClientImpl>(options);
  RETURN_IF_ERROR(client->Start());
  return std::unique_ptr<Client>(std::move(client));
}

}  // namespace nereus

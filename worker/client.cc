#include "nereus/client.h"

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>

#include "common/message.h"
#include "common/node.h"
#include "common/shard_map.h"

namespace nereus {

struct Handle::State {
  std::mutex mu;
  std::condition_variable cv;
  int pending = 0;         // Completions still expected.   GUARDED_BY(mu)
  bool done = false;       // GUARDED_BY(mu)
  Status status;           // GUARDED_BY(mu)
  int64_t version = std::numeric_limits<int64_t>::max();  // GUARDED_BY(mu)

  explicit State(int n) : pending(n), done(n == 0) { if (n == 0) version = 0; }

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

// Completes one unit of a push when the transport releases the gradient bytes.
struct SendGuard {
  std::shared_ptr<Handle::State> state;
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

class ClientImpl final : public Client {
 public:
  explicit ClientImpl(const ClientOptions& o) : node_(MakeNodeOptions(o)) {}

  ~ClientImpl() override {
    FailAll(AbortedError("client destroyed"));
  }

  Status Start() {
    return node_.Start(
        [this](const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) {
          OnData(from, std::move(msg), partial);
        },
        [this](const Status& why) { FailAll(why); });
  }

  int rank() const override { return node_.rank(); }
  int num_workers() const override { return node_.job().num_workers(); }
  int num_servers() const override { return node_.job().num_servers(); }
  const pb::JobConfig& job() const override { return node_.job(); }

  StatusOr<int> RegisterTensor(const TensorSpec& spec) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (initialized_) return FailedPreconditionError("RegisterTensor(\"" + spec.name + "\") after Init");
    uint64_t n = 1;
    for (int64_t d : spec.shape) {
      if (d <= 0) return InvalidArgumentError("tensor \"" + spec.name + "\" has a non-positive dimension");
      n *= static_cast<uint64_t>(d);
    }
    if (spec.shape.empty()) return InvalidArgumentError("tensor \"" + spec.name + "\" has no shape");
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
      initialized_ = true;
    }
    RETURN_IF_ERROR(node_.Barrier("nereus.model", pb::WORKER, ModelDigest()));
    if (rank() == 0) {
      std::vector<Handle> handles;
      for (size_t t = 0; t < tensors_.size(); ++t) handles.push_back(SendInit(static_cast<int>(t), sgd, initial[t]));
      for (auto& h : handles) RETURN_IF_ERROR(h.Wait().Annotate("initializing the servers"));
    }
    return node_.Barrier("nereus.init", pb::WORKER);
  }

  Handle Push(int tensor, const float* grad, int64_t clock) override {
    return Send(pb::PUSH, tensor, const_cast<float*>(grad), clock, nullptr);
  }

  Handle Pull(int tensor, float* dst, int64_t clock) override {
    return Send(pb::PULL, tensor, dst, clock, nullptr);
  }

  Status Barrier(const std::string& name) override { return node_.Barrier("user." + name, pb::WORKER); }

  Status Finish() override { return node_.Finish(); }

 private:
  struct Request {
    std::shared_ptr<Handle::State> state;
    pb::Op op;
    float* dst = nullptr;  // PULL: where the chunk goes.
    uint64_t length = 0;   // Chunk elements.
    std::string what;      // For error messages.
  };

  static NodeOptions MakeNodeOptions(const ClientOptions& o) {
    NodeOptions n;
    n.coordinator = o.coordinator;
    n.role = pb::WORKER;
    n.rank = o.rank;
    n.bind_host = o.bind_host;
    n.startup_timeout_s = o.startup_timeout_s;
    n.transport.io_threads = o.io_threads;
    n.transport.streams_per_peer = o.streams;
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

  Handle SendInit(int tensor, const pb::SgdConfig& sgd, const float* values) {
    return Send(pb::INIT_CHUNK, tensor, const_cast<float*>(values), 0, &sgd);
  }

  // One request per chunk of `tensor`, to the server holding it.
  Handle Send(pb::Op op, int tensor, float* data, int64_t clock, const pb::SgdConfig* sgd) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!initialized_) return Failed(FailedPreconditionError(std::string(OpName(op)) + " before Init"));
      if (tensor < 0 || tensor >= static_cast<int>(tensors_.size()))
        return Failed(NotFoundError("unknown tensor id " + std::to_string(tensor)));
      if (!abort_.ok()) return Failed(abort_);
    }
    const auto& chunks = shards_->chunks(tensor);
    const bool carries_data = op == pb::PUSH || op == pb::INIT_CHUNK;
    auto state = std::make_shared<Handle::State>(static_cast<int>(chunks.size()) + (carries_data ? 1 : 0));
    std::shared_ptr<SendGuard> guard;
    if (carries_data) guard = std::make_shared<SendGuard>(SendGuard{state});
    std::vector<std::pair<const Endpoint*, Message>> out;
    out.reserve(chunks.size());
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const ChunkPlacement& c : chunks) {
        Message m;
        const uint64_t id = next_request_id_++;
        m.header.set_op(op);
        m.header.set_request_id(id);
        m.header.set_tensor(tensor);
        m.header.set_chunk(c.chunk);
        m.header.set_clock(clock);
        m.header.set_priority(tensor * 1000 + c.chunk);
        if (carries_data) {
          m.header.set_dtype(pb::FLOAT32);
          m.payload.emplace_back(guard, data + c.offset, c.length * sizeof(float));
        }
        if (op == pb::INIT_CHUNK) {
          auto* meta = m.header.mutable_chunk_meta();
          meta->set_tensor(tensor);
          meta->set_chunk(c.chunk);
          meta->set_offset(c.offset);
          meta->set_length(c.length);
          meta->set_lr_mult(tensors_[tensor].lr_mult);
          meta->set_decay_mult(tensors_[tensor].decay_mult);
          meta->set_tensor_name(tensors_[tensor].name);
          *m.header.mutable_sgd() = *sgd;
        }
        Request r;
        r.state = state;
        r.op = op;
        r.dst = op == pb::PULL ? data + c.offset : nullptr;
        r.length = c.length;
        r.what = std::string(OpName(op)) + " of tensor \"" + tensors_[tensor].name + "\" chunk " + std::to_string(c.chunk);
        requests_.emplace(id, std::move(r));
        out.emplace_back(&node_.server(c.server), std::move(m));
      }
    }
    guard.reset();  // From now on only the messages in flight hold it.
    for (auto& [to, m] : out) {
      const uint64_t id = m.header.request_id();
      Status st = node_.Send(*to, std::move(m));
      if (!st.ok()) Resolve(id, st);
    }
    return Handle(state);
  }

  static Handle Failed(const Status& s) {
    auto state = std::make_shared<Handle::State>(1);
    state->Fail(s);
    return Handle(state);
  }

  void Resolve(uint64_t id, const Status& st, int64_t version = -1) {
    std::shared_ptr<Handle::State> state;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = requests_.find(id);
      if (it == requests_.end()) return;
      state = std::move(it->second.state);
      requests_.erase(it);
    }
    if (st.ok()) {
      state->Complete(version);
    } else {
      state->Fail(st);
    }
  }

  void OnData(const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) {
    if (!msg.ok()) {
      LOG(ERROR) << "worker " << rank() << ": bad message from " << from << ": " << msg.status().message();
      if (partial.request_id() != 0) Resolve(partial.request_id(), msg.status());
      return;
    }
    const pb::Header& h = msg->header;
    switch (h.op()) {
      case pb::PUSH_ACK:
      case pb::INIT_ACK:
        Resolve(h.request_id(), Status::OK());
        break;
      case pb::ERROR:
        Resolve(h.request_id(), InvalidArgumentError(h.error()));
        break;
      case pb::PULL_REPLY: {
        Request r;
        {
          std::lock_guard<std::mutex> lock(mu_);
          auto it = requests_.find(h.request_id());
          if (it == requests_.end()) break;
          r = std::move(it->second);
          requests_.erase(it);
        }
        if (msg->payload_bytes() != r.length * sizeof(float) || h.dtype() != pb::FLOAT32) {
          r.state->Fail(DataLossError(r.what + ": reply carries " + std::to_string(msg->payload_bytes()) +
                                      " bytes, expected " + std::to_string(r.length * sizeof(float))));
          break;
        }
        char* out = reinterpret_cast<char*>(r.dst);
        for (const Buffer& b : msg->payload) {
          std::memcpy(out, b.data(), b.size());
          out += b.size();
        }
        r.state->Complete(h.clock());
        break;
      }
      default:
        LOG(WARNING) << "worker " << rank() << ": unexpected " << OpName(h.op()) << " from " << from;
    }
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

  std::mutex mu_;
  bool initialized_ = false;                   // GUARDED_BY(mu_)
  std::vector<TensorSpec> tensors_;            // GUARDED_BY(mu_) until Init, then read-only.
  std::vector<uint64_t> elements_;             // Likewise.
  std::unique_ptr<ShardMap> shards_;           // Set by Init, then read-only.
  uint64_t next_request_id_ = 1;               // GUARDED_BY(mu_)
  std::map<uint64_t, Request> requests_;       // GUARDED_BY(mu_)
  Status abort_;                               // GUARDED_BY(mu_)
  // Last, so it is destroyed first: its threads call into the members above.
  Node node_;
};

}  // namespace

StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  auto client = std::make_unique<ClientImpl>(options);
  RETURN_IF_ERROR(client->Start());
  return std::unique_ptr<Client>(std::move(client));
}

}  // namespace nereus

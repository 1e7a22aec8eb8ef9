// ClientImpl: the Client facade. It wires the parts together and owns them;
// the work is done by:
//   TensorRegistry  tensors and their chunks      (tensor_registry.h)
//   RequestTable    outstanding requests, abort   (request_table.h)
//   MessageBuilder  chunks -> PUSH/PULL/INIT      (message_builder.h)
//   ServerQueues    per-server priority queues    (server_queues.h)
//   LayerPipeline   GradientsReady / WaitWeights  (layer_pipeline.h)
//   MergeProfiler   MG-WFBP timing and groups     (merge_profiler.h)
//   ReplyRouter     replies -> handles            (reply_router.h)
// and the Node (common/node.h) for membership, barriers and the transport.
#include "nereus/client.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/node.h"
#include "worker/client/handle_state.h"
#include "worker/client/layer_pipeline.h"
#include "worker/client/merge_profiler.h"
#include "worker/client/message_builder.h"
#include "worker/client/reply_router.h"
#include "worker/client/request_table.h"
#include "worker/client/server_queues.h"
#include "worker/client/tensor_registry.h"
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

Client::~Client() = default;

namespace {

NodeOptions MakeNodeOptions(const ClientOptions& o) {
  NodeOptions n;
  n.coordinator = o.coordinator;
  n.role = pb::WORKER;
  n.rank = o.rank;
  n.bind_host = o.bind_host;
  n.startup_timeout_s = o.startup_timeout_s;
  n.resume = o.resume;
  n.transport.io_threads = o.io_threads;
  n.transport.streams_per_peer = o.schedule == Schedule::kFull ? std::max(1, o.streams) : 1;
  return n;
}

// Public methods run on user threads; Node's threads call OnData (via the
// ReplyRouter) and FailAll (via RequestTable).
class ClientImpl final : public Client {
 public:
  explicit ClientImpl(const ClientOptions& o)
      : options_(o),
        queues_(&node_, &requests_),
        builder_(o, &tensors_, &requests_),
        pipeline_(o, &tensors_, &requests_, &builder_, &queues_),
        router_(&node_, &requests_, &queues_),
        node_(MakeNodeOptions(o)) {}

  ~ClientImpl() override { requests_.FailAll(AbortedError("client destroyed")); }

  Status Start() {
    RETURN_IF_ERROR(node_.Start(
        [this](const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) {
          router_.OnData(from, std::move(msg), partial);
        },
        [this](const Status& why) { requests_.FailAll(why); }));
    const bool prioritized = options_.schedule == Schedule::kPriority || options_.schedule == Schedule::kFull;
    queues_.Start(node_.job().num_servers(), prioritized ? options_.credit_bytes : 0);
    if (!options_.timeline.empty()) {
      timeline_path_ = options_.timeline;
      const size_t at = timeline_path_.find("{rank}");
      if (at != std::string::npos) timeline_path_.replace(at, 6, std::to_string(node_.rank()));
      timeline_ = std::make_unique<Timeline>(node_.rank(), options_.timeline_every);
      router_.set_timeline(timeline_.get());
    }
    return Status::OK();
  }

  int rank() const override { return node_.rank(); }
  int num_workers() const override { return node_.job().num_workers(); }
  int num_servers() const override { return node_.job().num_servers(); }
  const pb::JobConfig& job() const override { return node_.job(); }

  StatusOr<int> RegisterTensor(const TensorSpec& spec) override { return tensors_.Register(spec); }

  Status Init(const pb::SgdConfig& sgd, const std::vector<const float*>& initial) override {
    RETURN_IF_ERROR(pipeline_.Initialize(initial.size(), node_.job().chunk_bytes(), num_servers(), rank()));
    RETURN_IF_ERROR(node_.Barrier("nereus.model", pb::WORKER, tensors_.Digest()));
    if (rank() == 0) {
      std::vector<Handle> handles;
      for (int t = 0; t < tensors_.size(); ++t) handles.push_back(SendInit(t, sgd, initial[t]));
      for (auto& h : handles) RETURN_IF_ERROR(h.Wait().Annotate("initializing the servers"));
    }
    RETURN_IF_ERROR(node_.Barrier("nereus.init", pb::WORKER));
    const bool layered = pipeline_.layered();
    if (options_.schedule == Schedule::kFull && options_.merge && layered) {
      auto link = CalibrateLink(&node_, &requests_);
      if (!link.ok()) return link.status().Annotate("measuring the link for merging");
      pipeline_.SetLink(*link);
      LOG(INFO) << "worker " << rank() << ": link model alpha " << link->alpha * 1e6 << " us, beta "
                << link->beta * 1e9 << " ns/byte (" << 8e-9 / std::max(link->beta, 1e-15) << " Gbit/s)";
    }
    if (layered && options_.schedule != Schedule::kSequential) {
      // Prefetch clock 0's weights, the input layer first.
      for (int l = 0; l < pipeline_.num_layers(); ++l) pipeline_.Prefetch(l);
    }
    return Status::OK();
  }

  Handle Push(int tensor, const float* grad, int64_t clock) override {
    Status st = tensors_.CheckTensor(tensor, "PUSH");
    if (st.ok()) st = requests_.aborted();
    if (!st.ok()) return FailedHandle(st);
    std::vector<ChunkRef> refs = tensors_.Refs(tensor);
    StatePtr push = std::make_shared<Handle::State>(static_cast<int>(refs.size()) + 1);
    auto guard = std::make_shared<SendGuard>(push);
    std::vector<QueuedMessage> work;
    builder_.BuildPushes(refs, {grad}, {tensor}, clock, /*pull_of=*/nullptr, push, guard,
                         pipeline_.TensorPriority(tensor), &work);
    queues_.Submit(std::move(work));
    return Handle(push);
  }

  Handle Pull(int tensor, float* dst, int64_t clock) override {
    Status st = tensors_.CheckTensor(tensor, "PULL");
    if (st.ok()) st = requests_.aborted();
    if (!st.ok()) return FailedHandle(st);
    std::vector<ChunkRef> refs = tensors_.Refs(tensor);
    StatePtr pull = std::make_shared<Handle::State>(static_cast<int>(refs.size()));
    std::vector<QueuedMessage> work;
    builder_.BuildPulls(refs, dst, clock, pull, pipeline_.TensorPriority(tensor), &work);
    queues_.Submit(std::move(work));
    return Handle(pull);
  }

  Status GradientsReady(int layer, int64_t clock) override { return pipeline_.GradientsReady(layer, clock); }
  Status WaitWeights(int layer, int64_t clock) override { return pipeline_.WaitWeights(layer, clock); }

  void TraceSpan(const std::string& name, int64_t clock, int64_t begin_us, int64_t end_us) override {
    if (timeline_) timeline_->Span(Lane::kCompute, name, clock, begin_us, end_us);
  }

  ClientStats stats() const override { return queues_.stats(); }

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
  Handle SendInit(int tensor, const pb::SgdConfig& sgd, const float* values) {
    const int chunks = static_cast<int>(tensors_.chunks(tensor).size());
    StatePtr state = std::make_shared<Handle::State>(chunks + 1);
    auto guard = std::make_shared<SendGuard>(state);
    std::vector<QueuedMessage> work;
    builder_.BuildInit(tensor, sgd, values, state, guard, &work);
    queues_.Submit(std::move(work));
    return Handle(state);
  }

  const ClientOptions options_;
  std::unique_ptr<Timeline> timeline_;  // Set by Start, then read-only; internally synchronized.
  std::string timeline_path_;           // options_.timeline with {rank} filled in.
  TensorRegistry tensors_;
  RequestTable requests_;
  ServerQueues queues_;
  MessageBuilder builder_;
  LayerPipeline pipeline_;
  ReplyRouter router_;
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

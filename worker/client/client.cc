// ClientImpl: the Client facade. It wires the parts together and owns them;
// the work is done by:
//   TensorRegistry  tensors and their partitions      (tensor_registry.h)
//   RequestTable    outstanding requests, abort   (request_table.h)
//   MessageBuilder  partitions -> PUSH/PULL/INIT      (message_builder.h)
//   ServerQueues    per-server priority queues    (server_queues.h)
//   LayerPipeline   GradientsReady / WaitWeights  (layer_pipeline.h)
//   MergeProfiler   MG-WFBP timing and groups     (merge_profiler.h)
//   ReplyRouter     replies -> handles            (reply_router.h)
//   FactorExchange  sufficient factors among the workers (factor_exchange.h)
// and the Node (common/net/node.h) for membership, barriers and the transport.
#include "nereus/client.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/base/mutex.h"
#include "common/net/curve_keys.h"
#include "common/net/node.h"
#include "worker/client/client_internal.h"
#include "worker/client/factor_exchange.h"
#include "worker/client/handle_state.h"
#include "worker/client/host_aggregator.h"
#include "worker/client/layer_pipeline.h"
#include "worker/client/merge_profiler.h"
#include "worker/client/message_builder.h"
#include "worker/client/options_proto.h"
#include "worker/client/reply_router.h"
#include "worker/client/request_table.h"
#include "worker/client/server_queues.h"
#include "worker/client/sfb_choice.h"
#include "worker/client/tensor_registry.h"
#include "worker/client/timeline.h"

namespace nereus {

Client::~Client() = default;

static Status UnimplementedOrFailed(const char* what, int tensor, int64_t clock) {
  return FailedPreconditionError(std::string(what) + " of tensor " + std::to_string(tensor) + " at clock " +
                                 std::to_string(clock) + ": this FactorApplier cannot switch a tensor's path");
}

Status FactorApplier::BeginFactors(int tensor, int64_t clock, const float*) {
  return UnimplementedOrFailed("BeginFactors", tensor, clock);
}
Status FactorApplier::EndFactors(int tensor, int64_t clock, float*, float*) {
  return UnimplementedOrFailed("EndFactors", tensor, clock);
}

StatusOr<std::map<std::string, std::pair<double, double>>> ParseInjectedCosts(const std::string& text) {
  std::map<std::string, std::pair<double, double>> out;
  size_t at = 0;
  while (!text.empty() && at <= text.size()) {
    const size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    const size_t c1 = item.find(':');
    const size_t c2 = c1 == std::string::npos ? std::string::npos : item.find(':', c1 + 1);
    char* end1 = nullptr;
    char* end2 = nullptr;
    const std::string ps = c2 == std::string::npos ? "" : item.substr(c1 + 1, c2 - c1 - 1);
    const std::string sfb = c2 == std::string::npos ? "" : item.substr(c2 + 1);
    const double a = std::strtod(ps.c_str(), &end1), b = std::strtod(sfb.c_str(), &end2);
    if (c1 == 0 || c2 == std::string::npos || ps.empty() || sfb.empty() || *end1 != '\0' || *end2 != '\0' ||
        !(a >= 0) || !(b >= 0))
      return InvalidArgumentError("injected HybComm costs: \"" + item + "\" is not name:ps_ms:sfb_ms");
    out[item.substr(0, c1)] = {a * 1e-3, b * 1e-3};
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

namespace {

NodeOptions MakeNodeOptions(const ClientOptions& o, std::optional<CurveKeys> curve) {
  NodeOptions n;
  n.transport.curve = std::move(curve);
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
  ClientImpl(const ClientOptions& o, const ClientInternals& internals, std::optional<CurveKeys> curve)
      : options_(o),
        internals_(internals),
        queues_(&node_, &requests_),
        builder_(o, &tensors_, &requests_),
        factors_(
            &requests_, [this](const Endpoint& to, Message m) { return node_.Send(to, std::move(m)); },
            [this](const Endpoint& from, int* rank) {
              pb::Role role;
              return node_.Lookup(from, &role, rank) && role == pb::WORKER;
            }),
        pipeline_(o, &tensors_, &requests_, &builder_, &queues_, &factors_),
        aggregator_(&node_, &queues_, &tensors_, &requests_),
        router_(&node_, &requests_, &queues_),
        node_(MakeNodeOptions(o, std::move(curve))) {
    router_.set_factors(&factors_);
    router_.set_aggregator(&aggregator_);
  }

  ~ClientImpl() override {
    requests_.FailAll(AbortedError("client destroyed"));
    factors_.Abort(AbortedError("client destroyed"));
  }

  Status Start() {
    RETURN_IF_ERROR(node_.Start([this](const Endpoint& from, StatusOr<Message> msg,
                                       const pb::Header& partial) { router_.OnData(from, std::move(msg), partial); },
                                [this](const Status& why) {
                                  requests_.FailAll(why);
                                  factors_.Abort(why);
                                }));
    job_ = JobInfoFromProto(node_.job());
    const bool prioritized = options_.schedule == Schedule::kPriority || options_.schedule == Schedule::kFull;
    queues_.Start(node_.job().num_servers(), node_.job().num_workers(), prioritized ? options_.credit_bytes : 0,
                  options_.batch_bytes);
    // Host-local aggregation: the host's first worker sums its workers'
    // gradients; the others push to it (docs/HOSTAGG.md).
    const std::vector<int> group = node_.HostGroup(node_.rank());
    if (group.size() > 1) {
      std::string list;
      for (int r : group) list += (list.empty() ? "" : ", ") + std::to_string(r);
      if (group.front() == node_.rank()) {
        queues_.set_aggregator(&aggregator_);
        aggregator_.Configure(group, node_.job().num_servers());
        LOG(INFO) << "worker " << node_.rank() << ": host-local aggregation: this worker sums the gradients of its "
                  << "host's workers {" << list << "} and pushes them for all";
      } else {
        builder_.set_push_via(node_.job().num_servers() + group.front());
        LOG(INFO) << "worker " << node_.rank() << ": host-local aggregation: this worker's gradients go to worker "
                  << group.front() << ", which pushes its host's (workers {" << list << "})";
      }
    }
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
  const JobInfo& job() const override { return job_; }

  StatusOr<int> RegisterTensor(const TensorSpec& spec) override { return tensors_.Register(spec); }

  Status Init(const SgdConfig& config, const std::vector<const float*>& initial) override {
    const pb::SgdConfig sgd = SgdConfigToProto(config);
    RETURN_IF_ERROR(pipeline_.Initialize(initial.size(), node_.job().partition_bytes(), num_servers(), rank(), job_));
    RETURN_IF_ERROR(node_.Barrier("nereus.model", pb::WORKER, tensors_.Digest()));
    if (rank() == 0) {
      std::vector<Handle> handles;
      for (int t = 0; t < tensors_.size(); ++t) handles.push_back(SendInit(t, sgd, initial[t]));
      for (auto& h : handles) RETURN_IF_ERROR(h.Wait().Annotate("initializing the servers"));
    }
    RETURN_IF_ERROR(node_.Barrier("nereus.init", pb::WORKER));
    // After the servers are initialized, so that the link is timed by every
    // worker at once, as merging has always timed it.
    RETURN_IF_ERROR(ChooseSfb(sgd));
    const bool layered = pipeline_.layered();
    const bool merging = options_.schedule == Schedule::kFull && options_.merge && layered;
    if (merging && options_.merge_alpha_s > 0 && options_.merge_beta_s_per_byte > 0) {
      pipeline_.SetLink(LinkModel{options_.merge_alpha_s, options_.merge_beta_s_per_byte});
      LOG(INFO) << "worker " << rank() << ": link model given: alpha " << options_.merge_alpha_s * 1e6 << " us, beta "
                << options_.merge_beta_s_per_byte * 1e9 << " ns/byte";
    } else if (merging) {
      auto fit = MeasureLink();
      if (!fit.ok()) return fit.status().Annotate("measuring the link for merging");
      const LinkModel& link = fit->model;
      pipeline_.SetLink(link);
      LOG(INFO) << "worker " << rank() << ": link model alpha " << link.alpha * 1e6 << " us, beta " << link.beta * 1e9
                << " ns/byte (" << 8e-9 / std::max(link.beta, 1e-15) << " Gbit/s; smallest round trip "
                << fit->min_round_trip * 1e6 << " us)";
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
    std::vector<PartitionRef> refs = tensors_.Refs(tensor);
    StatePtr push = std::make_shared<Handle::State>(static_cast<int>(refs.size()) + 1);
    auto guard = std::make_shared<SendGuard>(push);
    std::vector<QueuedMessage> work;
    builder_.BuildPushes(refs, {grad}, {tensor}, clock, /*pull_of=*/nullptr, push, guard,
                         pipeline_.TensorPriority(tensor), &work);
    queues_.Submit(std::move(work));
    return MakeHandle(push);
  }

  Handle Pull(int tensor, float* dst, int64_t clock) override {
    Status st = tensors_.CheckTensor(tensor, "PULL");
    if (st.ok()) st = requests_.aborted();
    if (!st.ok()) return FailedHandle(st);
    std::vector<PartitionRef> refs = tensors_.Refs(tensor);
    StatePtr pull = std::make_shared<Handle::State>(static_cast<int>(refs.size()));
    std::vector<QueuedMessage> work;
    builder_.BuildPulls(refs, dst, clock, pull, pipeline_.TensorPriority(tensor), &work);
    queues_.Submit(std::move(work));
    return MakeHandle(pull);
  }

  Status GradientsReady(int layer, int64_t clock) override { return pipeline_.GradientsReady(layer, clock); }
  Status WaitWeights(int layer, int64_t clock) override { return pipeline_.WaitWeights(layer, clock); }

  void TraceSpan(const std::string& name, int64_t clock, int64_t begin_us, int64_t end_us, TraceLane lane) override {
    if (!timeline_) return;
    const Lane to = lane == TraceLane::kDeviceToHost   ? Lane::kDeviceToHost
                    : lane == TraceLane::kHostToDevice ? Lane::kHostToDevice
                                                       : Lane::kCompute;
    timeline_->Span(to, name, clock, begin_us, end_us);
  }

  ClientStats stats() const override {
    ClientStats s = queues_.stats();
    s.host_summed_bytes = aggregator_.summed_bytes();
    s.host_relayed_bytes = aggregator_.relayed_bytes();
    s.factor_bytes_received = factors_.received_bytes();
    s.factor_apply_us = factors_.apply_us();
    pipeline_.CountSfb(&s);
    return s;
  }

  std::vector<int> sfb_tensors() const override { return pipeline_.SfbTensors(); }
  bool SfbAt(int tensor, int64_t clock) const override { return pipeline_.SfbAt(tensor, clock); }

  Status Barrier(const std::string& name) override { return node_.Barrier("user." + name, pb::WORKER); }

  Status Broadcast(const std::string& name, float* values, size_t n, int root) override {
    if (root < 0 || root >= num_workers())
      return InvalidArgumentError("Broadcast \"" + name + "\" from worker " + std::to_string(root) + ": the job has " +
                                  std::to_string(num_workers()) + " worker(s)");
    // The barrier's element-wise minimum: the root's values against +inf.
    std::vector<double> v(n, std::numeric_limits<double>::infinity());
    if (rank() == root) {
      for (size_t i = 0; i < n; ++i) {
        if (std::isnan(values[i]))
          return InvalidArgumentError("Broadcast \"" + name + "\": element " + std::to_string(i) + " is NaN");
        v[i] = values[i];
      }
    }
    RETURN_IF_ERROR(node_.Barrier("user.broadcast." + name, pb::WORKER, 0, &v));
    if (v.size() != n)
      return InternalError("Broadcast \"" + name + "\" came back with " + std::to_string(v.size()) + " values, not " +
                           std::to_string(n));
    for (size_t i = 0; i < n; ++i) values[i] = static_cast<float>(v[i]);
    return Status::OK();
  }

  Status Finish() override {
    if (timeline_) {
      Status st = timeline_->Write(timeline_path_);
      if (!st.ok())
        LOG(ERROR) << st;
      else
        LOG(INFO) << "worker " << rank() << ": wrote " << timeline_->size() << " spans to " << timeline_path_;
    }
    return node_.Finish();
  }

  void Fail(const Status& why) override { node_.ReportFailure(why); }

  // For the C interface's bounded waits (client_internal.h).
  std::string DescribeAwaited(const Handle& h) const {
    return requests_.DescribeOutstanding(HandleAccess::StateOf(h), num_servers());
  }

 private:
  // The PING fit of the link (CalibrateLink), timed once per Init, for
  // HybComm and merging. Init's thread only.
  StatusOr<LinkFit> MeasureLink() {
    if (!link_fit_) {
      auto fit = CalibrateLink(&node_, &requests_);
      if (!fit.ok()) return fit.status();
      if (fit->fell_back || fit->alpha_bounded) LOG(WARNING) << "worker " << rank() << ": " << fit->note;
      link_fit_ = std::move(fit).value();
    }
    return *link_fit_;
  }

  // HybComm's choice (sfb_choice.h), then the FactorExchange and the
  // LayerPipeline configured for it. Every worker must send the same tensors
  // as factors and apply them with the same solver settings (the digest
  // covers both), and be ready for its peers' factors, before any sends
  // factors: the "nereus.sfb" barrier.
  Status ChooseSfb(const pb::SgdConfig& sgd) {
    SfbChoice choice(options_, &node_, &tensors_, [this] { return MeasureLink(); });
    ASSIGN_OR_RETURN(SfbPlan plan, choice.Choose(sgd, pipeline_.layered()));
    if (plan.digest == 0) return Status::OK();  // No tensor has factors.
    const int64_t start = node_.job().start_clock();
    std::vector<bool> active;
    for (const FactorExchange::TensorInfo& info : plan.infos) active.push_back(plan.start_sfb[info.id]);
    const bool any = !plan.infos.empty();
    factors_.Configure(sgd, num_workers(), rank(), num_servers(), std::move(plan.infos),
                       /*rebuild=*/!internals_.sfb_emulated_rebuild, active, start);
    LayerPipeline::SfbSetup setup;
    setup.start_clock = start;
    setup.start_sfb = plan.start_sfb;
    setup.trials = plan.trials;
    setup.trials_config.start_clock = start;
    setup.trials_config.warmup = std::max(5, options_.merge_profile_iterations + 2);
    setup.trials_config.measure = std::max(1, options_.sfb_trial_clocks);
    setup.trials_config.trust_ratio = options_.sfb_trial_trust_ratio;
    setup.trial_layers = plan.trial_layers;
    setup.forced = plan.forced;
    setup.timeline = timeline_.get();
    for (const auto& [name, cost] : internals_.sfb_injected_costs) {
      bool found = false;
      for (int t = 0; t < tensors_.size(); ++t)
        if (tensors_.spec(t).name == name) {
          setup.injected_costs[t] = cost;
          found = true;
        }
      if (!found) return InvalidArgumentError("injected HybComm costs for \"" + name + "\", which is no tensor");
    }
    if (plan.trials) {
      setup.agree = [this](const std::string& name, std::vector<double>* values) {
        return node_.Barrier(name, pb::WORKER, 0, values);
      };
      // The prior that orders the trials: the start-up model, with the
      // backward below each layer (the job's smallest) hiding its rebuild.
      const int rank = this->rank(), workers = num_workers(), servers = num_servers();
      const HybCommRates rates = plan.rates;
      const std::vector<FcLayerShape> shapes = plan.shapes;
      const SfbMode mode = plan.mode;
      setup.pricer = [=](const std::vector<double>& overlaps, std::vector<TrialLayer>* layers) {
        std::vector<FcLayerShape> with = shapes;
        for (size_t i = 0; i < with.size() && i < overlaps.size(); ++i) with[i].overlap_s = overlaps[i];
        auto priced = DecideHybComm(mode, workers, servers, pb::BSP, rates, with);
        if (!priced.ok()) return;  // Unpriced (rates unknown): the order stays.
        for (size_t i = 0; i < layers->size() && i < priced->size(); ++i) {
          (*layers)[i].ps_s = (*priced)[i].priced ? (*priced)[i].ps_s : 0;
          (*layers)[i].sfb_s = (*priced)[i].priced ? (*priced)[i].sfb_s : 0;
        }
        if (rank == 0)
          LOG(INFO) << "worker 0: HybComm's prior for the trials, the rebuild hidden by the backward below each "
                       "layer (the job's smallest measure of it): "
                    << FormatHybCommTable(mode, workers, servers, rates, *priced);
      };
    }
    pipeline_.ConfigureSfb(std::move(setup));
    // Where paths may change, the servers must know which partitions the
    // workers update from the start (a switch back hands them back).
    RETURN_IF_ERROR(pipeline_.LendAtStart().Wait().Annotate("lending the tensors sent as factors from the start"));
    return node_.Barrier("nereus.sfb", pb::WORKER, plan.digest, nullptr,
                         any ? "sufficient factors rebuilt by " + plan.engine : "");
  }

  Handle SendInit(int tensor, const pb::SgdConfig& sgd, const float* values) {
    const int partitions = static_cast<int>(tensors_.partitions(tensor).size());
    StatePtr state = std::make_shared<Handle::State>(partitions + 1);
    auto guard = std::make_shared<SendGuard>(state);
    std::vector<QueuedMessage> work;
    builder_.BuildInit(tensor, sgd, values, state, guard, &work);
    queues_.Submit(std::move(work));
    return MakeHandle(state);
  }

  const ClientOptions options_;
  const ClientInternals internals_;
  std::unique_ptr<Timeline> timeline_;  // Set by Start, then read-only; internally synchronized.
  std::string timeline_path_;           // options_.timeline with {rank} filled in.
  JobInfo job_;                         // Set by Start, then read-only.
  std::optional<LinkFit> link_fit_;     // Init's thread only: MeasureLink's.
  TensorRegistry tensors_;
  RequestTable requests_;
  ServerQueues queues_;
  MessageBuilder builder_;
  FactorExchange factors_;
  LayerPipeline pipeline_;
  HostAggregator aggregator_;
  ReplyRouter router_;
  // Last, so it is destroyed first: its threads call into the members above.
  Node node_;
};

}  // namespace

StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  return ConnectClient(options, ClientInternals());
}

std::string DescribeAwaited(const Client& client, const Handle& handle) {
  return static_cast<const ClientImpl&>(client).DescribeAwaited(handle);
}

StatusOr<std::unique_ptr<Client>> ConnectClient(const ClientOptions& options, const ClientInternals& internals) {
  if (options.credit_bytes == 0 && (options.schedule == Schedule::kPriority || options.schedule == Schedule::kFull))
    return InvalidArgumentError("--credit_bytes must be > 0 with --schedule=priority or full");
  for (const auto& [name, v] : {std::pair<const char*, double>{"--sfb_rebuild_gflops", options.sfb_rebuild_gflops},
                                {"--sfb_update_gbytes", options.sfb_update_gbytes},
                                {"--sfb_apply_gbytes", options.sfb_apply_gbytes},
                                {"--sfb_link_gbit", options.sfb_link_gbit}})
    if (!(v >= 0))
      return InvalidArgumentError(std::string(name) + " must be >= 0 (0: measured at Init), got " + std::to_string(v));
  if (!(options.sfb_trial_trust_ratio == 0 || options.sfb_trial_trust_ratio > 1))
    return InvalidArgumentError("--sfb_trial_trust_ratio must be 0 (try every layer) or more than 1, got " +
                                std::to_string(options.sfb_trial_trust_ratio));
  std::optional<CurveKeys> curve;
  if (!options.curve_dir.empty()) {
    if (options.rank < 0)
      return InvalidArgumentError("--curve_dir needs an explicit --rank (it picks the worker's key pair)");
    ASSIGN_OR_RETURN(curve, LoadCurveKeys(options.curve_dir, CurveKeyName(pb::WORKER, options.rank)));
  }
  auto client = std::make_unique<ClientImpl>(options, internals, std::move(curve));
  RETURN_IF_ERROR(client->Start());
  return std::unique_ptr<Client>(std::move(client));
}

}  // namespace nereus

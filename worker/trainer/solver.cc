#include "worker/trainer/solver.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "common/base/clock.h"
#include "common/update/sgd.h"
#include "worker/trainer/hdf5_snapshot.h"
#include "worker/trainer/math/math_functions.h"
#include "worker/trainer/prototxt.h"

#ifdef NEREUS_HAVE_CUDA
#include "worker/trainer/gpu/solver_step.h"
#include "worker/trainer/math/gpu_math_functions.h"
#endif

namespace nereus {
namespace {

using Clock = SteadyClock;

}  // namespace

StatusOr<pb::SolverType> SolverTypeOf(const caffe::SolverParameter& param) {
  if (param.has_solver_type()) {
    // Caffe's UpgradeSolverType: the deprecated enum names the type.
    if (param.has_type()) {
      return InvalidArgumentError("the solver gives both the old solver_type (" +
                                  caffe::SolverParameter::SolverType_Name(param.solver_type()) + ") and type (\"" +
                                  param.type() + "\"); give only type");
    }
    using Old = caffe::SolverParameter;
    static const std::map<Old::SolverType, pb::SolverType> kTypes = {
        {Old::SGD, pb::SOLVER_SGD},         {Old::NESTEROV, pb::SOLVER_NESTEROV}, {Old::ADAGRAD, pb::SOLVER_ADAGRAD},
        {Old::RMSPROP, pb::SOLVER_RMSPROP}, {Old::ADADELTA, pb::SOLVER_ADADELTA}, {Old::ADAM, pb::SOLVER_ADAM}};
    const auto it = kTypes.find(param.solver_type());
    if (it != kTypes.end()) return it->second;
    return InvalidArgumentError("unknown solver_type " + std::to_string(static_cast<int>(param.solver_type())));
  }
  return SolverTypeFromName(param.type());
}

pb::SgdConfig SgdConfigFromSolverParameter(const caffe::SolverParameter& param) {
  pb::SgdConfig c;
  auto type = SolverTypeOf(param);
  c.set_type(type.ok() ? *type : pb::SOLVER_SGD);
  c.set_delta(param.delta());
  c.set_momentum2(param.momentum2());
  c.set_rms_decay(param.rms_decay());
  c.set_base_lr(param.base_lr());
  c.set_lr_policy(param.lr_policy());
  c.set_gamma(param.gamma());
  c.set_power(param.power());
  c.set_stepsize(param.stepsize());
  for (int v : param.stepvalue()) c.add_stepvalue(v);
  c.set_max_iter(param.max_iter());
  c.set_momentum(param.momentum());
  c.set_weight_decay(param.weight_decay());
  c.set_regularization_type(param.regularization_type());
  return c;
}

float TestResult::Score(const std::string& name) const {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return mean_scores[i];
  }
  return std::numeric_limits<float>::quiet_NaN();
}

Solver::Solver(const caffe::SolverParameter& param, ParameterSync* sync, SolverOptions options)
    : param_(param), sgd_(SgdConfigFromSolverParameter(param)), sync_(sync), options_(std::move(options)) {}

StatusOr<std::unique_ptr<Solver>> Solver::Create(const caffe::SolverParameter& param, const LayerRegistry& registry,
                                                 ParameterSync* sync, SolverOptions options) {
  std::unique_ptr<Solver> solver(new Solver(param, sync, std::move(options)));
  RETURN_IF_ERROR(solver->Init(registry));
  return solver;
}

StatusOr<std::unique_ptr<Solver>> Solver::CreateFromFile(const std::string& path, const LayerRegistry& registry,
                                                         ParameterSync* sync, SolverOptions options) {
  caffe::SolverParameter param;
  RETURN_IF_ERROR(ReadSolverParameterFromTextFile(path, &param));
  return Create(param, registry, sync, std::move(options));
}

Status Solver::Init(const LayerRegistry& registry) {
  const caffe::SolverParameter& p = param_;
  {
    auto type = SolverTypeOf(p);
    if (!type.ok()) return type.status().Annotate("solver");
  }
  if (p.iter_size() < 1) return InvalidArgumentError("iter_size must be >= 1, got " + std::to_string(p.iter_size()));
  if (p.average_loss() < 1)
    return InvalidArgumentError("average_loss must be >= 1, got " + std::to_string(p.average_loss()));
  if (p.max_iter() < 0) return InvalidArgumentError("max_iter must be >= 0");
  if (p.snapshot() < 0) return InvalidArgumentError("snapshot must be >= 0");
  if (p.snapshot() > 0 && p.snapshot_prefix().empty()) {
    return InvalidArgumentError("snapshot is specified but snapshot_prefix is not");
  }
  RETURN_IF_ERROR(ValidateSgdConfig(sgd_).Annotate("solver"));
  uint64_t seed = p.random_seed() >= 0 ? static_cast<uint64_t>(p.random_seed())
                                       : static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  RETURN_IF_ERROR(ChooseDevice(seed));
  gpu::ScopedDevice scope(device_.get());

  // Train net (Caffe's InitTrainNet).
  const int num_train_nets = p.has_net() + p.has_net_param() + p.has_train_net() + p.has_train_net_param();
  const std::string field_names = "net, net_param, train_net, train_net_param";
  if (num_train_nets < 1) return InvalidArgumentError("the solver must name a train net with one of: " + field_names);
  if (num_train_nets > 1) return InvalidArgumentError("the solver names more than one train net among: " + field_names);
  caffe::NetParameter net_param;
  PrototxtLocations locations;
  bool have_locations = false;
  if (p.has_train_net_param()) net_param.CopyFrom(p.train_net_param());
  if (p.has_train_net()) {
    RETURN_IF_ERROR(ReadNetParameterFromTextFile(p.train_net(), &net_param, &locations));
    have_locations = true;
  }
  if (p.has_net_param()) net_param.CopyFrom(p.net_param());
  if (p.has_net()) {
    RETURN_IF_ERROR(ReadNetParameterFromTextFile(p.net(), &net_param, &locations));
    have_locations = true;
  }
  caffe::NetState train_state;
  train_state.set_phase(caffe::TRAIN);
  train_state.MergeFrom(net_param.state());
  train_state.MergeFrom(p.train_state());
  *net_param.mutable_state() = train_state;
  NetOptions net_options;
  net_options.seed = seed;
  net_options.device = device_.get();
  net_options.locations = have_locations ? &locations : nullptr;
  ASSIGN_OR_RETURN(net_, Net::Create(net_param, registry, net_options));

  // Test nets (Caffe's InitTestNets).
  const int num_generic_nets = p.has_net_param() + p.has_net();
  const int num_test_net_params = p.test_net_param_size();
  const int num_test_net_files = p.test_net_size();
  const int num_test_nets = num_test_net_params + num_test_net_files;
  if (num_generic_nets ? p.test_iter_size() < num_test_nets : p.test_iter_size() != num_test_nets) {
    return InvalidArgumentError("test_iter must be specified once for each test net");
  }
  const int num_generic_net_instances = p.test_iter_size() - num_test_nets;
  const int num_test_net_instances = num_test_nets + num_generic_net_instances;
  if (p.test_state_size() > 0 && p.test_state_size() != num_test_net_instances) {
    return InvalidArgumentError("test_state must be unspecified or specified once per test net");
  }
  if (num_test_net_instances > 0 && p.test_interval() <= 0) {
    return InvalidArgumentError("test nets are configured (test_iter) but test_interval is not > 0");
  }
  for (int i = 0; i < num_test_net_instances; ++i) {
    caffe::NetParameter test_param;
    PrototxtLocations test_locations;
    bool test_have_locations = false;
    if (i < num_test_net_params) {
      test_param.CopyFrom(p.test_net_param(i));
    } else if (i < num_test_nets) {
      RETURN_IF_ERROR(ReadNetParameterFromTextFile(p.test_net(i - num_test_net_params), &test_param, &test_locations));
      test_have_locations = true;
    } else if (p.has_net_param()) {
      test_param.CopyFrom(p.net_param());
    } else {
      RETURN_IF_ERROR(ReadNetParameterFromTextFile(p.net(), &test_param, &test_locations));
      test_have_locations = true;
    }
    caffe::NetState state;
    state.set_phase(caffe::TEST);
    state.MergeFrom(test_param.state());
    if (p.test_state_size() > 0) state.MergeFrom(p.test_state(i));
    *test_param.mutable_state() = state;
    NetOptions test_options;
    test_options.seed = seed + 1 + static_cast<uint64_t>(i);
    test_options.device = device_.get();
    test_options.locations = test_have_locations ? &test_locations : nullptr;
    ASSIGN_OR_RETURN(std::unique_ptr<Net> test_net, Net::Create(test_param, registry, test_options));
    RETURN_IF_ERROR(test_net->ShareTrainedLayersWith(*net_));
    test_nets_.push_back(std::move(test_net));
  }

  // Caffe's history layout: one blob per learnable parameter, then for
  // AdaDelta and Adam a second one per parameter after all of the first.
  for (int k = 0; k < NumHistoryBlobs(sgd_.type()); ++k) {
    for (const Blob* blob : net_->learnable_params()) {
      auto h = std::make_unique<Blob>(blob->shape());
      if (device_ != nullptr) {
        if (h->count() > 0) h->mutable_gpu_data();  // Zero-filled on the device.
      } else {
        caffe_set(h->count(), 0.0f, h->mutable_cpu_data());
      }
      history_.push_back(std::move(h));
    }
  }
  if (device_ != nullptr) RETURN_IF_ERROR(device_->TakeError().Annotate("allocating the solver's history"));
  if (net_->num_layers() > 0 && !net_->top_vecs()[0].empty() && net_->top_vecs()[0][0]->num_axes() > 0) {
    images_per_iter_ = net_->top_vecs()[0][0]->shape(0) * p.iter_size();
  } else if (!net_->input_blobs().empty() && net_->input_blobs()[0]->num_axes() > 0) {
    images_per_iter_ = net_->input_blobs()[0]->shape(0) * p.iter_size();
  }

  if (sync_ != nullptr) {
    net_->add_before_forward([this](int layer) -> Status {
      if (!first_sub_iter_) return Status::OK();
      return SyncCall([&] { return sync_->WaitWeights(layer, iter_); });
    });
    net_->add_after_backward([this](int layer) -> Status {
      if (!per_layer_gradients_) return Status::OK();
      return SyncCall([&] { return sync_->GradientsReady(layer, iter_); });
    });
    // With a ParameterSync the gradients go out without being copied, and a
    // layer's gradients of the last iteration may still be on their way until
    // its forward of this iteration has waited for its new weights. So the
    // diffs are not all cleared at the start of an iteration: each parameter's
    // diff is cleared right before the backward of the last layer (in forward
    // order) that uses it, the first to add to it.
    // A parameter is known by its diff's SyncedMemory (a layer sharing it
    // shares that), not by a host pointer: cpu_diff() would copy a GPU
    // net's gradients to the host.
    const auto& params = net_->learnable_params();
    std::map<const SyncedMemory*, int> param_of_diff;
    for (size_t p = 0; p < params.size(); ++p) param_of_diff[params[p]->diff().get()] = static_cast<int>(p);
    std::vector<int> last_user(params.size(), -1);
    for (int l = 0; l < net_->num_layers(); ++l) {
      for (const auto& b : net_->layers()[l]->blobs()) {
        auto it = param_of_diff.find(b->diff().get());
        if (it != param_of_diff.end()) last_user[it->second] = std::max(last_user[it->second], l);
      }
    }
    clear_before_backward_.assign(net_->num_layers(), {});
    for (size_t p = 0; p < params.size(); ++p) {
      CHECK_GE(last_user[p], 0) << "learnable parameter " << p << " belongs to no layer";
      clear_before_backward_[last_user[p]].push_back(static_cast<int>(p));
    }
    net_->add_before_backward([this](int layer) -> Status {
      if (!first_sub_iter_) return Status::OK();
      for (int p : clear_before_backward_[layer]) {
        Blob* b = net_->learnable_params()[p];
#ifdef NEREUS_HAVE_CUDA
        if (device_ != nullptr) {
          // On the compute stream, without a round trip through the host.
          // The staging's copy of this diff of the last iteration is done by
          // now: the copy stream uploaded the owner layer's weights after it,
          // and the compute stream waited for that upload before the owner's
          // forward of this iteration.
          caffe_gpu_set(device_.get(), b->count(), 0.0f, b->mutable_gpu_diff());
          continue;
        }
#endif
        caffe_set(b->count(), 0.0f, b->mutable_cpu_diff());
      }
      return Status::OK();
    });
  }
  return Status::OK();
}

Status Solver::ChooseDevice(uint64_t seed) {
  const caffe::SolverParameter& p = param_;
  int gpu_id = SolverOptions::kCpu;
  if (options_.gpu >= 0) {
    gpu_id = options_.gpu;
  } else if (options_.gpu == SolverOptions::kGpuFromSolver && p.solver_mode() == caffe::SolverParameter::GPU) {
    // A job's worker as a standalone run: with a ParameterSync the bridge
    // stages the gradients and weights between the device and the client.
    const Status usable = gpu::CheckDeviceId(p.device_id());
    if (!usable.ok()) {
      LOG(WARNING) << "solver_mode GPU (device_id " << p.device_id() << ") requested, but " << usable.message()
                   << "; continuing on the CPU";
    } else {
      gpu_id = p.device_id();
    }
  } else if (options_.gpu != SolverOptions::kGpuFromSolver && options_.gpu != SolverOptions::kCpu) {
    return InvalidArgumentError("bad GPU choice " + std::to_string(options_.gpu) + " (a device id >= 0, or the CPU)");
  }
  if (gpu_id < 0) return Status::OK();
  gpu::DeviceOptions device_options = options_.device;
  device_options.device_id = gpu_id;
  device_options.seed = seed;
  auto device = gpu::Device::Create(device_options);
  if (!device.ok()) return device.status().Annotate("GPU " + std::to_string(gpu_id));
  device_ = std::move(device).value();
  LOG(INFO) << "Solver: the nets compute on " << device_->description();
  return Status::OK();
}

Status Solver::SyncCall(const std::function<Status()>& call) {
  const auto start = Clock::now();
  Status st = call();
  total_wait_s_ += SecondsSince(start);
  return st;
}

Status Solver::WaitAllWeights() {
  if (sync_ == nullptr) return Status::OK();
  for (int layer = 0; layer < net_->num_layers(); ++layer) {
    RETURN_IF_ERROR(SyncCall([&] { return sync_->WaitWeights(layer, iter_); }));
  }
  return Status::OK();
}

void Solver::UpdateSmoothedLoss(float loss, int64_t start_iter, int average_loss) {
  if (losses_.size() < static_cast<size_t>(average_loss)) {
    losses_.push_back(loss);
    const int size = static_cast<int>(losses_.size());
    smoothed_loss_ = (smoothed_loss_ * (size - 1) + loss) / size;
  } else {
    const int idx = static_cast<int>((iter_ - start_iter) % average_loss);
    smoothed_loss_ += (loss - losses_[idx]) / average_loss;
    losses_[idx] = loss;
  }
}

Status Solver::Step(int iters) {
  gpu::ScopedDevice scope(device_.get());
  if (sync_ != nullptr && !sync_initialized_) {
    RETURN_IF_ERROR(SyncCall(
        [&] { return sync_->Init(net_->learnable_params(), net_->params_lr(), net_->params_weight_decay(), sgd_); }));
    sync_initialized_ = true;
  }
  const int64_t start_iter = iter_;
  const int64_t stop_iter = iter_ + iters;
  const int average_loss = param_.average_loss();
  const int iter_size = param_.iter_size();
  // Gradients can go to the servers layer by layer during backward only when
  // each layer's diff is final right after its backward: with iter_size > 1
  // only the last sub-iteration's backward qualifies, and clip_gradients
  // needs every layer's diff (the global norm) first, so then GradientsReady
  // is called for every layer after the whole backward, last to first.
  const bool clip = param_.clip_gradients() >= 0;
  losses_.clear();
  smoothed_loss_ = 0;
  auto display_start = Clock::now();
  double display_wait_start = total_wait_s_;
  int64_t iters_since_display = 0;

  while (iter_ < stop_iter) {
    if (sync_ == nullptr) net_->ClearParamDiffs();  // Else layer by layer (see Init).
    if (param_.test_interval() > 0 && iter_ % param_.test_interval() == 0 &&
        (iter_ > 0 || param_.test_initialization()) && !test_nets_.empty()) {
      const auto test_start = Clock::now();
      RETURN_IF_ERROR(TestAll());
      // Test time is neither compute nor waiting of the training iterations.
      display_start += std::chrono::duration_cast<Clock::duration>(Clock::now() - test_start);
    }
    const bool display = param_.display() > 0 && iter_ % param_.display() == 0;
    float loss = 0;
    for (int i = 0; i < iter_size; ++i) {
      first_sub_iter_ = i == 0;
      per_layer_gradients_ = sync_ != nullptr && !clip && iter_size == 1;
      auto sub_loss = net_->ForwardBackward();
      if (!sub_loss.ok()) return sub_loss.status().Annotate("iteration " + std::to_string(iter_));
      loss += *sub_loss;
    }
    per_layer_gradients_ = false;
    first_sub_iter_ = true;
    loss /= iter_size;
    UpdateSmoothedLoss(loss, start_iter, average_loss);
    ++iters_since_display;
    const float rate = LearningRate(sgd_, iter_);
    if (display) {
      TrainProgress progress;
      progress.iter = iter_;
      progress.loss = smoothed_loss_;
      progress.lr = rate;
      const double lapse = SecondsSince(display_start);
      progress.wait_s = total_wait_s_ - display_wait_start;
      progress.compute_s = lapse - progress.wait_s;
      progress.iters_per_s = lapse > 0 ? iters_since_display / lapse : 0;
      progress.images_per_s = progress.iters_per_s * images_per_iter_;
      const auto& result = net_->output_blobs();
      for (size_t j = 0; j < result.size(); ++j) {
        const std::string& name = net_->blob_names()[net_->output_blob_indices()[j]];
        const float* vec = result[j]->cpu_data();
        for (int k = 0; k < result[j]->count(); ++k) {
          progress.output_names.push_back(name);
          progress.output_values.push_back(vec[k]);
        }
      }
      if (options_.on_display) {
        options_.on_display(progress);
      } else {
        LOG(INFO) << "Iteration " << iter_ << ", loss = " << smoothed_loss_ << ", lr = " << rate << ", "
                  << progress.images_per_s << " images/s, compute " << progress.compute_s << " s, wait "
                  << progress.wait_s << " s";
      }
      display_start = Clock::now();
      display_wait_start = total_wait_s_;
      iters_since_display = 0;
    }
    if (sync_ == nullptr) {
      ApplyUpdate();
      if (device_ != nullptr) RETURN_IF_ERROR(device_->TakeError().Annotate("the solver's update on the GPU"));
    } else {
      if (iter_size > 1 || clip) {
        ClipGradients();
        for (size_t p = 0; p < net_->learnable_params().size(); ++p) Normalize(static_cast<int>(p));
        for (int layer = net_->num_layers() - 1; layer >= 0; --layer) {
          RETURN_IF_ERROR(SyncCall([&] { return sync_->GradientsReady(layer, iter_); }));
        }
      }
      RETURN_IF_ERROR(SyncCall([&] { return sync_->FinishIteration(iter_); }));
    }
    ++iter_;
    if (param_.snapshot() > 0 && iter_ % param_.snapshot() == 0) RETURN_IF_ERROR(Snapshot());
  }
  return Status::OK();
}

void Solver::ClipGradients() {
  const float clip_gradients = param_.clip_gradients();
  if (clip_gradients < 0) return;
  const auto& params = net_->learnable_params();
  float sumsq_diff = 0;
  for (const Blob* p : params) sumsq_diff += p->sumsq_diff();
  const float l2norm_diff = std::sqrt(sumsq_diff);
  if (l2norm_diff > clip_gradients) {
    const float scale_factor = clip_gradients / l2norm_diff;
    LOG(INFO) << "Gradient clipping: scaling down gradients (L2 norm " << l2norm_diff << " > " << clip_gradients
              << ") by scale factor " << scale_factor;
    for (Blob* p : params) p->scale_diff(scale_factor);
  }
}

void Solver::Normalize(int param_id) {
  if (param_.iter_size() == 1) return;
  const float accum_normalization = 1.0f / param_.iter_size();
  Blob* p = net_->learnable_params()[param_id];
#ifdef NEREUS_HAVE_CUDA
  if (device_ != nullptr) {
    caffe_gpu_scal(device_.get(), p->count(), accum_normalization, p->mutable_gpu_diff());
    return;
  }
#endif
  caffe_scal(p->count(), accum_normalization, p->mutable_cpu_diff());
}

void Solver::ApplyUpdate() {
  const float rate = LearningRate(sgd_, iter_);
  // Caffe's order: clip the accumulated gradient, then per parameter
  // normalize by iter_size, regularize and update (SolverStep does the last
  // two and data -= update, which is Caffe's ComputeUpdateValue + Net::Update).
  gpu::ScopedDevice scope(device_.get());
  ClipGradients();
  const auto& params = net_->learnable_params();
  const bool two = NumHistoryBlobs(sgd_.type()) == 2;
#ifdef NEREUS_HAVE_CUDA
  if (device_ != nullptr) {
    for (size_t i = 0; i < params.size(); ++i) {
      Normalize(static_cast<int>(i));
      Blob* p = params[i];
      float* history2 = two ? history_[params.size() + i]->mutable_gpu_data() : nullptr;
      gpu::SolverStepGpu(device_.get(),
                         PlanSolverStep(sgd_, iter_, rate, net_->params_lr()[i], net_->params_weight_decay()[i]),
                         p->gpu_diff(), p->mutable_gpu_data(), history_[i]->mutable_gpu_data(), history2, p->count());
    }
    return;
  }
#endif
  for (size_t i = 0; i < params.size(); ++i) {
    Normalize(static_cast<int>(i));
    Blob* p = params[i];
    float* history2 = two ? history_[params.size() + i]->mutable_cpu_data() : nullptr;
    SolverStep(sgd_, iter_, rate, net_->params_lr()[i], net_->params_weight_decay()[i], p->cpu_diff(),
               p->mutable_cpu_data(), history_[i]->mutable_cpu_data(), history2, static_cast<size_t>(p->count()));
  }
}

StatusOr<TestResult> Solver::Test(int test_net_id) {
  gpu::ScopedDevice scope(device_.get());
  CHECK_GE(test_net_id, 0);
  CHECK_LT(static_cast<size_t>(test_net_id), test_nets_.size());
  Net* test_net = test_nets_[test_net_id].get();
  RETURN_IF_ERROR(WaitAllWeights());
  RETURN_IF_ERROR(test_net->ShareTrainedLayersWith(*net_));
  TestResult result;
  result.test_net_id = test_net_id;
  result.iter = iter_;
  std::vector<double> scores;
  std::vector<int> score_blob;
  double loss = 0;
  const int test_iter = param_.test_iter(test_net_id);
  for (int i = 0; i < test_iter; ++i) {
    auto iter_loss = test_net->Forward();
    if (!iter_loss.ok()) {
      return iter_loss.status().Annotate("testing net #" + std::to_string(test_net_id) + " at iteration " +
                                         std::to_string(iter_) + ", batch " + std::to_string(i));
    }
    if (param_.test_compute_loss()) loss += *iter_loss;
    const auto& out = test_net->output_blobs();
    size_t idx = 0;
    for (size_t j = 0; j < out.size(); ++j) {
      const float* vec = out[j]->cpu_data();
      for (int k = 0; k < out[j]->count(); ++k, ++idx) {
        if (i == 0) {
          scores.push_back(vec[k]);
          score_blob.push_back(test_net->output_blob_indices()[j]);
        } else {
          scores[idx] += vec[k];
        }
      }
    }
  }
  if (param_.test_compute_loss() && test_iter > 0) result.loss = static_cast<float>(loss / test_iter);
  for (size_t i = 0; i < scores.size(); ++i) {
    result.names.push_back(test_net->blob_names()[score_blob[i]]);
    result.mean_scores.push_back(static_cast<float>(scores[i] / test_iter));
    result.loss_weights.push_back(test_net->blob_loss_weights()[score_blob[i]]);
  }
  if (options_.on_test) {
    options_.on_test(result);
  } else {
    LOG(INFO) << "Iteration " << iter_ << ", Testing net (#" << test_net_id << ")";
    if (param_.test_compute_loss()) LOG(INFO) << "Test loss: " << result.loss;
    for (size_t i = 0; i < result.names.size(); ++i) {
      std::ostringstream msg;
      if (result.loss_weights[i] != 0.0f) {
        msg << " (* " << result.loss_weights[i] << " = " << result.loss_weights[i] * result.mean_scores[i] << " loss)";
      }
      LOG(INFO) << "    Test net output #" << i << ": " << result.names[i] << " = " << result.mean_scores[i]
                << msg.str();
    }
  }
  return result;
}

Status Solver::TestAll() {
  for (size_t i = 0; i < test_nets_.size(); ++i) {
    auto result = Test(static_cast<int>(i));
    if (!result.ok()) return result.status();
  }
  return Status::OK();
}

Status Solver::Solve(const std::string& resume_file) {
  gpu::ScopedDevice scope(device_.get());
  LOG(INFO) << "Solving " << net_->name() << " with " << SolverTypeName(sgd_.type())
            << ", learning rate policy: " << param_.lr_policy();
  if (!resume_file.empty()) RETURN_IF_ERROR(Restore(resume_file));
  const int64_t start_iter = iter_;
  RETURN_IF_ERROR(Step(static_cast<int>(param_.max_iter() - iter_)));
  if (param_.snapshot_after_train() && (param_.snapshot() == 0 || iter_ % param_.snapshot() != 0)) {
    if (param_.snapshot_prefix().empty()) {
      LOG(WARNING) << "snapshot_after_train is set but snapshot_prefix is empty: not writing a final snapshot";
    } else {
      RETURN_IF_ERROR(Snapshot());
    }
  }
  // A final forward to display the loss after max_iter updates, and a final
  // test, as Caffe does.
  if (param_.display() > 0 && iter_ % param_.display() == 0) {
    RETURN_IF_ERROR(WaitAllWeights());
    const bool saved = first_sub_iter_;
    first_sub_iter_ = false;  // WaitAllWeights already waited.
    auto loss = net_->Forward();
    first_sub_iter_ = saved;
    if (!loss.ok()) return loss.status();
    UpdateSmoothedLoss(*loss, start_iter, param_.average_loss());
    LOG(INFO) << "Iteration " << iter_ << ", loss = " << smoothed_loss_;
  }
  if (param_.test_interval() > 0 && iter_ % param_.test_interval() == 0) RETURN_IF_ERROR(TestAll());
  LOG(INFO) << "Optimization done.";
  return Status::OK();
}

Status Solver::Snapshot(std::string* model_path, std::string* state_path) {
  gpu::ScopedDevice scope(device_.get());
  // With a ParameterSync, the weights of iter_ may still be arriving (pulls
  // are issued at the end of the previous iteration): wait for them so the
  // file holds the weights after iter_ updates.
  if (sync_initialized_) RETURN_IF_ERROR(WaitAllWeights());
  const bool hdf5 = param_.snapshot_format() == caffe::SolverParameter::HDF5;
  const std::string base = param_.snapshot_prefix() + "_iter_" + std::to_string(iter_);
  const std::string model_file = base + (hdf5 ? ".caffemodel.h5" : ".caffemodel");
  const std::string state_file = base + (hdf5 ? ".solverstate.h5" : ".solverstate");
  if (hdf5) {
    RETURN_IF_ERROR(WriteNetToHdf5(*net_, model_file, param_.snapshot_diff()));
  } else {
    caffe::NetParameter net_param;
    net_->ToProto(&net_param, param_.snapshot_diff());
    RETURN_IF_ERROR(WriteProtoToBinaryFile(net_param, model_file));
  }
  caffe::SolverState state;
  state.set_iter(static_cast<int>(iter_));
  state.set_learned_net(model_file);
  state.set_current_step(current_step_);
  for (const auto& h : history_) h->ToProto(state.add_history());
  RETURN_IF_ERROR(hdf5 ? WriteSolverStateToHdf5(state, state_file) : WriteProtoToBinaryFile(state, state_file));
  LOG(INFO) << "Snapshotting to " << model_file << " and " << state_file;
  if (model_path != nullptr) *model_path = model_file;
  if (state_path != nullptr) *state_path = state_file;
  return Status::OK();
}

Status Solver::Restore(const std::string& state_file) {
  gpu::ScopedDevice scope(device_.get());
  // As Caffe: a name ending in .h5 is an HDF5 state, anything else a binary proto.
  caffe::SolverState state;
  RETURN_IF_ERROR(IsHdf5Path(state_file) ? ReadSolverStateFromHdf5(state_file, &state)
                                         : ReadProtoFromBinaryFile(state_file, &state));
  if (state.history_size() != static_cast<int>(history_.size())) {
    return InvalidArgumentError(state_file + ": holds " + std::to_string(state.history_size()) +
                                " history blobs, the " + SolverTypeName(sgd_.type()) + " solver of this net keeps " +
                                std::to_string(history_.size()) + " (" + std::to_string(NumHistoryBlobs(sgd_.type())) +
                                " per learnable parameter, " + std::to_string(net_->learnable_params().size()) +
                                " parameters)");
  }
  if (state.has_learned_net()) {
    RETURN_IF_ERROR(CopyTrainedLayersFromFile(state.learned_net(), net_.get()));
  }
  for (size_t i = 0; i < history_.size(); ++i) {
    Status st = history_[i]->FromProto(state.history(static_cast<int>(i)), /*reshape=*/false);
    if (!st.ok()) return Status(st.code(), state_file + " history " + std::to_string(i) + ": " + st.message());
  }
  iter_ = state.iter();
  current_step_ = state.current_step();
  LOG(INFO) << "Restored solver state from " << state_file << " at iteration " << iter_;
  return Status::OK();
}

void Solver::StartAt(int64_t iter) {
  CHECK(!sync_initialized_) << "Solver::StartAt after the first Step";
  iter_ = iter;
}

}  // namespace nereus

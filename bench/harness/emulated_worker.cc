#include "bench/harness/emulated_worker.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "bench/harness/local_job.h"
#include "common/base/clock.h"
#include "common/update/sfb.h"
#include "worker/client/options_proto.h"

namespace nereus {
namespace bench {

void LayerTimes(const ModelSpec& model, const EmulatedRun& run, std::vector<double>* forward,
                std::vector<double>* backward) {
  forward->clear();
  backward->clear();
  for (const ModelLayer& l : model.layers) {
    forward->push_back(l.forward_flops * run.batch / (run.device_gflops * 1e9));
    backward->push_back(2 * forward->back());
  }
}

double RebuildSeconds(const EmulatedRun& run, int workers, int64_t rows, int64_t cols) {
  const double mn = static_cast<double>(rows) * static_cast<double>(cols);
  return 2.0 * workers * static_cast<double>(run.batch) * mn / (run.device_gflops * 1e9) +
         4.0 * mn / (run.device_update_gbytes * 1e9);
}

double FactorRowsPerBatch(const ModelSpec& model, int batch) {
  for (const ModelLayer& l : model.layers)
    if (l.fully_connected && batch > 0) return static_cast<double>(FactorRows(l, batch)) / batch;
  return 1;
}

void SetRebuildOptions(const EmulatedRun& run, const ModelSpec& model, ClientOptions* options,
                       ClientInternals* internals) {
  if (!run.rebuild_on_device) return;
  const double ratio = FactorRowsPerBatch(model, run.batch);
  options->sfb_rebuild_on = ratio == 1 ? std::string("the emulated device")
                                       : "the emulated device (its GEMM rate x " + std::to_string(ratio) +
                                             ", the factor rows sent per row of the batch charged)";
  options->sfb_rebuild_gflops = run.device_gflops * ratio;
  options->sfb_update_gbytes = run.device_update_gbytes;
  internals->sfb_emulated_rebuild = true;
}

EmulatedDevice::Clock::time_point EmulatedDevice::Begin(double seconds, Clock::time_point ready, bool blocked) {
  // Far behind (the first layer, or after a long stall): the device idled.
  if (!started_ || blocked || deadline_ < ready - std::chrono::milliseconds(50)) deadline_ = ready;
  started_ = true;
  start_ = deadline_;
  deadline_ += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  return deadline_;
}

double EmulatedDevice::End(Clock::time_point now) {
  const Clock::time_point from = std::max(start_, last_end_);
  last_end_ = now;
  return std::chrono::duration<double>(now - from).count();
}

Status RunEmulatedWorker(Client& c, const ModelSpec& model, const EmulatedRun& run, WorkerTimes* times) {
  using Clock = std::chrono::steady_clock;
  const int L = static_cast<int>(model.layers.size());
  std::vector<double> fwd, bwd;
  LayerTimes(model, run, &fwd, &bwd);
  std::vector<std::vector<std::vector<float>>> w(L), g(L);
  // Per layer: the factors of a fully connected layer's weight (else empty).
  std::vector<std::shared_ptr<std::vector<float>>> left(L), right(L);
  std::vector<const float*> init;
  // Per layer: the factors' rows (the batch, or fewer in a shrunk model:
  // models.h, Shrink).
  std::vector<int64_t> rows(L, 0);
  std::vector<int> layer_of;  // Of each registered tensor.
  for (int l = 0; l < L; ++l) {
    const ModelLayer& layer = model.layers[l];
    const int64_t K = rows[l] = FactorRows(layer, run.batch);
    for (size_t p = 0; p < layer.params.size(); ++p) {
      uint64_t n = 1;
      for (int64_t d : layer.params[p]) n *= d;
      w[l].emplace_back(n, 0.01f);
      g[l].emplace_back(n, 1e-4f);
    }
    if (layer.fully_connected && run.batch > 0 && layer.params[0].size() == 2) {
      const FactorShape shape{layer.params[0][0], layer.params[0][1]};
      left[l] = std::make_shared<std::vector<float>>(static_cast<size_t>(K * shape.rows), 1e-2f);
      right[l] = std::make_shared<std::vector<float>>(static_cast<size_t>(K * shape.cols), 1e-2f / K);
      // The full-matrix path sends what the factors stand for (1e-4 each).
      const Factors f{K, Buffer::Of(left[l]), Buffer::Of(right[l])};
      FactorScratch scratch;
      FactorGradient({&f}, shape, 1.0f, g[l][0].data(), &scratch);
    }
  }
  for (int l = 0; l < L; ++l) {
    for (size_t p = 0; p < model.layers[l].params.size(); ++p) {
      TensorSpec spec{model.layers[l].name + "/" + std::to_string(p), model.layers[l].params[p]};
      spec.layer = l;
      spec.data = w[l][p].data();
      spec.diff = g[l][p].data();
      if (p == 0 && left[l] != nullptr) {
        spec.factor_rows = rows[l];
        spec.factor_left = left[l]->data();
        spec.factor_right = right[l]->data();
      }
      init.push_back(w[l][p].data());
      layer_of.push_back(l);
      RETURN_IF_ERROR(c.RegisterTensor(spec).status());
    }
  }
  RETURN_IF_ERROR(c.Init(SgdConfigFromProto(BenchSgd()), init));
  // The emulated device's rebuild of each layer's weight with factors (0
  // elsewhere), made before the forward of a clock whose update came as
  // factors (HybComm may switch a layer's path at a clock: Client::SfbAt).
  std::vector<double> rebuild(L, 0.0);
  std::vector<int> factor_tensor(L, -1);
  for (size_t t = 0; t < layer_of.size(); ++t) {
    const int l = layer_of[t];
    if (left[l] == nullptr || factor_tensor[l] >= 0) continue;
    factor_tensor[l] = static_cast<int>(t);
    if (run.rebuild_on_device)
      rebuild[l] = RebuildSeconds(run, c.num_workers(), model.layers[l].params[0][0], model.layers[l].params[0][1]);
  }
  const int total = run.warmup + run.iterations;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  const auto kBlocked = std::chrono::milliseconds(1);  // A wait longer than this blocked.
  EmulatedDevice device;
  auto compute = [&](double s, Clock::time_point ready, bool blocked) {
    std::this_thread::sleep_until(device.Begin(s, ready, blocked));  // Emulated compute, not synchronisation.
    return device.End(Clock::now());
  };
  bool next_blocked = false;  // The wait for layer 0 of the next clock blocked.
  for (int64_t it = 0; it < total; ++it) {
    const auto t0 = Clock::now();
    double slept = 0, waited = 0;
    for (int l = 0; l < L; ++l) {
      const auto a = Clock::now();
      RETURN_IF_ERROR(c.WaitWeights(l, it));
      const auto b = Clock::now();
      const bool blocked = b - a > kBlocked || (l == 0 && next_blocked);
      next_blocked = false;
      const bool rebuilds = it > 0 && rebuild[l] > 0 && c.SfbAt(factor_tensor[l], it - 1);
      if (rebuilds) {
        // The update of clock it - 1, rebuilt on the device before this forward.
        const int64_t rebuild_begin = MonotonicMicros();
        slept += compute(rebuild[l], b, blocked);
        c.TraceSpan("rebuild " + model.layers[l].name, it, rebuild_begin, MonotonicMicros());
      }
      const int64_t begin = MonotonicMicros();
      slept += compute(fwd[l], b, blocked && !rebuilds);
      c.TraceSpan("forward " + model.layers[l].name, it, begin, MonotonicMicros());
      waited += seconds(a, b);
    }
    // The byte counters are read where the traffic of earlier clocks is over:
    // after the forward, every weight of this clock has arrived (and with it
    // every push and factor of the clock before).
    if (it == run.warmup) times->timed_begin = c.stats();
    for (int l = L - 1; l >= 0; --l) {
      const auto a = Clock::now();
      const int64_t begin = MonotonicMicros();
      slept += compute(bwd[l], a, false);
      c.TraceSpan("backward " + model.layers[l].name, it, begin, MonotonicMicros());
      const auto b = Clock::now();
      RETURN_IF_ERROR(c.GradientsReady(l, it));
      waited += seconds(b, Clock::now());
    }
    // The iteration ends when the next one can start its first layer.
    const auto a = Clock::now();
    RETURN_IF_ERROR(c.WaitWeights(0, it + 1));
    const auto end = Clock::now();
    waited += seconds(a, end);
    if (end - a > kBlocked) next_blocked = true;
    times->all_iteration_s.push_back(seconds(t0, end));
    if (it >= run.warmup) {
      times->iteration_s.push_back(seconds(t0, end));
      times->compute_s.push_back(slept);
      times->wait_s.push_back(waited);
    }
  }
  for (int l = 1; l < L; ++l) RETURN_IF_ERROR(c.WaitWeights(l, total));
  times->timed_end = c.stats();
  return Status::OK();
}

}  // namespace bench
}  // namespace nereus

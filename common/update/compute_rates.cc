#include "common/update/compute_rates.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "common/update/sfb.h"
#include "common/update/sgd.h"

namespace nereus {
namespace {

constexpr size_t kStepFloats = 1 << 20;
constexpr int kRepeats = 3;  // Timed, after one warm-up.

// Best (shortest) of kRepeats timed calls of `f`, after one untimed.
template <typename F>
double BestSeconds(F f) {
  f();
  double best = 1e300;
  for (int i = 0; i < kRepeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return std::max(best, 1e-9);
}

pb::SgdConfig StepConfig() {
  pb::SgdConfig sgd;
  sgd.set_base_lr(0.01f);
  sgd.set_lr_policy("fixed");
  sgd.set_momentum(0.9f);
  sgd.set_weight_decay(5e-4f);
  return sgd;
}

}  // namespace

CpuRates MeasureCpuRates() {
  CpuRates r;
  {
    constexpr int kWorkers = 4;
    constexpr int64_t kRows = 64, kSide = 1024;
    const FactorShape shape{kSide, kSide};
    std::vector<Factors> factors(kWorkers);
    for (int w = 0; w < kWorkers; ++w) {
      factors[w].k = kRows;
      factors[w].left = Buffer::Of(std::make_shared<std::vector<float>>(kRows * kSide, 0.01f * (w + 1)));
      factors[w].right = Buffer::Of(std::make_shared<std::vector<float>>(kRows * kSide, 0.02f));
    }
    std::vector<const Factors*> by_rank;
    for (const Factors& f : factors) by_rank.push_back(&f);
    std::vector<float> grad(static_cast<size_t>(kSide * kSide));
    FactorScratch scratch;
    const double s = BestSeconds([&] { FactorGradient(by_rank, shape, 0.25f, grad.data(), &scratch); });
    r.gemm_flops_per_s = 2.0 * kWorkers * kRows * kSide * kSide / s;
  }
  {
    const pb::SgdConfig sgd = StepConfig();
    std::vector<float> diff(kStepFloats, 1e-3f), data(kStepFloats, 0.5f), history(kStepFloats, 0.0f);
    const double s =
        BestSeconds([&] { SgdStep(sgd, 0.01f, 1.0f, 1.0f, diff.data(), data.data(), history.data(), kStepFloats); });
    r.step_bytes_per_s = kStepFloats * sizeof(float) / s;
  }
  return r;
}

const CpuRates& ThisCpuRates() {
  static const CpuRates rates = MeasureCpuRates();
  return rates;
}

double MeasureApplyBytesPerS(int gradients) {
  const int k = std::max(1, gradients);
  const pb::SgdConfig sgd = StepConfig();
  std::vector<std::vector<float>> grads(k, std::vector<float>(kStepFloats, 1e-3f));
  std::vector<const float*> srcs;
  for (const auto& g : grads) srcs.push_back(g.data());
  std::vector<float> data(kStepFloats, 0.5f), history(kStepFloats, 0.0f);
  const double s = BestSeconds([&] {
    SgdStepAveraged(sgd, 0.01f, 1.0f, 1.0f, srcs.data(), srcs.size(), data.data(), data.data(), history.data(),
                    kStepFloats);
  });
  return kStepFloats * sizeof(float) / s;
}

}  // namespace nereus

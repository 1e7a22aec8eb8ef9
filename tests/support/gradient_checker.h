// Numeric gradient checking for layers, in the manner of Caffe's
// test/test_gradient_check_util.hpp.
//
// The objective is either half the sum of squares of every top element
// (CheckGradient) or 2 * one top element (CheckGradientExhaustive, which
// visits every top element in turn). For each checked blob (the layer's
// parameter blobs, then the selected bottoms) every element x is perturbed by
// +-stepsize, the objective recomputed with Forward, and the central
// difference (f(x+h) - f(x-h)) / 2h compared against the diff Backward wrote:
//
//   |analytic - numeric| <= threshold * max(|analytic|, |numeric|, 1)
//
// Elements whose value lies within kink_range of kink (e.g. 0 for ReLU, where
// the function is not differentiable) are skipped, as Caffe does.
//
// Layers whose Forward draws random numbers (Dropout) must give the same
// output for each of the repeated forwards; the checker calls the
// `before_forward` hook, if set, before every Forward so a test can reseed
// the layer's own generator.
#ifndef NEREUS_TESTS_SUPPORT_GRADIENT_CHECKER_H_
#define NEREUS_TESTS_SUPPORT_GRADIENT_CHECKER_H_

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/support/status_util.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/layer.h"

namespace nereus {
namespace test {

class GradientChecker {
 public:
  // kink / kink_range: values of a checked input within kink_range of
  // +-kink are not compared (the function has a kink there).
  GradientChecker(float stepsize, float threshold, float kink = 0.0f, float kink_range = -1.0f)
      : stepsize_(stepsize), threshold_(threshold), kink_(kink), kink_range_(kink_range) {}

  // Called before every Forward the checker makes.
  void set_before_forward(std::function<void()> hook) { before_forward_ = std::move(hook); }

  // Sets the layer up, then checks the gradient of 0.5 * sum(top^2) with
  // respect to the parameters and bottom `check_bottom` (all bottoms if -1,
  // no bottom if -2).
  void CheckGradient(Layer* layer, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
                     int check_bottom = -1) {
    const Status status = layer->SetUp(bottom, top);
    ASSERT_TRUE(status.ok()) << status.message();
    CheckGradientSingle(layer, bottom, top, check_bottom, -1, -1, false);
  }

  // Sets the layer up, then checks the gradient of each top element on its
  // own (every row of the Jacobian).
  void CheckGradientExhaustive(Layer* layer, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
                               int check_bottom = -1) {
    const Status status = layer->SetUp(bottom, top);
    ASSERT_TRUE(status.ok()) << status.message();
    ASSERT_GT(top.size(), 0u) << "Exhaustive mode requires at least one top blob.";
    for (size_t i = 0; i < top.size(); ++i) {
      for (int j = 0; j < top[i]->count(); ++j) {
        CheckGradientSingle(layer, bottom, top, check_bottom, static_cast<int>(i), j, false);
      }
    }
  }

  // For element-wise layers without parameters: top element j depends only
  // on bottom element j, so only that element is differenced and every other
  // analytic derivative must be exactly zero.
  void CheckGradientEltwise(Layer* layer, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
    const Status status = layer->SetUp(bottom, top);
    ASSERT_TRUE(status.ok()) << status.message();
    ASSERT_GT(top.size(), 0u) << "Eltwise mode requires at least one top blob.";
    for (size_t i = 0; i < top.size(); ++i) {
      for (int j = 0; j < top[i]->count(); ++j) {
        CheckGradientSingle(layer, bottom, top, -1, static_cast<int>(i), j, true);
      }
    }
  }

  // One objective (top_id < 0: 0.5 * sum of squares of all tops; otherwise
  // 2 * top[top_id][top_data_id]) against the parameters and the bottoms
  // chosen by check_bottom. The layer must already be set up.
  void CheckGradientSingle(Layer* layer, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
                           int check_bottom, int top_id, int top_data_id, bool element_wise);

  // Number of element comparisons made so far (tests assert it is non-zero,
  // so a checker that silently skips everything fails).
  long comparisons() const { return comparisons_; }

 private:
  // Sets the top diffs to d(objective)/d(top) and returns the objective.
  double GetObjAndGradient(const std::vector<Blob*>& top, int top_id, int top_data_id);
  void RunForward(Layer* layer, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
    if (before_forward_) before_forward_();
    layer->Forward(bottom, top);
  }

  float stepsize_;
  float threshold_;
  float kink_;
  float kink_range_;
  std::function<void()> before_forward_;
  long comparisons_ = 0;
};

inline void GradientChecker::CheckGradientSingle(Layer* layer, const std::vector<Blob*>& bottom,
                                                 const std::vector<Blob*>& top, int check_bottom, int top_id,
                                                 int top_data_id, bool element_wise) {
  if (element_wise) {
    ASSERT_EQ(0u, layer->blobs().size()) << "element-wise check of a layer with parameters";
    ASSERT_LE(0, top_id);
    ASSERT_LE(0, top_data_id);
    const int top_count = top[top_id]->count();
    for (size_t b = 0; b < bottom.size(); ++b) {
      ASSERT_EQ(top_count, bottom[b]->count()) << "element-wise check needs equal counts";
    }
  }
  // The blobs whose gradients are checked: parameters first, then bottoms.
  std::vector<Blob*> blobs_to_check;
  std::vector<bool> propagate_down(bottom.size(), check_bottom == -1);
  for (const auto& param : layer->blobs()) {
    std::fill(param->mutable_cpu_diff(), param->mutable_cpu_diff() + param->count(), 0.0f);
    blobs_to_check.push_back(param.get());
  }
  if (check_bottom == -1) {
    for (Blob* b : bottom) blobs_to_check.push_back(b);
  } else if (check_bottom >= 0) {
    ASSERT_LT(check_bottom, static_cast<int>(bottom.size()));
    blobs_to_check.push_back(bottom[check_bottom]);
    propagate_down[check_bottom] = true;
  }
  ASSERT_GT(blobs_to_check.size(), 0u) << "No blobs to check.";

  // Analytic gradients.
  RunForward(layer, bottom, top);
  GetObjAndGradient(top, top_id, top_data_id);
  layer->Backward(top, propagate_down, bottom);
  std::vector<std::vector<float>> computed(blobs_to_check.size());
  for (size_t b = 0; b < blobs_to_check.size(); ++b) {
    const float* diff = blobs_to_check[b]->cpu_diff();
    computed[b].assign(diff, diff + blobs_to_check[b]->count());
  }

  // Numeric gradients by central differences.
  for (size_t b = 0; b < blobs_to_check.size(); ++b) {
    Blob* blob = blobs_to_check[b];
    for (int k = 0; k < blob->count(); ++k) {
      double estimated = 0.0;
      double positive = 0.0;
      double negative = 0.0;
      if (!element_wise || k == top_data_id) {
        const float original = blob->cpu_data()[k];
        blob->mutable_cpu_data()[k] = original + stepsize_;
        RunForward(layer, bottom, top);
        positive = GetObjAndGradient(top, top_id, top_data_id);
        blob->mutable_cpu_data()[k] = original - stepsize_;
        RunForward(layer, bottom, top);
        negative = GetObjAndGradient(top, top_id, top_data_id);
        blob->mutable_cpu_data()[k] = original;
        estimated = (positive - negative) / stepsize_ / 2.0;
      }
      const double analytic = computed[b][k];
      const double feature = blob->cpu_data()[k];
      if (kink_ - kink_range_ > std::fabs(feature) || std::fabs(feature) > kink_ + kink_range_) {
        const double scale = std::max({std::fabs(analytic), std::fabs(estimated), 1.0});
        ++comparisons_;
        EXPECT_NEAR(analytic, estimated, threshold_ * scale)
            << "(top_id, top_data_id, blob_id, feat_id)=" << top_id << "," << top_data_id << "," << b << "," << k
            << "; feat = " << feature << "; objective+ = " << positive << "; objective- = " << negative;
      }
    }
  }
}

inline double GradientChecker::GetObjAndGradient(const std::vector<Blob*>& top, int top_id, int top_data_id) {
  double loss = 0.0;
  if (top_id < 0) {
    for (Blob* t : top) {
      const float* data = t->cpu_data();
      float* diff = t->mutable_cpu_diff();
      for (int j = 0; j < t->count(); ++j) {
        loss += static_cast<double>(data[j]) * data[j];
        diff[j] = data[j];
      }
    }
    loss /= 2.0;
  } else {
    for (Blob* t : top) std::fill(t->mutable_cpu_diff(), t->mutable_cpu_diff() + t->count(), 0.0f);
    const float loss_weight = 2.0f;
    loss = static_cast<double>(top[top_id]->cpu_data()[top_data_id]) * loss_weight;
    top[top_id]->mutable_cpu_diff()[top_data_id] = loss_weight;
  }
  return loss;
}

// ---- Helpers shared by the layer tests ----

// A LayerParameter from protobuf text; aborts the test binary on a typo.
inline caffe::LayerParameter ParseLayerParameter(const std::string& text) {
  caffe::LayerParameter param;
  CHECK(google::protobuf::TextFormat::ParseFromString(text, &param)) << "bad test prototxt: " << text;
  return param;
}

// Replaces the blob's data (the sizes must match).
inline void SetBlobData(Blob* blob, const std::vector<float>& values) {
  CHECK_EQ(static_cast<int>(values.size()), blob->count()) << blob->shape_string();
  std::copy(values.begin(), values.end(), blob->mutable_cpu_data());
}

inline std::vector<float> BlobData(const Blob& blob) {
  return std::vector<float>(blob.cpu_data(), blob.cpu_data() + blob.count());
}

inline std::vector<float> BlobDiff(const Blob& blob) {
  return std::vector<float>(blob.cpu_diff(), blob.cpu_diff() + blob.count());
}

inline void FillGaussian(Blob* blob, std::mt19937* rng, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  float* data = blob->mutable_cpu_data();
  for (int i = 0; i < blob->count(); ++i) data[i] = dist(*rng);
}

// Distinct values spaced `gap` apart, in random order: max-based layers then
// have a unique argmax that a +-stepsize perturbation (stepsize < gap / 2)
// cannot change.
inline void FillDistinct(Blob* blob, std::mt19937* rng, float gap = 0.05f) {
  std::vector<float> values(blob->count());
  for (int i = 0; i < blob->count(); ++i) values[i] = (i - blob->count() / 2) * gap;
  std::shuffle(values.begin(), values.end(), *rng);
  SetBlobData(blob, values);
}

// SetUp of `layer` on new bottoms of `bottom_shapes` (zeros) and `num_tops`
// new tops: what a test of a configuration error needs.
inline Status SetUpOn(Layer* layer, const std::vector<std::vector<int>>& bottom_shapes, int num_tops = 1) {
  std::vector<std::unique_ptr<Blob>> blobs;
  std::vector<Blob*> bottom, top;
  for (const std::vector<int>& shape : bottom_shapes) {
    blobs.push_back(std::make_unique<Blob>(shape));
    bottom.push_back(blobs.back().get());
  }
  for (int i = 0; i < num_tops; ++i) {
    blobs.push_back(std::make_unique<Blob>());
    top.push_back(blobs.back().get());
  }
  return layer->SetUp(bottom, top);
}

// Elementwise comparison with a message naming the first mismatch.
inline void ExpectBlobNear(const std::vector<float>& expected, const Blob& actual, float tolerance = 1e-5f) {
  ASSERT_EQ(static_cast<int>(expected.size()), actual.count()) << actual.shape_string();
  for (int i = 0; i < actual.count(); ++i) {
    EXPECT_NEAR(expected[i], actual.cpu_data()[i], tolerance) << "at index " << i;
  }
}

// ---- The gradient test most layer tests write ----

// Which objective the checker uses (see GradientChecker).
enum class GradientCheck {
  kExhaustive,    // CheckGradientExhaustive: each top element on its own
  kEltwise,       // CheckGradientEltwise: element-wise layers, no parameters
  kSumOfSquares,  // CheckGradient: 0.5 * sum(top^2)
};

// A GradientChecker's settings and the objective to check:
// {check, stepsize, threshold, kink, kink_range, check_bottom}.
struct CheckerSettings {
  GradientCheck check = GradientCheck::kExhaustive;
  float stepsize = 1e-2f;
  float threshold = 1e-3f;
  float kink = 0.0f;
  float kink_range = -1.0f;
  int check_bottom = -1;  // CheckGradient's and CheckGradientExhaustive's
};

// Sets `layer` up on bottom -> top and checks its gradient with a fresh
// checker of `settings`; fails the test if the checker compared nothing.
inline void ExpectGradient(Layer* layer, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
                           const CheckerSettings& settings = {}) {
  GradientChecker checker(settings.stepsize, settings.threshold, settings.kink, settings.kink_range);
  switch (settings.check) {
    case GradientCheck::kExhaustive:
      checker.CheckGradientExhaustive(layer, bottom, top, settings.check_bottom);
      break;
    case GradientCheck::kEltwise:
      checker.CheckGradientEltwise(layer, bottom, top);
      break;
    case GradientCheck::kSumOfSquares:
      checker.CheckGradient(layer, bottom, top, settings.check_bottom);
      break;
  }
  EXPECT_GT(checker.comparisons(), 0) << layer->layer_param().name();
}

// How a test fills a bottom: N(0, 1) draws, FillDistinct (a max-based
// layer then has a unique argmax), or not at all (zeros, drawing nothing).
enum class BottomFill { kGaussian, kDistinct, kZeros };

inline void FillBottom(Blob* blob, BottomFill fill, std::mt19937* rng) {
  if (fill == BottomFill::kDistinct) {
    FillDistinct(blob, rng);
  } else if (fill == BottomFill::kGaussian) {
    FillGaussian(blob, rng);
  }
}

// Bottoms of each of `shapes`, filled in turn from `rng`.
struct FilledBottoms {
  FilledBottoms(const std::vector<std::vector<int>>& shapes, BottomFill fill, std::mt19937* rng) {
    for (const std::vector<int>& shape : shapes) {
      blobs.push_back(std::make_unique<Blob>(shape));
      FillBottom(blobs.back().get(), fill, rng);
      bottom.push_back(blobs.back().get());
    }
  }
  std::vector<std::unique_ptr<Blob>> blobs;
  std::vector<Blob*> bottom;  // The blobs, as a layer takes them.
};

// A layer of type L built from `param_text`, run forward on one bottom of
// `shape` holding `values`: the top has `top_shape` and the values
// `expected` (each within `tolerance`).
template <typename L>
void ExpectLayerForward(const std::string& param_text, const std::vector<int>& shape, const std::vector<float>& values,
                        const std::vector<int>& top_shape, const std::vector<float>& expected,
                        float tolerance = 1e-5f) {
  Blob bottom(shape), top;
  SetBlobData(&bottom, values);
  L layer(ParseLayerParameter(param_text));
  const Status status = layer.SetUp({&bottom}, {&top});
  ASSERT_TRUE(status.ok()) << status.message();
  layer.Forward({&bottom}, {&top});
  EXPECT_EQ(top_shape, top.shape());
  ExpectBlobNear(expected, top, tolerance);
}

// The usual gradient test of a layer of type L (Caffe's layer tests): a
// bottom of each of `shapes`, filled in turn from an engine seeded `seed`,
// then the layer built from `param_text`, its fillers drawing from the same
// engine, checked as `settings` say.
template <typename L>
void ExpectLayerGradient(const std::string& param_text, const std::vector<std::vector<int>>& shapes, uint32_t seed,
                         BottomFill fill = BottomFill::kGaussian, const CheckerSettings& settings = {}) {
  std::mt19937 rng(seed);
  FilledBottoms bottoms(shapes, fill, &rng);
  Blob top;
  L layer(ParseLayerParameter(param_text));
  layer.set_rng(&rng);
  ExpectGradient(&layer, bottoms.bottom, {&top}, settings);
}

// The same with one bottom of `shape`.
template <typename L>
void ExpectLayerGradient(const std::string& param_text, const std::vector<int>& shape, uint32_t seed,
                         BottomFill fill = BottomFill::kGaussian, const CheckerSettings& settings = {}) {
  ExpectLayerGradient<L>(param_text, std::vector<std::vector<int>>{shape}, seed, fill, settings);
}

// A layer of type L built from `param_text` (its fillers drawing from an
// engine seeded 1), set up and run forward on zeroed bottoms of `shapes`:
// a backward asking for the gradients `propagate_down` dies with a message
// matching `death_regex` (a bottom that has none: indices, labels).
template <typename L>
void ExpectBackwardDies(const std::string& param_text, const std::vector<std::vector<int>>& shapes,
                        const std::vector<bool>& propagate_down, const std::string& death_regex) {
  std::mt19937 rng(1);
  FilledBottoms bottoms(shapes, BottomFill::kZeros, &rng);
  Blob top;
  L layer(ParseLayerParameter(param_text));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp(bottoms.bottom, {&top}).ok());
  layer.Forward(bottoms.bottom, {&top});
  EXPECT_DEATH(layer.Backward({&top}, propagate_down, bottoms.bottom), death_regex);
}

// start, start + 1, ..., start + n - 1: a bottom's values when each is to
// be told apart.
inline std::vector<float> Iota(int n, float start = 0.0f) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// For a layer that may run in place: `apart` (its own bottom and top) and
// `in_place` (one blob as both), built alike and not yet set up, each run on
// a copy of `input`, top diffs 0.1 i + diff_start, their parameters' diffs
// zeroed first; expects the same top, bottom gradient and parameter
// gradients.
inline void ExpectInPlaceMatchesApart(Layer* apart, Layer* in_place, const Blob& input, float diff_start = 0.0f) {
  Blob bottom(input.shape()), top, blob(input.shape());
  bottom.CopyFrom(input);
  blob.CopyFrom(input);
  ASSERT_TRUE(apart->SetUp({&bottom}, {&top}).ok());
  ASSERT_TRUE(in_place->SetUp({&blob}, {&blob}).ok());
  apart->Forward({&bottom}, {&top});
  in_place->Forward({&blob}, {&blob});
  EXPECT_EQ(BlobData(top), BlobData(blob));
  for (int i = 0; i < top.count(); ++i) top.mutable_cpu_diff()[i] = blob.mutable_cpu_diff()[i] = 0.1f * i + diff_start;
  for (Layer* l : {apart, in_place}) {
    for (auto& b : l->blobs()) caffe_set(b->count(), 0.0f, b->mutable_cpu_diff());
  }
  apart->Backward({&top}, {true}, {&bottom});
  in_place->Backward({&blob}, {true}, {&blob});
  EXPECT_EQ(BlobDiff(bottom), BlobDiff(blob));
  ASSERT_EQ(apart->blobs().size(), in_place->blobs().size());
  for (size_t k = 0; k < apart->blobs().size(); ++k) {
    EXPECT_EQ(BlobDiff(*apart->blobs()[k]), BlobDiff(*in_place->blobs()[k])) << "parameter " << k;
  }
}

// The same for two layers of type L built from `param_text`, their fillers
// drawing from two engines seeded 7, on an N(0, 1) input of `shape` drawn
// from an engine seeded `seed`.
template <typename L>
void ExpectLayerInPlaceMatchesApart(const std::string& param_text, const std::vector<int>& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  Blob input(shape);
  FillGaussian(&input, &rng);
  std::mt19937 rng_a(7), rng_b(7);
  L apart(ParseLayerParameter(param_text)), in_place(ParseLayerParameter(param_text));
  apart.set_rng(&rng_a);
  in_place.set_rng(&rng_b);
  ExpectInPlaceMatchesApart(&apart, &in_place, input);
}

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_GRADIENT_CHECKER_H_

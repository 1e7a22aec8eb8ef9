// Small layers with hand-checkable math for the trainer core's tests (net,
// solver, prototxt): they let those tests build nets without the real
// compute layers and compare against values computed by hand.
#ifndef NEREUS_TESTS_SUPPORT_TRAINER_TEST_LAYERS_H_
#define NEREUS_TESTS_SUPPORT_TRAINER_TEST_LAYERS_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/support/bytes_equal.h"
#include "worker/trainer/filler.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/math/math_functions.h"
#include "worker/trainer/prototxt.h"
#include "worker/trainer/solver.h"

namespace nereus {
namespace testing_layers {

// The test layers of one bottom and one top.
class OneBottomOneTopLayer : public Layer {
 public:
  using Layer::Layer;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
};

// y = x W^T + b with W [num_output, K], b [num_output], filled from
// inner_product_param's fillers (Caffe's InnerProduct, axis 1, no transpose).
class LinearLayer : public OneBottomOneTopLayer {
 public:
  using OneBottomOneTopLayer::OneBottomOneTopLayer;
  const char* type() const override { return "TestLinear"; }
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const auto& p = layer_param_.inner_product_param();
    if (p.num_output() == 0) return LayerError("num_output must be > 0");
    const int k = bottom[0]->count(1);
    blobs_.push_back(std::make_shared<Blob>(std::vector<int>{static_cast<int>(p.num_output()), k}));
    blobs_.push_back(std::make_shared<Blob>(std::vector<int>{static_cast<int>(p.num_output())}));
    RETURN_IF_ERROR(FillBlob(p.weight_filler(), blobs_[0].get(), rng()));
    RETURN_IF_ERROR(FillBlob(p.bias_filler(), blobs_[1].get(), rng()));
    return Status::OK();
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    top[0]->Reshape({bottom[0]->shape(0), blobs_[0]->shape(0)});
  }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const int n = bottom[0]->shape(0), k = bottom[0]->count(1), m = blobs_[0]->shape(0);
    float* y = top[0]->mutable_cpu_data();
    caffe_cpu_gemm(CblasNoTrans, CblasTrans, n, m, k, 1.0f, bottom[0]->cpu_data(), blobs_[0]->cpu_data(), 0.0f, y);
    for (int i = 0; i < n; ++i) caffe_axpy(m, 1.0f, blobs_[1]->cpu_data(), y + i * m);
  }
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {
    const int n = bottom[0]->shape(0), k = bottom[0]->count(1), m = blobs_[0]->shape(0);
    const float* dy = top[0]->cpu_diff();
    if (param_propagate_down(0)) {
      caffe_cpu_gemm(CblasTrans, CblasNoTrans, m, k, n, 1.0f, dy, bottom[0]->cpu_data(), 1.0f,
                     blobs_[0]->mutable_cpu_diff());
    }
    if (param_propagate_down(1)) {
      float* db = blobs_[1]->mutable_cpu_diff();
      for (int i = 0; i < n; ++i) caffe_axpy(m, 1.0f, dy + i * m, db);
    }
    if (propagate_down[0]) {
      caffe_cpu_gemm(CblasNoTrans, CblasNoTrans, n, k, m, 1.0f, dy, blobs_[0]->cpu_data(), 0.0f,
                     bottom[0]->mutable_cpu_diff());
    }
  }
};

// loss = sum(x^2) / (2 N), N = x.shape(0); default loss_weight 1 as Caffe's
// loss layers.
class SquareLossLayer : public OneBottomOneTopLayer {
 public:
  using OneBottomOneTopLayer::OneBottomOneTopLayer;
  const char* type() const override { return "TestSquareLoss"; }
  bool AutoTopBlobs() const override { return true; }
  Status LayerSetUpStatus(const std::vector<Blob*>&, const std::vector<Blob*>&) override {
    if (layer_param_.loss_weight_size() == 0) layer_param_.add_loss_weight(1.0f);
    return Status::OK();
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    top[0]->Reshape(std::vector<int>{});
  }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const float n = static_cast<float>(bottom[0]->shape(0));
    top[0]->mutable_cpu_data()[0] = bottom[0]->sumsq_data() / (2.0f * n);
  }
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {
    if (!propagate_down[0]) return;
    const float scale = top[0]->cpu_diff()[0] / static_cast<float>(bottom[0]->shape(0));
    caffe_cpu_scale(bottom[0]->count(), scale, bottom[0]->cpu_data(), bottom[0]->mutable_cpu_diff());
  }
};

// y = x; may run in place.
class IdentityLayer : public OneBottomOneTopLayer {
 public:
  using OneBottomOneTopLayer::OneBottomOneTopLayer;
  const char* type() const override { return "TestIdentity"; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    top[0]->ReshapeLike(*bottom[0]);
  }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    caffe_copy(bottom[0]->count(), bottom[0]->cpu_data(), top[0]->mutable_cpu_data());
  }
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {
    if (propagate_down[0]) caffe_copy(top[0]->count(), top[0]->cpu_diff(), bottom[0]->mutable_cpu_diff());
  }
};

// Emits rows of a fixed data set cyclically: row r of the set is
// (r + 1) * 0.1 + c * 0.01 for feature c. input_param.shape(0) gives the
// batch shape (batch, features); data_param.batch_size (if set) the number of
// rows in the set (default: one batch). A second top gets labels r % 10.
class FixedDataLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "TestFixedData"; }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  Status LayerSetUpStatus(const std::vector<Blob*>&, const std::vector<Blob*>&) override {
    if (layer_param_.input_param().shape_size() != 1) return LayerError("needs one input_param shape");
    for (auto d : layer_param_.input_param().shape(0).dim()) shape_.push_back(static_cast<int>(d));
    rows_ = layer_param_.data_param().batch_size() > 0 ? static_cast<int>(layer_param_.data_param().batch_size())
                                                       : shape_[0];
    return Status::OK();
  }
  void Reshape(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    top[0]->Reshape(shape_);
    if (top.size() > 1) top[1]->Reshape(std::vector<int>{shape_[0]});
  }

 protected:
  void Forward_cpu(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    const int n = shape_[0];
    const int features = top[0]->count(1);
    float* x = top[0]->mutable_cpu_data();
    for (int i = 0; i < n; ++i) {
      const int r = (cursor_ + i) % rows_;
      for (int c = 0; c < features; ++c) x[i * features + c] = (r + 1) * 0.1f + c * 0.01f;
      if (top.size() > 1) top[1]->mutable_cpu_data()[i] = static_cast<float>(r % 10);
    }
    cursor_ = (cursor_ + n) % rows_;
  }
  void Backward_cpu(const std::vector<Blob*>&, const std::vector<bool>&, const std::vector<Blob*>&) override {}

 private:
  std::vector<int> shape_;
  int rows_ = 1;
  int cursor_ = 0;
};

inline LayerRegistry TestRegistry() {
  LayerRegistry r;
  r.Register<LinearLayer>("TestLinear");
  r.Register<SquareLossLayer>("TestSquareLoss");
  r.Register<IdentityLayer>("TestIdentity");
  r.Register<FixedDataLayer>("TestFixedData");
  return r;
}

}  // namespace testing_layers

namespace test {

// A Solver of the SolverParameter text `text` over the test layers. On an
// error, nullptr: the test fails, unless `error` is given, which then holds
// Solver::Create's status.
inline std::unique_ptr<Solver> MakeTestSolver(const std::string& text, ParameterSync* sync = nullptr,
                                              Status* error = nullptr) {
  caffe::SolverParameter param;
  const Status parsed = ParseSolverParameter(text, "solver.prototxt", &param);
  EXPECT_TRUE(parsed.ok()) << parsed;
  LayerRegistry registry = testing_layers::TestRegistry();
  auto solver = Solver::Create(param, registry, sync);
  if (error != nullptr) {
    *error = solver.status();
  } else {
    EXPECT_TRUE(solver.ok()) << solver.status();
  }
  return solver.ok() ? std::move(solver).value() : nullptr;
}

// The solver's learnable parameters, one after another.
inline std::vector<float> LearnableWeights(const Solver& s) {
  std::vector<float> w;
  for (const Blob* b : s.net()->learnable_params()) w.insert(w.end(), b->cpu_data(), b->cpu_data() + b->count());
  return w;
}

// Fails unless the two solvers' weights and histories are bitwise equal.
inline void ExpectBitwiseSameState(const Solver& expected, const Solver& actual) {
  EXPECT_TRUE(BytesEqual(LearnableWeights(expected), LearnableWeights(actual), "weights"));
  ASSERT_EQ(expected.history().size(), actual.history().size());
  for (size_t p = 0; p < expected.history().size(); ++p) {
    const Blob& a = *expected.history()[p];
    const Blob& b = *actual.history()[p];
    EXPECT_TRUE(BytesEqual(a.cpu_data(), a.count(), b.cpu_data(), b.count(), "history " + std::to_string(p)));
  }
}

// A snapshot-and-resume run of the solver `text`: `straight` stepped 2n
// iterations; `first` stepped n and snapshot (to model_path, state_path);
// `resumed` restored from that state (at iteration n) and stepped n more.
struct SnapshotResumeRun {
  std::unique_ptr<Solver> straight, first, resumed;
  std::string model_path, state_path;
};

// Makes `run` and checks that the resumed solver ends bitwise where the
// straight one did (weights and history). Call it in
// ASSERT_NO_FATAL_FAILURE: a failed step stops the test.
inline void RunSnapshotResume(const std::string& text, int n, SnapshotResumeRun* run) {
  run->straight = MakeTestSolver(text);
  ASSERT_NE(run->straight, nullptr);
  ASSERT_TRUE(run->straight->Step(2 * n).ok());
  run->first = MakeTestSolver(text);
  ASSERT_NE(run->first, nullptr);
  ASSERT_TRUE(run->first->Step(n).ok());
  ASSERT_TRUE(run->first->Snapshot(&run->model_path, &run->state_path).ok());
  run->resumed = MakeTestSolver(text);
  ASSERT_NE(run->resumed, nullptr);
  ASSERT_TRUE(run->resumed->Restore(run->state_path).ok());
  EXPECT_EQ(run->resumed->iter(), n);
  ASSERT_TRUE(run->resumed->Step(n).ok());
  ExpectBitwiseSameState(*run->straight, *run->resumed);
}

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_TRAINER_TEST_LAYERS_H_

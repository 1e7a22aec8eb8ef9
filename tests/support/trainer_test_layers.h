// Small layers with hand-checkable math for the trainer core's tests (net,
// solver, prototxt): they let those tests build nets without the real
// compute layers and compare against values computed by hand.
#ifndef NEREUS_TESTS_SUPPORT_TRAINER_TEST_LAYERS_H_
#define NEREUS_TESTS_SUPPORT_TRAINER_TEST_LAYERS_H_

#include <vector>

#include "worker/trainer/filler.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/math_functions.h"

namespace nereus {
namespace testing_layers {

// y = x W^T + b with W [num_output, K], b [num_output], filled from
// inner_product_param's fillers (Caffe's InnerProduct, axis 1, no transpose).
class LinearLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "TestLinear"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
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
class SquareLossLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "TestSquareLoss"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
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
class IdentityLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "TestIdentity"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
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
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_TRAINER_TEST_LAYERS_H_

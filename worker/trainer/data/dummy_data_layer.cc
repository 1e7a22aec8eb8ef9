#include "worker/trainer/data/dummy_data_layer.h"

#include <cstdint>
#include <random>

#include "worker/trainer/filler.h"

namespace nereus {
namespace data {
namespace {

// A repeated field given once or once per top.
template <typename Repeated>
bool OnceOrPerTop(const Repeated& field, int tops) {
  return field.size() == 1 || field.size() == tops;
}

template <typename Repeated>
auto ForTop(const Repeated& field, int i) {
  return field.size() == 1 ? field.Get(0) : field.Get(i);
}

}  // namespace

Status DummyDataLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int tops = static_cast<int>(top.size());
  const caffe::DummyDataParameter& p = layer_param_.dummy_data_param();
  const std::string count = " (" + std::to_string(tops) + " top(s))";
  if (p.data_filler_size() > 1 && p.data_filler_size() != tops) {
    return LayerError("dummy_data_param: give no data_filler, one, or one per top" + count + "; got " +
                      std::to_string(p.data_filler_size()));
  }
  const bool legacy = p.num_size() || p.channels_size() || p.height_size() || p.width_size();
  if (legacy) {
    if (p.shape_size() > 0) return LayerError("dummy_data_param: give shape or num/channels/height/width, not both");
    if (!OnceOrPerTop(p.num(), tops) || !OnceOrPerTop(p.channels(), tops) || !OnceOrPerTop(p.height(), tops) ||
        !OnceOrPerTop(p.width(), tops)) {
      return LayerError("dummy_data_param: give each of num, channels, height and width once, or once per top" + count);
    }
  } else if (!OnceOrPerTop(p.shape(), tops)) {
    return LayerError("dummy_data_param: give shape once, or once per top" + count + "; got " +
                      std::to_string(p.shape_size()));
  }
  fillers_.clear();
  refill_.clear();
  for (int i = 0; i < tops; ++i) {
    caffe::FillerParameter filler;
    if (p.data_filler_size() == 0) {
      filler.set_type("constant");
      filler.set_value(0);
    } else {
      filler = ForTop(p.data_filler(), i);
    }
    fillers_.push_back(filler);
    refill_.push_back(filler.type() != "constant");
    if (legacy) {
      top[i]->Reshape(static_cast<int>(ForTop(p.num(), i)), static_cast<int>(ForTop(p.channels(), i)),
                      static_cast<int>(ForTop(p.height(), i)), static_cast<int>(ForTop(p.width(), i)));
    } else {
      const caffe::BlobShape& shape = ForTop(p.shape(), i);
      std::vector<int> dims;
      for (long long d : shape.dim()) {
        if (d < 0 || d > INT32_MAX) return LayerError("dummy_data_param: bad dimension " + std::to_string(d));
        dims.push_back(static_cast<int>(d));
      }
      top[i]->Reshape(dims);
    }
    // Every filler is tried here, so one that cannot fill its top is a
    // set-up error: a constant one fills its top for good, the others draw
    // from an engine of their own (Forward draws from the Net's).
    std::mt19937 probe(0);
    Status filled = FillBlob(filler, top[i], refill_[i] ? &probe : nullptr);
    if (!filled.ok())
      return LayerError("dummy_data_param.data_filler of top " + std::to_string(i) + ": " + filled.message());
  }
  return Status::OK();
}

void DummyDataLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  for (std::size_t i = 0; i < top.size(); ++i) {
    if (!refill_[i]) continue;
    const Status s = FillBlob(fillers_[i], top[i], rng());
    if (!s.ok()) {
      set_forward_error(s.code(), "dummy_data_param.data_filler of top " + std::to_string(i) + ": " + s.message());
      return;
    }
  }
}

}  // namespace data
}  // namespace nereus

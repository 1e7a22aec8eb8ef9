// DummyDataLayer: Caffe's "DummyData" layer. N >= 1 tops of fixed shapes
// (dummy_data_param: `shape` once or once per top, or the legacy num,
// channels, height, width, each once or once per top), filled by fillers
// (data_filler: none, a constant 0; one, for every top; or one per top;
// any of Caffe's fillers, worker/trainer/filler.h). As in Caffe, a top
// whose filler is "constant" is filled once, at set-up; the others are
// filled again at every Forward, from the Net's engine (rng()), so a run is
// reproducible. For benchmarks and tests that need data of a shape without
// a source. No sharding: every worker draws its own values.
//
// Runs on the CPU (the fillers are host code): on a GPU net each refilled
// top is copied to the device when the next layer reads it.
//
// Errors: counts of shapes or fillers that fit neither rule, both shape and
// legacy fields, and a filler that cannot fill its top are SetUp errors
// naming the field (where Caffe dies on a CHECK).
//
// Not thread-safe (like every Layer).
#ifndef NEREUS_WORKER_TRAINER_DATA_DUMMY_DATA_LAYER_H_
#define NEREUS_WORKER_TRAINER_DATA_DUMMY_DATA_LAYER_H_

#include <vector>

#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/layer.h"

namespace nereus {
namespace data {

class DummyDataLayer : public Layer {
 public:
  explicit DummyDataLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // The tops keep their set-up shapes.
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}

  const char* type() const override { return "DummyData"; }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {}

 private:
  std::vector<caffe::FillerParameter> fillers_;  // One per top.
  std::vector<bool> refill_;                     // Per top: not a constant filler.
};

}  // namespace data
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_DUMMY_DATA_LAYER_H_

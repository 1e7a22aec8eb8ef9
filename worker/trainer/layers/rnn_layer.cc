#include "worker/trainer/layers/rnn_layer.h"

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/layers/neuron_layers.h"

namespace nereus {
namespace {

// RNN's element-wise parts on the CPU: loops over the ops:: functions
// (cont's Scale from RecurrentCpuCells, TanH's).
struct RnnCpuCells : RecurrentCpuCells {
  void Tanh(int n, const float* in, float* out) const {
    for (int i = 0; i < n; ++i) out[i] = ops::Tanh(in[i]);
  }
  void TanhBackward(int n, const float* dy, const float* y, float* out) const {
    for (int i = 0; i < n; ++i) out[i] = ops::TanHBackward(dy[i], y[i]);
  }
};

}  // namespace

const RecurrentLayer::Spec& RNNLayer::spec() const {
  static const Spec kSpec = {1,          1,           {"W_xh", "b_h", "W_xh_static"},
                             " and h_0", "o and h_T", "o alone (h_T is a top with expose_hidden)"};
  return kSpec;
}

void RNNLayer::AddStepParameters(std::vector<std::vector<int>>* shapes, std::vector<std::string>* names) const {
  const int H = hidden_;
  shapes->insert(shapes->end(), {{H, H}, {H, H}, {H}});
  names->insert(names->end(), {"W_hh", "W_ho", "b_o"});
}

void RNNLayer::ReshapeSteps() {
  const int H = hidden_;
  hidden_x_.Reshape({steps_, streams_, H});
  hidden_static_.Reshape({streams_, H});
  h_.Reshape({steps_ + 1, streams_, H});
  continued_.Reshape({steps_, streams_, H});
  pre_.Reshape({steps_, streams_, H});
  out_pre_.Reshape({steps_, streams_, H});
}

void RNNLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardWith(CpuMath(), RnnCpuCells(), bottom, top);
}

void RNNLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[1]) << "cont (bottom 1) has no gradient";
  BackwardWith(CpuMath(), RnnCpuCells(), top, propagate_down, bottom);
}

}  // namespace nereus

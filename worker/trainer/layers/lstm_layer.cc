#include "worker/trainer/layers/lstm_layer.h"

#include "worker/trainer/layers/layer_check.h"

namespace nereus {
namespace {

// LSTM's element-wise parts on the CPU: loops over ops:: functions (cont's
// Scale from RecurrentCpuCells, LSTMUnit's).
struct LstmCpuCells : RecurrentCpuCells {
  void UnitForward(int n, const float* c_prev, const float* gates, const float* cont, int hidden, float* c,
                   float* h) const {
    for (int i = 0; i < n; ++i) {
      const int stream = i / hidden;
      ops::LSTMUnitForward(c_prev[i], gates + 4 * stream * hidden, i % hidden, hidden, cont[stream], &c[i], &h[i]);
    }
  }
  void UnitBackward(int n, const float* c_prev, const float* gates, const float* cont, int hidden, const float* c,
                    const float* c_diff, const float* h_diff, float* c_prev_diff, float* gates_diff) const {
    for (int i = 0; i < n; ++i) {
      const int stream = i / hidden;
      ops::LSTMUnitBackward(c_prev[i], gates + 4 * stream * hidden, i % hidden, hidden, cont[stream], c[i], c_diff[i],
                            h_diff[i], &c_prev_diff[i], gates_diff + 4 * stream * hidden);
    }
  }
};

}  // namespace

const RecurrentLayer::Spec& LSTMLayer::spec() const {
  static const Spec kSpec = {2,
                             4,
                             {"W_xc", "b_c", "W_xc_static"},
                             ", h_0 and c_0",
                             "h, h_T and c_T",
                             "h alone (h_T and c_T are tops with expose_hidden)"};
  return kSpec;
}

void LSTMLayer::AddStepParameters(std::vector<std::vector<int>>* shapes, std::vector<std::string>* names) const {
  shapes->push_back({4 * hidden_, hidden_});
  names->push_back("W_hc");
}

void LSTMLayer::ReshapeSteps() {
  const int H = hidden_, G = 4 * hidden_;
  gate_x_.Reshape({steps_, streams_, G});
  gate_static_.Reshape({streams_, G});
  gates_.Reshape({steps_, streams_, G});
  h_.Reshape({steps_ + 1, streams_, H});
  c_.Reshape({steps_ + 1, streams_, H});
  continued_.Reshape({steps_, streams_, H});
}

void LSTMLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardWith(CpuMath(), LstmCpuCells(), bottom, top);
}

void LSTMLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[1]) << "cont (bottom 1) has no gradient";
  BackwardWith(CpuMath(), LstmCpuCells(), top, propagate_down, bottom);
}

}  // namespace nereus

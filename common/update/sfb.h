// Sufficient-factor broadcasting (SFB: Xie et al., "Distributed Machine
// Learning via Sufficient Factor Broadcasting", 2015; Poseidon): a fully
// connected layer's weight gradient over a batch is left^T * right, left = K x
// rows, right = K x cols (for Caffe's InnerProduct without transpose: the top
// diff and the bottom data). Workers send each other these factors instead of
// the rows x cols gradient; each rebuilds the summed gradient with one GEMM
// and applies the same SGD step the servers would (common/update/sgd.h).
//
// Wire format of one worker's factors of one tensor for one clock: a FACTORS
// message (proto/nereus.proto) whose header carries tensor, clock and
// factor_rows = K, and exactly two payload frames: left (K * rows float32,
// row-major) then right (K * cols float32). The receiver answers FACTORS_ACK,
// or ERROR naming what was wrong.
#ifndef NEREUS_COMMON_UPDATE_SFB_H_
#define NEREUS_COMMON_UPDATE_SFB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "common/net/message.h"
#include "proto/nereus.pb.h"

namespace nereus {

// The weight is rows x cols (row-major), as registered.
struct FactorShape {
  int64_t rows = 0;
  int64_t cols = 0;
};

// Largest K accepted from a peer (a batch of a million rows is a bug).
constexpr int64_t kMaxFactorRows = 1 << 20;

// One worker's factors of one clock: gradient = left^T * right.
struct Factors {
  int64_t k = 0;
  Buffer left;   // k * rows floats.
  Buffer right;  // k * cols floats.
};

// The FACTORS message of `f` for tensor `tensor` and `clock` (frames shared,
// not copied).
Message FactorsMessage(int tensor, int64_t clock, const Factors& f);

// Checks a decoded FACTORS message against the tensor's shape and returns its
// factors (sharing the frames). InvalidArgument, naming `what` (the tensor)
// and the mismatch, when: not exactly two frames, K < 1 or K >
// kMaxFactorRows, a frame whose size is not K * rows (K * cols) floats.
StatusOr<Factors> ParseFactors(const Message& msg, const FactorShape& shape, const std::string& what);

// Scratch space reused across clocks (the stacked factors).
struct FactorScratch {
  std::vector<float> left, right, grad;
};

// grad (rows x cols) = scale * sum over w of by_rank[w].left^T * by_rank[w].right,
// computed as ONE GEMM over the factors stacked in the order given (worker
// rank order): the same inputs give the same bits on every worker.
void FactorGradient(const std::vector<const Factors*>& by_rank, const FactorShape& shape, float scale, float* grad,
                    FactorScratch* scratch);

// One clock's update of an SFB tensor, the servers' semantics: the gradient
// above with scale = 1 / by_rank.size() (the workers' average), then one
// Caffe SGD step (LearningRate(sgd, clock), lr_mult, decay_mult, momentum,
// weight decay) on `data` and `history` (rows * cols floats each).
void ApplySufficientFactors(const pb::SgdConfig& sgd, int64_t clock, float lr_mult, float decay_mult,
                            const std::vector<const Factors*>& by_rank, const FactorShape& shape, float* data,
                            float* history, FactorScratch* scratch);

}  // namespace nereus

#endif  // NEREUS_COMMON_UPDATE_SFB_H_

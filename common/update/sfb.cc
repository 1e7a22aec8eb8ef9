#include "common/update/sfb.h"

#include <cblas.h>

#include <cstring>

#include "common/update/sgd.h"

namespace nereus {

Message FactorsMessage(int tensor, int64_t clock, const Factors& f) {
  Message m;
  m.header.set_op(pb::FACTORS);
  m.header.set_tensor(tensor);
  m.header.set_clock(clock);
  m.header.set_factor_rows(f.k);
  m.header.set_dtype(pb::FLOAT32);
  m.payload = {f.left, f.right};
  return m;
}

StatusOr<Factors> ParseFactors(const Message& msg, const FactorShape& shape, const std::string& what) {
  const pb::Header& h = msg.header;
  const std::string where = "factors of " + what + " for clock " + std::to_string(h.clock());
  if (h.dtype() != pb::FLOAT32)
    return InvalidArgumentError(where + ": dtype " + pb::DType_Name(h.dtype()) + ", expected FLOAT32");
  if (msg.payload.size() != 2)
    return InvalidArgumentError(where + ": " + std::to_string(msg.payload.size()) +
                                " payload frame(s), expected 2 (left and right factor)");
  const int64_t k = h.factor_rows();
  if (k < 1 || k > kMaxFactorRows)
    return InvalidArgumentError(where + ": factor_rows " + std::to_string(k) + " is outside [1, " +
                                std::to_string(kMaxFactorRows) + "]");
  const uint64_t left = static_cast<uint64_t>(k * shape.rows) * sizeof(float);
  const uint64_t right = static_cast<uint64_t>(k * shape.cols) * sizeof(float);
  if (msg.payload[0].size() != left)
    return InvalidArgumentError(where + ": left factor frame has " + std::to_string(msg.payload[0].size()) +
                                " bytes, expected " + std::to_string(left) + " (" + std::to_string(k) + " x " +
                                std::to_string(shape.rows) + " floats)");
  if (msg.payload[1].size() != right)
    return InvalidArgumentError(where + ": right factor frame has " + std::to_string(msg.payload[1].size()) +
                                " bytes, expected " + std::to_string(right) + " (" + std::to_string(k) + " x " +
                                std::to_string(shape.cols) + " floats)");
  Factors f;
  f.k = k;
  f.left = msg.payload[0];
  f.right = msg.payload[1];
  return f;
}

void FactorGradient(const std::vector<const Factors*>& by_rank, const FactorShape& shape, float scale, float* grad,
                    FactorScratch* scratch) {
  CHECK(!by_rank.empty());
  const size_t rows = static_cast<size_t>(shape.rows), cols = static_cast<size_t>(shape.cols);
  int64_t total = 0;
  for (const Factors* f : by_rank) total += f->k;
  const float* left;
  const float* right;
  if (by_rank.size() == 1) {
    left = by_rank[0]->left.floats();
    right = by_rank[0]->right.floats();
  } else {
    // Stack in the order given: [left_0; left_1; ...] and [right_0; ...].
    scratch->left.resize(static_cast<size_t>(total) * rows);
    scratch->right.resize(static_cast<size_t>(total) * cols);
    size_t at_l = 0, at_r = 0;
    for (const Factors* f : by_rank) {
      std::memcpy(scratch->left.data() + at_l, f->left.data(), f->left.size());
      std::memcpy(scratch->right.data() + at_r, f->right.data(), f->right.size());
      at_l += f->left.size() / sizeof(float);
      at_r += f->right.size() / sizeof(float);
    }
    left = scratch->left.data();
    right = scratch->right.data();
  }
  // grad = scale * left^T (rows x total) * right (total x cols).
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(cols),
              static_cast<int>(total), scale, left, static_cast<int>(rows), right, static_cast<int>(cols), 0.0f, grad,
              static_cast<int>(cols));
}

void ApplySufficientFactors(const pb::SgdConfig& sgd, int64_t clock, float lr_mult, float decay_mult,
                            const std::vector<const Factors*>& by_rank, const FactorShape& shape, float* data,
                            float* history, FactorScratch* scratch) {
  const size_t n = static_cast<size_t>(shape.rows * shape.cols);
  scratch->grad.resize(n);
  FactorGradient(by_rank, shape, 1.0f / static_cast<float>(by_rank.size()), scratch->grad.data(), scratch);
  SgdStep(sgd, LearningRate(sgd, clock), lr_mult, decay_mult, scratch->grad.data(), data, history, n);
}

}  // namespace nereus

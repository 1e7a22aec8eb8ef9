#include "worker/trainer/layers/im2col.h"

#include <algorithm>

namespace nereus {
namespace layers {
namespace {

// 0 <= a < b, in one unsigned comparison (as Caffe does).
inline bool InRange(int a, int b) { return static_cast<unsigned>(a) < static_cast<unsigned>(b); }

// Walks the column matrix of `g` in order (Caffe's im2col layout), calling
// visit(column entry, image entry) for each column entry with the image
// entry it stands for, nullptr in the padding.
template <typename Image, typename Column, typename Visit>
void ForEachColumn(Image* data_im, const ConvGeometry& g, Column* data_col, Visit visit) {
  const int output_h = g.output_h();
  const int output_w = g.output_w();
  const int channel_size = g.height * g.width;
  for (int c = 0; c < g.channels; ++c, data_im += channel_size) {
    for (int kh = 0; kh < g.kernel_h; ++kh) {
      for (int kw = 0; kw < g.kernel_w; ++kw) {
        int input_row = -g.pad_h + kh * g.dilation_h;
        for (int oh = 0; oh < output_h; ++oh, input_row += g.stride_h) {
          Image* row = InRange(input_row, g.height) ? data_im + input_row * g.width : nullptr;
          int input_col = -g.pad_w + kw * g.dilation_w;
          for (int ow = 0; ow < output_w; ++ow, input_col += g.stride_w) {
            visit(*data_col++, row != nullptr && InRange(input_col, g.width) ? row + input_col : nullptr);
          }
        }
      }
    }
  }
}

}  // namespace

void Im2Col(const float* data_im, const ConvGeometry& g, float* data_col) {
  ForEachColumn(data_im, g, data_col, [](float& col, const float* im) { col = im != nullptr ? *im : 0.0f; });
}

void Col2Im(const float* data_col, const ConvGeometry& g, float* data_im) {
  std::fill(data_im, data_im + g.channels * g.height * g.width, 0.0f);
  ForEachColumn(data_im, g, data_col, [](const float& col, float* im) {
    if (im != nullptr) *im += col;
  });
}

void Im2ColImageMajor(const float* data_im, const ConvGeometry& g, int num, float* data_col) {
  const long long stride = ImageMajorRowStride(g, num);
  const int im_size = g.channels * g.height * g.width;
  const int spatial = g.output_h() * g.output_w();
  for (int b = 0; b < num; ++b) {
    for (int c = 0; c < g.channels; ++c) {
      for (int h = 0; h < g.output_h(); ++h) {
        for (int w = 0; w < g.output_w(); ++w) {
          Im2ColColumnStrided(data_im + static_cast<long long>(b) * im_size, g, c, h, w,
                              data_col + static_cast<long long>(b) * spatial, stride);
        }
      }
    }
  }
}

void ImagesToRows(const float* images, int num, int rows, int cols, float* out) {
  for (int r = 0; r < rows; ++r) {
    for (int b = 0; b < num; ++b) {
      for (int s = 0; s < cols; ++s) *out++ = images[ImagesToRowsSource(r, b, s, rows, cols)];
    }
  }
}

}  // namespace layers
}  // namespace nereus

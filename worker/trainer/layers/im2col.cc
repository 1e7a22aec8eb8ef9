#include "worker/trainer/layers/im2col.h"

#include <algorithm>

namespace nereus {
namespace layers {
namespace {

// 0 <= a < b, in one unsigned comparison (as Caffe does).
inline bool InRange(int a, int b) { return static_cast<unsigned>(a) < static_cast<unsigned>(b); }

}  // namespace

void Im2Col(const float* data_im, const ConvGeometry& g, float* data_col) {
  const int output_h = g.output_h();
  const int output_w = g.output_w();
  const int channel_size = g.height * g.width;
  for (int c = 0; c < g.channels; ++c, data_im += channel_size) {
    for (int kh = 0; kh < g.kernel_h; ++kh) {
      for (int kw = 0; kw < g.kernel_w; ++kw) {
        int input_row = -g.pad_h + kh * g.dilation_h;
        for (int oh = 0; oh < output_h; ++oh, input_row += g.stride_h) {
          if (!InRange(input_row, g.height)) {
            std::fill(data_col, data_col + output_w, 0.0f);
            data_col += output_w;
            continue;
          }
          int input_col = -g.pad_w + kw * g.dilation_w;
          for (int ow = 0; ow < output_w; ++ow, input_col += g.stride_w) {
            *data_col++ = InRange(input_col, g.width) ? data_im[input_row * g.width + input_col] : 0.0f;
          }
        }
      }
    }
  }
}

void Col2Im(const float* data_col, const ConvGeometry& g, float* data_im) {
  std::fill(data_im, data_im + g.channels * g.height * g.width, 0.0f);
  const int output_h = g.output_h();
  const int output_w = g.output_w();
  const int channel_size = g.height * g.width;
  for (int c = 0; c < g.channels; ++c, data_im += channel_size) {
    for (int kh = 0; kh < g.kernel_h; ++kh) {
      for (int kw = 0; kw < g.kernel_w; ++kw) {
        int input_row = -g.pad_h + kh * g.dilation_h;
        for (int oh = 0; oh < output_h; ++oh, input_row += g.stride_h) {
          if (!InRange(input_row, g.height)) {
            data_col += output_w;
            continue;
          }
          int input_col = -g.pad_w + kw * g.dilation_w;
          for (int ow = 0; ow < output_w; ++ow, input_col += g.stride_w) {
            if (InRange(input_col, g.width)) {
              data_im[input_row * g.width + input_col] += *data_col;
            }
            ++data_col;
          }
        }
      }
    }
  }
}

}  // namespace layers
}  // namespace nereus

#include "bench/sim/models.h"

#include <algorithm>
#include <cmath>

namespace nereus {
namespace bench {

uint64_t ModelSpec::parameters() const {
  uint64_t n = 0;
  for (const auto& l : layers)
    for (const auto& shape : l.params) {
      uint64_t k = 1;
      for (int64_t d : shape) k *= d;
      n += k;
    }
  return n;
}

double ModelSpec::forward_flops() const {
  double f = 0;
  for (const auto& l : layers) f += l.forward_flops;
  return f;
}

namespace {

// A k x k convolution cin -> cout producing an out x out map (2 FLOPs a MAC).
ModelLayer Conv(const std::string& name, int k, int cin, int cout, int out, bool bias, bool batchnorm) {
  ModelLayer l;
  l.name = name;
  l.params.push_back({cout, cin, k, k});
  if (bias) l.params.push_back({cout});
  if (batchnorm) {
    l.params.push_back({cout});  // scale
    l.params.push_back({cout});  // shift
  }
  l.forward_flops = 2.0 * k * k * cin * cout * static_cast<double>(out) * out;
  return l;
}

ModelLayer Fc(const std::string& name, int in, int out) {
  ModelLayer l;
  l.name = name;
  l.params = {{out, in}, {out}};
  l.forward_flops = 2.0 * in * out;
  l.fully_connected = true;
  return l;
}

ModelSpec Vgg19(int classes = 1000) {
  ModelSpec m;
  m.name = classes == 1000 ? "vgg19" : "vgg19_22k";
  // (channels, convolutions) per block; spatial size halves after each block.
  const int blocks[5][2] = {{64, 2}, {128, 2}, {256, 4}, {512, 4}, {512, 4}};
  int cin = 3, size = 224;
  for (int b = 0; b < 5; ++b) {
    for (int i = 0; i < blocks[b][1]; ++i) {
      m.layers.push_back(
          Conv("conv" + std::to_string(b + 1) + "_" + std::to_string(i + 1), 3, cin, blocks[b][0], size, true, false));
      cin = blocks[b][0];
    }
    size /= 2;
  }
  m.layers.push_back(Fc("fc6", 512 * 7 * 7, 4096));
  m.layers.push_back(Fc("fc7", 4096, 4096));
  m.layers.push_back(Fc("fc8", 4096, classes));
  return m;
}

ModelSpec Resnet50() {
  ModelSpec m;
  m.name = "resnet50";
  m.layers.push_back(Conv("conv1", 7, 3, 64, 112, false, true));
  const int stages[4][3] = {{64, 3, 56}, {128, 4, 28}, {256, 6, 14}, {512, 3, 7}};  // width, blocks, map size
  int cin = 64;
  for (int s = 0; s < 4; ++s) {
    const int w = stages[s][0], out = stages[s][2], cout = 4 * w;
    for (int b = 0; b < stages[s][1]; ++b) {
      const std::string n = "res" + std::to_string(s + 2) + static_cast<char>('a' + b);
      m.layers.push_back(Conv(n + "_branch2a", 1, cin, w, out, false, true));
      m.layers.push_back(Conv(n + "_branch2b", 3, w, w, out, false, true));
      m.layers.push_back(Conv(n + "_branch2c", 1, w, cout, out, false, true));
      if (b == 0) m.layers.push_back(Conv(n + "_branch1", 1, cin, cout, out, false, true));
      cin = cout;
    }
  }
  m.layers.push_back(Fc("fc1000", 2048, 1000));
  return m;
}

// A kh x kw convolution (no bias, batch norm) on an out_h x out_w map.
ModelLayer ConvBn(const std::string& name, int kh, int kw, int cin, int cout, int out_h, int out_w) {
  ModelLayer l;
  l.name = name;
  l.params = {{cout, cin, kh, kw}, {cout}, {cout}};
  l.forward_flops = 2.0 * kh * kw * cin * cout * static_cast<double>(out_h) * out_w;
  return l;
}

// Inception-V3 (Szegedy et al. 2016, 299 x 299 input, no auxiliary head):
// every convolution with batch-norm scale and shift, the branches of each
// Inception module listed one after another.
ModelSpec InceptionV3() {
  ModelSpec m;
  m.name = "inception_v3";
  auto conv = [&m](const std::string& n, int kh, int kw, int cin, int cout, int out) {
    m.layers.push_back(ConvBn(n, kh, kw, cin, cout, out, out));
  };
  conv("conv1_3x3_s2", 3, 3, 3, 32, 149);
  conv("conv2_3x3", 3, 3, 32, 32, 147);
  conv("conv3_3x3", 3, 3, 32, 64, 147);
  conv("conv4_1x1", 1, 1, 64, 80, 73);
  conv("conv5_3x3", 3, 3, 80, 192, 71);
  // 35 x 35: three modules A.
  int cin = 192;
  const int pool_features[3] = {32, 64, 64};
  for (int i = 0; i < 3; ++i) {
    const std::string n = std::string("mixed5") + static_cast<char>('b' + i) + "_";
    conv(n + "1x1", 1, 1, cin, 64, 35);
    conv(n + "5x5_reduce", 1, 1, cin, 48, 35);
    conv(n + "5x5", 5, 5, 48, 64, 35);
    conv(n + "3x3dbl_reduce", 1, 1, cin, 64, 35);
    conv(n + "3x3dbl_1", 3, 3, 64, 96, 35);
    conv(n + "3x3dbl_2", 3, 3, 96, 96, 35);
    conv(n + "pool_proj", 1, 1, cin, pool_features[i], 35);
    cin = 64 + 64 + 96 + pool_features[i];
  }
  // Reduction to 17 x 17.
  conv("mixed6a_3x3_s2", 3, 3, cin, 384, 17);
  conv("mixed6a_3x3dbl_reduce", 1, 1, cin, 64, 35);
  conv("mixed6a_3x3dbl_1", 3, 3, 64, 96, 35);
  conv("mixed6a_3x3dbl_2_s2", 3, 3, 96, 96, 17);
  cin = 384 + 96 + cin;  // 768
  // 17 x 17: four modules B with factorised 7x7 convolutions.
  const int c7s[4] = {128, 160, 160, 192};
  for (int i = 0; i < 4; ++i) {
    const std::string n = std::string("mixed6") + static_cast<char>('b' + i) + "_";
    const int c7 = c7s[i];
    conv(n + "1x1", 1, 1, cin, 192, 17);
    conv(n + "7x7_reduce", 1, 1, cin, c7, 17);
    m.layers.push_back(ConvBn(n + "7x7_1x7", 1, 7, c7, c7, 17, 17));
    m.layers.push_back(ConvBn(n + "7x7_7x1", 7, 1, c7, 192, 17, 17));
    conv(n + "7x7dbl_reduce", 1, 1, cin, c7, 17);
    m.layers.push_back(ConvBn(n + "7x7dbl_7x1_1", 7, 1, c7, c7, 17, 17));
    m.layers.push_back(ConvBn(n + "7x7dbl_1x7_1", 1, 7, c7, c7, 17, 17));
    m.layers.push_back(ConvBn(n + "7x7dbl_7x1_2", 7, 1, c7, c7, 17, 17));
    m.layers.push_back(ConvBn(n + "7x7dbl_1x7_2", 1, 7, c7, 192, 17, 17));
    conv(n + "pool_proj", 1, 1, cin, 192, 17);
  }
  // Reduction to 8 x 8.
  conv("mixed7a_3x3_reduce", 1, 1, cin, 192, 17);
  conv("mixed7a_3x3_s2", 3, 3, 192, 320, 8);
  conv("mixed7a_7x7x3_reduce", 1, 1, cin, 192, 17);
  m.layers.push_back(ConvBn("mixed7a_7x7x3_1x7", 1, 7, 192, 192, 17, 17));
  m.layers.push_back(ConvBn("mixed7a_7x7x3_7x1", 7, 1, 192, 192, 17, 17));
  conv("mixed7a_7x7x3_3x3_s2", 3, 3, 192, 192, 8);
  cin = 320 + 192 + cin;  // 1280
  // 8 x 8: two modules C with split 3x3 convolutions.
  for (int i = 0; i < 2; ++i) {
    const std::string n = std::string("mixed7") + static_cast<char>('b' + i) + "_";
    conv(n + "1x1", 1, 1, cin, 320, 8);
    conv(n + "3x3_reduce", 1, 1, cin, 384, 8);
    m.layers.push_back(ConvBn(n + "3x3_1x3", 1, 3, 384, 384, 8, 8));
    m.layers.push_back(ConvBn(n + "3x3_3x1", 3, 1, 384, 384, 8, 8));
    conv(n + "3x3dbl_reduce", 1, 1, cin, 448, 8);
    conv(n + "3x3dbl_3x3", 3, 3, 448, 384, 8);
    m.layers.push_back(ConvBn(n + "3x3dbl_1x3", 1, 3, 384, 384, 8, 8));
    m.layers.push_back(ConvBn(n + "3x3dbl_3x1", 3, 1, 384, 384, 8, 8));
    conv(n + "pool_proj", 1, 1, cin, 192, 8);
    cin = 320 + 768 + 768 + 192;  // 2048
  }
  m.layers.push_back(Fc("fc", cin, 1000));
  return m;
}

ModelSpec Lenet() {
  ModelSpec m;
  m.name = "lenet";
  m.layers.push_back(Conv("conv1", 5, 1, 20, 24, true, false));
  m.layers.push_back(Conv("conv2", 5, 20, 50, 8, true, false));
  m.layers.push_back(Fc("ip1", 800, 500));
  m.layers.push_back(Fc("ip2", 500, 10));
  return m;
}

}  // namespace

StatusOr<ModelSpec> ModelByName(const std::string& name) {
  if (name == "vgg19") return Vgg19();
  // Poseidon's VGG19-22K: VGG19 with ImageNet-22K's 21,841-way classifier.
  if (name == "vgg19_22k") return Vgg19(21841);
  if (name == "resnet50") return Resnet50();
  if (name == "inception_v3") return InceptionV3();
  if (name == "lenet") return Lenet();
  return InvalidArgumentError("unknown --model \"" + name +
                              "\" (expected vgg19, vgg19_22k, resnet50, inception_v3 or lenet)");
}

ModelSpec Shrink(const ModelSpec& model, double factor) {
  ModelSpec out = model;
  if (factor <= 1) return out;
  const double side = std::sqrt(factor);
  for (ModelLayer& l : out.layers) {
    for (size_t p = 0; p < l.params.size(); ++p) {
      auto& shape = l.params[p];
      if (l.fully_connected && p == 0 && shape.size() == 2) {
        // The weight stays a matrix with factors (see models.h).
        for (int64_t& d : shape) d = std::max<int64_t>(1, std::llround(static_cast<double>(d) / side));
        continue;
      }
      uint64_t n = 1;
      for (int64_t d : shape) n *= d;
      shape = {static_cast<int64_t>(std::ceil(n / factor))};
    }
    if (l.fully_connected) l.factor_rows_scale /= side;
    l.forward_flops /= factor;
  }
  return out;
}

int64_t FactorRows(const ModelLayer& layer, int batch) {
  return std::max<int64_t>(1, std::llround(batch * layer.factor_rows_scale));
}

}  // namespace bench
}  // namespace nereus

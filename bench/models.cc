#include "bench/models.h"

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
  return l;
}

ModelSpec Vgg19() {
  ModelSpec m;
  m.name = "vgg19";
  // (channels, convolutions) per block; spatial size halves after each block.
  const int blocks[5][2] = {{64, 2}, {128, 2}, {256, 4}, {512, 4}, {512, 4}};
  int cin = 3, size = 224;
  for (int b = 0; b < 5; ++b) {
    for (int i = 0; i < blocks[b][1]; ++i) {
      m.layers.push_back(Conv("conv" + std::to_string(b + 1) + "_" + std::to_string(i + 1), 3, cin, blocks[b][0], size,
                              true, false));
      cin = blocks[b][0];
    }
    size /= 2;
  }
  m.layers.push_back(Fc("fc6", 512 * 7 * 7, 4096));
  m.layers.push_back(Fc("fc7", 4096, 4096));
  m.layers.push_back(Fc("fc8", 4096, 1000));
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
  if (name == "resnet50") return Resnet50();
  if (name == "lenet") return Lenet();
  return InvalidArgumentError("unknown --model \"" + name + "\" (expected vgg19, resnet50 or lenet)");
}

}  // namespace bench
}  // namespace nereus

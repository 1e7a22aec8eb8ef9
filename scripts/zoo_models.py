#!/usr/bin/env python3
"""Writes the model-zoo train_val nets in Caffe's prototxt format:

  worker/trainer/models/resnet50_train_val.prototxt
      ResNet-50 as Kaiming He's Caffe release (ResNet-50-deploy.prototxt):
      stride in the first 1x1 of each down-sampling block, convolutions
      without bias, each followed by BatchNorm + Scale (bias_term) in place.
  worker/trainer/models/googlenet_train_val.prototxt
      BVLC GoogLeNet (models/bvlc_googlenet/train_val.prototxt): inception
      modules 3a-5b, LRN, and the two auxiliary classifiers (loss_weight 0.3).

  worker/trainer/models/vgg19_train_val.prototxt
      VGG-19 (Simonyan and Zisserman 2014), as their Caffe release
      VGG_ILSVRC_19_layers: sixteen 3x3 convolutions in five blocks, each
      block closed by a 2x2 max pooling, fc6/fc7 (4096, dropout 0.5), fc8.
  worker/trainer/models/caffenet_train_val.prototxt
      BVLC CaffeNet (models/bvlc_reference_caffenet/train_val.prototxt): the
      AlexNet variant with pooling before normalization, grouped conv2/4/5.
  worker/trainer/models/cifar10_full_train_test.prototxt
      Caffe's CIFAR-10 full (examples/cifar10/cifar10_full_train_test.prototxt):
      three 5x5 convolutions with max/average pooling and WITHIN_CHANNEL LRN.

The ImageNet nets read ImageNet-style LMDBs (paths relative to the repository
root, as the LeNet example) with crop 224 (CaffeNet 227) and Caffe's mean
values, CIFAR-10 its 32x32 LMDBs. Run from anywhere:
  scripts/zoo_models.py            # (re)writes both files
  scripts/zoo_models.py --check    # exits 1 if the files differ from the output
and print the parameter counts the tests check (--counts).
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "worker", "trainer", "models")


class Writer:
    def __init__(self, name, header):
        self.lines = [f"# {l}".rstrip() for l in header] + [f'name: "{name}"']
        self.params = 0  # learned parameters (BatchNorm statistics excluded)

    def layer(self, body):
        self.lines.append("layer {")
        self.lines.extend("  " + l for l in body)
        self.lines.append("}")

    def text(self):
        return "\n".join(self.lines) + "\n"


def data_layers(w, train_source, test_source, train_batch, test_batch, crop=224):
    for phase, source, batch, mirror in (("TRAIN", train_source, train_batch, "true"),
                                         ("TEST", test_source, test_batch, "false")):
        w.layer(['name: "data"', 'type: "Data"', 'top: "data"', 'top: "label"',
                 f"include {{ phase: {phase} }}",
                 "transform_param {", f"  mirror: {mirror}", f"  crop_size: {crop}",
                 "  mean_value: 104", "  mean_value: 117", "  mean_value: 123", "}",
                 "data_param {", f'  source: "{source}"', f"  batch_size: {batch}",
                 "  backend: LMDB", "}"])


def conv(w, name, bottom, top, num_output, kernel, stride=1, pad=0, bias=True, cin=None,
         weight_filler='type: "msra"', bias_value=0.0, lr=True):
    body = [f'name: "{name}"', 'type: "Convolution"', f'bottom: "{bottom}"', f'top: "{top}"']
    if bias:
        body += ["param { lr_mult: 1 decay_mult: 1 }", "param { lr_mult: 2 decay_mult: 0 }"]
    body += ["convolution_param {", f"  num_output: {num_output}"]
    if pad:
        body.append(f"  pad: {pad}")
    body.append(f"  kernel_size: {kernel}")
    if stride != 1:
        body.append(f"  stride: {stride}")
    if not bias:
        body.append("  bias_term: false")
    body.append(f"  weight_filler {{ {weight_filler} }}")
    if bias:
        body.append(f'  bias_filler {{ type: "constant" value: {bias_value} }}')
    body.append("}")
    w.layer(body)
    w.params += num_output * cin * kernel * kernel + (num_output if bias else 0)


def relu(w, name, blob):
    w.layer([f'name: "{name}"', 'type: "ReLU"', f'bottom: "{blob}"', f'top: "{blob}"'])


def pool(w, name, bottom, top, method, kernel, stride, pad=0):
    body = [f'name: "{name}"', 'type: "Pooling"', f'bottom: "{bottom}"', f'top: "{top}"',
            "pooling_param {", f"  pool: {method}", f"  kernel_size: {kernel}",
            f"  stride: {stride}"]
    if pad:
        body.append(f"  pad: {pad}")
    body.append("}")
    w.layer(body)


def fc(w, name, bottom, top, num_output, cin, weight_filler='type: "xavier"', bias_value=0.0):
    w.layer([f'name: "{name}"', 'type: "InnerProduct"', f'bottom: "{bottom}"', f'top: "{top}"',
             "param { lr_mult: 1 decay_mult: 1 }", "param { lr_mult: 2 decay_mult: 0 }",
             "inner_product_param {", f"  num_output: {num_output}",
             f"  weight_filler {{ {weight_filler} }}",
             f'  bias_filler {{ type: "constant" value: {bias_value} }}', "}"])
    w.params += num_output * cin + num_output


def loss_and_accuracy(w, prefix, bottom, loss_weight=None):
    body = [f'name: "{prefix}loss"', 'type: "SoftmaxWithLoss"', f'bottom: "{bottom}"',
            'bottom: "label"', f'top: "{prefix}loss"']
    if loss_weight is not None:
        body.append(f"loss_weight: {loss_weight}")
    w.layer(body)
    for k in (1, 5):
        body = [f'name: "{prefix}top-{k}"', 'type: "Accuracy"', f'bottom: "{bottom}"',
                'bottom: "label"', f'top: "{prefix}top-{k}"', "include { phase: TEST }"]
        if k != 1:
            body.append(f"accuracy_param {{ top_k: {k} }}")
        w.layer(body)


# ---- ResNet-50 ----

def conv_bn(w, name, bn, sc, bottom, cin, cout, kernel, stride=1, pad=0, with_relu=True):
    conv(w, name, bottom, name, cout, kernel, stride, pad, bias=False, cin=cin)
    w.layer([f'name: "{bn}"', 'type: "BatchNorm"', f'bottom: "{name}"', f'top: "{name}"'])
    w.layer([f'name: "{sc}"', 'type: "Scale"', f'bottom: "{name}"', f'top: "{name}"',
             "scale_param { bias_term: true }"])
    w.params += 2 * cout  # the Scale layer's scale and bias
    if with_relu:
        relu(w, name + "_relu", name)


def resnet50():
    w = Writer("ResNet-50", [
        "ResNet-50 (He et al. 2015) in Caffe's format, as Kaiming He's Caffe release:",
        "the stride sits in the first 1x1 convolution of each down-sampling block,",
        "convolutions have no bias, and each is followed by BatchNorm + Scale",
        "(bias_term) in place. 25,557,032 learned parameters (the BatchNorm",
        "statistics, lr_mult 0, are not counted). Written by scripts/zoo_models.py."])
    data_layers(w, "data/imagenet/ilsvrc12_train_lmdb", "data/imagenet/ilsvrc12_val_lmdb", 32, 50)
    conv_bn(w, "conv1", "bn_conv1", "scale_conv1", "data", 3, 64, 7, 2, 3)
    pool(w, "pool1", "conv1", "pool1", "MAX", 3, 2)
    bottom, cin = "pool1", 64
    for stage, blocks, width in ((2, 3, 64), (3, 4, 128), (4, 6, 256), (5, 3, 512)):
        for b in range(blocks):
            s = f"{stage}{chr(ord('a') + b)}"
            stride = 2 if (b == 0 and stage > 2) else 1
            cout = 4 * width
            if b == 0:
                conv_bn(w, f"res{s}_branch1", f"bn{s}_branch1", f"scale{s}_branch1", bottom, cin,
                        cout, 1, stride, with_relu=False)
                shortcut = f"res{s}_branch1"
            else:
                shortcut = bottom
            conv_bn(w, f"res{s}_branch2a", f"bn{s}_branch2a", f"scale{s}_branch2a", bottom, cin,
                    width, 1, stride)
            conv_bn(w, f"res{s}_branch2b", f"bn{s}_branch2b", f"scale{s}_branch2b",
                    f"res{s}_branch2a", width, width, 3, 1, 1)
            conv_bn(w, f"res{s}_branch2c", f"bn{s}_branch2c", f"scale{s}_branch2c",
                    f"res{s}_branch2b", width, cout, 1, with_relu=False)
            w.layer([f'name: "res{s}"', 'type: "Eltwise"', f'bottom: "{shortcut}"',
                     f'bottom: "res{s}_branch2c"', f'top: "res{s}"'])
            relu(w, f"res{s}_relu", f"res{s}")
            bottom, cin = f"res{s}", cout
    pool(w, "pool5", bottom, "pool5", "AVE", 7, 1)
    fc(w, "fc1000", "pool5", "fc1000", 1000, 2048, 'type: "msra"')
    loss_and_accuracy(w, "", "fc1000")
    return w


# ---- GoogLeNet ----

def inception(w, name, bottom, cin, c1, c3r, c3, c5r, c5, cp):
    p = f"inception_{name}/"

    def branch(part, below, cout, kernel, c_below, pad=0):  # A convolution and its ReLU, in place.
        conv(w, p + part, below, p + part, cout, kernel, pad=pad, cin=c_below, weight_filler='type: "xavier"',
             bias_value=0.2)
        relu(w, p + "relu_" + part, p + part)

    branch("1x1", bottom, c1, 1, cin)
    branch("3x3_reduce", bottom, c3r, 1, cin)
    branch("3x3", p + "3x3_reduce", c3, 3, c3r, pad=1)
    branch("5x5_reduce", bottom, c5r, 1, cin)
    branch("5x5", p + "5x5_reduce", c5, 5, c5r, pad=2)
    pool(w, p + "pool", bottom, p + "pool", "MAX", 3, 1, 1)
    branch("pool_proj", p + "pool", cp, 1, cin)
    w.layer([f'name: "{p}output"', 'type: "Concat"', f'bottom: "{p}1x1"', f'bottom: "{p}3x3"',
             f'bottom: "{p}5x5"', f'bottom: "{p}pool_proj"', f'top: "{p}output"'])
    return p + "output", c1 + c3 + c5 + cp


def lrn(w, name, bottom, top):
    w.layer([f'name: "{name}"', 'type: "LRN"', f'bottom: "{bottom}"', f'top: "{top}"',
             "lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 }"])


def dropout(w, name, blob, ratio):
    w.layer([f'name: "{name}"', 'type: "Dropout"', f'bottom: "{blob}"', f'top: "{blob}"',
             f"dropout_param {{ dropout_ratio: {ratio} }}"])


def auxiliary(w, n, bottom, cin):
    p = f"loss{n}/"
    pool(w, p + "ave_pool", bottom, p + "ave_pool", "AVE", 5, 3)
    conv(w, p + "conv", p + "ave_pool", p + "conv", 128, 1, cin=cin,
         weight_filler='type: "xavier"', bias_value=0.2)
    relu(w, p + "relu_conv", p + "conv")
    fc(w, p + "fc", p + "conv", p + "fc", 1024, 128 * 4 * 4, bias_value=0.2)
    relu(w, p + "relu_fc", p + "fc")
    dropout(w, p + "drop_fc", p + "fc", 0.7)
    fc(w, p + "classifier", p + "fc", p + "classifier", 1000, 1024)
    loss_and_accuracy(w, p, p + "classifier", loss_weight=0.3)


def googlenet():
    w = Writer("GoogleNet", [
        "GoogLeNet (Szegedy et al. 2014) in Caffe's format, as BVLC's",
        "models/bvlc_googlenet/train_val.prototxt: inception 3a-5b, LRN, and the two",
        "auxiliary classifiers on 4a and 4d, weighted 0.3. 13,378,280 learned",
        "parameters. Written by scripts/zoo_models.py."])
    data_layers(w, "data/imagenet/ilsvrc12_train_lmdb", "data/imagenet/ilsvrc12_val_lmdb", 32, 50)
    conv(w, "conv1/7x7_s2", "data", "conv1/7x7_s2", 64, 7, 2, 3, cin=3,
         weight_filler='type: "xavier"', bias_value=0.2)
    relu(w, "conv1/relu_7x7", "conv1/7x7_s2")
    pool(w, "pool1/3x3_s2", "conv1/7x7_s2", "pool1/3x3_s2", "MAX", 3, 2)
    lrn(w, "pool1/norm1", "pool1/3x3_s2", "pool1/norm1")
    conv(w, "conv2/3x3_reduce", "pool1/norm1", "conv2/3x3_reduce", 64, 1, cin=64,
         weight_filler='type: "xavier"', bias_value=0.2)
    relu(w, "conv2/relu_3x3_reduce", "conv2/3x3_reduce")
    conv(w, "conv2/3x3", "conv2/3x3_reduce", "conv2/3x3", 192, 3, pad=1, cin=64,
         weight_filler='type: "xavier"', bias_value=0.2)
    relu(w, "conv2/relu_3x3", "conv2/3x3")
    lrn(w, "conv2/norm2", "conv2/3x3", "conv2/norm2")
    pool(w, "pool2/3x3_s2", "conv2/norm2", "pool2/3x3_s2", "MAX", 3, 2)
    b, c = inception(w, "3a", "pool2/3x3_s2", 192, 64, 96, 128, 16, 32, 32)
    b, c = inception(w, "3b", b, c, 128, 128, 192, 32, 96, 64)
    pool(w, "pool3/3x3_s2", b, "pool3/3x3_s2", "MAX", 3, 2)
    b, c = inception(w, "4a", "pool3/3x3_s2", c, 192, 96, 208, 16, 48, 64)
    auxiliary(w, 1, b, c)
    b, c = inception(w, "4b", b, c, 160, 112, 224, 24, 64, 64)
    b, c = inception(w, "4c", b, c, 128, 128, 256, 24, 64, 64)
    b, c = inception(w, "4d", b, c, 112, 144, 288, 32, 64, 64)
    auxiliary(w, 2, b, c)
    b, c = inception(w, "4e", b, c, 256, 160, 320, 32, 128, 128)
    pool(w, "pool4/3x3_s2", b, "pool4/3x3_s2", "MAX", 3, 2)
    b, c = inception(w, "5a", "pool4/3x3_s2", c, 256, 160, 320, 32, 128, 128)
    b, c = inception(w, "5b", b, c, 384, 192, 384, 48, 128, 128)
    pool(w, "pool5/7x7_s1", b, "pool5/7x7_s1", "AVE", 7, 1)
    dropout(w, "pool5/drop_7x7_s1", "pool5/7x7_s1", 0.4)
    fc(w, "loss3/classifier", "pool5/7x7_s1", "loss3/classifier", 1000, c)
    loss_and_accuracy(w, "loss3/", "loss3/classifier", loss_weight=1)
    return w


# ---- VGG-19, CaffeNet, CIFAR-10 full ----

def accuracy(w, bottom, top_k=1, name="accuracy"):
    body = [f'name: "{name}"', 'type: "Accuracy"', f'bottom: "{bottom}"', 'bottom: "label"', f'top: "{name}"',
            "include { phase: TEST }"]
    if top_k != 1:
        body.append(f"accuracy_param {{ top_k: {top_k} }}")
    w.layer(body)


def softmax_loss(w, bottom):
    w.layer(['name: "loss"', 'type: "SoftmaxWithLoss"', f'bottom: "{bottom}"', 'bottom: "label"', 'top: "loss"'])


def vgg19():
    w = Writer("VGG_ILSVRC_19_layers", [
        "VGG-19 (Simonyan and Zisserman 2014) as their Caffe release",
        "VGG_ILSVRC_19_layers: 3x3 convolutions (pad 1) in blocks of 2, 2, 4, 4, 4",
        "closed by 2x2 max pooling, fc6/fc7 4096 with dropout 0.5, fc8 1000.",
        "143,667,240 learned parameters. Gaussian (std 0.01) weights, zero biases,",
        "as the paper's training from scratch. Written by scripts/zoo_models.py."])
    data_layers(w, "data/imagenet/ilsvrc12_train_lmdb", "data/imagenet/ilsvrc12_val_lmdb", 32, 50)
    bottom, cin = "data", 3
    for block, (convs, width) in enumerate(((2, 64), (2, 128), (4, 256), (4, 512), (4, 512)), 1):
        for i in range(1, convs + 1):
            name = f"conv{block}_{i}"
            conv(w, name, bottom, name, width, 3, pad=1, cin=cin, weight_filler='type: "gaussian" std: 0.01')
            relu(w, f"relu{block}_{i}", name)
            bottom, cin = name, width
        pool(w, f"pool{block}", bottom, f"pool{block}", "MAX", 2, 2)
        bottom = f"pool{block}"
    fc(w, "fc6", bottom, "fc6", 4096, 512 * 7 * 7, weight_filler='type: "gaussian" std: 0.01')
    relu(w, "relu6", "fc6")
    dropout(w, "drop6", "fc6", 0.5)
    fc(w, "fc7", "fc6", "fc7", 4096, 4096, weight_filler='type: "gaussian" std: 0.01')
    relu(w, "relu7", "fc7")
    dropout(w, "drop7", "fc7", 0.5)
    fc(w, "fc8", "fc7", "fc8", 1000, 4096, weight_filler='type: "gaussian" std: 0.01')
    accuracy(w, "fc8")
    softmax_loss(w, "fc8")
    return w


def caffenet():
    w = Writer("CaffeNet", [
        "BVLC CaffeNet as models/bvlc_reference_caffenet/train_val.prototxt: AlexNet",
        "with pooling before normalization; conv2, conv4 and conv5 in two groups.",
        "60,965,224 learned parameters. Crop 227, Caffe's mean values instead of",
        "the ImageNet mean file. Written by scripts/zoo_models.py."])
    data_layers(w, "data/imagenet/ilsvrc12_train_lmdb", "data/imagenet/ilsvrc12_val_lmdb", 256, 50, crop=227)
    g01, g005 = 'type: "gaussian" std: 0.01', 'type: "gaussian" std: 0.005'
    conv(w, "conv1", "data", "conv1", 96, 11, 4, cin=3, weight_filler=g01)
    relu(w, "relu1", "conv1")
    pool(w, "pool1", "conv1", "pool1", "MAX", 3, 2)
    lrn(w, "norm1", "pool1", "norm1")
    grouped_conv(w, "conv2", "norm1", 256, 5, 2, 96, pad=2, weight_filler=g01, bias_value=1)
    relu(w, "relu2", "conv2")
    pool(w, "pool2", "conv2", "pool2", "MAX", 3, 2)
    lrn(w, "norm2", "pool2", "norm2")
    conv(w, "conv3", "norm2", "conv3", 384, 3, pad=1, cin=256, weight_filler=g01)
    relu(w, "relu3", "conv3")
    grouped_conv(w, "conv4", "conv3", 384, 3, 2, 384, pad=1, weight_filler=g01, bias_value=1)
    relu(w, "relu4", "conv4")
    grouped_conv(w, "conv5", "conv4", 256, 3, 2, 384, pad=1, weight_filler=g01, bias_value=1)
    relu(w, "relu5", "conv5")
    pool(w, "pool5", "conv5", "pool5", "MAX", 3, 2)
    fc(w, "fc6", "pool5", "fc6", 4096, 256 * 6 * 6, weight_filler=g005, bias_value=1)
    relu(w, "relu6", "fc6")
    dropout(w, "drop6", "fc6", 0.5)
    fc(w, "fc7", "fc6", "fc7", 4096, 4096, weight_filler=g005, bias_value=1)
    relu(w, "relu7", "fc7")
    dropout(w, "drop7", "fc7", 0.5)
    fc(w, "fc8", "fc7", "fc8", 1000, 4096, weight_filler=g01)
    accuracy(w, "fc8")
    softmax_loss(w, "fc8")
    return w


def grouped_conv(w, name, bottom, num_output, kernel, group, cin, pad=0, weight_filler='type: "msra"',
                 bias_value=0.0):
    w.layer([f'name: "{name}"', 'type: "Convolution"', f'bottom: "{bottom}"', f'top: "{name}"',
             "param { lr_mult: 1 decay_mult: 1 }", "param { lr_mult: 2 decay_mult: 0 }",
             "convolution_param {", f"  num_output: {num_output}", f"  pad: {pad}", f"  kernel_size: {kernel}",
             f"  group: {group}", f"  weight_filler {{ {weight_filler} }}",
             f'  bias_filler {{ type: "constant" value: {bias_value} }}', "}"])
    w.params += num_output * (cin // group) * kernel * kernel + num_output


def cifar10_full():
    w = Writer("CIFAR10_full", [
        "Caffe's CIFAR-10 full (examples/cifar10/cifar10_full_train_test.prototxt):",
        "5x5 convolutions of 32, 32 and 64 channels, max then average pooling, LRN",
        "within channels; ip1 with Caffe's decay_mult 250. 89,578 learned",
        "parameters. Pixels scaled to [0, 1) instead of the mean file. Written by",
        "scripts/zoo_models.py."])
    for phase, source, batch in (("TRAIN", "data/cifar10/cifar10_train_lmdb", 100),
                                 ("TEST", "data/cifar10/cifar10_test_lmdb", 100)):
        w.layer(['name: "cifar"', 'type: "Data"', 'top: "data"', 'top: "label"', f"include {{ phase: {phase} }}",
                 "transform_param { scale: 0.00390625 }",
                 "data_param {", f'  source: "{source}"', f"  batch_size: {batch}", "  backend: LMDB", "}"])
    norm = ("lrn_param { local_size: 3 alpha: 5e-05 beta: 0.75 norm_region: WITHIN_CHANNEL }")
    conv(w, "conv1", "data", "conv1", 32, 5, pad=2, cin=3, weight_filler='type: "gaussian" std: 0.0001')
    pool(w, "pool1", "conv1", "pool1", "MAX", 3, 2)
    relu(w, "relu1", "pool1")
    w.layer(['name: "norm1"', 'type: "LRN"', 'bottom: "pool1"', 'top: "norm1"', norm])
    conv(w, "conv2", "norm1", "conv2", 32, 5, pad=2, cin=32, weight_filler='type: "gaussian" std: 0.01')
    relu(w, "relu2", "conv2")
    pool(w, "pool2", "conv2", "pool2", "AVE", 3, 2)
    w.layer(['name: "norm2"', 'type: "LRN"', 'bottom: "pool2"', 'top: "norm2"', norm])
    conv(w, "conv3", "norm2", "conv3", 64, 5, pad=2, cin=32, weight_filler='type: "gaussian" std: 0.01')
    relu(w, "relu3", "conv3")
    pool(w, "pool3", "conv3", "pool3", "AVE", 3, 2)
    w.layer(['name: "ip1"', 'type: "InnerProduct"', 'bottom: "pool3"', 'top: "ip1"',
             "param { lr_mult: 1 decay_mult: 250 }", "param { lr_mult: 2 decay_mult: 0 }",
             "inner_product_param {", "  num_output: 10", '  weight_filler { type: "gaussian" std: 0.01 }',
             '  bias_filler { type: "constant" }', "}"])
    w.params += 10 * 64 * 4 * 4 + 10
    accuracy(w, "ip1")
    softmax_loss(w, "ip1")
    return w


def main():
    nets = {"resnet50_train_val.prototxt": resnet50(),
            "googlenet_train_val.prototxt": googlenet(),
            "vgg19_train_val.prototxt": vgg19(),
            "caffenet_train_val.prototxt": caffenet(),
            "cifar10_full_train_test.prototxt": cifar10_full()}
    if "--counts" in sys.argv:
        for name, w in nets.items():
            print(f"{name}: {w.params} learned parameters")
        return 0
    stale = []
    for name, w in nets.items():
        path = os.path.join(MODELS, name)
        if "--check" in sys.argv:
            if not os.path.exists(path):
                stale.append(path)
                continue
            with open(path) as f:
                if f.read() != w.text():
                    stale.append(path)
        else:
            with open(path, "w") as f:
                f.write(w.text())
    if stale:
        print("out of date (run scripts/zoo_models.py): " + " ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

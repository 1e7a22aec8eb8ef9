"""Small models of the common shapes, for the examples and bench/torch/ddp_compare.py: a VGG-style stack of
convolutions with a wide fully connected head, a ResNet-style network of residual blocks with BatchNorm, and
a multi-layer perceptron (many small tensors: what per-call costs show on)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class VGGSmall(nn.Module):
    """VGG's pattern at CIFAR's size: three stages of two 3x3 convolutions and a max pool (32, 64, 128
    channels), then fully connected 2048 -> 256 -> 10 (1.1 M parameters, 0.5 M of them in fc1)."""

    def __init__(self, classes=10):
        super().__init__()
        chans = [3, 32, 32, 64, 64, 128, 128]
        self.convs = nn.ModuleList(nn.Conv2d(chans[i], chans[i + 1], 3, padding=1) for i in range(6))
        self.fc1 = nn.Linear(128 * 4 * 4, 256)
        self.fc2 = nn.Linear(256, classes)

    def forward(self, x):
        for i, conv in enumerate(self.convs):
            x = F.relu(conv(x))
            if i % 2 == 1:
                x = F.max_pool2d(x, 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.shortcut is None else self.shortcut(x)))


class ResNetSmall(nn.Module):
    """ResNet-20's shape (He et al. 2016, CIFAR): a 3x3 stem, three stages of three basic blocks (16, 32, 64
    channels, stride 2 between stages), global average pooling, fully connected to 10 (0.27 M parameters in
    65 tensors)."""

    def __init__(self, classes=10, blocks=3):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        layers, cin = [], 16
        for stage, cout in enumerate((16, 32, 64)):
            for b in range(blocks):
                layers.append(BasicBlock(cin, cout, 2 if (stage > 0 and b == 0) else 1))
                cin = cout
        self.blocks = nn.Sequential(*layers)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = F.relu(self.bn(self.stem(x)))
        x = self.blocks(x)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class MLP(nn.Module):
    """64 -> 128 -> 128 -> 10 (26 K parameters in 6 small tensors): docs TORCH.md's per-call measurement."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(64, 128), nn.Linear(128, 128), nn.Linear(128, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def build(name):
    return {"vgg": VGGSmall, "resnet": ResNetSmall, "mlp": MLP}[name]()


def synthetic_batch(name, batch, generator):
    """Random inputs and labels of the model's shape (CIFAR's 3 x 32 x 32 images, or 64 features)."""
    if name == "mlp":
        x = torch.randn(batch, 64, generator=generator)
    else:
        x = torch.randn(batch, 3, 32, 32, generator=generator)
    return x, torch.randint(0, 10, (batch,), generator=generator)

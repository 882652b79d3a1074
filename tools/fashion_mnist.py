#!/usr/bin/python3
"""PyTorch eager reference for `train_fashion_mnist` (the README's main job, --model=mlp) and
`train_fashion_mnist --model=cnn`.

    /usr/bin/python3 tools/fashion_mnist.py --epochs 5 --threads 1              # the MLP
    /usr/bin/python3 tools/fashion_mnist.py --model cnn --epochs 5 --threads 1

The same models, data, preprocessing and schedule as examples/train_fashion_mnist.cc:
mlp: Flatten, Linear 784->256, ReLU, Linear 256->128, ReLU, Linear 128->10 (--hidden), AdamW
lr 3e-3; cnn: two blocks conv3x3(pad 1) + BatchNorm2d + ReLU + MaxPool2d(2) (1->32, 32->64),
Flatten, Linear 3136->128, ReLU, Dropout(0.3), Linear 128->10, AdamW lr 2e-3. Both: weight
decay 1e-2, the learning rate cosine-annealed to 0 per step over the run; batch 128 (last
partial batch dropped); pixels / 255 standardized with the training set's mean 0.2860 and
std 0.3530. Data: the IDX files of Debian's dataset-fashion-mnist.

Prints the train time of each epoch (the training loop only: forward, loss, backward, step;
not the evaluation) and the test accuracy after it.

    /usr/bin/python3 tools/fashion_mnist.py --model cnn --eval_checkpoint fashion_mnist.safetensors

(with the same --model) loads a checkpoint that `train_fashion_mnist` saved (the same
state-dict names, BatchNorm's running statistics included) into this model and prints its
test accuracy.
"""
import argparse
import gzip
import json
import math
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    with gzip.open(path, "rb") as f:
        b = f.read()
    magic = int.from_bytes(b[0:4], "big")
    if magic == 2051:
        n, r, c = (int.from_bytes(b[i:i + 4], "big") for i in (4, 8, 12))
        return np.frombuffer(b, dtype=np.uint8, offset=16).reshape(n, r, c)
    if magic == 2049:
        return np.frombuffer(b, dtype=np.uint8, offset=8)
    raise ValueError(f"{path}: bad IDX magic {magic}")


def load(root, train):
    p = "train" if train else "t10k"
    x = read_idx(f"{root}/{p}-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    y = read_idx(f"{root}/{p}-labels-idx1-ubyte.gz").astype(np.int64)
    x = (x - 0.2860) / 0.3530   # the sloth example's normalization (training-set mean/std)
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)


class Cnn(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(128, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


class Mlp(nn.Module):
    """nn::MLP's layout: a Sequential of Linear/ReLU named 0, 1, 2, ... (0.weight, 2.weight, ...)."""
    def __init__(self, sizes):
        super().__init__()
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(nn.Linear(sizes[i], sizes[i + 1]))
            if i + 2 < len(sizes):
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x.flatten(1))

    def load_state_dict(self, sd, strict=True):
        return self.net.load_state_dict(sd, strict=strict)


def make_model(a):
    if a.model == "cnn":
        return Cnn(a.dropout)
    if a.model == "mlp":
        return Mlp([784] + [int(h) for h in a.hidden.split(",") if h] + [10])
    raise SystemExit(f"--model: expected mlp or cnn, got {a.model!r}")


def load_safetensors(path):
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    types = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32}
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        a = np.frombuffer(b[8 + n + lo:8 + n + hi], dtype=types[t["dtype"]]).reshape(t["shape"])
        out[name] = torch.from_numpy(a.copy())
    return out


@torch.no_grad()
def evaluate(model, x, y):
    model.eval()
    correct = 0
    for i in range(0, len(x), 1000):
        correct += (model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item()
    model.train()
    return correct / len(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mlp", help="mlp (--hidden) or cnn")
    ap.add_argument("--hidden", default="256,128", help="mlp: hidden layer sizes")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--batch_size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0, help="0: 3e-3 (mlp) or 2e-3 (cnn)")
    ap.add_argument("--weight_decay", type=float, default=1e-2)
    ap.add_argument("--dropout", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--eval_checkpoint", default="",
                    help="evaluate a sloth checkpoint (safetensors) instead of training")
    a = ap.parse_args()
    if a.lr == 0:
        a.lr = 3e-3 if a.model == "mlp" else 2e-3

    if a.eval_checkpoint:
        model = make_model(a)
        model.load_state_dict(load_safetensors(a.eval_checkpoint), strict=True)
        xte, yte = load(a.data, False)
        print(f"{a.eval_checkpoint}: test accuracy {100 * evaluate(model, xte, yte):.2f}% "
              f"(PyTorch eval mode, BatchNorm running statistics from the checkpoint)")
        return

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    xtr, ytr = load(a.data, True)
    xte, yte = load(a.data, False)
    model = make_model(a)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    steps_per_epoch = len(xtr) // a.batch_size
    total = a.epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / total)))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"{sum(p.numel() for p in model.parameters())} parameters; batch {a.batch_size}, "
          f"{a.model}; AdamW lr {a.lr} wd {a.weight_decay}, cosine per step")
    times = []
    for epoch in range(a.epochs):
        g = torch.Generator().manual_seed(a.seed + epoch)
        order = torch.randperm(len(xtr), generator=g)
        t0 = time.perf_counter()
        loss_sum = 0.0
        for s in range(steps_per_epoch):
            idx = order[s * a.batch_size:(s + 1) * a.batch_size]
            x, y = xtr[idx], ytr[idx]
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            if s % 50 == 0:
                loss_sum += loss.item()
        dt = time.perf_counter() - t0
        times.append(dt)
        acc = evaluate(model, xte, yte)
        print(f"epoch {epoch + 1}/{a.epochs}: train {dt:.2f} s ({steps_per_epoch * a.batch_size / dt:.0f} "
              f"samples/s), train loss {loss_sum / math.ceil(steps_per_epoch / 50):.4f}, "
              f"test accuracy {100 * acc:.2f}%", flush=True)
    print(f"mean train time per epoch: {sum(times) / len(times):.3f} s ({a.threads} threads)")


if __name__ == "__main__":
    main()

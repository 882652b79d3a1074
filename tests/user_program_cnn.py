import math, torch
torch.set_printoptions(precision=10)
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2), torch.nn.Flatten())
        self.drop = torch.nn.Dropout(0.0)
        self.fc = torch.nn.Linear(64, 3)
    def forward(self, x):
        return self.fc(self.drop(self.features(x)))
net = Net()
with torch.no_grad():
    for k, (name, p) in enumerate(net.named_parameters()):
        n = p.numel()
        v = torch.tensor([0.3 * math.sin(0.41 * i + k) for i in range(n)], dtype=torch.float64)
        p.copy_(v.reshape(p.shape).float())
        print(name, list(p.shape))
def images(step, half):
    x = [0.5 * math.sin(0.13 * i + 0.7 * step + 1.9 * half) + 0.1 * math.cos(0.029 * i * i) for i in range(3 * 64)]
    x = torch.tensor(x, dtype=torch.float64).reshape(3, 1, 8, 8).float()
    y = torch.tensor([(step + half + j) % 3 for j in range(3)])
    return x, y
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
losses, correct = [], []
net.train()
for step in range(20):
    opt.zero_grad()
    total = 0.0
    right = 0
    for half in range(2):
        x, y = images(step, half)
        out = net(x)
        loss = torch.nn.functional.cross_entropy(out, y) / 2
        loss.backward()
        total += loss.item()
        right += out.argmax(1).eq(y).sum().item()
    opt.step()
    losses.append(total)
    correct.append(right)
print("losses", ", ".join("%.9g" % l for l in losses))
print("correct", ", ".join("%d" % c for c in correct))
bn = net.features[1]
print("running_mean", ", ".join("%.9g" % v for v in bn.running_mean.tolist()))
print("running_var", ", ".join("%.9g" % v for v in bn.running_var.tolist()))
print("num_batches_tracked", bn.num_batches_tracked.item())
print("fc.bias", ", ".join("%.9g" % v for v in net.fc.bias.tolist()))
net.eval()
with torch.no_grad():
    x, y = images(50, 0)
    out = net(x)
    print("eval logits", ", ".join("%.9g" % v for v in out.flatten().tolist()))

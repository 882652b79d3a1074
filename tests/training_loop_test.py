# The expected values of tests/training_loop_test.cc: run with PyTorch 1.13 (/usr/bin/python3).
import math, torch
torch.set_printoptions(precision=10)
def seq(shape, f, a, scale=1.0):
    n = 1
    for s in shape: n *= s
    v = [scale * f(a * i) for i in range(n)]
    return torch.tensor(v, dtype=torch.float64).reshape(shape).float()
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)
    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))
def make_net():  # the initial weights the C++ test sets
    net = Net()
    with torch.no_grad():
        net.fc1.weight.copy_(seq([16, 8], math.sin, 0.37, 0.3))
        net.fc1.bias.copy_(seq([16], math.cos, 0.5, 0.1))
        net.fc2.weight.copy_(seq([4, 16], math.cos, 0.23, 0.3))
        net.fc2.bias.copy_(seq([4], math.sin, 1.1, 0.1))
    return net
net = make_net()
x = seq([6, 8], math.sin, 0.71)
y = torch.tensor([0, 3, 1, 2, 1, 0])
opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
losses = []
for step in range(25):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
    losses.append(loss.item())
print("losses", ", ".join("%.9g" % l for l in losses))
print("fc2.bias", ", ".join("%.9g" % v for v in net.fc2.bias.tolist()))
print("fc1.weight[0]", ", ".join("%.9g" % v for v in net.fc1.weight[0].tolist()))
print("fc1.weight.sum", "%.9g" % net.fc1.weight.double().sum().item())
# Second loop: the loss scaled by a factor that changes every 3 steps.
net = make_net()
opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
losses = []
for step in range(25):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(x), y) * (0.5 ** (step // 3))
    loss.backward()
    opt.step()
    losses.append(loss.item())
print("scaled losses", ", ".join("%.9g" % l for l in losses))
print("fc2.bias", ", ".join("%.9g" % v for v in net.fc2.bias.tolist()))

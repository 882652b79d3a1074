# Expected values for tests/user_loop_test.cc (PyTorch 1.13, /usr/bin/python3).
import math, torch
torch.set_printoptions(precision=10)
V, E, H, C, B, T = 20, 16, 24, 5, 8, 7
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(V, E)
        self.lstm = torch.nn.LSTM(E, H, batch_first=True)
        self.norm = torch.nn.LayerNorm(H)
        self.fc = torch.nn.Linear(H, C)
    def forward(self, tok):
        out, (h, c) = self.lstm(self.emb(tok))
        z = self.norm(out[:, -1])
        return self.fc(torch.nn.functional.gelu(z))
net = Net()
with torch.no_grad():
    for k, (name, p) in enumerate(net.named_parameters()):
        n = p.numel()
        v = torch.tensor([0.2 * math.sin(0.37 * i + k) for i in range(n)], dtype=torch.float64)
        p.copy_(v.reshape(p.shape).float())
        print(name, list(p.shape))
def batch(step):
    tok = [[(step * 13 + i * 7 + j * 3 + (i * j) % 5) % V for j in range(T)] for i in range(B)]
    y = [sum(r) % C for r in tok]
    return torch.tensor(tok), torch.tensor(y)
opt = torch.optim.Adam(net.parameters(), lr=0.02, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
losses, norms = [], []
avg = torch.zeros(())
for step in range(30):
    tok, y = batch(step)
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(tok), y, label_smoothing=0.1)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
    opt.step()
    sched.step()
    avg = avg * 0.9 + loss.detach() * 0.1
    losses.append(loss.item())
    norms.append(norm.item())
print("losses", ", ".join("%.9g" % l for l in losses))
print("norms", ", ".join("%.9g" % l for l in norms))
print("avg", "%.9g" % avg.item())
print("fc.bias", ", ".join("%.9g" % v for v in net.fc.bias.tolist()))
print("lstm.weight_hh_l0.sum", "%.9g" % net.lstm.weight_hh_l0.double().sum().item())
print("emb.weight[3]", ", ".join("%.9g" % v for v in net.emb.weight[3].tolist()))
net.eval()
with torch.no_grad():
    tok, y = batch(100)
    print("eval logits[0]", ", ".join("%.9g" % v for v in net(tok)[0].tolist()))

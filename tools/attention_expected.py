# Expected values of tests/attention_test.cc from PyTorch 1.13 (CPU, float32): prints C++
# initializers. Inputs come from gen(shape, seed) on both sides (the test has the same formula).
# PyTorch 1.13 has no F.scaled_dot_product_attention: the math below is PyTorch 2's reference
# (softmax(q k^T / sqrt(E) + mask) v).
import math
import torch

torch.set_printoptions(precision=10)


def gen(shape, seed):
    n = 1
    for s in shape:
        n *= s
    v = [math.sin(0.61 * i + 1.7 * seed) for i in range(n)]
    return torch.tensor(v, dtype=torch.float64).to(torch.float32).reshape(shape)


def sdpa(q, k, v, mask=None, causal=False):
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


def arr(name, t):
    vals = t.detach().reshape(-1).tolist()
    body = ", ".join(repr(float(x)) if not isinstance(x, int) else str(x) for x in vals)
    print(f"const std::vector<double> {name} = {{{body}}};")


def sdpa_case(name, qs, ks, vs, mask=None, causal=False, mask_grad=False):
    q = gen(qs, 1).requires_grad_()
    k = gen(ks, 2).requires_grad_()
    v = gen(vs, 3).requires_grad_()
    if mask is not None and mask_grad:
        mask.requires_grad_()
    o = sdpa(q, k, v, mask, causal)
    (o * gen(list(o.shape), 4)).sum().backward()
    arr(name + "_out", o)
    arr(name + "_dq", q.grad)
    arr(name + "_dk", k.grad)
    arr(name + "_dv", v.grad)
    if mask_grad:
        arr(name + "_dmask", mask.grad)


sdpa_case("kPlain", [2, 2, 3, 4], [2, 2, 5, 4], [2, 2, 5, 3])
bmask = torch.tensor([[(i + 2 * j) % 3 != 0 for j in range(5)] for i in range(3)])
sdpa_case("kBoolMask", [2, 2, 3, 4], [2, 2, 5, 4], [2, 2, 5, 3], mask=bmask)
sdpa_case("kFloatMask", [2, 2, 3, 4], [2, 2, 5, 4], [2, 2, 5, 3], mask=gen([2, 1, 3, 5], 5),
          mask_grad=True)
sdpa_case("kCausal", [2, 2, 4, 4], [2, 2, 4, 4], [2, 2, 4, 3], causal=True)
sdpa_case("kCausalWide", [1, 3, 4], [1, 5, 4], [1, 5, 2], causal=True)

x = gen([2, 3, 4], 6)
arr("kTril0", torch.tril(x))
arr("kTrilM1", torch.tril(x, -1))
arr("kTriu1", torch.triu(x, 1))
c = gen([3, 4], 7)
arr("kCumsum1", torch.cumsum(c, 1))
arr("kCumsum0", torch.cumsum(c, 0))
ci = torch.tensor([[1, -2, 3], [4, 5, -6]], dtype=torch.int32)
arr("kCumsumInt", torch.cumsum(ci, 1))
s = torch.floor(gen([2, 6], 8) * 2)
for desc in (False, True):
    vals, idx = torch.sort(s, -1, descending=desc)
    arr("kSort%s_values" % ("Desc" if desc else "Asc"), vals)
    arr("kSort%s_indices" % ("Desc" if desc else "Asc"), idx)
vals, idx = torch.sort(s, 0)
arr("kSortDim0_indices", idx)
t = torch.tensor([float(i % 3) for i in range(40)])
arr("kTopkTies_largest", torch.topk(t, 5).indices)
arr("kTopkTies_smallest", torch.topk(t, 5, largest=False).indices)
t2 = torch.floor(gen([2, 130], 9) * 2)
arr("kTopkPartial_values", torch.topk(t2, 2, 1).values)
arr("kTopkPartial_indices", torch.topk(t2, 2, 1).indices)
t3 = torch.floor(gen([3, 7], 10) * 2)
arr("kTopkDim0_indices", torch.topk(t3, 2, 0).indices)
arr("kTopkDim0_smallest_indices", torch.topk(t3, 3, 0, largest=False).indices)

# MultiheadAttention: E = 8, 2 heads.
def mha_params(m, base):
    with torch.no_grad():
        m.in_proj_weight.copy_(gen([24, 8], base) * 0.3)
        m.in_proj_bias.copy_(gen([24], base + 1) * 0.1)
        m.out_proj.weight.copy_(gen([8, 8], base + 2) * 0.3)
        m.out_proj.bias.copy_(gen([8], base + 3) * 0.1)


m = torch.nn.MultiheadAttention(8, 2)
mha_params(m, 20)
xs = gen([3, 2, 8], 14)
o, w = m(xs, xs, xs)
arr("kMhaSelf_out", o)
arr("kMhaSelf_weights", w)
kpm = torch.tensor([[False, False, False], [False, False, True]])
am = gen([3, 3], 15) * 0.5
o, _ = m(xs, xs, xs, key_padding_mask=kpm, need_weights=False, attn_mask=am)
arr("kMhaMasked_out", o)
mb = torch.nn.MultiheadAttention(8, 2, batch_first=True)
mha_params(mb, 30)
qb, kb, vb = gen([2, 3, 8], 16), gen([2, 4, 8], 17), gen([2, 4, 8], 18)
bam = torch.tensor([[(i + j) % 4 == 3 for j in range(4)] for i in range(3)])
o, w = mb(qb, kb, vb, attn_mask=bam, average_attn_weights=False)
arr("kMhaCross_out", o)
arr("kMhaCross_weights", w)


def tel_params(layer, base):
    mha_params(layer.self_attn, base)
    with torch.no_grad():
        layer.linear1.weight.copy_(gen([16, 8], base + 4) * 0.3)
        layer.linear1.bias.copy_(gen([16], base + 5) * 0.1)
        layer.linear2.weight.copy_(gen([8, 16], base + 6) * 0.3)
        layer.linear2.bias.copy_(gen([8], base + 7) * 0.1)
        layer.norm1.weight.copy_(1 + gen([8], base + 8) * 0.1)
        layer.norm1.bias.copy_(gen([8], base + 9) * 0.1)
        layer.norm2.weight.copy_(1 + gen([8], base + 10) * 0.1)
        layer.norm2.bias.copy_(gen([8], base + 11) * 0.1)


src = gen([4, 2, 8], 19)
causal = torch.triu(torch.full((4, 4), float("-inf")), 1)
for nf in (False, True):
    for act in ("relu", "gelu"):
        layer = torch.nn.TransformerEncoderLayer(8, 2, 16, 0.0, act, norm_first=nf)
        tel_params(layer, 40)
        layer.eval()
        name = "kTel%s%s" % ("Pre" if nf else "Post", act.capitalize())
        arr(name, layer(src))
        arr(name + "Causal", layer(src, src_mask=causal))
print("// names:", [n for n, _ in torch.nn.TransformerEncoderLayer(8, 2, 16).named_parameters()])

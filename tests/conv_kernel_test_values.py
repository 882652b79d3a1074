# Generates tests/conv_kernel_test_values.inc (expected values of tests/conv_kernel_test.cc)
# with PyTorch 1.13:
#   /usr/bin/python3 tests/conv_kernel_test_values.py > tests/conv_kernel_test_values.inc
import torch, math
import torch.nn.functional as F
torch.set_default_dtype(torch.float64)
def seq(shape, f, a, scale=1.0):
    n = math.prod(shape)
    return torch.tensor([scale*f(a*i) for i in range(n)]).reshape(shape)
def fmt(name, t):
    v = t.detach().reshape(-1).tolist()
    return "const std::vector<double> %s = {%s};" % (name, ", ".join("%.15g" % x for x in v))
out = []
def case(tag, xs, ws, bias, **kw):
    x = seq(xs, math.sin, 0.37).requires_grad_()
    w = seq(ws, math.cos, 0.23, 0.5).requires_grad_()
    b = seq([ws[0]], math.sin, 0.7, 0.3).requires_grad_() if bias else None
    y = F.conv2d(x, w, b, **kw)
    gy = seq(list(y.shape), math.cos, 0.11)
    (y*gy).sum().backward()
    out.append("// %s: conv2d x%s w%s bias %s %s; y %s" % (tag, xs, ws, bias, kw, list(y.shape)))
    out.extend([fmt("k%s_y" % tag, y), fmt("k%s_gx" % tag, x.grad), fmt("k%s_gw" % tag, w.grad)])
    if bias: out.append(fmt("k%s_gb" % tag, b.grad))
case("Stride2Odd", [2,3,7,6], [4,3,3,3], True, stride=2, padding=1)
case("SameDilated", [1,2,6,5], [3,2,2,3], False, padding="same", dilation=(2,1))
case("Unbatched", [2,5,5], [2,2,3,3], True, dilation=2)
case("Batch1Stride21", [1,3,5,8], [2,3,3,2], True, stride=(2,1), padding=(0,1))
# Second order: L = sum(gx * u) + sum(gw * v) with (gx, gw) = d sum(y * gy) / d(x, w).
x = seq([2,2,5,4], math.sin, 0.37).requires_grad_()
w = seq([3,2,3,3], math.cos, 0.23, 0.5).requires_grad_()
y = F.conv2d(x, w, None, stride=2, padding=1)
gy = seq(list(y.shape), math.cos, 0.11).requires_grad_()
gx, gw = torch.autograd.grad((y*gy).sum(), [x, w], create_graph=True)
u = seq(list(x.shape), math.cos, 0.19)
v = seq(list(w.shape), math.sin, 0.13)
((gx*u).sum() + (gw*v).sum()).backward()
out.append("// Second: conv2d x[2,2,5,4] w[3,2,3,3] stride 2 padding 1; gy requires grad; "
           "L = sum(gx * u) + sum(gw * v), grads of L")
out.extend([fmt("kSecond_gx", gx), fmt("kSecond_gw", gw), fmt("kSecond_x", x.grad),
            fmt("kSecond_w", w.grad), fmt("kSecond_gy", gy.grad)])
# conv_transpose2d without groups (one ConvInputGrad kernel): stride 2, output_padding 1, bias.
x = seq([2,3,4,3], math.sin, 0.37).requires_grad_()
w = seq([3,2,3,2], math.cos, 0.23, 0.5).requires_grad_()
b = torch.tensor([0.5, -0.25]).requires_grad_()
y = F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, dilation=(1, 2))
gy = seq(list(y.shape), math.cos, 0.11)
(y*gy).sum().backward()
out.append("// Transposed: conv_transpose2d x[2,3,4,3] w[3,2,3,2] b stride 2 padding 1 "
           "output_padding 1 dilation (1,2); y " + str(list(y.shape)))
out.extend([fmt("kTransposed_y", y), fmt("kTransposed_gx", x.grad), fmt("kTransposed_gw", w.grad),
            fmt("kTransposed_gb", b.grad)])
print("\n".join(out))

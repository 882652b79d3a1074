#!/usr/bin/python3
"""PyTorch oracle for sloth: random programs, run by PyTorch 1.13, committed as test data.

Each program is a list of statements over numbered variables (a tiny language both sides
interpret: this file with torch, tests/oracle_test.cc with sloth). While generating, every
statement is run by PyTorch at once, so the generator knows shapes, leafness and values and
can pick the next statement to fit; what PyTorch did is stored with the statement:
  "err": 1        PyTorch raised here (the replay must raise here too, and nothing may change)
  "x": {...}      what a read saw: values, shape, requires_grad, is_leaf (or a grad's values)
A backward or autograd.grad that raises ends the program (PyTorch may have accumulated some
leaf grads before raising; sloth checks first, so the two are not comparable afterwards).

Regenerate (needs Debian's python3-torch):
  /usr/bin/python3 tools/oracle/gen.py --out tests/oracle
"""
import argparse
import json
import math
import os
import random

import torch

FLOAT = torch.float32

UNARY = ["neg", "abs", "exp", "tanh", "sigmoid", "relu", "sin", "cos", "square", "silu",
         "sign", "floor", "gelu", "erf"]
UNARY_POS = ["log", "sqrt", "rsqrt"]            # need x > 0.05
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum"]
SCALAR_OPS = ["add", "sub", "mul", "div"]
REDUCE = ["sum", "mean", "amax", "amin", "prod", "logsumexp", "var", "std"]
CMP = ["gt", "lt", "ge", "le"]
INPLACE_T = ["add_", "sub_", "mul_", "div_", "copy_"]
INPLACE_S = ["add_", "sub_", "mul_", "div_", "fill_"]


class Raised(Exception):
    pass


def f32(x):
    return float(torch.tensor(x, dtype=FLOAT))


def flat(t):
    return [round(float(v), 7) if math.isfinite(float(v)) else str(float(v))
            for v in t.detach().reshape(-1).to(torch.float64).tolist()]


# ---- the interpreter (the semantics the C++ replay mirrors) -------------------------------
def run_view(x, st):
    v = st["v"]
    p = st.get("p", [])
    if v == "view": return x.view(p)
    if v == "reshape": return x.reshape(p)
    if v == "flatten": return x.flatten(p[0], p[1])
    if v == "transpose": return x.transpose(p[0], p[1])
    if v == "t": return x.t()
    if v == "permute": return x.permute(p)
    if v == "slice":
        dim, start, end, step = p
        idx = (slice(None),) * dim + (slice(start, end, step),)
        return x[idx]
    if v == "narrow": return x.narrow(p[0], p[1], p[2])
    if v == "select": return x.select(p[0], p[1])
    if v == "expand": return x.expand(p)
    if v == "squeeze": return x.squeeze(p[0]) if p else x.squeeze()
    if v == "unsqueeze": return x.unsqueeze(p[0])
    if v == "diagonal": return x.diagonal(p[0], p[1], p[2])
    if v == "as_strided": return x.as_strided(st["size"], st["stride"], p[0])
    if v == "detach": return x.detach()
    if v == "split": return x.split(p[0], p[1])[p[2]]
    if v == "chunk": return x.chunk(p[0], p[1])[p[2]]
    if v == "contiguous": return x.contiguous()
    if v == "clone": return x.clone()
    raise ValueError(v)


def run_unary(op, x):
    if op == "square": return torch.square(x)
    if op == "gelu": return torch.nn.functional.gelu(x)
    if op == "silu": return torch.nn.functional.silu(x)
    return getattr(torch, op)(x)


def run_reduce(x, st):
    op, dims, keep = st["op"], st.get("dims"), st.get("keep", False)
    if op in ("sum", "mean") and dims is None: return getattr(torch, op)(x)
    if op in ("amax", "amin", "logsumexp"): return getattr(torch, op)(x, dims, keep)
    if op == "prod":
        if dims is None: return torch.prod(x)
        return torch.prod(x, dims[0], keep)
    if op in ("var", "std"): return getattr(torch, op)(x, dims, unbiased=st.get("unb", True), keepdim=keep)
    return getattr(torch, op)(x, dims, keepdim=keep)


class Env:
    def __init__(self):
        self.vars = []
        self.grad_enabled = True
        self.depth = 0

    def set(self, st, t):
        o = st["o"]
        while len(self.vars) <= o: self.vars.append(None)
        self.vars[o] = t


def exec_stmt(env, st):
    """Runs one statement with torch; raises Raised where torch raised."""
    k = st["k"]
    V = env.vars
    a = [V[i] for i in st.get("a", [])]
    try:
        with torch.set_grad_enabled(env.grad_enabled):
            if k == "leaf":
                t = torch.tensor(st["val"], dtype=FLOAT).reshape(st["shape"]).clone()  # a base, not a view
                if st.get("rg"): t.requires_grad_()
                env.set(st, t)
            elif k == "un": env.set(st, run_unary(st["op"], a[0]))
            elif k == "bin":
                op = st["op"]
                if op == "add" and "alpha" in st: env.set(st, torch.add(a[0], a[1], alpha=st["alpha"]))
                else: env.set(st, getattr(torch, op)(a[0], a[1]))
            elif k == "sc":
                op, s = st["op"], st["s"]
                x = a[0]
                env.set(st, {"add": lambda: x + s, "sub": lambda: x - s, "mul": lambda: x * s,
                             "div": lambda: x / s, "pow": lambda: torch.pow(x, s)}[op]())
            elif k == "cmp": env.set(st, getattr(torch, st["op"])(a[0], a[1] if len(a) > 1 else st["s"]))
            elif k == "where": env.set(st, torch.where(a[0], a[1], a[2]))
            elif k == "mfill": env.set(st, a[0].masked_fill(a[1], st["s"]))
            elif k == "clamp": env.set(st, torch.clamp(a[0], st["lo"], st["hi"]))
            elif k == "red": env.set(st, run_reduce(a[0], st))
            elif k == "mm": env.set(st, torch.matmul(a[0], a[1]))
            elif k == "sm":
                fn = torch.softmax if st["op"] == "softmax" else torch.log_softmax
                env.set(st, fn(a[0], st["dim"]))
            elif k == "view": env.set(st, run_view(a[0], st))
            elif k == "inp":
                op = st["op"]
                x = a[0]
                if op == "zero_": x.zero_()
                elif op == "relu_": x.relu_()
                elif op == "clamp_": x.clamp_(st["lo"], st["hi"])
                elif op == "fill_": x.fill_(st["s"])
                elif len(a) > 1: getattr(x, op)(a[1])
                else: getattr(x, op)(st["s"])
            elif k == "nograd": env.grad_enabled = not st["on"]
            elif k == "sync": pass
            elif k == "read":
                x = a[0]
                st["x"] = {"v": flat(x), "shape": list(x.shape), "rg": bool(x.requires_grad),
                           "leaf": _leaf_or_none(x)}
            elif k == "grad":
                g = a[0].grad
                st["x"] = {"v": None if g is None else flat(g)}
            elif k == "rg": a[0].requires_grad_(st.get("on", True))
            elif k == "bw":
                with torch.set_grad_enabled(True):
                    a[0].backward(retain_graph=st.get("retain"), create_graph=st.get("cg", False))
            elif k == "agrad":
                ins = a[1:]
                # PyTorch 1.13 bug: autograd.grad through a CopySlices node (a write through a
                # view) also accumulates into the leaf's .grad. autograd.grad is documented not
                # to touch .grad; the oracle keeps the documented behaviour.
                before = [(t, None if t.grad is None else t.grad.detach().clone()) for t in V
                          if t is not None and _attr(t, "is_leaf") and t.requires_grad]
                with torch.set_grad_enabled(True):
                    gs = torch.autograd.grad([a[0]], ins, retain_graph=st.get("retain"),
                                             create_graph=st.get("cg", False), allow_unused=True)
                for j, g in enumerate(gs):
                    while len(V) <= st["o"] + j: V.append(None)
                    V[st["o"] + j] = g
                st["x"] = {"def": [g is not None for g in gs]}
                for t, g in before: t.grad = g
            elif k == "del": V[st["a"][0]] = None
            elif k == "fgrad": env.set(st, run_fgrad(env, st))
            else: raise ValueError(k)
    except RuntimeError as e:
        st["msg"] = str(e).split("\n")[0][:200]
        raise Raised() from e


def run_fgrad(env, st):
    """func::grad(f)(x): f's statements run at a new level; x is differentiable at this level
    and still tracked by outer levels (like functorch for closed functions)."""
    x = env.vars[st["a"][0]]
    inner = Env()
    inner.depth = env.depth + 1
    outermost = env.depth == 0
    with torch.enable_grad():
        xl = x.detach().requires_grad_() if outermost or not x.requires_grad else x.view_as(x)
        inner.vars = [xl]
        for s in st["body"]:
            exec_stmt(inner, s)
        y = inner.vars[st["ret"]]
        if y.requires_grad:
            g, = torch.autograd.grad([y], [xl], create_graph=True, allow_unused=True)
        else:
            g = None
        if g is None: g = torch.zeros_like(x)
    return g.detach() if outermost else g


# ---- the generator ----------------------------------------------------------------------------
class Gen:
    def __init__(self, rng, tier):
        self.r = rng
        self.tier = tier          # 0 simple, 1 harder, 2 second order
        self.env = Env()
        self.prog = []
        self.nograd_open = False
        self.ended = False

    def floats(self):
        return [i for i, t in enumerate(self.env.vars) if t is not None and t.dtype == FLOAT]

    def bools(self):
        return [i for i, t in enumerate(self.env.vars) if t is not None and t.dtype == torch.bool]

    def leaves_rg(self):
        return [i for i, t in enumerate(self.env.vars)
                if t is not None and t.dtype == FLOAT and _attr(t, "is_leaf") and t.requires_grad]

    def nxt(self):
        return len(self.env.vars)

    def rand_shape(self):
        r = self.r
        nd = r.choice([0, 1, 1, 2, 2, 2, 3])
        return [r.randint(1, 4) for _ in range(nd)]

    def rand_vals(self, shape, lo=-2.0, hi=2.0):
        n = 1
        for d in shape: n *= d
        return [round(self.r.uniform(lo, hi), 4) for _ in range(n)]

    def emit(self, st, ok_error=False):
        """Runs st; keeps it when it works, or when it raised and errors are wanted here."""
        saved_vars = list(self.env.vars)
        # Cloned: PyTorch accumulates into an existing .grad in place.
        saved_grads = [(t, t.grad.detach().clone()) for t in saved_vars
                       if t is not None and _attr(t, "is_leaf") and t.grad is not None]
        try:
            exec_stmt(self.env, st)
        except Raised:
            if st["k"] in ("bw", "agrad"):
                if self.r.random() < 0.15:
                    st["err"] = 1
                    self.prog.append(st)
                    self.ended = True
                    return True
                # Not kept: undo what PyTorch's engine may have accumulated before it raised.
                self.env.vars = saved_vars
                for t in saved_vars:
                    if t is not None and _attr(t, "is_leaf"): t.grad = None
                for t, g in saved_grads: t.grad = g
                return False
            self.env.vars = saved_vars
            if not ok_error:
                return False
            st["err"] = 1
            self.prog.append(st)
            return True
        # PyTorch's elementwise results take their inputs' memory layout (a transposed input
        # gives a transposed result), which is observable through contiguous()/view(); sloth's
        # results are always contiguous. Programs with such results are left out.
        # (clone() preserves a dense input's layout the same way.)
        if st["k"] in ("un", "bin", "sc", "cmp", "where", "mfill", "clamp", "sm", "red", "mm") or (
                st["k"] == "view" and st.get("v") == "clone"):
            t = self.env.vars[st["o"]]
            if t is not None and not t.is_contiguous():
                self.env.vars = saved_vars
                return False
        self.prog.append(st)
        return True

    def leaf(self, rg=None, shape=None):
        shape = self.rand_shape() if shape is None else shape
        if rg is None: rg = self.r.random() < 0.6
        st = {"k": "leaf", "o": self.nxt(), "shape": shape, "val": self.rand_vals(shape), "rg": rg}
        self.emit(st)
        return st["o"]

    def pick(self, pool):
        return self.r.choice(pool) if pool else None

    def broadcast_partner(self, x):
        """A variable whose shape broadcasts with x's, or a new leaf of such a shape."""
        r = self.r
        V = self.env.vars
        shp = list(V[x].shape)
        cands = [i for i in self.floats() if i != x and
                 _broadcastable(list(V[i].shape), shp)]
        if cands and r.random() < 0.6: return r.choice(cands)
        s = [d if r.random() < 0.7 else 1 for d in shp]
        if s and r.random() < 0.3: s = s[r.randint(0, len(s) - 1):]
        return self.leaf(shape=s)

    def view_stmt(self, x):
        r = self.r
        t = self.env.vars[x]
        shp = list(t.shape)
        nd = len(shp)
        n = t.numel()
        opts = ["detach", "clone", "contiguous", "unsqueeze", "reshape", "view", "flatten"]
        if nd >= 1: opts += ["slice", "narrow", "select", "split", "chunk", "squeeze", "expand", "as_strided"]
        if nd >= 2: opts += ["transpose", "permute", "diagonal", "t" if nd == 2 else "transpose"]
        v = r.choice(opts)
        st = {"k": "view", "o": self.nxt(), "a": [x], "v": v}
        if v == "unsqueeze": st["p"] = [r.randint(-nd - 1, nd)]
        elif v in ("reshape", "view"):
            st["p"] = _factor_shape(r, n) if r.random() < 0.8 else [-1]
        elif v == "flatten": st["p"] = [0, -1] if nd < 2 else [r.randint(0, nd - 1), -1]
        elif v == "slice":
            d = r.randrange(nd); size = shp[d]
            s = r.randint(0, size - 1); e = r.randint(s + 1, size + 1)
            st["p"] = [d, s, e, r.choice([1, 1, 2])]
        elif v == "narrow":
            d = r.randrange(nd); size = shp[d]
            s = r.randint(0, size - 1); st["p"] = [d, s, r.randint(1, size - s)]
        elif v == "select":
            d = r.randrange(nd); st["p"] = [d, r.randint(-shp[d], shp[d] - 1)]
        elif v == "split":
            d = r.randrange(nd); sz = r.randint(1, max(1, shp[d]))
            st["p"] = [sz, d, r.randint(0, max(0, (shp[d] + sz - 1) // sz - 1))]
        elif v == "chunk":
            d = r.randrange(nd); c = r.randint(1, 3)
            k = len(t.detach().chunk(c, d)); st["p"] = [c, d, r.randint(0, k - 1)]
        elif v == "squeeze": st["p"] = [r.randrange(nd)] if r.random() < 0.6 else []
        elif v == "expand":
            ones = [i for i, d in enumerate(shp) if d == 1]
            tgt = [r.randint(2, 3) if i in ones else d for i, d in enumerate(shp)]
            if r.random() < 0.3: tgt = [2] + tgt
            st["p"] = tgt
        elif v == "as_strided":
            # A window of the contiguous storage: sizes and strides within its numel.
            if not t.is_contiguous() or n < 2: st["v"] = "clone"
            else:
                size = [r.randint(1, 2), r.randint(1, 2)]
                # Rows never share elements: PyTorch leaves writes through self-overlapping
                # as_strided views undefined (its result depends on loop order); sloth refuses them.
                stride = [r.randint(size[1], size[1] + 1), 1]
                span = (size[0] - 1) * stride[0] + (size[1] - 1) * stride[1] + 1
                st["size"], st["stride"], st["p"] = size, stride, [r.randint(0, n - span) if n >= span else 0]
                if n < span: st["v"] = "clone"; st.pop("size"); st.pop("stride")
        elif v == "transpose": st["p"] = [r.randrange(nd), r.randrange(nd)]
        elif v == "permute":
            p = list(range(nd)); r.shuffle(p); st["p"] = p
        elif v == "diagonal":
            d0, d1 = r.sample(range(nd), 2); st["p"] = [r.randint(-1, 1), d0, d1]
        return st

    def compute_stmt(self):
        r = self.r
        V = self.env.vars
        fl = self.floats()
        x = self.pick(fl)
        if x is None: return self.leaf()
        t = V[x]
        c = r.random()
        if c < 0.16:
            pos = _all(t, lambda v: v > 0.05)
            op = r.choice(UNARY + (UNARY_POS if pos else []))
            st = {"k": "un", "o": self.nxt(), "a": [x], "op": op}
        elif c < 0.32:
            y = self.broadcast_partner(x)
            op = r.choice(BINARY)
            if op == "div" and not _all(V[y], lambda v: v.abs() > 0.2): op = "mul"
            st = {"k": "bin", "o": self.nxt(), "a": [x, y], "op": op}
            if op == "add" and r.random() < 0.3: st["alpha"] = r.choice([2.0, -0.5])
        elif c < 0.42:
            op = r.choice(SCALAR_OPS + ["pow"])
            s = r.choice([0.5, 2.0, -1.5, 3.0])
            if op == "pow":
                if not _all(t, lambda v: v > 0.05): s = 2.0
                elif r.random() < 0.5: s = 0.5
            st = {"k": "sc", "o": self.nxt(), "a": [x], "op": op, "s": s}
        elif c < 0.47:
            m = self.nxt()
            if not self.emit({"k": "cmp", "o": m, "a": [x], "op": r.choice(CMP), "s": 0.0}): return
            if r.random() < 0.5:
                y = self.broadcast_partner(x)
                st = {"k": "where", "o": self.nxt(), "a": [m, x, y]}
            else:
                st = {"k": "mfill", "o": self.nxt(), "a": [x, m], "s": r.choice([0.0, 1.5])}
        elif c < 0.51:
            st = {"k": "clamp", "o": self.nxt(), "a": [x], "lo": -0.5, "hi": r.choice([0.5, 1.0])}
        elif c < 0.63:
            op = r.choice(REDUCE)
            nd = t.dim()
            st = {"k": "red", "o": self.nxt(), "a": [x], "op": op}
            if op in ("sum", "mean") and r.random() < 0.4: st["dims"] = None
            elif op == "prod":
                st["dims"] = None if nd == 0 or r.random() < 0.4 else [r.randrange(nd)]
                st["keep"] = r.random() < 0.3
            else:
                dims = sorted(r.sample(range(nd), r.randint(1, nd))) if nd else []
                if op in ("amax", "amin", "logsumexp", "var", "std") and nd == 0: dims = [0] if op != "var" and op != "std" else []
                if op in ("var", "std") and (not dims or t.numel() < 2): return
                st["dims"] = dims
                st["keep"] = r.random() < 0.3
                if op in ("var", "std"): st["unb"] = r.random() < 0.7
        elif c < 0.7:
            nd = t.dim()
            if nd == 0: return
            k = t.shape[-1]
            shape2 = r.choice([[k], [k, r.randint(1, 3)]])
            if nd >= 3 and r.random() < 0.5: shape2 = [t.shape[0], k, r.randint(1, 3)]
            y = self.leaf(shape=shape2) if r.random() < 0.7 else self.pick(
                [i for i in fl if V[i].dim() >= 1 and V[i].shape[0] == k and V[i].dim() <= 2] or [None])
            if y is None: return
            st = {"k": "mm", "o": self.nxt(), "a": [x, y]}
        elif c < 0.76:
            if t.dim() == 0: return
            st = {"k": "sm", "o": self.nxt(), "a": [x], "op": r.choice(["softmax", "log_softmax"]),
                  "dim": r.randint(-t.dim(), t.dim() - 1)}
        else:
            st = self.view_stmt(x)
        self.emit(st, ok_error=r.random() < 0.25)

    def inplace_stmt(self):
        r = self.r
        V = self.env.vars
        # Mostly tensors that may be written (writing a leaf that requires grad raises).
        writable = [i for i in self.floats() if not (V[i].requires_grad and _leaf_base(V[i]))]
        x = self.pick(writable if writable and r.random() < 0.85 else self.floats())
        if x is None: return
        t = V[x]
        c = r.random()
        if c < 0.35:
            op = r.choice(INPLACE_T)
            y = self.broadcast_partner(x) if r.random() < 0.8 else self.pick(self.floats())
            if op == "div_" and not _all(V[y], lambda v: v.abs() > 0.2): op = "mul_"
            # A source that shares memory with the target in a layout PyTorch cannot check
            # (not dense) is read while it is written: PyTorch's result then depends on its
            # loop order. sloth reads the source as it was; such programs are left out.
            if y != x and _shares_storage(V[x], V[y]) and not (
                    _dense(V[x]) and _dense(V[y])):
                return
            st = {"k": "inp", "a": [x, y], "op": op}
        elif c < 0.7:
            op = r.choice(INPLACE_S)
            st = {"k": "inp", "a": [x], "op": op, "s": r.choice([0.5, 2.0, -1.0])}
        elif c < 0.8: st = {"k": "inp", "a": [x], "op": "zero_"}
        elif c < 0.9: st = {"k": "inp", "a": [x], "op": "clamp_", "lo": -0.5, "hi": 1.0}
        else: st = {"k": "inp", "a": [x], "op": "relu_"}
        self.emit(st, ok_error=r.random() < 0.3)

    def alias_write_stmt(self):
        """A write through an alias (detach, a view, the tensor itself) of a value some backward
        node may have saved, sometimes under no_grad: PyTorch's version-counter checks."""
        r = self.r
        V = self.env.vars
        x = self.pick(self.floats())
        if x is None: return
        t = V[x]
        kind = r.choice(["self", "detach", "detach", "view", "select"])
        target = x
        if kind != "self":
            o = self.nxt()
            if kind == "detach": st = {"k": "view", "o": o, "a": [x], "v": "detach"}
            elif kind == "view": st = {"k": "view", "o": o, "a": [x], "v": "reshape", "p": [-1]}
            else:
                if t.dim() == 0: return
                st = {"k": "view", "o": o, "a": [x], "v": "select", "p": [0, 0]}
            if not self.emit(st): return
            target = o
        quiet = r.random() < 0.3 and not self.nograd_open
        if quiet: self.emit({"k": "nograd", "on": True})
        op = r.choice(["add_", "mul_", "sub_", "fill_", "zero_", "relu_", "copy_"])
        if op == "copy_":
            y = self.broadcast_partner(target)
            st = {"k": "inp", "a": [target, y], "op": op}
        elif op in ("zero_", "relu_"): st = {"k": "inp", "a": [target], "op": op}
        else: st = {"k": "inp", "a": [target], "op": op, "s": r.choice([0.0, 1.0, 0.5])}
        self.emit(st, ok_error=True)
        if quiet: self.emit({"k": "nograd", "on": False})

    def loss_of(self, x):
        """loss = (x * W).sum() with a constant W (so every element gets its own weight)."""
        V = self.env.vars
        w = self.leaf(rg=False, shape=list(V[x].shape))
        m = self.nxt()
        if not self.emit({"k": "bin", "o": m, "a": [x, w], "op": "mul"}): return None
        s = self.nxt()
        if not self.emit({"k": "red", "o": s, "a": [m], "op": "sum", "dims": None}): return None
        return s

    def backward_stmt(self):
        r = self.r
        V = self.env.vars
        cands = [i for i in self.floats() if V[i].requires_grad]
        if not cands: return
        x = r.choice(cands)
        loss = self.loss_of(x)
        if loss is None: return
        self.emit({"k": "bw", "a": [loss], "retain": r.random() < 0.3})
        if self.ended: return
        for lf in self.leaves_rg():
            if r.random() < 0.7: self.emit({"k": "grad", "a": [lf]})

    def second_order_stmt(self):
        r = self.r
        V = self.env.vars
        leaves = self.leaves_rg()
        cands = [i for i in self.floats() if V[i].requires_grad]
        if not cands or not leaves: return
        x = r.choice(cands)
        loss = self.loss_of(x)
        if loss is None: return
        ins = r.sample(leaves, r.randint(1, len(leaves)))
        o = self.nxt()
        # retain: None is the default (create_graph), as LibTorch's optional<bool>.
        st = {"k": "agrad", "o": o, "a": [loss] + ins, "cg": r.random() < 0.85,
              "retain": r.choice([None, None, True, False])}
        if not self.emit(st) or self.ended: return
        gs = list(range(o, o + len(ins)))
        # Sometimes the first-order grads' helpers go out of scope before anything is read.
        loss2 = None
        for g in gs:
            if V[g] is None or not V[g].requires_grad: continue
            if r.random() < 0.7:
                l = self.loss_of(g)
                if l is None: continue
                if loss2 is None: loss2 = l
                else:
                    n = self.nxt()
                    if self.emit({"k": "bin", "o": n, "a": [loss2, l], "op": "add"}): loss2 = n
        if r.random() < 0.5:
            for g in gs:
                if r.random() < 0.6: self.emit({"k": "del", "a": [g]})
        for g in gs:
            if V[g] is not None and r.random() < 0.4: self.emit({"k": "read", "a": [g]})
        if loss2 is not None:
            self.emit({"k": "bw", "a": [loss2]})
            if self.ended: return
            for lf in self.leaves_rg():
                self.emit({"k": "grad", "a": [lf]})

    def fgrad_stmt(self):
        """func::grad(f)(x) with tensors made inside f; sometimes nested twice."""
        r = self.r
        x = self.pick([i for i in self.floats() if self.env.vars[i].numel() <= 6])
        if x is None: return
        shape = list(self.env.vars[x].shape)
        depth2 = r.random() < 0.35
        body = _fgrad_body(r, shape, self)
        if depth2:
            inner = {"k": "fgrad", "o": 1, "a": [0], "body": body["stmts"], "ret": body["ret"]}
            outer = [inner, {"k": "red", "o": 2, "a": [1], "op": "sum", "dims": None}]
            extra = _fgrad_body(r, shape, self, start=3)
            outer += extra["stmts"]
            outer.append({"k": "bin", "o": extra["ret"] + 1, "a": [2, extra["ret"]], "op": "add"})
            st = {"k": "fgrad", "o": self.nxt(), "a": [x], "body": outer, "ret": extra["ret"] + 1}
        else:
            st = {"k": "fgrad", "o": self.nxt(), "a": [x], "body": body["stmts"], "ret": body["ret"]}
        if self.emit(st):
            self.emit({"k": "read", "a": [st["o"]]})

    def read_stmt(self):
        x = self.pick([i for i, t in enumerate(self.env.vars) if t is not None])
        if x is not None: self.emit({"k": "read", "a": [x]})

    def program(self, n_stmts):
        r = self.r
        for _ in range(r.randint(1, 3)): self.leaf()
        steps = 0
        while steps < n_stmts and not self.ended:
            steps += 1
            c = r.random()
            if self.tier == 3:  # versions: compute, write through aliases, backward
                if c < 0.5: self.compute_stmt()
                elif c < 0.72: self.alias_write_stmt()
                elif c < 0.84 and not self.nograd_open:
                    if r.random() < 0.3: self.second_order_stmt()
                    else: self.backward_stmt()
                elif c < 0.92: self.read_stmt()
                else: self.emit({"k": "sync"})
                continue
            if c < 0.45: self.compute_stmt()
            elif c < 0.45 + (0.12 if self.tier == 0 else 0.22): self.inplace_stmt()
            elif c < 0.72:
                if self.tier >= 1 and r.random() < 0.4:
                    self.emit({"k": "nograd", "on": not self.nograd_open})
                    self.nograd_open = not self.nograd_open
                elif r.random() < 0.5: self.emit({"k": "sync"})
                else: self.read_stmt()
            elif c < 0.78: self.leaf()
            elif c < 0.86 and self.tier >= 1 and r.random() < 0.3:
                x = self.pick(self.floats())
                if x is not None: self.emit({"k": "rg", "a": [x]}, ok_error=True)
            elif c < 0.86 and self.tier >= 1:
                x = self.pick([i for i, t in enumerate(self.env.vars) if t is not None])
                if x is not None: self.emit({"k": "del", "a": [x]})
            elif c < 0.93 and not self.nograd_open:
                if self.tier == 2 and r.random() < 0.6: self.second_order_stmt()
                elif self.tier >= 1 and r.random() < 0.25: self.fgrad_stmt()
                else: self.backward_stmt()
            else: self.read_stmt()
        if self.nograd_open and not self.ended:
            self.emit({"k": "nograd", "on": False})
        if not self.ended:
            if self.tier >= 2: self.second_order_stmt()
            else: self.backward_stmt()
        if not self.ended:
            for i, t in enumerate(self.env.vars):
                if t is not None and r.random() < 0.5: self.emit({"k": "read", "a": [i]})
        return self.prog


def _fgrad_body(r, shape, gen, start=1):
    """Statements of f(x) (x is variable 0 of the body; new ones from `start`): a tensor made
    inside, copy_ of x into it, and a smooth scalar result."""
    stmts = []
    n = 1
    for d in shape: n *= d
    o = start
    vals = gen.rand_vals(shape)
    stmts.append({"k": "leaf", "o": o, "shape": shape, "val": vals, "rg": False}); c = o; o += 1
    kind = r.random()
    if kind < 0.4:
        stmts.append({"k": "inp", "a": [c, 0], "op": "copy_"})
        z = c
    else:
        stmts.append({"k": "bin", "o": o, "a": [0, c], "op": "mul"}); z = o; o += 1
    stmts.append({"k": "un", "o": o, "a": [z], "op": r.choice(["sin", "tanh", "square", "exp"])}); u = o; o += 1
    stmts.append({"k": "bin", "o": o, "a": [u, 0], "op": "mul"}); p = o; o += 1
    stmts.append({"k": "red", "o": o, "a": [p], "op": "sum", "dims": None})
    return {"stmts": stmts, "ret": o}


def _attr(t, name):
    """t.is_leaf etc.; PyTorch raises for a split() output whose base was written since."""
    try:
        return getattr(t, name)
    except RuntimeError:
        return False


def _shares_storage(a, b):
    return a.storage().data_ptr() == b.storage().data_ptr()


def _dense(t):
    dims = sorted((s, n) for s, n in zip(t.stride(), t.shape) if n > 1)
    expected = 1
    for s, n in dims:
        if s != expected: return False
        expected *= n
    return True


def _leaf_base(t):
    b = t._base if t._base is not None else t
    return _attr(b, "is_leaf")


def _all(t, pred):
    """pred holds for every element (read without autograd: a stale split() view raises)."""
    try:
        with torch.no_grad():
            return bool(pred(t.detach()).all())
    except RuntimeError:
        return False


def _leaf_or_none(t):
    try:
        return bool(t.is_leaf)
    except RuntimeError:
        return None


def _broadcastable(a, b):
    for x, y in zip(reversed(a), reversed(b)):
        if x != y and x != 1 and y != 1: return False
    return len(a) <= len(b) or True


def _factor_shape(r, n):
    if n == 0: return [0]
    dims = []
    m = n
    while m > 1 and len(dims) < 3:
        f = [d for d in range(2, m + 1) if m % d == 0]
        d = r.choice(f)
        dims.append(d)
        m //= d
    if r.random() < 0.3: dims.insert(r.randint(0, len(dims)), 1)
    if not dims: dims = [1] if r.random() < 0.5 else []
    return dims


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/oracle")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--counts", default="900,800,700,600",
                    help="programs per tier: simple,harder,second_order,versions")
    args = ap.parse_args()
    torch.set_num_threads(1)
    counts = [int(c) for c in args.counts.split(",")]
    os.makedirs(args.out, exist_ok=True)
    names = ["simple", "harder", "second_order", "versions"]
    for tier, count in enumerate(counts):
        progs = []
        for i in range(count):
            rng = random.Random(args.seed * 1000003 + tier * 100003 + i)
            g = Gen(rng, tier)
            prog = g.program(rng.randint(8, 30 if tier == 0 else 45))
            progs.append({"id": f"{names[tier]}/{i}", "s": prog})
        path = os.path.join(args.out, f"{names[tier]}.json")
        with open(path, "w") as f:
            f.write("[\n")
            for j, p in enumerate(progs):
                f.write(json.dumps(p, separators=(",", ":")))
                f.write(",\n" if j + 1 < len(progs) else "\n")
            f.write("]\n")
        errs = sum(1 for p in progs for s in p["s"] if s.get("err"))
        print(f"{path}: {len(progs)} programs, {sum(len(p['s']) for p in progs)} statements, "
              f"{errs} expected errors")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""PyTorch eager reference for examples/train_char_lm.cc (issue 13).

    /usr/bin/python3 tools/char_lm.py --threads 2

A GPT-style character-level language model trained on the word list of Debian's `wamerican`
package (/usr/share/dict/words), one word per line:
  data    the words are shuffled (Fisher-Yates driven by splitmix64 seeded with 13, so the C++
          port reproduces the order; the file is sorted, and sorted neighbours share prefixes
          that a model would learn to copy), then word i goes to the validation set when
          i % 10 == 9 and to the training set otherwise (a fixed 90/10 split by words); each
          set is its words joined by "\\n" (with a final "\\n").
          The vocabulary is the set of characters (Unicode code points) of the file plus "\\n",
          sorted. A training sequence is a random contiguous chunk of T+1 characters of the
          training text (input: the first T, target: the last T).
  model   token + position embeddings (N(0, 0.02)); n_layer pre-norm blocks
          x += attn(ln1(x)); x += mlp(ln2(x)), attention causal with n_head heads (written with
          matmul, masked_fill and softmax: PyTorch 1.13 has no scaled_dot_product_attention),
          the MLP d -> 4d -> d with GELU (erf); a final LayerNorm; the output projection is
          the token embedding (weight tying). Linear weights N(0, 0.02), biases 0.
  train   AdamW (betas 0.9/0.95, weight decay 0.01 on every parameter), learning rate warmed
          up linearly for --warmup steps then cosine-decayed to lr/10 at --steps; gradients
          clipped to total norm 1.0; no dropout.
  report  train loss (mean since the last report) and validation loss (mean over --eval_batches
          fixed validation batches) every --eval_every steps, tokens per second of training
          (evaluation excluded), and --samples new words sampled at the end with
          --temperature and --top_k.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


MASK64 = (1 << 64) - 1


def splitmix64(state):
    """One step of splitmix64: returns (new state, output)."""
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def shuffle_words(words, seed=13):
    state = seed
    for i in range(len(words) - 1, 0, -1):
        state, r = splitmix64(state)
        j = r % (i + 1)
        words[i], words[j] = words[j], words[i]


def load_words(path):
    with open(path, encoding="utf-8") as f:
        words = [w for w in f.read().split("\n") if w]
    shuffle_words(words)
    train = [w for i, w in enumerate(words) if i % 10 != 9]
    val = [w for i, w in enumerate(words) if i % 10 == 9]
    vocab = sorted(set("".join(words)) | {"\n"})
    return "\n".join(train) + "\n", "\n".join(val) + "\n", vocab


class Block(nn.Module):
    def __init__(self, d, n_head, T):
        super().__init__()
        self.n_head = n_head
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc_out = nn.Linear(4 * d, d)
        self.register_buffer("causal", torch.ones(T, T, dtype=torch.bool).tril())

    def attn(self, x):
        B, T, d = x.shape
        h = self.n_head
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (t.view(B, T, h, d // h).transpose(1, 2) for t in (q, k, v))
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // h))
        s = s.masked_fill(~self.causal[:T, :T], float("-inf"))
        y = F.softmax(s, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x))))


class CharGpt(nn.Module):
    def __init__(self, vocab, d, n_head, n_layer, T):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(T, d)
        self.blocks = nn.ModuleList(Block(d, n_head, T) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        return self.ln_f(x) @ self.tok.weight.t()   # weight tying


def batch(data, B, T, g):
    start = torch.randint(0, len(data) - T - 1, (B,), generator=g)
    rows = torch.stack([data[s:s + T + 1] for s in start.tolist()])
    return rows[:, :-1], rows[:, 1:]


def lr_at(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    p = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr / 10 + (a.lr - a.lr / 10) * 0.5 * (1 + math.cos(math.pi * min(p, 1.0)))


@torch.no_grad()
def sample_words(model, vocab, n, T, temperature, top_k, g):
    model.eval()
    nl = vocab.index("\n")
    ctx = [nl]
    words, cur = [], []
    while len(words) < n:
        logits = model(torch.tensor([ctx[-T:]]))[0, -1] / temperature
        if top_k > 0:
            v, _ = torch.topk(logits, min(top_k, logits.numel()))
            logits = logits.masked_fill(logits < v[-1], float("-inf"))
        c = torch.multinomial(F.softmax(logits, -1), 1, generator=g).item()
        ctx.append(c)
        if c == nl:
            if cur:
                words.append("".join(cur))
            cur = []
        else:
            cur.append(vocab[c])
    model.train()
    return words


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--data", default="/usr/share/dict/words")
    ap.add_argument("--d_model", type=int, default=128)
    ap.add_argument("--n_head", type=int, default=4)
    ap.add_argument("--n_layer", type=int, default=2)
    ap.add_argument("--block_size", type=int, default=64)
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--weight_decay", type=float, default=0.01)
    ap.add_argument("--eval_every", type=int, default=250)
    ap.add_argument("--eval_batches", type=int, default=20)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top_k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    train_text, val_text, vocab = load_words(a.data)
    stoi = {c: i for i, c in enumerate(vocab)}
    train = torch.tensor([stoi[c] for c in train_text], dtype=torch.int64)
    val = torch.tensor([stoi[c] for c in val_text], dtype=torch.int64)
    T, B = a.block_size, a.batch_size
    gv = torch.Generator().manual_seed(1234)
    val_batches = [batch(val, B, T, gv) for _ in range(a.eval_batches)]

    model = CharGpt(len(vocab), a.d_model, a.n_head, a.n_layer, T)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95),
                            weight_decay=a.weight_decay)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; vocabulary "
          f"{len(vocab)}, {len(train)} training and {len(val)} validation characters; "
          f"{sum(p.numel() for p in model.parameters())} parameters (d={a.d_model}, "
          f"{a.n_head} heads, {a.n_layer} layers, T={T}, batch {B}); {a.steps} steps")

    @torch.no_grad()
    def val_loss():
        model.eval()
        l = sum(F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
                for x, y in val_batches) / len(val_batches)
        model.train()
        return l

    print(f"step 0: val loss {val_loss():.4f} (uniform: {math.log(len(vocab)):.4f})", flush=True)
    g = torch.Generator().manual_seed(a.seed)
    train_s, loss_sum, loss_n = 0.0, 0.0, 0
    for step in range(a.steps):
        t0 = time.perf_counter()
        for grp in opt.param_groups:
            grp["lr"] = lr_at(step, a)
        x, y = batch(train, B, T, g)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_sum += loss.item()
        loss_n += 1
        train_s += time.perf_counter() - t0
        if (step + 1) % a.eval_every == 0 or step + 1 == a.steps:
            print(f"step {step + 1}: train loss {loss_sum / loss_n:.4f}, val loss "
                  f"{val_loss():.4f}, lr {lr_at(step, a):.2e}, "
                  f"{(step + 1) * B * T / train_s:.0f} tokens/s", flush=True)
            loss_sum, loss_n = 0.0, 0
    print(f"trained {a.steps} steps in {train_s:.1f} s: {a.steps * B * T / train_s:.0f} tokens/s "
          f"({1e3 * train_s / a.steps:.1f} ms/step)")
    gs = torch.Generator().manual_seed(a.seed)
    words = sample_words(model, vocab, a.samples, T, a.temperature, a.top_k, gs)
    print(f"samples (temperature {a.temperature}, top_k {a.top_k}): " + " ".join(words))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""
twin.py -- the PyTorch twin of examples/tinygpt (issue 28).

The same model, batches and optimiser as tinygpt (gpt.h, gpt.c,
tinygpt.c), written independently on PyTorch, starting from the initial
parameters of a tinygpt checkpoint:

    tinygpt --data FILES --steps 0 --save init.ckpt
    twin.py --data FILES --ckpt init.ckpt --steps N --log twin.tsv
    tinygpt --data FILES --load init.ckpt --steps N --log c.tsv

and the two loss curves agree within float32 rounding (twin-compare.py
runs and compares both; docs/TINYGPT.md, "The PyTorch twin").

What it reimplements:
  - the model: byte tokens (V = 256), wte [256][E], wpe [T][E], L pre-LN
    blocks x += MHA(LN1(x)), x += fc2(GELU_tanh(fc1(LN2(x)))), a final
    LayerNorm, logits = LN_f(x) wte^T (tied); LayerNorm eps 1e-5.  The
    attention is written out (packed in_proj, per-head softmax(q k^T /
    sqrt(D)) with a causal mask, out_proj), not nn.MultiheadAttention;
    --selfcheck compares it with nn.MultiheadAttention in float64;
  - the data: the files concatenated in order, training on the first 90%
    when the last 10% holds 8 contexts (else on everything), batches of
    gpt_batch (SplitMix64 from 7, offset = next % (ntrain - T - 1));
  - the step: mean cross-entropy, AdamW as gpt_adamw (beta1 0.9, beta2
    0.95, eps 1e-8, bias corrections 1 - beta^step, decoupled weight decay
    0.01 on every parameter, the global gradient norm clipped to 1.0), in
    float32 element operations in gpt_adamw's order; dropout 0;
  - the report: --log as tinygpt's (step, loss, ms, attn_ms), the final
    eval loss on tinygpt's 8 fixed evaluation batches (seed 99).

attn_ms: tinygpt times its calls of attn's MHA layer (forward and
backward: in_proj, attention, out_proj).  The twin times the same share:
the attention sub-module's forward with a clock around the call, and its
backward by running the backward in segments (graph cut with detach() at
the attention's input and output, see TinyGPT.step_grads), so that the
attention's backward is one timed torch.autograd.backward call of its own.
The cut changes no gradient (the chain rule is applied in the same order;
--selfcheck compares with one loss.backward()).

Runs on torch 1.13 (Debian 12) and 2.x, float32, CPU.
"""
import argparse
import math
import os
import struct
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    sys.stderr.write("twin.py: needs numpy and torch (%s)\n" % e)
    sys.exit(77)

V = 256
MASK64 = (1 << 64) - 1


# ---- data and batches (gpt_rng_next, gpt_batch, tinygpt's main) ----

def splitmix64(state):
    """One step of SplitMix64: returns (new state, output), Python ints."""
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


class Batches:
    """gpt_batch: B sequences of T + 1 bytes at offsets next() % (len - T - 1)."""

    def __init__(self, text, length, T, B, seed):
        self.text, self.length, self.T, self.B, self.state = text, length, T, B, seed

    def next(self):
        rows = []
        for _ in range(self.B):
            self.state, r = splitmix64(self.state)
            o = r % (self.length - self.T - 1)
            rows.append(self.text[o:o + self.T + 1])
        return torch.from_numpy(np.stack(rows).astype(np.int64))


def read_text(paths):
    chunks = []
    for p in paths:
        try:
            with open(p, "rb") as f:
                chunks.append(f.read())
        except OSError as e:
            die("cannot open %s (%s)" % (p, e.strerror), 2)
    return np.frombuffer(b"".join(chunks), dtype=np.uint8)


def split_text(length, T):
    """tinygpt's split: (ntrain, eval0)."""
    if length // 10 >= 8 * (T + 1):
        return length - length // 10, length - length // 10
    return length, 0


# ---- checkpoints (gpt_save / gpt_load) ----

MAGIC = b"ATTNGPT\0"
VERSION = 1
HEADER = struct.Struct("<8sI5iQ")     # magic, version, L E H T V, n


def fnv1a64(data):
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & MASK64
    return h


def param_count(L, E, T):
    per_layer = (E + E + 3 * E * E + 3 * E + E * E + E + E + E
                 + 4 * E * E + 4 * E + 4 * E * E + E)
    return V * E + T * E + 2 * E + L * per_layer


def load_checkpoint(path):
    """(L, E, H, T, float32 parameters) of a tinygpt checkpoint; every field,
    the size and the FNV-1a checksum checked (a message and exit 1)."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        die("cannot open checkpoint %s (%s)" % (path, e.strerror))

    def bad(what):
        die("%s: %s" % (path, what))

    if len(blob) < 8 or blob[:8] != MAGIC:
        bad("not a tinygpt checkpoint (magic)")
    if len(blob) < HEADER.size:
        bad("truncated header")
    _, version, L, E, H, T, v, n = HEADER.unpack_from(blob)
    if version != VERSION:
        bad("unsupported version %d (this twin reads version %d)" % (version, VERSION))
    if not (0 <= L <= 64 and 1 <= E <= 4096 and H >= 1 and E % H == 0
            and 2 <= T <= 65536 and v == V):
        bad("sizes out of range (L %d E %d H %d T %d V %d)" % (L, E, H, T, v))
    if n != param_count(L, E, T):
        bad("parameter count %d does not match the sizes (%d)" % (n, param_count(L, E, T)))
    if len(blob) != HEADER.size + 4 * n + 8:
        bad("file size %d does not match the sizes (%d: truncated or extended)"
            % (len(blob), HEADER.size + 4 * n + 8))
    body = blob[HEADER.size:HEADER.size + 4 * n]
    (h,) = struct.unpack_from("<Q", blob, HEADER.size + 4 * n)
    if h != fnv1a64(body):
        bad("checksum mismatch (corrupt parameters)")
    w = np.frombuffer(body, dtype="<f4").astype(np.float32)
    return L, E, H, T, w


def save_checkpoint(path, L, E, H, T, w):
    w = np.ascontiguousarray(w, dtype="<f4")
    body = w.tobytes()
    try:
        with open(path, "wb") as f:
            f.write(HEADER.pack(MAGIC, VERSION, L, E, H, T, V, w.size))
            f.write(body)
            f.write(struct.pack("<Q", fnv1a64(body)))
    except OSError as e:
        die("writing %s failed (%s)" % (path, e.strerror))


# ---- the model ----

class CausalSelfAttention(nn.Module):
    """The MHA layer of tinygpt, written out: packed in_proj (rows [0, E) Q,
    [E, 2E) K, [2E, 3E) V), heads of D = E / H columns, causal softmax of
    q k^T / sqrt(D), out_proj."""

    def __init__(self, E, H):
        super().__init__()
        self.E, self.H = E, H
        self.in_proj_weight = nn.Parameter(torch.empty(3 * E, E))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * E))
        self.out_proj = nn.Linear(E, E)

    def forward(self, x):
        B, T, E = x.shape
        H, D = self.H, E // self.H
        qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias)
        q, k, v = qkv.split(E, dim=2)
        q = q.reshape(B, T, H, D).transpose(1, 2)           # [B][H][T][D]
        k = k.reshape(B, T, H, D).transpose(1, 2)
        v = v.reshape(B, T, H, D).transpose(1, 2)
        s = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(D))
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        p = torch.softmax(s.masked_fill(future, float("-inf")), dim=-1)
        o = torch.matmul(p, v).transpose(1, 2).reshape(B, T, E)
        return self.out_proj(o)


class Block(nn.Module):
    def __init__(self, E, H):
        super().__init__()
        self.ln1 = nn.LayerNorm(E, eps=1e-5)
        self.attn = CausalSelfAttention(E, H)
        self.ln2 = nn.LayerNorm(E, eps=1e-5)
        self.fc1 = nn.Linear(E, 4 * E)
        self.fc2 = nn.Linear(4 * E, E)

    def mlp(self, h):
        return self.fc2(F.gelu(self.fc1(h), approximate="tanh"))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, L, E, H, T):
        super().__init__()
        self.L, self.E, self.H, self.T = L, E, H, T
        self.wte = nn.Parameter(torch.empty(V, E))
        self.wpe = nn.Parameter(torch.empty(T, E))
        self.ln_f = nn.LayerNorm(E, eps=1e-5)
        self.blocks = nn.ModuleList(Block(E, H) for _ in range(L))

    def checkpoint_order(self):
        """The parameters in the order of gpt_make_layout."""
        ps = [self.wte, self.wpe, self.ln_f.weight, self.ln_f.bias]
        for b in self.blocks:
            ps += [b.ln1.weight, b.ln1.bias, b.attn.in_proj_weight, b.attn.in_proj_bias,
                   b.attn.out_proj.weight, b.attn.out_proj.bias, b.ln2.weight, b.ln2.bias,
                   b.fc1.weight, b.fc1.bias, b.fc2.weight, b.fc2.bias]
        return ps

    def load_flat(self, w):
        o = 0
        with torch.no_grad():
            for p in self.checkpoint_order():
                p.copy_(torch.from_numpy(w[o:o + p.numel()]).view_as(p))
                o += p.numel()
        assert o == w.size, (o, w.size)

    def flat(self):
        return torch.cat([p.detach().reshape(-1) for p in self.checkpoint_order()]).numpy()

    def embed(self, inp):
        return self.wte[inp] + self.wpe[:inp.shape[1]]

    def head(self, x, tgt):
        logits = F.linear(self.ln_f(x), self.wte)
        return F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))

    def loss(self, tok):
        """The mean cross-entropy of tok [B][T + 1] in one graph."""
        x = self.embed(tok[:, :-1])
        for b in self.blocks:
            x = b(x)
        return self.head(x, tok[:, 1:])

    def step_grads(self, tok):
        """Forward and backward of one batch, gradients into .grad (zeroed
        first), with the attention's forward and backward timed: the graph
        is cut at every attention's input (LN1's output) and output, and the
        backward walks the segments from the top.  Returns (loss as a
        float, seconds inside the attention sub-modules)."""
        for p in self.parameters():
            p.grad = None
        ta = 0.0
        x0 = self.embed(tok[:, :-1])
        x = x0.detach().requires_grad_()
        segs = []
        for b in self.blocks:
            h1 = b.ln1(x)
            h1c = h1.detach().requires_grad_()
            t0 = time.perf_counter()
            a = b.attn(h1c)
            ta += time.perf_counter() - t0
            ac = a.detach().requires_grad_()
            xmid = x + ac
            xout = xmid + b.mlp(b.ln2(xmid))
            segs.append((x, h1, h1c, a, ac, xout))
            x = xout.detach().requires_grad_()
        loss = self.head(x, tok[:, 1:])
        loss.backward()
        g = x.grad
        for (xin, h1, h1c, a, ac, xout) in reversed(segs):
            xout.backward(g)                 # MLP, LN2; d(attention output), d xin
            t0 = time.perf_counter()
            a.backward(ac.grad)              # the attention: in_proj, out_proj, d h1
            ta += time.perf_counter() - t0
            h1.backward(h1c.grad)            # LN1; adds to d xin
            g = xin.grad
        x0.backward(g)                       # wte (input side), wpe
        return float(loss.detach()), ta


class AdamW:
    """gpt_adamw: the global gradient norm (sum of squares in double) clipped
    to clip, then per element, in float32 and in gpt_adamw's order,
        m = b1 m + (1 - b1) g;  v = b2 v + ((1 - b2) g) g
        w -= lr (m / c1 / (sqrt(v / c2) + eps) + wd w)
    with c1 = 1 - b1^step, c2 = 1 - b2^step (powf of float32 values)."""

    def __init__(self, params, lr, wd=0.01, clip=1.0):
        self.params = list(params)
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        f = np.float32
        self.b1, self.b2, self.eps = f(0.9), f(0.95), f(1e-8)
        self.lr, self.wd, self.clip = f(lr), f(wd), f(clip)

    def step(self, step):
        f = np.float32
        ss = sum(float((p.grad.double() ** 2).sum()) for p in self.params)
        norm = f(math.sqrt(ss))
        k = self.clip / norm if norm > self.clip else f(1.0)
        c1 = f(1.0) - np.power(self.b1, f(step))
        c2 = f(1.0) - np.power(self.b2, f(step))
        t = lambda x: torch.tensor(float(x), dtype=torch.float32)   # exact: x is a float32
        k, b1, b2, omb1, omb2 = t(k), t(self.b1), t(self.b2), t(f(1) - self.b1), t(f(1) - self.b2)
        c1, c2, eps, lr, wd = t(c1), t(c2), t(self.eps), t(self.lr), t(self.wd)
        with torch.no_grad():
            for p, m, v in zip(self.params, self.m, self.v):
                g = p.grad * k
                m.copy_(b1 * m + omb1 * g)
                v.copy_(b2 * v + (omb2 * g) * g)
                upd = (m / c1) / (torch.sqrt(v / c2) + eps) + wd * p
                p.sub_(lr * upd)
        return float(norm)


# ---- self-checks ----

def selfcheck(model, tok):
    """1. The written-out attention against nn.MultiheadAttention (same
    weights, causal attn_mask) in float64, outputs and gradients;
    2. the segmented backward of step_grads against one loss.backward()."""
    ok = True
    E, H = model.E, model.H
    if model.L > 0:
        torch.manual_seed(0)
        mine = CausalSelfAttention(E, H).double()
        ref = nn.MultiheadAttention(E, H, bias=True, batch_first=True).double()
        with torch.no_grad():
            for p in mine.parameters():
                p.normal_(0, 0.2)
            ref.in_proj_weight.copy_(mine.in_proj_weight)
            ref.in_proj_bias.copy_(mine.in_proj_bias)
            ref.out_proj.weight.copy_(mine.out_proj.weight)
            ref.out_proj.bias.copy_(mine.out_proj.bias)
        T = min(model.T, 16)
        x = torch.randn(2, T, E, dtype=torch.float64)
        x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
        y1 = mine(x1)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)      # True = not allowed
        y2, _ = ref(x2, x2, x2, attn_mask=mask, need_weights=False)
        gy = torch.randn_like(y1)
        y1.backward(gy)
        y2.backward(gy)
        pairs = [("output", y1, y2), ("d x", x1.grad, x2.grad),
                 ("d in_proj_weight", mine.in_proj_weight.grad, ref.in_proj_weight.grad),
                 ("d out_proj.weight", mine.out_proj.weight.grad, ref.out_proj.weight.grad)]
        for name, a, b in pairs:
            d = float((a - b).abs().max())
            good = d <= 1e-10
            ok &= good
            print("selfcheck: attention vs nn.MultiheadAttention (float64), %s: max |diff| "
                  "%.2e (tolerance 1e-10) %s" % (name, d, "ok" if good else "FAILED"))
    # the segmented backward against one graph
    for p in model.parameters():
        p.grad = None
    loss = model.loss(tok)
    loss.backward()
    want = [p.grad.clone() for p in model.checkpoint_order()]
    got_loss, _ = model.step_grads(tok)
    worst = 0.0
    for p, w in zip(model.checkpoint_order(), want):
        scale = float(w.abs().max()) + 1e-30
        worst = max(worst, float((p.grad - w).abs().max()) / scale)
    dl = abs(got_loss - float(loss))
    good = worst <= 1e-5 and dl == 0.0
    ok &= good
    print("selfcheck: segmented backward vs loss.backward(): loss diff %.1e, max gradient "
          "diff %.2e relative to each parameter's largest (tolerance 1e-5) %s"
          % (dl, worst, "ok" if good else "FAILED"))
    for p in model.parameters():
        p.grad = None
    return ok


# ---- the program ----

def die(msg, code=1):
    sys.stderr.write("twin.py: %s\n" % msg)
    sys.exit(code)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="PyTorch twin of tinygpt: trains the same model from a tinygpt "
                    "checkpoint on the same batches (docs/TINYGPT.md).")
    ap.add_argument("--data", nargs="+", required=True, metavar="FILE",
                    help="text files, concatenated in order (as tinygpt --data)")
    ap.add_argument("--ckpt", required=True,
                    help="tinygpt checkpoint with the initial parameters "
                         "(tinygpt --data FILES --steps 0 --save init.ckpt)")
    ap.add_argument("--steps", type=int, default=200, help="training steps (200)")
    ap.add_argument("--batch", type=int, default=8, help="sequences per step (8)")
    ap.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate (1e-3)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch intra-op threads (0: torch's default)")
    ap.add_argument("--log", help="TSV: step, loss, ms, attn_ms (as tinygpt --log)")
    ap.add_argument("--save", help="the trained parameters as a tinygpt checkpoint")
    ap.add_argument("--selfcheck", action="store_true",
                    help="before training: the attention against nn.MultiheadAttention and "
                         "the segmented backward against one loss.backward() (exit 1 if not)")
    a = ap.parse_args(argv)
    if not 0 <= a.steps <= 100000000:
        die("--steps wants a whole number in [0, 100000000]", 2)
    if not 1 <= a.batch <= 65536:
        die("--batch wants a whole number in [1, 65536]", 2)
    if not 0 <= a.lr <= 1:
        die("--lr wants a number in [0, 1]", 2)
    if not 0 <= a.threads <= 1024:
        die("--threads wants a whole number in [0, 1024]", 2)
    if a.threads:
        torch.set_num_threads(a.threads)

    L, E, H, T, w = load_checkpoint(a.ckpt)
    text = read_text(a.data)
    n = text.size
    if n < 2 * (T + 2):
        die("the data (%d bytes) is shorter than two contexts" % n, 2)
    ntrain, eval0 = split_text(n, T)
    model = TinyGPT(L, E, H, T)
    model.load_flat(w)
    opt = AdamW(model.checkpoint_order(), a.lr)
    print("twin: torch %s, %d threads; %d parameters, L %d E %d H %d T %d B %d; %d bytes of "
          "text (%d train, %d eval)" % (torch.__version__, torch.get_num_threads(), w.size,
                                        L, E, H, T, a.batch, n, ntrain, n - eval0))
    train = Batches(text, ntrain, T, a.batch, 7)
    rc = 0
    if a.selfcheck:
        probe = Batches(text, ntrain, T, a.batch, 7).next()     # the first batch, not consumed
        rc = 0 if selfcheck(model, probe) else 1

    logf = None
    if a.log:
        try:
            logf = open(a.log, "w")
        except OSError as e:
            die("cannot write %s (%s)" % (a.log, e.strerror))
        logf.write("step\tloss\tms\tattn_ms\n")
    t_all = t_attn = 0.0
    for step in range(1, a.steps + 1):
        tok = train.next()
        t0 = time.perf_counter()
        loss, ta = model.step_grads(tok)
        opt.step(step)
        dt = time.perf_counter() - t0
        t_all += dt
        t_attn += ta
        if logf:
            logf.write("%d\t%.6f\t%.3f\t%.3f\n" % (step, loss, 1e3 * dt, 1e3 * ta))
        if step == 1 or step % 100 == 0 or step == a.steps:
            print("step %5d loss %.4f (%.3f bits/byte)" % (step, loss, loss / math.log(2)))
    if logf:
        logf.close()
    if a.steps > 0:
        print("%.2f ms/step, attention (forward + backward) %.2f ms/step = %.0f%%"
              % (1e3 * t_all / a.steps, 1e3 * t_attn / a.steps, 100 * t_attn / t_all))
    # tinygpt's evaluation: 8 batches (seed 99) of the evaluation text
    ev = Batches(text[eval0:], n - eval0, T, a.batch, 99)
    evl = 0.0
    with torch.no_grad():
        for _ in range(8):
            evl += float(model.loss(ev.next())) / 8
    print("eval loss %.6f (%.4f bits/byte)" % (evl, evl / math.log(2)))
    if a.save:
        save_checkpoint(a.save, L, E, H, T, model.flat())
    return rc


if __name__ == "__main__":
    sys.exit(main())

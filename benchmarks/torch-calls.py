#!/usr/bin/env python3
"""Per-call cost of attn.torch against PyTorch's own, in the same run.

Each row times one call (or one forward + backward) of attn.torch and of
the PyTorch equivalent on the same tensors, interleaved round by round
(median of --rounds rounds, each the mean of enough calls to last about
--min-ms), at torch.get_num_threads() = --threads for both.  PyTorch's
SDPA is F.scaled_dot_product_attention where torch has it (2.x; with
enable_gqa from 2.5), else the same formula in torch operations (1.13:
softmax(scale Q K^T + mask) V, a GQA group's queries stacked as rows of one
product per key/value head);
its layer is nn.MultiheadAttention.  Ratio = torch time / attn time (> 1:
attn faster).

  PYTHONPATH=python ATTN_LIBRARY=build/lib/libattn.so.1 \\
      /usr/bin/python3 benchmarks/torch-calls.py [--threads N] [--rounds R]

Run it alone on the machine (docs/BENCHMARKS.md, "attn.torch per call").
"""

import argparse
import statistics
import time

import torch

import attn
import attn.torch as at

F = torch.nn.functional
HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def _has_gqa():
    try:                                   # enable_gqa: torch >= 2.5
        t = torch.zeros(1, 2, 1, 1)
        F.scaled_dot_product_attention(t, t[:, :1], t[:, :1], enable_gqa=True)
        return True
    except (TypeError, AttributeError):
        return False


HAS_GQA = HAS_SDPA and _has_gqa()


def torch_sdpa(q, k, v, attn_mask=None, is_causal=False, enable_gqa=False):
    gqa = enable_gqa and q.shape[-3] != k.shape[-3]
    if HAS_SDPA and (not gqa or HAS_GQA):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal,
                                              **({"enable_gqa": True} if gqa else {}))
    if gqa and not is_causal and attn_mask is None:
        # the group's queries as rows of one product per key/value head
        B, H, L, E = q.shape
        Hkv = k.shape[-3]
        o = torch_sdpa(q.reshape(B, Hkv, H // Hkv * L, E), k, v)
        return o.reshape(B, H, L, v.shape[-1])
    if gqa:
        g = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(g, -3), v.repeat_interleave(g, -3)
    s = (q @ k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
    if is_causal:
        L, S = s.shape[-2:]
        s = s.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float("-inf"))
    if attn_mask is not None:
        s = s + attn_mask
    return torch.softmax(s, -1) @ v


def timed(fn, min_s):
    fn()
    n, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t = time.perf_counter() - t0
        if t >= min_s:
            return t / n
        n *= 2 if t < min_s / 4 else 1
        n = max(n, int(n * min_s / max(t, 1e-9)))


def sdpa_case(shape_q, shape_kv, grad=False, causal=False, gqa=False):
    q = torch.randn(shape_q, requires_grad=grad)
    k = torch.randn(shape_kv, requires_grad=grad)
    v = torch.randn(shape_kv, requires_grad=grad)

    def run(f):
        def call():
            o = f(q, k, v, is_causal=causal, enable_gqa=gqa)
            if grad:
                o.sum().backward()
        return call
    return run(at.scaled_dot_product_attention), run(torch_sdpa)


def mha_case(N, L, E, H, grad=False):
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(E, H, batch_first=True)
    mine = at.MultiheadAttention(E, H, batch_first=True)
    mine.load_state_dict(ref.state_dict())
    if not grad:
        ref.eval()
        mine.eval()
    x = torch.randn(N, L, E, requires_grad=grad)

    def run(m):
        def call():
            if grad:
                y, _ = m(x, x, x, need_weights=False)
                y.sum().backward()
            else:
                with torch.no_grad():
                    m(x, x, x, need_weights=False)
        return call
    return run(mine), run(ref)


CASES = [
    ("SDPA (1,1,4,8), no grad", lambda: sdpa_case((1, 1, 4, 8), (1, 1, 4, 8))),
    ("SDPA (1,8,128,64), no grad", lambda: sdpa_case((1, 8, 128, 64), (1, 8, 128, 64))),
    ("SDPA (1,1,4,8), fwd+bwd", lambda: sdpa_case((1, 1, 4, 8), (1, 1, 4, 8), grad=True)),
    ("SDPA (2,8,256,64) causal, fwd+bwd",
     lambda: sdpa_case((2, 8, 256, 64), (2, 8, 256, 64), grad=True, causal=True)),
    ("GQA decode step (1,32,1,128) x 4096 keys, 8 kv heads",
     lambda: sdpa_case((1, 32, 1, 128), (1, 8, 4096, 128), gqa=True)),
    ("MHA layer (1,4,8) H 2, eval", lambda: mha_case(1, 4, 8, 2)),
    ("MHA layer (8,128,256) H 8, eval", lambda: mha_case(8, 128, 256, 8)),
    ("MHA layer (1,4,8) H 2, fwd+bwd", lambda: mha_case(1, 4, 8, 2, grad=True)),
    ("MHA layer (8,128,256) H 8, fwd+bwd", lambda: mha_case(8, 128, 256, 8, grad=True)),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-ms", type=float, default=100.0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print("attn %s (%s), torch %s, %d thread(s); torch SDPA: %s" % (
        attn.library_version(), attn.library_path, torch.__version__, a.threads,
        "F.scaled_dot_product_attention" if HAS_SDPA else "torch operations (no F.sdpa)"))
    print("| call | attn.torch | torch | torch / attn |")
    print("|---|---|---|---|")
    for name, make in CASES:
        mine, ref = make()
        tm, tr = [], []
        for _ in range(a.rounds):
            tm.append(timed(mine, a.min_ms / 1e3))
            tr.append(timed(ref, a.min_ms / 1e3))
        m, r = statistics.median(tm), statistics.median(tr)

        def fmt(t):
            return "%.1f us" % (t * 1e6) if t < 1e-3 else "%.2f ms" % (t * 1e3)
        print("| %s | %s | %s | %.2f |" % (name, fmt(m), fmt(r), r / m), flush=True)


if __name__ == "__main__":
    main()

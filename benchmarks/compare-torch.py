#!/usr/bin/env python3
"""Time attn, the naive path and PyTorch on the benchmark cases in one run.

attn and the naive path come from attn-bench --json (same process tree,
same BLAS); PyTorch is timed here on the same shapes with the same thread
counts, when it is installed (Debian: apt-get install python3-torch).  The
table goes to stdout; --csv writes one row per (case, threads, impl) for
benchmarks/plot.gp.

    benchmarks/compare-torch.py --bench build/benchmarks/attn-bench \
        [--case S1 ...] [--threads 1 --threads 2] [--runs 10] [--csv out.csv]

Training cases T1, T1d (dropout 0.1), T2 and T3 (the whole layer against
nn.MultiheadAttention) compare attn's forward and backward with PyTorch's
autograd on the same shapes, and print the largest difference of the SDPA
gradients (attn through ctypes, --lib, on PyTorch's own inputs; T1 and T2).

The cases and their shapes are attn-bench's table, read from
`attn-bench --list --json` (the --bench program): the dense ones (S*, T*)
and the long-sequence ones (L1, X1, X2; --case L1 names every L1-*).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import casetable  # noqa: E402

# From attn-bench's table (main() fills them): id -> case.
CASES = {}    # the dense forward cases (S*): SDPA, or the layer (mha)
TRAIN = {}    # training: forward + backward (autograd in PyTorch)
LONG = {}     # long sequences: kind linear, global or bigbird
# PyTorch runs causal linear attention written with cumsum, and dense SDPA
# with the same visible set as a bool mask, head by head, up to
# TORCH_DENSE_MAX_N (the targets compare with it at 4k).
TORCH_DENSE_MAX_N = 4096     # PyTorch's dense SDPA at 16k takes minutes a run


def read_table(bench):
    """Fill CASES, TRAIN and LONG from attn-bench --list --json."""
    for c in casetable.load(bench):
        if c["kind"] == "dense":
            (TRAIN if c["train"] else CASES)[c["id"]] = c
        elif c["kind"] in ("linear", "global", "bigbird"):
            LONG[c["id"]] = c


def shape(c):
    """(B, Hq, Hkv, n, m, d, causal, padded) of a case."""
    return (c["B"], c["Hq"], c["Hkv"], c["n"], c["m"], c["d"], c["causal"], c["padded"])


def run_attn_bench(bench, cases, threads, runs, naive):
    cmd = [bench, "--json", "--runs", str(runs)]
    for c in cases:
        cmd += ["--case", c]
    for t in threads:
        cmd += ["--threads", str(t)]
    if not naive:
        cmd.append("--no-naive")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    # attn-bench also prints a line per thread count with the machine's
    # rates, and (when the decode cases are named) decode rows and ratios:
    # only the case rows of the tables here
    return [r for r in rows if "case" in r and r.get("kind") not in ("decode", "plan")]


def torch_sdpa(torch):
    """The fused SDPA of this PyTorch: public in 2.x, private in 1.13."""
    F = torch.nn.functional
    if hasattr(F, "scaled_dot_product_attention"):
        return lambda q, k, v, mask, causal, p=0.0: F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal)
    if hasattr(F, "_scaled_dot_product_attention"):
        return lambda q, k, v, mask, causal, p=0.0: F._scaled_dot_product_attention(
            q, k, v, mask, p, False, causal)[0]
    return None


class AttnLib:
    """attn's SDPA forward and backward through ctypes, on torch tensors (to
    print the error of attn's gradients against PyTorch's autograd)."""

    def __init__(self, path):
        import ctypes as C
        self.C = C

        class View(C.Structure):
            _fields_ = [("batch", C.c_int64), ("head", C.c_int64), ("seq", C.c_int64)]

        class Desc(C.Structure):
            _fields_ = [(f, C.c_int64) for f in (
                "batch", "q_heads", "kv_heads", "q_len", "kv_len", "qk_dim", "v_dim")] + [
                ("q", View), ("k", View), ("v", View), ("o", View), ("scale", C.c_float),
                ("align", C.c_int), ("window_left", C.c_int64), ("window_right", C.c_int64),
                ("use_kv_lens", C.c_int), ("use_q_lens", C.c_int), ("mask_mode", C.c_int),
                ("mask", View), ("use_bias", C.c_int), ("bias", View), ("want_probs", C.c_int),
                ("probs", View), ("want_lse", C.c_int), ("lse", View), ("threads", C.c_int),
                ("dropout_p", C.c_double), ("dropout_seed", C.c_uint64),
                ("dropout_offset", C.c_uint64), ("use_global_k", C.c_int),
                ("use_global_q", C.c_int), ("layout_per_head", C.c_int),
                ("reserved_flags", C.c_int), ("block_size", C.c_int64),
                ("reserved", C.c_int64 * 10)]

        class BwdDesc(C.Structure):
            _fields_ = [("fwd", Desc), ("d_o", View), ("dq", View), ("dk", View), ("dv", View),
                        ("want_dbias", C.c_int), ("dbias", View), ("reserved", C.c_int64 * 16)]

        P = C.c_void_p

        class Args(C.Structure):
            _fields_ = [(f, P) for f in (
                "q", "k", "v", "o", "kv_lens", "q_lens", "mask", "bias", "probs", "lse",
                "global_k", "global_q", "layout")]

        class BwdArgs(C.Structure):
            _fields_ = [(f, P) for f in (
                "q", "k", "v", "o", "d_o", "lse", "kv_lens", "q_lens", "mask", "bias",
                "dq", "dk", "dv", "dbias", "global_k", "global_q", "layout")]

        self.View, self.Desc, self.BwdDesc, self.Args, self.BwdArgs = (
            View, Desc, BwdDesc, Args, BwdArgs)
        self.lib = C.CDLL(path)
        for f in ("attn_sdpa_desc_init", "attn_sdpa_bwd_desc_init", "attn_sdpa",
                  "attn_sdpa_backward"):
            getattr(self.lib, f).restype = C.c_int
        assert C.sizeof(Desc) == 448, "attn_sdpa_desc's layout changed: update AttnLib"

    def grads(self, torch, q, k, v, d_o, causal, threads):
        """dQ, dK, dV of attn for contiguous BHSD float32 tensors."""
        C = self.C
        B, Hq, n, d = q.shape
        Hkv, m = k.shape[1], k.shape[2]
        bd = self.BwdDesc()
        self.lib.attn_sdpa_bwd_desc_init(C.byref(bd))
        f = bd.fwd
        f.batch, f.q_heads, f.kv_heads, f.q_len, f.kv_len, f.qk_dim, f.v_dim = (
            B, Hq, Hkv, n, m, d, d)
        vq, vk = self.View(Hq * n * d, n * d, d), self.View(Hkv * m * d, m * d, d)
        f.q = f.o = bd.d_o = bd.dq = vq
        f.k = f.v = bd.dk = bd.dv = vk
        f.want_lse = 1
        f.lse = self.View(Hq * n, n, 1)
        f.window_right = 0 if causal else -1
        f.threads = threads
        o = torch.empty_like(q)
        lse = torch.empty(B, Hq, n)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        a = self.Args(q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=o.data_ptr(),
                      lse=lse.data_ptr())
        if self.lib.attn_sdpa(C.byref(bd.fwd), C.byref(a)) != 0:
            raise RuntimeError("attn_sdpa failed")
        ba = self.BwdArgs(q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=o.data_ptr(),
                          d_o=d_o.data_ptr(), lse=lse.data_ptr(), dq=dq.data_ptr(),
                          dk=dk.data_ptr(), dv=dv.data_ptr())
        if self.lib.attn_sdpa_backward(C.byref(bd), C.byref(ba)) != 0:
            raise RuntimeError("attn_sdpa_backward failed")
        return dq, dk, dv


def time_train(torch, sdpa, case, threads, runs, attn):
    """PyTorch autograd: forward (with grad) and backward timed apart; the
    largest |attn - torch| over dQ, dK, dV (without dropout)."""
    c = TRAIN[case]
    p = c["dropout"]
    B, Hq, Hkv, n, m, d, causal, _ = shape(c)
    torch.set_num_threads(threads)
    if c["mha"]:   # the whole layer: nn.MultiheadAttention in training
        torch.manual_seed(1)
        mha = torch.nn.MultiheadAttention(Hq * d, Hq, batch_first=True)
        x0 = torch.rand(B, n, Hq * d) * 2 - 1
        dy = torch.rand(B, n, Hq * d) * 2 - 1
        tf, tb = [], []
        for r in range(runs + 2):
            x = x0.clone().requires_grad_(True)
            mha.zero_grad()
            t0 = time.perf_counter()
            y, _ = mha(x, x, x, need_weights=False)
            t1 = time.perf_counter()
            y.backward(dy)
            t2 = time.perf_counter()
            if r >= 2:
                tf.append((t1 - t0) * 1e3)
                tb.append((t2 - t1) * 1e3)
        return statistics.median(tf), statistics.median(tb), None
    g = torch.Generator().manual_seed(1)
    q = torch.rand(B, Hq, n, d, generator=g) * 2 - 1
    k = torch.rand(B, Hkv, m, d, generator=g) * 2 - 1
    v = torch.rand(B, Hkv, m, d, generator=g) * 2 - 1
    d_o = torch.rand(B, Hq, n, d, generator=g) * 2 - 1
    tf, tb = [], []
    for r in range(runs + 2):
        qq, kk, vv = (x.clone().requires_grad_(True) for x in (q, k, v))
        t0 = time.perf_counter()
        out = sdpa(qq, kk, vv, None, causal, p)
        t1 = time.perf_counter()
        out.backward(d_o)
        t2 = time.perf_counter()
        if r >= 2:
            tf.append((t1 - t0) * 1e3)
            tb.append((t2 - t1) * 1e3)
    err = None
    if attn is not None and p == 0.0:
        dq, dk, dv = attn.grads(torch, q, k, v, d_o, causal, threads)
        err = max(float((a - b).abs().max()) for a, b in
                  ((dq, qq.grad), (dk, kk.grad), (dv, vv.grad)))
    return statistics.median(tf), statistics.median(tb), err


def torch_linear_causal(torch, q, k, v, eps=1e-6):
    """Causal linear attention, phi = elu + 1, the cumsum way: per head the
    prefix sums of phi(k_j) v_j^T ([n][dk][dv]) and of phi(k_j)."""
    F = torch.nn.functional
    out = torch.empty_like(v)
    for h in range(q.shape[0]):
        pq, pk = F.elu(q[h]) + 1, F.elu(k[h]) + 1
        s = torch.cumsum(pk[:, :, None] * v[h][:, None, :], dim=0)
        z = torch.cumsum(pk, dim=0)
        out[h] = torch.einsum("nd,nde->ne", pq, s) / ((pq * z).sum(-1, keepdim=True) + eps)
    return out


def long_mask(torch, c, lib):
    """The visible set of X1 or X2 as an [n][n] bool mask (True = seen).
    X2's BigBird layout comes from attn_layout_build_bigbird (so both sides use
    the same random blocks)."""
    n = c["n"]
    i = torch.arange(n)
    if c["kind"] == "global":   # window each side, the first `global` tokens global both ways
        g = i < c["global"]
        return ((i[:, None] - i[None, :]).abs() <= c["window"]) | g[:, None] | g[None, :]
    import ctypes as C
    if lib is None:
        raise RuntimeError("X2 needs libattn (--lib) for attn_layout_build_bigbird")
    bs, bb = c["block"], c["bigbird"]
    nb = (n + bs - 1) // bs
    lay = (C.c_uint8 * (nb * nb))()
    fn = lib.attn_layout_build_bigbird
    fn.restype = C.c_int
    fn.argtypes = [C.c_void_p, C.c_int64, C.c_int64, C.c_int64, C.c_int64, C.c_int64,
                   C.c_uint64]
    if fn(lay, nb, nb, bb["window"], bb["global"], bb["random"], bb["seed"]) != 0:
        raise RuntimeError("attn_layout_build_bigbird failed")
    blocks = torch.tensor(list(lay), dtype=torch.bool).reshape(nb, nb)
    return blocks.repeat_interleave(bs, 0).repeat_interleave(bs, 1)[:n, :n]


def time_long(torch, sdpa, case, threads, runs, lib):
    """PyTorch on a long-sequence case: (median, min, max) ms, or None
    where its dense path would not fit."""
    c = LONG[case]
    n, H = c["n"], c["B"] * c["Hq"]
    if c["kind"] != "linear" and n > TORCH_DENSE_MAX_N:
        return None
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.rand(H, n, c["d"], generator=g) * 2 - 1 for _ in range(3))
    if c["kind"] == "linear":
        run = lambda: torch_linear_causal(torch, q, k, v)
    else:
        mask = long_mask(torch, c, lib)
        run = lambda: [sdpa(q[h:h + 1][None], k[h:h + 1][None], v[h:h + 1][None],
                            mask, False) for h in range(H)]
    # the O(n) PyTorch paths still take seconds a run at 16k and more
    runs = 1 if n >= 65536 else min(runs, 3) if n >= 16384 else runs
    with torch.no_grad():
        if n < 65536:
            run()
        t = []
        for _ in range(runs):
            t0 = time.perf_counter()
            run()
            t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t), min(t), max(t)


def time_mha(torch, case, threads, runs):
    """S6: nn.MultiheadAttention(batch_first=True) self-attention, no weights."""
    B, H, _, L, _, d, _, _ = shape(CASES[case])
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    mha = torch.nn.MultiheadAttention(H * d, H, batch_first=True).eval()
    x = torch.rand(B, L, H * d) * 2 - 1
    with torch.no_grad():
        for _ in range(2):
            mha(x, x, x, need_weights=False)
        t = []
        for _ in range(runs):
            t0 = time.perf_counter()
            mha(x, x, x, need_weights=False)
            t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t), min(t), max(t)


def time_torch(torch, sdpa, case, threads, runs):
    if CASES[case]["mha"]:
        return time_mha(torch, case, threads, runs)
    B, Hq, Hkv, n, m, d, causal, padded = shape(CASES[case])
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(1)
    q = torch.rand(B, Hq, n, d, generator=g) * 2 - 1
    k = torch.rand(B, Hkv, m, d, generator=g) * 2 - 1
    v = torch.rand(B, Hkv, m, d, generator=g) * 2 - 1
    if Hkv != Hq:  # PyTorch 1.13 has no GQA: expanded outside the timing
        k = k.repeat_interleave(Hq // Hkv, dim=1)
        v = v.repeat_interleave(Hq // Hkv, dim=1)
    mask = None
    if padded:  # key lengths m, m - m/8, ...: True = take part
        lens = torch.tensor(CASES[case]["kv_lens"])
        mask = (torch.arange(m)[None, :] < lens[:, None])[:, None, None, :]
    with torch.no_grad():
        for _ in range(2):
            sdpa(q, k, v, mask, causal)
        t = []
        for _ in range(runs):
            t0 = time.perf_counter()
            sdpa(q, k, v, mask, causal)
            t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t), min(t), max(t)


def main():
    bench = casetable.bench_option()
    try:
        read_table(bench)
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        if "-h" not in sys.argv[1:] and "--help" not in sys.argv[1:]:
            sys.exit("cannot read the case table from %s --list --json (%s): build it "
                     "(meson compile -C build) or name it with --bench" % (bench, e))
    groups = sorted({c["group"] for c in LONG.values() if c["group"]})
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default=casetable.DEFAULT_BENCH,
                    help="the attn-bench program: runs attn and the naive path, and gives "
                         "the case table (--list --json)")
    ap.add_argument("--case", action="append",
                    choices=(sorted(CASES) + sorted(TRAIN) + list(LONG) + groups) or None,
                    help="a case or group of attn-bench's table (default: every dense and "
                         "training case not marked extra)")
    ap.add_argument("--lib", default=os.path.join("build", "lib", "libattn.so"),
                    help="libattn for the gradients' error against PyTorch")
    ap.add_argument("--threads", action="append", type=int)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--no-naive", action="store_true")
    ap.add_argument("--csv")
    ap.add_argument("--save-json", help="write every measurement, one JSON object a line")
    args = ap.parse_args()
    cases = args.case or [c for c in CASES if not CASES[c]["extra"]] + list(TRAIN)
    cases = [x for c in cases for x in ([l for l in LONG if LONG[l]["group"] == c]
                                         if c in groups else [c])]
    threads = args.threads or [1, 2]
    train = [c for c in cases if c in TRAIN]
    long = [c for c in cases if c in LONG]
    cases = [c for c in cases if c not in TRAIN and c not in LONG]

    rows = run_attn_bench(args.bench, cases + train + long, threads, args.runs,
                          not args.no_naive)
    try:
        import torch
        sdpa = torch_sdpa(torch)
        tver = torch.__version__
    except ImportError:
        torch, sdpa, tver = None, None, None
    if torch is None or sdpa is None:
        print("PyTorch not installed (Debian: apt-get install python3-torch): "
              "attn and naive only", file=sys.stderr)
    else:
        for c in cases:
            B, Hq, Hkv, n, m, d, _, _ = shape(CASES[c])
            flops = 4.0 * B * Hq * n * m * d
            if CASES[c]["mha"]:
                flops += 8.0 * B * n * (Hq * d) ** 2
            for t in threads:
                med, lo, hi = time_torch(torch, sdpa, c, t, args.runs)
                rows.append({"case": c, "threads": t, "impl": "torch", "ms_median": med,
                             "ms_min": lo, "ms_max": hi, "gflops": flops / (med * 1e6)})

    if torch is not None and sdpa is not None and long:
        import ctypes
        try:
            lib = ctypes.CDLL(args.lib)
        except OSError as e:
            print("no %s (%s): no X2 in PyTorch" % (args.lib, e), file=sys.stderr)
            lib = None
        for c in long:
            for t in threads:
                got = time_long(torch, sdpa, c, t, args.runs, lib)
                if got:
                    rows.append({"case": c, "threads": t, "impl": "torch", "ms_median": got[0],
                                 "ms_min": got[1], "ms_max": got[2]})

    trows = []
    if torch is not None and sdpa is not None and train:
        try:
            attn = AttnLib(args.lib)
        except OSError as e:
            print("no %s (%s): no gradient error" % (args.lib, e), file=sys.stderr)
            attn = None
        for c in train:
            for t in threads:
                f, b, err = time_train(torch, sdpa, c, t, args.runs, attn)
                trows.append({"case": c, "threads": t, "impl": "torch", "fwd": f, "bwd": b,
                              "err": err})
    rows = [r for r in rows if r["case"] not in TRAIN] + [
        r for r in rows if r["case"] in TRAIN]

    first = next((r for r in rows if "blas" in r), {})
    print("attn-bench: BLAS %s, kernel %s, attn SIMD %s; PyTorch %s" % (
        first.get("blas", "?"), first.get("kernel", "?"), first.get("simd", "?"),
        tver or "not installed"))
    print("%-4s %3s %10s %10s %10s %9s %9s" % (
        "case", "thr", "attn ms", "naive ms", "torch ms", "vs naive", "vs torch"))
    by = {(r["case"], r["threads"], r["impl"]): r for r in rows}
    for c in cases:
        for t in threads:
            a = by.get((c, t, "attn"))
            nv = by.get((c, t, "naive"))
            tr = by.get((c, t, "torch"))
            if not a:
                continue
            fmt = lambda r: "%10.3f" % r["ms_median"] if r else "%10s" % "-"
            sp = lambda r: "%8.2fx" % (r["ms_median"] / a["ms_median"]) if r else "%9s" % "-"
            print("%-4s %3d %s %s %s %s %s" % (c, t, fmt(a), fmt(nv), fmt(tr), sp(nv), sp(tr)))
    if train:
        print("\ntraining (ms; f+b = forward + backward):")
        print("%-4s %3s %10s %10s %10s %9s %10s %9s %10s" % (
            "case", "thr", "attn fwd", "attn bwd", "attn f+b", "f+b/fwd", "torch f+b",
            "vs torch", "|d attn-torch|"))
        tby = {(r["case"], r["threads"]): r for r in trows}
        for c in train:
            for t in threads:
                part = {r.get("part"): r for r in rows
                        if r["case"] == c and r["threads"] == t and r["impl"] == "attn"}
                if "f+b" not in part:
                    continue
                fb = part["f+b"]["ms_median"]
                tr = tby.get((c, t))
                tfb = tr["fwd"] + tr["bwd"] if tr else None
                print("%-4s %3d %10.2f %10.2f %10.2f %8.2fx %10s %9s %10s" % (
                    c, t, part["fwd"]["ms_median"], part["bwd"]["ms_median"], fb,
                    fb / part["fwd"]["ms_median"], "%.2f" % tfb if tfb else "-",
                    "%.2fx" % (tfb / fb) if tfb else "-",
                    "%.2g" % tr["err"] if tr and tr["err"] is not None else "-"))
        rows += trows
    if long:
        print("\nlong sequences (ms; dense = attn's dense SDPA, causal for L1, with the same "
              "mask for X1/X2; torch = cumsum linear attention for L1, dense SDPA with the "
              "mask for X1/X2):")
        print("%-7s %3s %10s %7s %10s %10s %9s %9s %10s" % (
            "case", "thr", "attn ms", "%sgemm", "dense ms", "torch ms", "vs dense", "vs torch",
            "max_err"))
        by = {(r["case"], r["threads"], r["impl"]): r for r in rows}
        for c in long:
            for t in threads:
                a = by.get((c, t, "attn"))
                if not a:
                    continue
                dn, tr = by.get((c, t, "dense")), by.get((c, t, "torch"))
                fmt = lambda r: "%10.2f" % r["ms_median"] if r else "%10s" % "-"
                sp = lambda r: "%8.2fx" % (r["ms_median"] / a["ms_median"]) if r else "%9s" % "-"
                print("%-7s %3d %s %6.0f%% %s %s %s %s %10.2g" % (
                    c, t, fmt(a), 100 * a.get("frac_sgemm", 0), fmt(dn), fmt(tr), sp(dn),
                    sp(tr), a.get("max_err", float("nan"))))
        at_n = {(LONG[c]["group"], LONG[c]["n"]): c for c in LONG}
        for grp in ("L1", "X1"):
            lo, hi = at_n.get((grp, 4096)), at_n.get((grp, 65536))
            for t in threads:
                a, b = by.get((lo, t, "attn")), by.get((hi, t, "attn"))
                if a and b:
                    print("%s %d thread%s: time(64k) / time(4k) = %.1f (target <= 18)" % (
                        grp, t, "s" if t > 1 else "", b["ms_median"] / a["ms_median"]))
    if args.save_json:
        with open(args.save_json, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("case,threads,impl,ms_median,ms_min,ms_max,gflops\n")
            for r in rows:
                if "ms_median" not in r or "part" in r:
                    continue
                f.write("%s,%d,%s,%.4f,%.4f,%.4f,%.2f\n" % (
                    r["case"], r["threads"], r["impl"], r["ms_median"],
                    r.get("ms_min", r["ms_median"]), r.get("ms_max", r["ms_median"]),
                    r.get("gflops", 0.0)))


if __name__ == "__main__":
    main()

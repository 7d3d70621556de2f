#!/usr/bin/env python3
"""Time attn, the naive path and PyTorch on the benchmark cases in one run.

attn and the naive path come from attn-bench --json (same process tree,
same BLAS); PyTorch is timed here on the same shapes with the same thread
counts, when it is installed (Debian: apt-get install python3-torch).  The
table goes to stdout; --csv writes one row per (case, threads, impl) for
benchmarks/plot.gp.

    benchmarks/compare-torch.py --bench build/benchmarks/attn-bench \
        [--case S1 ...] [--threads 1 --threads 2] [--runs 10] [--csv out.csv]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# id: (B, Hq, Hkv, n, m, d, causal, padded) -- the same table as attn-bench.
CASES = {
    "S1": (8, 12, 12, 512, 512, 64, False, False),
    "S2": (4, 12, 12, 1024, 1024, 64, True, False),
    "S3": (1, 8, 8, 4096, 4096, 64, True, False),
    "S4": (8, 8, 8, 128, 1024, 64, False, False),
    "S5": (1, 32, 8, 1, 4096, 128, False, False),
    "S6": (8, 12, 12, 512, 512, 64, False, False),   # whole layer: nn.MultiheadAttention
    "S7": (32, 8, 8, 64, 64, 32, False, False),
    "S8": (8, 12, 12, 197, 197, 64, False, False),
    "S9": (8, 12, 12, 512, 512, 64, False, True),
}
EXTRA = {  # only when named: S2 and S3 without their mask
    "S2n": (4, 12, 12, 1024, 1024, 64, False, False),
    "S3n": (1, 8, 8, 4096, 4096, 64, False, False),
}
CASES.update(EXTRA)


def run_attn_bench(bench, cases, threads, runs, naive):
    cmd = [bench, "--json", "--runs", str(runs)]
    for c in cases:
        cmd += ["--case", c]
    for t in threads:
        cmd += ["--threads", str(t)]
    if not naive:
        cmd.append("--no-naive")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def torch_sdpa(torch):
    """The fused SDPA of this PyTorch: public in 2.x, private in 1.13."""
    F = torch.nn.functional
    if hasattr(F, "scaled_dot_product_attention"):
        return lambda q, k, v, mask, causal: F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=causal)
    if hasattr(F, "_scaled_dot_product_attention"):
        return lambda q, k, v, mask, causal: F._scaled_dot_product_attention(
            q, k, v, mask, 0.0, False, causal)[0]
    return None


def time_mha(torch, case, threads, runs):
    """S6: nn.MultiheadAttention(batch_first=True) self-attention, no weights."""
    B, H, _, L, _, d, _, _ = CASES[case]
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
    if case == "S6":
        return time_mha(torch, case, threads, runs)
    B, Hq, Hkv, n, m, d, causal, padded = CASES[case]
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
        lens = torch.tensor([m - b * (m // B) for b in range(B)])
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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default=os.path.join("build", "benchmarks", "attn-bench"))
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    ap.add_argument("--threads", action="append", type=int)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--no-naive", action="store_true")
    ap.add_argument("--csv")
    ap.add_argument("--save-json", help="write every measurement, one JSON object a line")
    args = ap.parse_args()
    cases = args.case or [c for c in CASES if c not in EXTRA]
    threads = args.threads or [1, 2]

    rows = run_attn_bench(args.bench, cases, threads, args.runs, not args.no_naive)
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
            B, Hq, Hkv, n, m, d, _, _ = CASES[c]
            flops = 4.0 * B * Hq * n * m * d
            if c == "S6":
                flops += 8.0 * B * n * (Hq * d) ** 2
            for t in threads:
                med, lo, hi = time_torch(torch, sdpa, c, t, args.runs)
                rows.append({"case": c, "threads": t, "impl": "torch", "ms_median": med,
                             "ms_min": lo, "ms_max": hi, "gflops": flops / (med * 1e6)})

    first = rows[0] if rows else {}
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
    if args.save_json:
        with open(args.save_json, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("case,threads,impl,ms_median,ms_min,ms_max,gflops\n")
            for r in rows:
                f.write("%s,%d,%s,%.4f,%.4f,%.4f,%.2f\n" % (
                    r["case"], r["threads"], r["impl"], r["ms_median"],
                    r.get("ms_min", r["ms_median"]), r.get("ms_max", r["ms_median"]),
                    r.get("gflops", 0.0)))


if __name__ == "__main__":
    main()

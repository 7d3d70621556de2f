#!/usr/bin/env python3
"""attn at F32 and BF16 against PyTorch 2.x's bf16 SDPA, case by case, in one run.

PyTorch 2.6 is Debian 13's python3-torch; on a Debian 12 machine it lives in
a Debian 13 chroot (docs/BENCHMARKS.md says how to make one):

    benchmarks/compare-torch26.py --bench build/benchmarks/attn-bench \\
        [--chroot /opt/trixie] [--case S1 ...] [--threads 1 --threads 2] \\
        [--runs 10] [--rounds 2] [--torch-f32] [--save-json out.jsonl]

Without --chroot the local python3's torch is used when it is 2.x.  For
every (case, threads) and round, attn-bench runs the case (its attn row at
F32 and its bf16 row, --json) and then PyTorch times
F.scaled_dot_product_attention on the same shape at bf16 (and fp32 with
--torch-f32: about 30x slower than attn), each in its own process, one
after the other: interleaved, so that a change of the machine's speed hits
both.  Training cases (T1, T2) time forward + backward: attn's training rows
and PyTorch's autograd (sdpa(...).backward(dO)).  The table gives the
medians over the rounds and the ratios: attn bf16 / attn f32 (the same-run
gain of the type) and attn bf16 against PyTorch bf16.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import casetable  # noqa: E402

# Run by the chroot's (or the local) python3: times one case, prints JSON.
TORCH_SCRIPT = r'''
import json, sys, time, statistics
import torch
import torch.nn.functional as F
a = json.loads(sys.argv[1])
torch.set_num_threads(a["threads"])
B, Hq, Hkv, n, m, d = a["B"], a["Hq"], a["Hkv"], a["n"], a["m"], a["d"]
out = {"torch": torch.__version__, "capability": torch.backends.cpu.get_cpu_capability()}
for dt in a["dtypes"]:
    dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dt]
    g = torch.Generator().manual_seed(1)
    q = (torch.rand(B, Hq, n, d, generator=g) * 2 - 1).to(dtype)
    k = (torch.rand(B, Hkv, m, d, generator=g) * 2 - 1).to(dtype)
    v = (torch.rand(B, Hkv, m, d, generator=g) * 2 - 1).to(dtype)
    mask = None
    if a["kv_lens"]:
        lens = torch.tensor(a["kv_lens"])
        mask = (torch.arange(m)[None, :] < lens[:, None])[:, None, None, :]
    gqa = Hkv != Hq
    def call():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=a["causal"],
                                              enable_gqa=gqa)
    t = []
    if a["train"]:
        for x in (q, k, v):
            x.requires_grad_(True)
        do = torch.rand(B, Hq, n, d, generator=g).to(dtype)
        for r in range(a["runs"] + 2):
            t0 = time.perf_counter()
            call().backward(do)
            if r >= 2:
                t.append((time.perf_counter() - t0) * 1e3)
    else:
        with torch.no_grad():
            for r in range(a["runs"] + 2):
                t0 = time.perf_counter()
                call()
                if r >= 2:
                    t.append((time.perf_counter() - t0) * 1e3)
    out[dt] = statistics.median(t)
print(json.dumps(out))
'''


def attn_rows(bench, case, threads, runs):
    """attn-bench's rows for one case at one thread count: {impl: ms}."""
    cmd = [bench, "--json", "--no-naive", "--case", case, "--threads", str(threads),
           "--runs", str(runs), "--types", "f32,bf16"]
    env = dict(os.environ, ATTN_ENGINE=os.environ.get("ATTN_ENGINE", ""))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    got, machine = {}, {}
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if r.get("machine"):
            machine = r
        elif r.get("case") == case and r.get("impl") in ("attn", "bf16", "f16"):
            if "part" in r and r["part"] != "f+b":
                continue
            got[r["impl"]] = r["ms_median"]
    return got, machine


def torch_row(python, c, threads, runs, dtypes):
    arg = {"threads": threads, "runs": runs, "dtypes": dtypes, "B": c["B"], "Hq": c["Hq"],
           "Hkv": c["Hkv"], "n": c["n"], "m": c["m"], "d": c["d"], "causal": bool(c["causal"]),
           "kv_lens": c.get("kv_lens") if c["padded"] else None, "train": bool(c["train"])}
    res = subprocess.run(python + ["-", json.dumps(arg)], input=TORCH_SCRIPT,
                         capture_output=True, text=True)
    if res.returncode != 0:
        print(res.stderr.strip().splitlines()[-1] if res.stderr else "torch failed",
              file=sys.stderr)
        return None
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default=casetable.DEFAULT_BENCH)
    ap.add_argument("--chroot", help="a Debian 13 chroot with python3-torch (PyTorch 2.6)")
    ap.add_argument("--case", action="append")
    ap.add_argument("--threads", action="append", type=int)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--torch-f32", action="store_true")
    ap.add_argument("--save-json")
    args = ap.parse_args()

    table = {c["id"]: c for c in casetable.load(args.bench) if c["kind"] == "dense"}
    cases = args.case or ["S1", "S2", "S3", "S4", "S7", "S8", "S9", "T1", "T2"]
    cases = [c for c in cases if c in table and not table[c]["mha"]]
    threads = args.threads or [1, 2]
    python = ["chroot", args.chroot, "python3"] if args.chroot else [sys.executable]
    dtypes = ["bf16"] + (["f32"] if args.torch_f32 else [])

    rows, info = [], {}
    for c in cases:
        for t in threads:
            meas = {"attn": [], "bf16": [], "torch_bf16": [], "torch_f32": []}
            for _ in range(args.rounds):
                got, machine = attn_rows(args.bench, c, t, args.runs)
                info.update(machine)
                for k in ("attn", "bf16"):
                    if k in got:
                        meas[k].append(got[k])
                tr = torch_row(python, table[c], t, args.runs, dtypes)
                if tr:
                    info["torch"] = "%s (%s)" % (tr["torch"], tr["capability"])
                    for dt in dtypes:
                        meas["torch_" + dt].append(tr[dt])
            med = {k: statistics.median(v) if v else None for k, v in meas.items()}
            rows.append({"case": c, "threads": t, **{k + "_ms": v for k, v in med.items()}})
            print(json.dumps(rows[-1]), file=sys.stderr)

    print("attn-bench: BLAS %s, kernel %s, SIMD %s, BF16 kernels %s, FMA peak %.0f, BF16 peak "
          "%.0f GFLOP/s (1 thread); PyTorch %s" % (
              info.get("blas", "?"), info.get("kernel", "?"), info.get("simd", "?"),
              info.get("bf16", "?"), info.get("fma_gflops", 0), info.get("bf16_gflops", 0),
              info.get("torch", "not found")))
    print("median ms over %d interleaved rounds of %d runs; T cases: forward + backward" % (
        args.rounds, args.runs))
    hdr = "%-4s %3s %10s %10s %11s" % ("case", "thr", "attn f32", "attn bf16", "torch bf16")
    if args.torch_f32:
        hdr += " %10s" % "torch f32"
    print(hdr + " %13s %15s" % ("bf16 vs f32", "attn vs torch"))
    f = lambda x: "%10.2f" % x if x else "%10s" % "-"
    for r in rows:
        a, b, tb = r["attn_ms"], r["bf16_ms"], r["torch_bf16_ms"]
        line = "%-4s %3d %s %s %s " % (r["case"], r["threads"], f(a), f(b), f(tb))
        if args.torch_f32:
            line += f(r["torch_f32_ms"]) + " "
        line += "%12s " % ("%.2fx" % (a / b) if a and b else "-")
        line += "%14s" % ("%.2fx" % (tb / b) if tb and b else "-")
        print(line)
    if args.save_json:
        with open(args.save_json, "w") as fo:
            for r in rows:
                fo.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()

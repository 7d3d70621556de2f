#!/usr/bin/env python3
"""Markdown tables for docs/BENCHMARKS.md from compare-torch.py --save-json.

    benchmarks/report.py run.json [run-mask.json]

Prints, per thread count, one row per case with attn's median ms, GFLOP/s
(full and useful), the fraction of the same-run sgemm rate, workspace, peak
RSS, the naive path and PyTorch, and the speedups.  With a second file from
`attn-bench --json --case S2 --case S2n ...`, also the causal speedups.
"""
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.startswith("{")]


def main():
    rows = load(sys.argv[1])
    by = {(r["case"], r["threads"], r["impl"]): r for r in rows}
    cases = []
    for r in rows:
        if r["case"] not in cases:
            cases.append(r["case"])
    threads = sorted({r["threads"] for r in rows})
    first = next((r for r in rows if r["impl"] == "attn"), {})
    print("BLAS %s, kernel %s, attn SIMD %s\n" % (first.get("blas"), first.get("kernel"),
                                                 first.get("simd")))
    for t in threads:
        a0 = next((r for r in rows if r["threads"] == t and r["impl"] == "attn"), None)
        print("**%d thread%s** (sgemm 1024^3 per thread, same run: %.0f GFLOP/s)\n" % (
            t, "s" if t > 1 else "", a0["sgemm_gflops"] if a0 else 0))
        print("| case | attn ms (min-max) | GFLOP/s | useful GFLOP/s | % sgemm | workspace | peak RSS | naive ms | PyTorch ms | vs naive | vs PyTorch |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for c in cases:
            a = by.get((c, t, "attn"))
            if not a:
                continue
            n = by.get((c, t, "naive"))
            p = by.get((c, t, "torch"))
            ws = a["workspace_bytes"]
            wss = "%.2f MiB" % (ws / 2**20) if ws >= 2**20 else "%.0f KiB" % (ws / 1024)
            print("| %s | %.2f (%.2f-%.2f) | %.0f | %.0f | %.0f%% | %s | %.0f MiB | %s | %s | %s | %s |" % (
                c, a["ms_median"], a["ms_min"], a["ms_max"], a["gflops"], a["gflops_useful"],
                100 * a["frac_sgemm"], wss, a["peak_rss_bytes"] / 2**20,
                "%.2f" % n["ms_median"] if n else "-", "%.2f" % p["ms_median"] if p else "-",
                "%.2fx" % (n["ms_median"] / a["ms_median"]) if n else "-",
                "%.2fx" % (p["ms_median"] / a["ms_median"]) if p else "-"))
        print()
    if len(sys.argv) > 2:
        m = {(r["case"], r["threads"]): r for r in load(sys.argv[2]) if r["impl"] == "attn"}
        print("| causal case | threads | causal ms | same case unmasked ms | speedup |")
        print("|---|---|---|---|---|")
        for c in ("S2", "S3"):
            for t in threads:
                a, u = m.get((c, t)), m.get((c + "n", t))
                if a and u:
                    print("| %s | %d | %.2f | %.2f | %.2fx |" % (c, t, a["ms_median"], u["ms_median"],
                                                            u["ms_median"] / a["ms_median"]))
        print()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Bar chart (SVG) of the dense cases as a fraction of the FMA peak: attn on
its tile engine, attn on the BLAS engine and ONNX Runtime's
MultiHeadAttention, at 1 and 2 threads, from one session's

    build/benchmarks/attn-bench --case S1 ... --no-naive --json > engines.json
    node benchmarks/compare-ort.mjs --case dense --json > ort-dense.json

    benchmarks/plot-engines.py engines.json ort-dense.json docs/bench-engines.svg \
        [--bench build/benchmarks/attn-bench]

Useful FLOPs (causal and padding left out) over the FMA peak attn-bench
measured at that thread count; ORT's time is its own profiler's run time.
The cases are those of attn-bench's table (--list --json, from --bench)
that ORT's MultiHeadAttention runs (compare-ort.mjs: "ort": "mha").
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import casetable  # noqa: E402
import svgplot  # noqa: E402

COLORS = [("#2b7bba", "attn, tile engine"), ("#9ecae1", "attn, BLAS engine"),
          ("#e4572e", "ONNX Runtime 1.30")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("engines", help="attn-bench --json output")
    ap.add_argument("ort", help="compare-ort.mjs --json output")
    ap.add_argument("out", help="the SVG to write")
    args, table = casetable.parse_with_table(ap)
    CASES = [c["id"] for c in table if c["kind"] == "dense" and c["ort"] == "mha"]
    eng = [json.loads(line) for line in open(args.engines) if line.strip()]
    ort = [json.loads(line) for line in open(args.ort) if line.strip()]
    peak = {r["threads"]: r["fma_gflops"] for r in eng if r.get("machine")}
    frac = {}
    for r in eng:
        if r.get("impl") in ("attn", "blas") and r.get("case") in CASES and "part" not in r:
            frac[(r["case"], r["threads"], r["impl"])] = r["frac_peak"]
    for r in ort:
        if (r.get("ok") and str(r.get("impl", "")).startswith("ort") and r.get("case") in CASES
                and r["threads"] in peak):
            gf = r["flops_useful"] / (r["ort_run_ms_median"] * 1e6)
            frac[(r["case"], r["threads"], "ort")] = gf / peak[r["threads"]]
    threads = sorted(peak)
    groups = [(c, t) for t in threads for c in CASES]
    page = svgplot.Page(980, 430, "Dense forward: useful GFLOP/s as % of the measured FMA peak "
                        "(higher is better)")
    y = page.linear_y(100, 20, "%g%%")
    page.hline(y(80), "#444", dash="5,4")
    page.text(page.W - page.right - 4, y(80) - 4, "target 80%", anchor="end")
    gw = page.plot_w / len(groups)
    bw = gw * 0.26
    for i, (c, t) in enumerate(groups):
        x0 = page.left + i * gw + gw * 0.1
        for k, impl in enumerate(("attn", "blas", "ort")):
            v = frac.get((c, t, impl))
            if v is None:
                continue
            page.rect(x0 + k * bw, y(100 * v), bw - 1, y(0), COLORS[k][0],
                      "%s %s, %d thread%s: %.0f%%" % (c, COLORS[k][1], t, "s" if t > 1 else "",
                                                     100 * v))
        page.text(x0 + 1.5 * bw, y(0) + 16, c, anchor="middle")
    for j, t in enumerate(threads):
        page.text(page.left + (j + 0.5) * len(CASES) * gw, y(0) + 34,
                  "%d thread%s (FMA peak %.0f GFLOP/s)" % (t, "s" if t > 1 else "", peak[t]),
                  anchor="middle")
    page.legend(COLORS, page.left, page.H - 14)
    page.save(args.out)


if __name__ == "__main__":
    main()

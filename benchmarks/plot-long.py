#!/usr/bin/env python3
"""Log-log plot (SVG, no plotting library needed) of time against sequence
length for the long-sequence cases from compare-torch.py --save-json: attn's
linear attention (L1), window + global tokens (X1) and BigBird (X2), attn's
dense SDPA (causal, and with the X1 mask), and PyTorch, at one thread count.

    benchmarks/plot-long.py docs/bench-data/long.json docs/bench-long.svg [threads] \
        [--bench build/benchmarks/attn-bench]

The cases (their group, n, window, global tokens and block) are those of
attn-bench's table (--list --json, from --bench).
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import casetable  # noqa: E402
import svgplot  # noqa: E402


def series(long):
    """(group, impl) -> (label, colour, dashed), the labels from the table's
    first case of each group."""
    first = {}
    for c in long.values():
        first.setdefault(c["group"], c)
    x1, x2 = first.get("X1", {}), first.get("X2", {})
    return [
        (("L1", "attn"), ("attn linear, causal (L1)", "#2b7bba", False)),
        (("X1", "attn"), ("attn window %s + %s global (X1)" % (
            2 * x1.get("window", 0), x1.get("global", 0)), "#1a9850", False)),
        (("X2", "attn"), ("attn BigBird, block %s (X2)" % x2.get("block", "?"), "#984ea3", False)),
        (("L1", "dense"), ("attn dense causal SDPA", "#555555", False)),
        (("X1", "dense"), ("attn dense SDPA, X1 mask", "#999999", False)),
        (("L1", "torch"), ("PyTorch linear, cumsum", "#2b7bba", True)),
        (("X1", "torch"), ("PyTorch dense SDPA, X1 mask", "#1a9850", True)),
        (("X2", "torch"), ("PyTorch dense SDPA, X2 mask", "#984ea3", True)),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", help="compare-torch.py --save-json output")
    ap.add_argument("out", help="the SVG to write")
    ap.add_argument("threads", nargs="?", type=int, default=1)
    args, table = casetable.parse_with_table(ap)
    src, out, threads = args.src, args.out, args.threads
    long = {c["id"]: c for c in table if c["kind"] in ("linear", "global", "bigbird")}
    SERIES = series(long)
    rows = [json.loads(line) for line in open(src) if line.strip()]
    pts = {}
    for r in rows:
        c = long.get(r.get("case", ""))
        if r.get("threads") != threads or c is None:
            continue
        if "ms_median" not in r or r.get("part"):
            continue
        pts.setdefault((c["group"], r["impl"]), []).append((c["n"], r["ms_median"]))
    if not pts:
        sys.exit("no long-sequence rows for %d thread(s) in %s" % (threads, src))
    xs = [n for v in pts.values() for n, _ in v]
    ys = [t for v in pts.values() for _, t in v]
    x0, x1 = math.log2(min(xs)), math.log2(max(xs))
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    pg = svgplot.Page(900, 520, "Time against n, B = 1, H = 8, d = 64, %d thread%s "
                      "(median ms, log-log)" % (threads, "s" if threads > 1 else ""),
                      right=300, top=40, bottom=50)

    def X(n):
        return pg.left + pg.plot_w * (math.log2(n) - x0) / max(x1 - x0, 1)

    Y = pg.log_y(y0, y1)
    for p in range(int(x0), int(x1) + 1):
        pg.vline(X(2 ** p), "#eee")
        pg.text(X(2 ** p), pg.H - pg.bottom + 18, "%dk" % (2 ** p // 1024), anchor="middle")
    pg.text((pg.left + pg.W - pg.right) // 2, pg.H - 12, "n (tokens)", anchor="middle")
    ly = pg.top + 10
    for key, (label, color, dashed) in SERIES:
        if key not in pts:
            continue
        dash = "6,4" if dashed else None
        pg.series([(X(n), Y(t)) for n, t in sorted(pts[key])], color, dash)
        pg.line_key(pg.W - pg.right + 20, ly, color, label, dash)
        ly += 20
    pg.save(out)

if __name__ == "__main__":
    main()

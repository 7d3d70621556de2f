#!/usr/bin/env python3
"""Log-log plot (SVG, no plotting library needed) of time against sequence
length for the long-sequence cases from compare-torch.py --save-json: attn's
linear attention (L1), window + global tokens (X1) and BigBird (X2), attn's
dense SDPA (causal, and with the X1 mask), and PyTorch, at one thread count.

    benchmarks/plot-long.py docs/bench-data/long.json docs/bench-long.svg [threads]
"""
import json
import math
import sys

# (case prefix, impl) -> (label, colour, dashed)
SERIES = [
    (("L1", "attn"), ("attn linear, causal (L1)", "#2b7bba", False)),
    (("X1", "attn"), ("attn window 512 + 32 global (X1)", "#1a9850", False)),
    (("X2", "attn"), ("attn BigBird, block 64 (X2)", "#984ea3", False)),
    (("L1", "dense"), ("attn dense causal SDPA", "#555555", False)),
    (("X1", "dense"), ("attn dense SDPA, X1 mask", "#999999", False)),
    (("L1", "torch"), ("PyTorch linear, cumsum", "#2b7bba", True)),
    (("X1", "torch"), ("PyTorch dense SDPA, X1 mask", "#1a9850", True)),
    (("X2", "torch"), ("PyTorch dense SDPA, X2 mask", "#984ea3", True)),
]


def n_of(case):
    k = case.split("-")[1]
    return int(k[:-1]) * 1024


def main():
    src, out = sys.argv[1], sys.argv[2]
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    rows = [json.loads(line) for line in open(src) if line.strip()]
    pts = {}
    for r in rows:
        c = r.get("case", "")
        if r.get("threads") != threads or "-" not in c or c[:2] not in ("L1", "X1", "X2"):
            continue
        if "ms_median" not in r or r.get("part"):
            continue
        pts.setdefault((c[:2], r["impl"]), []).append((n_of(c), r["ms_median"]))
    if not pts:
        sys.exit("no long-sequence rows for %d thread(s) in %s" % (threads, src))
    xs = [n for v in pts.values() for n, _ in v]
    ys = [t for v in pts.values() for _, t in v]
    x0, x1 = math.log2(min(xs)), math.log2(max(xs))
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    W, H, left, right, top, bottom = 900, 520, 70, 300, 40, 50

    def X(n):
        return left + (W - left - right) * (math.log2(n) - x0) / max(x1 - x0, 1)

    def Y(t):
        return top + (H - top - bottom) * (1 - (math.log10(t) - y0) / max(y1 - y0, 1))

    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="24" font-size="14">Time against n, B = 1, H = 8, d = 64, %d '
           'thread%s (median ms, log-log)</text>' % (left, threads, "s" if threads > 1 else "")]
    for e in range(y0, y1 + 1):
        yy = Y(10 ** e)
        svg.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' %
                   (left, W - right, yy, yy))
        svg.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (left - 6, yy + 4,
                                                                          10 ** e))
    for p in range(int(x0), int(x1) + 1):
        xx = X(2 ** p)
        svg.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/>' %
                   (xx, xx, top, H - bottom))
        svg.append('<text x="%.1f" y="%d" text-anchor="middle">%dk</text>' %
                   (xx, H - bottom + 18, 2 ** p // 1024))
    svg.append('<text x="%d" y="%d" text-anchor="middle">n (tokens)</text>' %
               ((left + W - right) // 2, H - 12))
    ly = top + 10
    for key, (label, color, dashed) in SERIES:
        if key not in pts:
            continue
        v = sorted(pts[key])
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        svg.append('<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>' % (
            color, dash, " ".join("%.1f,%.1f" % (X(n), Y(t)) for n, t in v)))
        for n, t in v:
            svg.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (X(n), Y(t), color))
        svg.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/>' % (
            W - right + 20, W - right + 44, ly, ly, color, dash))
        svg.append('<text x="%d" y="%d">%s</text>' % (W - right + 50, ly + 4, label))
        ly += 20
    svg.append('</svg>')
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()

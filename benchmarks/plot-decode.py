#!/usr/bin/env python3
"""Plot (SVG, no plotting library needed) of decode read speed against cache
length from `attn-bench --case DL --json` (S5: 32 query heads, 8 KV heads,
d 128, one query): GB/s of K/V read by attn's decode path and by the sgemm
path, F32 and F16 storage, with the machine's streaming read bandwidth
measured in the same run, one panel per thread count.

    attn-bench --case DL --threads 1 --threads 2 --json > docs/bench-data/decode.json
    benchmarks/plot-decode.py docs/bench-data/decode.json docs/bench-decode.svg
"""
import json
import math
import sys

# (impl, row) -> (label, colour, dashed)
SERIES = [
    (("attn", "f32"), ("attn decode path, F32 cache", "#2b7bba", False)),
    (("attn", "f16"), ("attn decode path, F16 cache", "#1a9850", False)),
    (("sgemm", "f32"), ("sgemm path (ATTN_DECODE=0), F32", "#2b7bba", True)),
    (("sgemm", "f16"), ("sgemm path (ATTN_DECODE=0), F16", "#1a9850", True)),
]


def m_of(case):
    k = case.split("-")[1]
    return int(k[:-1]) * 1024 if k.endswith("k") else int(k)


def main():
    src, out = sys.argv[1], sys.argv[2]
    rows = [json.loads(line) for line in open(src) if line.strip().startswith("{")]
    bw, pts = {}, {}
    for r in rows:
        if r.get("machine"):
            bw[r["threads"]] = r["read_gbs"]
        elif r.get("kind") == "decode" and r.get("case", "").startswith("DL-") and r.get("ok"):
            pts.setdefault(r["threads"], {}).setdefault((r["impl"], r["row"]), []).append(
                (m_of(r["case"]), r["gbs"]))
    if not pts:
        sys.exit("no DL rows in %s (run attn-bench --case DL --json)" % src)
    threads = sorted(pts)
    xs = [m for t in pts.values() for v in t.values() for m, _ in v]
    ymax = max([g for t in pts.values() for v in t.values() for _, g in v] +
               [bw.get(t, 0) for t in threads])
    ytop = 10 * math.ceil(ymax * 1.05 / 10)
    x0, x1 = math.log2(min(xs)), math.log2(max(xs))
    PW, PH, left, gap, top, bottom, legend = 420, 380, 60, 50, 50, 50, 260
    W = left + len(threads) * PW + (len(threads) - 1) * gap + legend
    H = top + PH + bottom
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="22" font-size="14">Decode: K/V read speed against cache length '
           '(S5: 32 query heads, 8 KV heads, d 128, 1 query)</text>' % left]
    for pi, t in enumerate(threads):
        ox = left + pi * (PW + gap)

        def X(m):
            return ox + PW * (math.log2(m) - x0) / max(x1 - x0, 1)

        def Y(g):
            return top + PH * (1 - g / ytop)

        svg.append('<text x="%d" y="%d" font-weight="bold">%d thread%s</text>' %
                   (ox, top - 10, t, "s" if t > 1 else ""))
        for g in range(0, int(ytop) + 1, 10):
            svg.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' %
                       (ox, ox + PW, Y(g), Y(g)))
            svg.append('<text x="%d" y="%.1f" text-anchor="end">%d</text>' % (ox - 6, Y(g) + 4, g))
        for p in range(int(x0), int(x1) + 1):
            m = 2 ** p
            svg.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/>' %
                       (X(m), X(m), top, top + PH))
            svg.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (
                X(m), top + PH + 18, "%dk" % (m // 1024) if m >= 1024 else str(m)))
        svg.append('<text x="%d" y="%d" text-anchor="middle">cached tokens</text>' %
                   (ox + PW // 2, H - 12))
        if pi == 0:
            svg.append('<text x="16" y="%d" transform="rotate(-90 16 %d)" '
                       'text-anchor="middle">GB/s of K/V read</text>' % (top + PH // 2,
                                                                          top + PH // 2))
        if t in bw:
            svg.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#d73027" '
                       'stroke-width="1.5" stroke-dasharray="3,3"/>' % (ox, ox + PW, Y(bw[t]),
                                                                         Y(bw[t])))
            svg.append('<text x="%d" y="%.1f" fill="#d73027">read bandwidth %.1f GB/s</text>' %
                       (ox + 6, Y(bw[t]) - 6, bw[t]))
        for key, (label, color, dashed) in SERIES:
            if key not in pts[t]:
                continue
            v = sorted(pts[t][key])
            dash = ' stroke-dasharray="6,4"' if dashed else ""
            svg.append('<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>' % (
                color, dash, " ".join("%.1f,%.1f" % (X(m), Y(g)) for m, g in v)))
            for m, g in v:
                svg.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (X(m), Y(g), color))
    lx, ly = W - legend + 20, top + 10
    for _, (label, color, dashed) in SERIES:
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        svg.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/>' % (
            lx, lx + 24, ly, ly, color, dash))
        svg.append('<text x="%d" y="%d">%s</text>' % (lx + 30, ly + 4, label))
        ly += 20
    svg.append('</svg>')
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Plot (SVG, no plotting library needed) of decode read speed against cache
length from `attn-bench --case DL --json` (S5: 32 query heads, 8 KV heads,
d 128, one query): GB/s of K/V read by attn's decode path and by the sgemm
path, F32 and F16 storage, with the machine's streaming read bandwidth
measured in the same run, one panel per thread count.

    attn-bench --case DL --threads 1 --threads 2 --json > docs/bench-data/decode.json
    benchmarks/plot-decode.py docs/bench-data/decode.json docs/bench-decode.svg \
        [--bench build/benchmarks/attn-bench]

Each DL case's cache length is its m in attn-bench's table (--list --json,
from --bench).
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import casetable  # noqa: E402
import svgplot  # noqa: E402

# (impl, row) -> (label, colour, dashed)
SERIES = [
    (("attn", "f32"), ("attn decode path, F32 cache", "#2b7bba", False)),
    (("attn", "f16"), ("attn decode path, F16 cache", "#1a9850", False)),
    (("sgemm", "f32"), ("sgemm path (ATTN_DECODE=0), F32", "#2b7bba", True)),
    (("sgemm", "f16"), ("sgemm path (ATTN_DECODE=0), F16", "#1a9850", True)),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", help="attn-bench --case DL --json output")
    ap.add_argument("out", help="the SVG to write")
    args, table = casetable.parse_with_table(ap)
    src, out = args.src, args.out
    m_of = {c["id"]: c["m"] for c in table if c["kind"] == "decode"}
    rows = [json.loads(line) for line in open(src) if line.strip().startswith("{")]
    bw, pts = {}, {}
    for r in rows:
        if r.get("machine"):
            bw[r["threads"]] = r["read_gbs"]
        elif r.get("kind") == "decode" and r.get("case", "").startswith("DL-") and r.get("ok"):
            pts.setdefault(r["threads"], {}).setdefault((r["impl"], r["row"]), []).append(
                (m_of[r["case"]], r["gbs"]))
    if not pts:
        sys.exit("no DL rows in %s (run attn-bench --case DL --json)" % src)
    threads = sorted(pts)
    xs = [m for t in pts.values() for v in t.values() for m, _ in v]
    ymax = max([g for t in pts.values() for v in t.values() for _, g in v] +
               [bw.get(t, 0) for t in threads])
    ytop = 10 * math.ceil(ymax * 1.05 / 10)
    x0, x1 = math.log2(min(xs)), math.log2(max(xs))
    PW, PH, left, gap, top, bottom, legend = 420, 380, 60, 50, 50, 50, 260
    pg = svgplot.Page(left + len(threads) * PW + (len(threads) - 1) * gap + legend,
                      top + PH + bottom, "Decode: K/V read speed against cache length "
                      "(S5: 32 query heads, 8 KV heads, d 128, 1 query)",
                      left=left, right=legend, top=top, bottom=bottom)

    def Y(g):
        return top + PH * (1 - g / ytop)

    for pi, t in enumerate(threads):
        ox = left + pi * (PW + gap)

        def X(m):
            return ox + PW * (math.log2(m) - x0) / max(x1 - x0, 1)

        pg.text(ox, top - 10, "%d thread%s" % (t, "s" if t > 1 else ""), bold=True)
        for g in range(0, int(ytop) + 1, 10):
            pg.hline(Y(g), "#ddd", x0=ox, x1=ox + PW)
            pg.text(ox - 6, Y(g) + 4, "%d" % g, anchor="end")
        for p in range(int(x0), int(x1) + 1):
            m = 2 ** p
            pg.vline(X(m), "#eee", top, top + PH)
            pg.text(X(m), top + PH + 18, "%dk" % (m // 1024) if m >= 1024 else str(m),
                    anchor="middle")
        pg.text(ox + PW // 2, pg.H - 12, "cached tokens", anchor="middle")
        if pi == 0:
            pg.text(16, top + PH // 2, "GB/s of K/V read", anchor="middle", rotate=-90)
        if t in bw:
            pg.hline(Y(bw[t]), "#d73027", dash="3,3", width=1.5, x0=ox, x1=ox + PW)
            pg.text(ox + 6, Y(bw[t]) - 6, "read bandwidth %.1f GB/s" % bw[t], color="#d73027")
        for key, (label, color, dashed) in SERIES:
            if key in pts[t]:
                pg.series([(X(m), Y(g)) for m, g in sorted(pts[t][key])], color,
                          "6,4" if dashed else None)
    ly = top + 10
    for _, (label, color, dashed) in SERIES:
        pg.line_key(pg.W - legend + 20, ly, color, label, "6,4" if dashed else None)
        ly += 20
    pg.save(out)

if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Bar chart (SVG, no plotting library needed) of the training cases from
compare-torch.py --save-json: per case and thread count, attn's forward and
backward stacked, next to PyTorch's autograd forward + backward.

    benchmarks/plot-train.py docs/bench-data/train.json docs/bench-train.svg
"""
import json
import math
import sys


def main():
    src, out = sys.argv[1], sys.argv[2]
    rows = [json.loads(line) for line in open(src) if line.strip()]
    attn = {}
    torch = {}
    for r in rows:
        key = (r["case"], r["threads"])
        if r.get("impl") == "attn" and r.get("part") in ("fwd", "bwd"):
            attn.setdefault(key, {})[r["part"]] = r["ms_median"]
        elif r.get("impl") == "torch" and "fwd" in r:
            torch[key] = (r["fwd"], r["bwd"])
    keys = sorted(attn, key=lambda k: (k[1], k[0]))
    vmax = max([a["fwd"] + a["bwd"] for a in attn.values()] +
               [f + b for f, b in torch.values()] + [1.0])
    top = 10 ** math.ceil(math.log10(vmax))
    W, H, left, bottom, ptop = 940, 420, 70, 70, 50
    plot_h = H - bottom - ptop
    group = (W - left - 20) / max(len(keys), 1)
    bar = group * 0.32

    def y(v):  # log scale from 1 ms to top
        v = max(v, 1.0)
        return ptop + plot_h * (1 - math.log10(v) / math.log10(top))

    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="24" font-size="14">Training: forward + backward, median ms '
           '(log scale, lower is better)</text>' % left]
    e = 0
    while 10 ** e <= top:
        yy = y(10 ** e)
        svg.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' %
                   (left, W - 20, yy, yy))
        svg.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (left - 6, yy + 4, 10 ** e))
        e += 1
    for i, k in enumerate(keys):
        x0 = left + i * group + group * 0.15
        a = attn[k]
        fw, bw = a.get("fwd", 0), a.get("bwd", 0)
        svg.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#2b7bba"/>' %
                   (x0, y(fw + bw), bar, y(1) - y(fw + bw)))
        svg.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#9ecae1"/>' %
                   (x0, y(fw), bar, y(1) - y(fw)))
        if k in torch:
            tf, tb = torch[k]
            svg.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#e4572e"/>' %
                       (x0 + bar + 4, y(tf + tb), bar, y(1) - y(tf + tb)))
            svg.append('<text x="%.1f" y="%.1f" text-anchor="middle">%.1fx</text>' %
                       (x0 + bar + 2, y(tf + tb) - 4, (tf + tb) / (fw + bw)))
        svg.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' %
                   (x0 + bar, H - bottom + 18, k[0]))
        svg.append('<text x="%.1f" y="%d" text-anchor="middle">%d thr</text>' %
                   (x0 + bar, H - bottom + 34, k[1]))
    lx = left
    for color, label in (("#9ecae1", "attn forward"), ("#2b7bba", "attn forward + backward"),
                         ("#e4572e", "PyTorch 1.13 autograd (label: how many times slower)")):
        svg.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>' % (lx, H - 22, color))
        svg.append('<text x="%d" y="%d">%s</text>' % (lx + 16, H - 12, label))
        lx += 20 + 7 * len(label)
    svg.append('</svg>')
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()

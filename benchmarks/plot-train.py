#!/usr/bin/env python3
"""Bar chart (SVG, no plotting library needed) of the training cases from
compare-torch.py --save-json: per case and thread count, attn's forward and
backward stacked, next to PyTorch's autograd forward + backward.

    benchmarks/plot-train.py docs/bench-data/train.json docs/bench-train.svg
"""
import json
import math
import sys

import svgplot


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
    pg = svgplot.Page(940, 420, "Training: forward + backward, median ms "
                      "(log scale, lower is better)")
    y = pg.log_y(0, math.ceil(math.log10(vmax)))   # from 1 ms
    group = pg.plot_w / max(len(keys), 1)
    bar = group * 0.32
    for i, k in enumerate(keys):
        x0 = pg.left + i * group + group * 0.15
        a = attn[k]
        fw, bw = a.get("fwd", 0), a.get("bwd", 0)
        pg.rect(x0, y(fw + bw), bar, y(1), "#2b7bba")
        pg.rect(x0, y(fw), bar, y(1), "#9ecae1")
        if k in torch:
            tf, tb = torch[k]
            pg.rect(x0 + bar + 4, y(tf + tb), bar, y(1), "#e4572e")
            pg.text(x0 + bar + 2, y(tf + tb) - 4, "%.1fx" % ((tf + tb) / (fw + bw)),
                    anchor="middle")
        pg.text(x0 + bar, pg.H - pg.bottom + 18, k[0], anchor="middle")
        pg.text(x0 + bar, pg.H - pg.bottom + 34, "%d thr" % k[1], anchor="middle")
    pg.legend((("#9ecae1", "attn forward"), ("#2b7bba", "attn forward + backward"),
               ("#e4572e", "PyTorch 1.13 autograd (label: how many times slower)")),
              pg.left, pg.H - 12)
    pg.save(out)

if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Bar chart (SVG, no plotting library) of compare-torch26.py --save-json:
per case and thread count, the speed of attn at BF16 and of PyTorch's bf16
SDPA relative to attn at F32 in the same run (higher is better; 1 = attn's
fp32 time), with the issue's 1.7x line.

    benchmarks/plot-types.py docs/bench-data/types.json docs/bench-types.svg
"""
import json
import sys

import svgplot


def main():
    src, out = sys.argv[1], sys.argv[2]
    rows = [json.loads(line) for line in open(src) if line.strip()]
    rows = [r for r in rows if r.get("attn_ms") and r.get("bf16_ms")]
    rows.sort(key=lambda r: (r["threads"], r["case"]))
    ratios = [r["attn_ms"] / r["bf16_ms"] for r in rows] + \
             [r["attn_ms"] / r["torch_bf16_ms"] for r in rows if r.get("torch_bf16_ms")]
    vmax = max(ratios + [2.0]) * 1.1
    pg = svgplot.Page(940, 420, "BF16: speed relative to attn's F32 in the same run "
                      "(higher is better)")
    y = pg.linear_y(vmax, 0.25 if vmax < 3 else 0.5, "%.2fx")
    pg.hline(y(1.7), "#999", dash="4,3")
    pg.text(pg.W - pg.right, y(1.7) - 4, "target 1.7x", anchor="end", color="#666")
    group = pg.plot_w / max(len(rows), 1)
    bar = group * 0.32
    for i, r in enumerate(rows):
        x0 = pg.left + i * group + group * 0.15
        a = r["attn_ms"] / r["bf16_ms"]
        pg.rect(x0, y(a), bar, y(0), "#2b7bba")
        pg.text(x0 + bar / 2, y(a) - 4, "%.2f" % a, anchor="middle", size=10)
        if r.get("torch_bf16_ms"):
            t = r["attn_ms"] / r["torch_bf16_ms"]
            pg.rect(x0 + bar + 4, y(t), bar, y(0), "#e4572e")
            pg.text(x0 + bar * 1.5 + 4, y(t) - 4, "%.2f" % t, anchor="middle", size=10)
        pg.text(x0 + bar, pg.H - pg.bottom + 18, r["case"], anchor="middle")
        pg.text(x0 + bar, pg.H - pg.bottom + 34, "%d thr" % r["threads"], anchor="middle")
    pg.legend((("#2b7bba", "attn BF16 / attn F32"),
               ("#e4572e", "PyTorch 2.6 bf16 SDPA / attn F32")), pg.left, pg.H - 12)
    pg.save(out)


if __name__ == "__main__":
    main()

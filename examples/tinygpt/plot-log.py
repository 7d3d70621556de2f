#!/usr/bin/env python3
"""The training curve of a tinygpt --log file as an SVG (no plotting library).

    plot-log.py LOG.tsv OUT.svg [--unigram NATS] [--eval NATS] [--title TEXT]

Draws every step's loss (light) and its mean over windows of 1% of the run
(dark), in bits per byte, with optional horizontal lines for the unigram
baseline and the final evaluation loss that tinygpt prints.
"""
import argparse
import math
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("svg")
    ap.add_argument("--unigram", type=float, help="the unigram baseline, nats")
    ap.add_argument("--eval", type=float, help="the final evaluation loss, nats")
    ap.add_argument("--title", default="tinygpt training loss")
    a = ap.parse_args()
    steps, loss = [], []
    with open(a.log) as f:
        head = f.readline().split("\t")
        if head[:2] != ["step", "loss"]:
            sys.exit("plot-log.py: %s is not a tinygpt --log file" % a.log)
        for line in f:
            p = line.split("\t")
            steps.append(int(p[0]))
            loss.append(float(p[1]) / math.log(2))
    if not steps:
        sys.exit("plot-log.py: %s has no steps" % a.log)
    w = max(1, len(loss) // 100)
    mean = [(steps[min(i + w // 2, len(steps) - 1)], sum(loss[i:i + w]) / len(loss[i:i + w]))
            for i in range(0, len(loss), w)]
    W, H, L, R, T, B = 760, 420, 60, 20, 40, 50
    ymax = math.ceil(max(loss[min(len(loss) - 1, 5):] + [a.unigram / math.log(2) if a.unigram else 0]) + 0.5)
    ymin = 0.0
    X = lambda s: L + (W - L - R) * (s - steps[0]) / max(1, steps[-1] - steps[0])
    Y = lambda v: T + (H - T - B) * (1 - (min(v, ymax) - ymin) / (ymax - ymin))
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
         'font-size="12">' % (W, H), '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="22" font-size="15">%s</text>' % (L, a.title)]
    for k in range(int(ymin), int(ymax) + 1):
        o.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (L, W - R, Y(k), Y(k)))
        o.append('<text x="%d" y="%.1f" text-anchor="end">%d</text>' % (L - 6, Y(k) + 4, k))
    span = steps[-1] - steps[0]
    tick = 10 ** math.floor(math.log10(max(1, span)))
    if span / tick < 3:
        tick //= 2 or 1
    s = (steps[0] // tick + 1) * tick if tick else steps[0]
    while tick and s <= steps[-1]:
        o.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#ddd"/>' % (X(s), X(s), T, H - B))
        o.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (X(s), H - B + 16, s))
        s += tick
    o.append('<text x="%d" y="%d" text-anchor="middle">step</text>' % ((L + W - R) // 2, H - 12))
    o.append('<text transform="translate(16 %d) rotate(-90)" text-anchor="middle">bits per byte'
             '</text>' % ((T + H - B) // 2))
    stride = max(1, len(loss) // 4000)
    o.append('<polyline fill="none" stroke="#b8c8e8" stroke-width="1" points="%s"/>' %
             " ".join("%.1f,%.1f" % (X(steps[i]), Y(loss[i])) for i in range(0, len(loss), stride)))
    o.append('<polyline fill="none" stroke="#1f4e9c" stroke-width="2" points="%s"/>' %
             " ".join("%.1f,%.1f" % (X(st), Y(v)) for st, v in mean))
    legend = [("#b8c8e8", "training loss, each step"), ("#1f4e9c", "mean over %d steps" % w)]
    for val, color, name in ((a.unigram, "#c0392b", "unigram baseline (held-out)"),
                             (a.eval, "#27ae60", "final loss on held-out text")):
        if val is not None:
            b = val / math.log(2)
            o.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="6 4" '
                     'stroke-width="1.5"/>' % (L, W - R, Y(b), Y(b), color))
            legend.append((color, "%s: %.3f" % (name, b)))
    for i, (color, name) in enumerate(legend):
        y = T + 14 + 18 * i
        o.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/>' %
                 (W - R - 270, W - R - 250, y - 4, y - 4, color))
        o.append('<text x="%d" y="%d">%s</text>' % (W - R - 244, y, name))
    o.append("</svg>")
    with open(a.svg, "w") as f:
        f.write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()

"""Small SVG helpers shared by the plot scripts (no plotting library):
a page with a title, linear or log axes with grid lines, bars, lines with
points, and legends.  Coordinates are pixels; y grows downwards as in SVG."""
import math


class Page:
    def __init__(self, width, height, title, left=70, right=20, top=50, bottom=70):
        self.W, self.H = width, height
        self.left, self.right, self.top, self.bottom = left, right, top, bottom
        self.parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
                      'font-family="sans-serif" font-size="12">' % (width, height),
                      '<rect width="100%" height="100%" fill="white"/>',
                      '<text x="%d" y="24" font-size="14">%s</text>' % (left, esc(title))]

    @property
    def plot_h(self):
        return self.H - self.top - self.bottom

    @property
    def plot_w(self):
        return self.W - self.left - self.right

    def linear_y(self, vmax, step, fmt="%g"):
        """A y axis from 0 to vmax with a grid line every step; returns the
        value -> pixel function."""
        def y(v):
            return self.top + self.plot_h * (1 - min(max(v, 0.0), vmax) / vmax)
        v = 0.0
        while v <= vmax + 1e-9:
            self.hline(y(v), "#ddd")
            self.text(self.left - 6, y(v) + 4, fmt % v, anchor="end")
            v += step
        return y

    def log_y(self, lo_exp, hi_exp):
        """A log y axis over the decades 10^lo_exp .. 10^hi_exp, a grid line
        and a label at each; returns the value -> pixel function (values at
        or below 10^lo_exp sit on the bottom)."""
        span = max(hi_exp - lo_exp, 1)

        def y(v):
            v = max(v, 10.0 ** lo_exp)
            return self.top + self.plot_h * (1 - (math.log10(v) - lo_exp) / span)
        for e in range(lo_exp, hi_exp + 1):
            self.hline(y(10 ** e), "#ddd")
            self.text(self.left - 6, y(10 ** e) + 4, "%g" % 10 ** e, anchor="end")
        return y

    def vline(self, xx, color, y0=None, y1=None):
        y0 = self.top if y0 is None else y0
        y1 = self.H - self.bottom if y1 is None else y1
        self.parts.append('<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s"/>' %
                          (xx, xx, y0, y1, color))

    def series(self, points, color, dash=None):
        """A polyline through the pixel points, with a dot at each."""
        d = ' stroke-dasharray="%s"' % dash if dash else ""
        self.parts.append('<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>'
                          % (color, d, " ".join("%.1f,%.1f" % p for p in points)))
        for x, y in points:
            self.parts.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (x, y, color))

    def line_key(self, x, y, color, label, dash=None):
        """A legend entry for a series: a short line and its label."""
        d = ' stroke-dasharray="%s"' % dash if dash else ""
        self.parts.append('<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" '
                          'stroke-width="2"%s/>' % (x, x + 24, y, y, color, d))
        self.text(x + 30, y + 4, label)

    def hline(self, yy, color, dash=None, width=1, x0=None, x1=None):
        """Across the plot area, or from x0 to x1 (a panel of it)."""
        d = ' stroke-dasharray="%s"' % dash if dash else ""
        x0 = self.left if x0 is None else x0
        x1 = self.W - self.right if x1 is None else x1
        self.parts.append('<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" '
                          'stroke-width="%g"%s/>' % (x0, x1, yy, yy, color, width, d))

    def rect(self, x, y0, w, y1, color, tip=None):
        """A bar from pixel y0 (top) down to y1."""
        t = "<title>%s</title>" % esc(tip) if tip else ""
        self.parts.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">%s'
                          '</rect>' % (x, y0, w, max(y1 - y0, 0.0), color, t))

    def text(self, x, y, s, anchor="start", size=None, rotate=None, bold=False, color=None):
        extra = ' font-size="%d"' % size if size else ""
        if bold:
            extra += ' font-weight="bold"'
        if color:
            extra += ' fill="%s"' % color
        if rotate is not None:
            extra += ' transform="rotate(%g %.1f %.1f)"' % (rotate, x, y)
        self.parts.append('<text x="%.1f" y="%.1f" text-anchor="%s"%s>%s</text>' %
                          (x, y, anchor, extra, esc(s)))

    def legend(self, items, x, y):
        """items: (color, label) pairs, left to right from (x, y)."""
        for color, label in items:
            self.parts.append('<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s"/>' %
                              (x, y - 10, color))
            self.text(x + 16, y, label)
            x += 16 + 7 * len(label) + 18

    def save(self, path):
        with open(path, "w") as f:
            f.write("\n".join(self.parts + ["</svg>"]) + "\n")


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

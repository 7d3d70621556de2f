"""Small SVG helpers shared by the plot scripts (no plotting library):
a page with a title, a linear y axis with grid lines, bars and a legend.
Coordinates are pixels; y grows downwards as in SVG."""


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

    def hline(self, yy, color, dash=None, width=1):
        d = ' stroke-dasharray="%s"' % dash if dash else ""
        self.parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s" '
                          'stroke-width="%g"%s/>' % (self.left, self.W - self.right, yy, yy,
                                                     color, width, d))

    def rect(self, x, y0, w, y1, color, tip=None):
        """A bar from pixel y0 (top) down to y1."""
        t = "<title>%s</title>" % esc(tip) if tip else ""
        self.parts.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">%s'
                          '</rect>' % (x, y0, w, max(y1 - y0, 0.0), color, t))

    def text(self, x, y, s, anchor="start", size=None, rotate=None):
        extra = ' font-size="%d"' % size if size else ""
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
